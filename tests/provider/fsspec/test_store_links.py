"""Symlinks through S3, GCS and Azure (each a real API on loopback), kept as rclone's
``--links`` keeps them: the object ``NAME.rclonelink`` whose bytes are the target,
with the link's own time in its metadata. A tree with symlinks goes to the store and
comes back the same (rsync sees nothing to change); an unchanged rerun asks no
object's data; a changed target, a file replacing a link and the reverse are copied
as ``-o`` says; what a store holds that no symlink can be (a hostile target, a link
object beside a file of its name) is an entry error, never a symlink, and a local
file named like a link object is refused. A service keeps them too (store ->
service)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import storeproxy
from benchmarks.objectstores import SERVERS, Store
from benchmarks.storeproxy import Kind, Proxy
from rcp_core.engine.portcopy import copy_tree
from rcp_provider.fsspec import objectmeta
from rcp_provider.fsspec.storetree import Place, port_of
from support.rcprun import Run, program
from support.services import RcpdServe, service_fs
from support.treecmp import rsync_differences
from support.treespec import Dir, File, Symlink, make_tree

T1 = 1_600_000_000_123_456_789
T2 = 1_500_000_000_000_000_001
TREE = {
    ".": Dir(mode=0o750, mtime_ns=T2),
    "f": File(b"the file\n", mode=0o640, mtime_ns=T1),
    "link": Symlink("f", mtime_ns=T1 + 1),
    "dirlink": Symlink("d", mtime_ns=T1 + 2),
    "dangling": Symlink("/nowhere/at all", mtime_ns=T1 + 3),
    "d": Dir(mode=0o755, mtime_ns=T2 + 1),
    "d/up": Symlink("../f", mtime_ns=T1 + 4),
}
LINKS = ("link", "dirlink", "dangling", "d/up")
DATA = (Kind.PUT, Kind.PART, Kind.START, Kind.COMMIT, Kind.GET, Kind.COPY)


@pytest.fixture(params=sorted(SERVERS))
def store(request: pytest.FixtureRequest) -> Store:
    found: Store = request.getfixturevalue(request.param)
    return found


@pytest.fixture(params=sorted(SERVERS))
def proxy(request: pytest.FixtureRequest) -> Iterator[Proxy]:
    upstream: Store = request.getfixturevalue(request.param)
    with storeproxy.proxied(upstream, delay=0.0) as proxied:
        yield proxied


def _rcp(store: Store, *args: str, code: int = 0) -> Run:
    run = program(["-p", "mode,times", *args], store.environ())
    assert run.code == code, run
    return run


def _metadata(store: Store, path: str) -> dict[str, str]:
    fs = store.fs()
    if store.protocol == "s3":
        return dict(fs.metadata(path))
    return dict(fs.info(path).get("metadata") or {})


def test_a_tree_with_symlinks_comes_back_the_same(store: Store, tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    where = f"{store.bucket()}/tree"
    up = _rcp(store, str(src), store.url(where))
    assert up.counts("copied")["symlinks"] == len(LINKS), up
    down = _rcp(store, store.url(where), str(tmp_path / "back"))
    assert down.counts("copied")["symlinks"] == len(LINKS), down
    assert rsync_differences(src, tmp_path / "back") == ""
    for rel in LINKS:
        assert os.readlink(tmp_path / "back" / rel) == os.readlink(src / rel)


def test_a_symlink_is_rclones_link_object_with_its_time(
    store: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    where = f"{store.bucket()}/tree"
    _rcp(store, str(src), store.url(where))
    fs = store.fs()
    fs.invalidate_cache()
    keys = {k[len(where) + 1 :] for k in fs.find(where)}
    assert {f"{rel}.rclonelink" for rel in LINKS} <= keys
    assert not keys & set(LINKS)
    assert fs.cat_file(f"{where}/dangling.rclonelink") == b"/nowhere/at all"
    kept = objectmeta.decode(_metadata(store, f"{where}/link.rclonelink"))
    assert kept.mtime_ns == T1 + 1


def test_an_unchanged_rerun_reads_no_link_and_a_changed_one_is_replaced(
    proxy: Proxy, tmp_path: Path
) -> None:
    """The MD5 a store recorded of a link object's bytes tells its target
    unchanged: a rerun up or down reads no object's data."""
    store = proxy.store
    src = make_tree(tmp_path / "src", TREE)
    where = store.url(f"{store.bucket()}/tree")
    _rcp(store, str(src), where)
    proxy.reset()
    again = _rcp(store, "-o", str(src), where)
    counts = proxy.reset()
    assert counts.of(*DATA) == 0, counts
    assert again.counts("unchanged")["symlinks"] == len(LINKS), again
    (src / "link").unlink()
    os.symlink("d", src / "link")
    changed = _rcp(store, "-o", str(src), where)
    assert changed.counts("copied")["symlinks"] == 1, changed
    back = tmp_path / "back"
    _rcp(store, where, str(back))
    assert os.readlink(back / "link") == "d"
    proxy.reset()
    rerun_down = _rcp(store, "-o", where, str(back))
    counts = proxy.reset()
    assert counts.of(*DATA) == 0, counts
    assert rerun_down.counts("unchanged")["symlinks"] == len(LINKS), rerun_down


def test_a_link_is_read_once_and_rcmp_reads_none_its_md5_proves(
    proxy: Proxy, tmp_path: Path
) -> None:
    """``-u`` reads a store link once, even the one whose target changed, and only
    where its listing lacked its time (S3: every link) or its target is wanted; ``rcmp``
    of a tree and its copy reads no link object (the MD5 its store recorded proves
    each target)."""
    store = proxy.store
    src = make_tree(tmp_path / "src", TREE)
    where = store.url(f"{store.bucket()}/tree")
    back = tmp_path / "back"
    _rcp(store, str(src), where)
    _rcp(store, where, str(back))
    proxy.reset()
    same = _tool("rcmp", store, str(src), where)
    counts = proxy.reset()
    assert same.returncode == 0, same
    assert counts.of(Kind.GET) == 0, counts
    (src / "link").unlink()
    os.symlink("d", src / "link")
    os.utime(src / "link", ns=(T1 + 10**9, T1 + 10**9), follow_symlinks=False)
    _rcp(store, "-o", str(src), where)
    proxy.reset()
    update = _rcp(store, "-u", where, str(back))
    counts = proxy.reset()
    assert update.counts("copied")["symlinks"] == 1, update
    assert os.readlink(back / "link") == "d"
    reads = len(LINKS) if store.protocol == "s3" else 1
    assert counts.of(Kind.GET) == reads, counts


def test_a_file_and_a_symlink_replace_each_other_with_o(
    s3: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", {"a": File(b"a file\n"), "b": Symlink("a")})
    bucket = s3.bucket()
    where = s3.url(f"{bucket}/tree")
    _rcp(s3, str(src), where)
    (src / "a").unlink()
    os.symlink("b", src / "a")
    (src / "b").unlink()
    (src / "b").write_bytes(b"now a file\n")
    _rcp(s3, "-o", str(src), where)
    fs = s3.fs()
    fs.invalidate_cache()
    keys = sorted(k.rsplit("/", 1)[-1] for k in fs.find(f"{bucket}/tree"))
    assert keys == ["", "a.rclonelink", "b"]  # "": the tree's marker "tree/"
    back = tmp_path / "back"
    _rcp(s3, where, str(back))
    assert os.readlink(back / "a") == "b"
    assert (back / "b").read_bytes() == b"now a file\n"


def test_a_copy_to_a_store_without_symlinks_skips_them(
    s3: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    where = s3.url(f"{s3.bucket()}/tree")
    _rcp(s3, str(src), where)
    run = program([where, "memory://links-skipped"], s3.environ())
    assert run.code == 0, run
    assert run.counts("skipped")["symlinks"] == len(LINKS), run
    assert run.counts("copied")["files"] == 1, run


def test_what_no_symlink_can_be_is_an_entry_error(s3: Store, tmp_path: Path) -> None:
    """A link object whose bytes hold a NUL or more than 4,095 bytes, and one
    beside a file of its name: entry errors, no symlink made; the rest copied."""
    bucket = s3.bucket()
    fs = s3.fs()
    fs.pipe(
        {
            f"{bucket}/t/ok": b"fine\n",
            f"{bucket}/t/nul.rclonelink": b"a\0b",
            f"{bucket}/t/long.rclonelink": b"x" * 4096,
            f"{bucket}/t/twice": b"a file\n",
            f"{bucket}/t/twice.rclonelink": b"ok",
            f"{bucket}/t/good.rclonelink": b"ok",
        }
    )
    back = tmp_path / "back"
    run = _rcp(s3, s3.url(f"{bucket}/t"), str(back), code=1)
    assert run.errors == 3, run
    assert sorted(os.listdir(back)) == ["good", "ok", "twice"]
    assert os.readlink(back / "good") == "ok"
    assert (back / "twice").read_bytes() == b"a file\n"
    assert not any(p.is_symlink() for p in back.iterdir() if p.name != "good")


def test_a_local_file_named_like_a_link_object_is_refused(
    s3: Store, tmp_path: Path
) -> None:
    src = make_tree(
        tmp_path / "src", {"x.rclonelink": File(b"a file\n"), "y": File(b"y\n")}
    )
    bucket = s3.bucket()
    run = _rcp(s3, str(src), s3.url(f"{bucket}/t"), code=1)
    assert run.errors == 1, run
    assert "rclonelink" in str(run.summary), run
    fs = s3.fs()
    fs.invalidate_cache()
    assert [k.rsplit("/", 1)[-1] for k in fs.find(f"{bucket}/t")] == [
        "",
        "y",
    ]  # "": the marker "t/"


def _tool(module: str, store: Store, *args: str) -> subprocess.CompletedProcess[str]:
    """``rcmp`` or ``rrm`` (``module`` of ``rcp_provider.cli``) run on ``store``."""
    return subprocess.run(
        [sys.executable, "-m", f"rcp_provider.cli.{module}", *args],
        env=store.environ(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_rcmp_compares_link_targets_and_rrm_removes_link_objects(
    s3: Store, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    bucket = s3.bucket()
    where = s3.url(f"{bucket}/tree")
    _rcp(s3, str(src), where)
    same = _tool("rcmp", s3, str(src), where)
    assert same.returncode == 0, same
    (src / "link").unlink()
    os.symlink("d", src / "link")
    differ = _tool("rcmp", s3, str(src), where)
    assert differ.returncode == 3, differ  # they differ (the exit-status table)
    assert "link 'd' != 'f'" in differ.stdout, differ
    gone = _tool("rrm", s3, where)
    assert gone.returncode == 0, gone
    fs = s3.fs()
    fs.invalidate_cache()
    assert fs.find(f"{bucket}/tree") == []


def test_symlinks_go_from_a_store_to_a_service_with_their_times(
    s3: Store, served: tuple[RcpdServe, Path], area: Path, tmp_path: Path
) -> None:
    """The generic engine between two ports that keep symlinks, neither of them
    this host's files: the service makes each (its ``symlink`` request) whole, with
    its own time."""
    src = make_tree(tmp_path / "src", TREE)
    where = f"{s3.bucket()}/tree"
    _rcp(s3, str(src), s3.url(where))
    copied = copy_tree(
        Place(s3.fs(), where), port_of(service_fs(served[0]), str(area / "tree"))
    )
    assert copied["copied.symlinks"] == len(LINKS), copied
    assert rsync_differences(src, area / "tree") == ""
