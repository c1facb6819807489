"""``rrm`` on URLs: ``memory://``, S3 (moto), an ``rcpd serve`` service and a site's
backend, removed through their ports with the local removal's rules, words, summary
and exit codes; what a storage cannot honour refused up front, nothing touched.

Each run is ``rrm``'s own ``main`` in this process (``memory://`` is only this
process's), with fsspec configured for the storage at hand as a user's environment
would configure it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import fsspec.config
import pytest

from benchmarks import storeproxy
from benchmarks.objectstores import Store
from benchmarks.storeproxy import Kind, Proxy
from rcp_core import hookimpl
from rcp_core.errors import CopyFailedError
from rcp_core.run.summary import Summary
from rcp_core.tools.remove.portremove import remove_ports
from rcp_provider.cli.rrm import main
from rcp_provider.fsspec import storeremoval, storetree
from rcp_provider.fsspec.storetree import port_of, port_of_url
from support import services
from support.treespec import Dir, Fifo, File, Spec, Symlink, make_tree

Run = tuple[int, str, str]


@pytest.fixture
def rrm(capsys: pytest.CaptureFixture[str]) -> Any:
    """``rrm(*args)``: its exit status, stdout and stderr."""

    def run(*args: str) -> Run:
        status = main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def summary_of(tmp_path: Path) -> list[str]:
    return ["--summary-json", str(tmp_path / "summary.json")]


def read_summary(tmp_path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((tmp_path / "summary.json").read_text())
    return loaded


# -- memory:// ----------------------------------------------------------------------


@pytest.fixture
def memory() -> Iterator[tuple[Any, str]]:
    """The memory filesystem and a fresh top-level name in it, with a tree: ``a/x``,
    ``a/y.keep``, ``b/c/z``, ``top``; and a sibling tree whose name extends it."""
    fs = fsspec.filesystem("memory")
    name = f"t{uuid.uuid4().hex[:8]}"
    for key in ("a/x", "a/y.keep", "b/c/z", "top"):
        fs.pipe(f"/{name}/{key}", b"12345")
    fs.pipe(f"/{name}2/sibling", b"stays")
    yield fs, name
    for top in (name, f"{name}2"):
        if fs.exists(f"/{top}"):
            fs.rm(f"/{top}", recursive=True)


def test_a_memory_tree_goes_and_its_sibling_stays(
    rrm: Any, memory: tuple[Any, str], tmp_path: Path
) -> None:
    fs, name = memory
    status, _, err = rrm(*summary_of(tmp_path), f"memory://{name}")
    assert status == 0, err
    assert not fs.exists(f"/{name}")
    assert fs.cat(f"/{name}2/sibling") == b"stays"
    removed = read_summary(tmp_path)["removed"]
    assert (removed["files"], removed["bytes"]) == (4, 20)
    assert removed["dirs"] == 4  # the operand, a, b and b/c


def test_a_dry_run_says_what_the_local_one_says_and_keeps_everything(
    rrm: Any, memory: tuple[Any, str], tmp_path: Path
) -> None:
    fs, name = memory
    before = fs.find(f"/{name}", withdirs=True)
    status, out, _ = rrm("--dry-run", *summary_of(tmp_path), f"memory://{name}/")
    assert status == 0
    assert fs.find(f"/{name}", withdirs=True) == before
    said = {line for line in out.splitlines() if line.startswith("would remove")}
    url = f"memory:///{name}"
    assert said == {
        *(f"would remove '{url}/{key}'" for key in ("a/x", "a/y.keep", "b/c/z", "top")),
        *(f"would remove '{url}/{d}'" for d in ("a/", "b/", "b/c/", "")),
    }
    removed = read_summary(tmp_path)["removed"]
    assert (removed["files"], removed["dirs"], removed["bytes"]) == (4, 4, 20)


def test_filters_keep_what_they_exclude_and_its_directories(
    rrm: Any, memory: tuple[Any, str], tmp_path: Path
) -> None:
    fs, name = memory
    status, _, err = rrm(
        "--exclude", "*.keep", *summary_of(tmp_path), f"memory://{name}"
    )
    assert status == 0, err
    assert fs.find(f"/{name}") == [f"/{name}/a/y.keep"]
    assert read_summary(tmp_path)["skipped"]["files"] == 1
    included = rrm("--include", "/b/**", f"memory://{name}")
    assert included[0] == 0
    assert fs.find(f"/{name}") == [f"/{name}/a/y.keep"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--created-before", "1d"], "--created-before"),
        (["--modified-before", "1d"], "--modified-before"),
        (["--cross-devices"], "--cross-devices"),
    ],
)
def test_what_memory_cannot_honour_is_refused_naming_the_flag_and_storage(
    rrm: Any, memory: tuple[Any, str], args: list[str], words: str
) -> None:
    fs, name = memory
    before = fs.find(f"/{name}", withdirs=True)
    status, _, err = rrm(*args, f"memory://{name}")
    assert status == 2
    assert err.count("\n") == 1
    assert words in err
    assert "memory://" in err
    assert fs.find(f"/{name}", withdirs=True) == before


@pytest.mark.parametrize(
    ("operands", "words"),
    [
        (["memory://"], "top of a storage"),
        (["memory://NAME/../x"], "'..'"),
        (["memory://NAME/gone"], "no such file"),
        (["memory://NAME", "LOCAL"], "local paths and URLs"),
        # Checked before any session is started on the host.
        (["memory://NAME", "host:/x/../y"], "'..'"),
        (["LOCAL", "host:/x"], "local paths and URLs or host:/paths"),
    ],
)
def test_bad_operands_are_refused_before_anything_goes(
    rrm: Any,
    memory: tuple[Any, str],
    tmp_path: Path,
    operands: list[str],
    words: str,
) -> None:
    fs, name = memory
    local = tmp_path / "local"
    local.mkdir()
    given = [o.replace("NAME", name).replace("LOCAL", str(local)) for o in operands]
    before = fs.find("/", withdirs=True)
    status, _, err = rrm(*given)
    assert status == 2, err
    assert words in err
    assert err.count("\n") == 1
    assert fs.find("/", withdirs=True) == before
    assert local.exists()


def test_a_missing_operand_is_nothing_to_do_with_missing_ok(
    rrm: Any, memory: tuple[Any, str]
) -> None:
    fs, name = memory
    status, _, err = rrm("-f", f"memory://{name}/gone", f"memory://{name}/a")
    assert status == 0, err
    assert not fs.exists(f"/{name}/a")
    assert fs.exists(f"/{name}/top")


class Finished:
    """Records what ``rcp_run_finished`` is told."""

    def __init__(self) -> None:
        self.told: list[tuple[Summary | None, BaseException | None]] = []

    @hookimpl
    def rcp_run_finished(
        self, summary: Summary | None, error: BaseException | None
    ) -> None:
        self.told.append((summary, error))


# -- S3 (moto) ------------------------------------------------------------------------


@pytest.fixture
def bucket(s3: Store, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    """A fresh bucket holding ``dir/``'s tree and names beside it that share its
    prefix; ``s3://`` URLs of this process reach moto."""
    monkeypatch.setitem(fsspec.config.conf, "s3", s3.options)
    fs, name = s3.fs(), s3.bucket()
    for key in ("dir/x", "dir/sub/y", "dir/sub/deeper/z", "dir2/beside", "dirx"):
        fs.pipe(f"{name}/{key}", b"0123456789")
    return fs, name


def keys(fs: Any, bucket: str) -> list[str]:
    return sorted(str(k).removeprefix(f"{bucket}/") for k in fs.find(bucket))


def test_a_prefix_goes_and_nothing_beside_it(
    rrm: Any, bucket: tuple[Any, str], tmp_path: Path
) -> None:
    """``s3://b/dir`` is the prefix ``dir/``: ``dir2/`` and ``dirx`` stay; the
    directory markers a console makes (empty keys ``dir/``, ``dir/sub/``) go with
    their prefixes, the one beside them (``dir2/``) stays."""
    fs, name = bucket
    for marker in ("dir/", "dir/sub/", "dir2/"):
        fs.call_s3("put_object", Bucket=name, Key=marker, Body=b"")
    status, _, err = rrm(*summary_of(tmp_path), f"s3://{name}/dir")
    assert status == 0, err
    listed = fs.call_s3("list_objects_v2", Bucket=name)["Contents"]
    assert sorted(o["Key"] for o in listed) == ["dir2/", "dir2/beside", "dirx"]
    removed = read_summary(tmp_path)["removed"]
    assert (removed["files"], removed["bytes"]) == (3, 30)


def test_modified_before_reads_an_objects_upload_time(
    rrm: Any, bucket: tuple[Any, str], tmp_path: Path
) -> None:
    """Objects uploaded just now are younger than a day: kept, counted; before a
    time to come, they are old enough."""
    fs, name = bucket
    status, _, err = rrm(
        "--modified-before", "1d", *summary_of(tmp_path), f"s3://{name}/dir"
    )
    assert status == 0, err
    assert len(keys(fs, name)) == 5
    assert read_summary(tmp_path)["skipped"]["files"] == 3
    later = time.strftime("%Y-%m-%dT%H:%M", time.localtime(time.time() + 3600))
    assert rrm("--modified-before", later, f"s3://{name}/dir")[0] == 0
    assert keys(fs, name) == ["dir2/beside", "dirx"]


def test_unsafe_keys_are_errors_never_joined(rrm: Any, bucket: tuple[Any, str]) -> None:
    """Keys whose names hold an empty component or ``..`` are entry errors: each is
    left, with the prefixes holding it; everything else goes (exit 1)."""
    fs, name = bucket
    fs.pipe(f"{name}/dir/sub/..", b"dots")
    fs.pipe(f"{name}/dir/a//b", b"empty component")
    status, out, err = rrm(f"s3://{name}/dir")
    assert status == 1
    assert "2 error(s)" in err
    assert out.count("unsafe name") == 2
    assert keys(fs, name) == ["dir/a//b", "dir/sub/..", "dir2/beside", "dirx"]


def test_the_run_ends_as_a_local_removal_does(bucket: tuple[Any, str]) -> None:
    """``rcp_run_finished`` hears the summary, and of a run with a failed entry the
    summary and the :class:`CopyFailedError` ("remove") the run raises."""
    fs, name = bucket
    finished = Finished()
    summary = remove_ports([port_of_url(f"s3://{name}/dir/sub")], plugins=[finished])
    assert summary["removed.files"] == 2
    assert finished.told == [(summary, None)]
    finished.told.clear()
    fs.pipe(f"{name}/dir/..", b"dots")
    with pytest.raises(CopyFailedError, match="remove") as failed:
        remove_ports([port_of_url(f"s3://{name}/dir")], plugins=[finished])
    assert failed.value.summary["errors"] == 1
    assert finished.told == [(failed.value.summary, failed.value)]
    assert keys(fs, name) == ["dir/..", "dir2/beside", "dirx"]


def test_a_whole_bucket_needs_force(rrm: Any, bucket: tuple[Any, str]) -> None:
    fs, name = bucket
    status, _, err = rrm(f"s3://{name}")
    assert status == 2
    assert "top of a storage" in err
    assert len(keys(fs, name)) == 5
    assert rrm("--force", f"s3://{name}")[0] == 0
    assert keys(fs, name) == []


BIG = 2500
"""Objects of one level: three ``DeleteObjects`` requests (a thousand each)."""


@pytest.fixture
def counted(s3: Store) -> Iterator[tuple[Proxy, Any, str]]:
    """S3 behind the counting proxy; a bucket holding ``big/``: :data:`BIG` objects,
    a symlink's object and a prefix below."""
    with storeproxy.proxied(s3, delay=0.0) as proxy:
        fs, name = proxy.store.fs(), proxy.store.bucket()
        fs.pipe({f"{name}/big/f{i:04d}": b"x" * 10 for i in range(BIG)})
        fs.pipe({f"{name}/big/l.rclonelink": b"f0000", f"{name}/big/d/y": b"yy"})
        yield proxy, fs, name


def test_a_level_goes_a_thousand_objects_a_request(
    counted: tuple[Proxy, Any, str],
) -> None:
    proxy, fs, name = counted
    proxy.reset()
    summary = remove_ports([port_of(fs, f"{name}/big")])
    requests = proxy.reset()
    assert summary["removed.files"] == BIG + 1, summary
    assert summary["removed.symlinks"] == 1, summary
    assert summary["removed.bytes"] == BIG * 10 + 2  # a symlink's counts none
    # 3 batches of the level's 2,501 objects, 1 of the prefix's one object, and a
    # request for each prefix's directory marker (big/d/, big/)
    assert requests.of(Kind.DELETE) == 4 + 2, requests
    fs.invalidate_cache()
    assert fs.find(f"{name}/big") == []


def test_what_a_batch_leaves_goes_one_at_a_time(
    counted: tuple[Proxy, Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key a ``DeleteObjects`` answer names as failed, and every key of a
    request that failed (injected: moto refuses neither), is removed on its own;
    nothing is left, nothing is counted twice."""
    proxy, fs, name = counted
    batches: list[int] = []

    def refusing(fs_: Any, paths: list[str]) -> dict[str, OSError]:
        batches.append(len(paths))
        if len(batches) == 1:
            raise PermissionError(13, "AccessDenied")
        rest = paths[1:]
        failed = storeremoval.delete_s3_objects(fs_, rest) if rest else {}
        return {**failed, paths[0]: OSError(5, "InternalError: try again")}

    monkeypatch.setattr(storetree, "delete_s3_objects", refusing)
    proxy.reset()
    summary = remove_ports([port_of(fs, f"{name}/big")])
    requests = proxy.reset()
    assert sorted(batches) == [1, 502, 999, 1000]  # the first page holds d/ too
    assert summary["removed.files"] == BIG + 1, summary
    assert summary["errors"] == 0
    # the failed request's keys each alone; each later batch's request (the one
    # of a single key made none) and its first key alone; the 2 markers
    went = sum(1 for n in batches[1:] if n > 1)
    alone = batches[0] + len(batches) - 1
    assert requests.of(Kind.DELETE) == went + alone + 2, requests
    fs.invalidate_cache()
    assert fs.find(f"{name}/big") == []


# -- rcpd serve -----------------------------------------------------------------------


@pytest.fixture
def service(
    rcp_service: services.Served, monkeypatch: pytest.MonkeyPatch
) -> tuple[services.Served, str]:
    """The service's ``data`` root holding a tree with a symlink out of it, and its
    URL; ``rcp://`` URLs of this process trust it."""
    trust = {
        "fingerprint": rcp_service.identity.fingerprint,
        "token": services.TOKEN,
        "skip_instance_cache": True,
    }
    monkeypatch.setitem(fsspec.config.conf, "rcp", trust)
    tree = rcp_service.data / "tree"
    (tree / "old").mkdir(parents=True)
    (tree / "old" / "a").write_bytes(b"a" * 100)
    (tree / "new").write_bytes(b"new")
    (tree / "out").symlink_to(rcp_service.outside)
    past = time.time() - 10 * 86400
    os.utime(tree / "old" / "a", (past, past))
    host, port = rcp_service.service.address
    return rcp_service, f"rcp://{host}:{port}"


def test_a_tree_on_a_service_goes_its_symlinks_not_followed(
    rrm: Any, service: tuple[services.Served, str], tmp_path: Path
) -> None:
    served, base = service
    status, _, err = rrm(*summary_of(tmp_path), f"{base}{served.data}/tree")
    assert status == 0, err
    assert not (served.data / "tree").exists()
    assert (served.outside / "secret").read_text() == "secret"
    removed = read_summary(tmp_path)["removed"]
    assert (removed["files"], removed["symlinks"], removed["dirs"]) == (2, 1, 2)


def test_a_symlink_operand_on_a_service_is_the_link(
    rrm: Any, service: tuple[services.Served, str]
) -> None:
    served, base = service
    status, _, err = rrm(f"{base}{served.data}/tree/out")
    assert status == 0, err
    assert not os.path.lexists(served.data / "tree" / "out")
    assert (served.outside / "secret").read_text() == "secret"


def test_modified_before_on_a_service_reads_mtimes(
    rrm: Any, service: tuple[services.Served, str]
) -> None:
    served, base = service
    status, _, err = rrm("--modified-before", "7d", f"{base}{served.data}/tree")
    assert status == 0, err
    left = sorted(str(p.relative_to(served.data)) for p in served.data.rglob("*"))
    assert left == ["escape", "tree", "tree/new", "tree/out"]  # all young


COUNTED: Spec = {
    "a": File(b"a" * 1000),
    "d/b": File(b"b" * 20_000),
    "d/e/c": File(b"c" * 300_000),
    "d/e/empty": File(b""),
    "d/e/link": Symlink("../b"),
    "d/fifo": Fifo(),
    "f/g/h": Dir(),
}


def test_a_tree_removed_here_and_on_a_service_is_counted_alike(
    rrm: Any, service: tuple[services.Served, str], tmp_path: Path
) -> None:
    """One tree removed from this host's disk (the local walk) and from a service
    (through its port): the same files, symlinks, specials and directories, in a
    dry run and in the removal itself; the port counts the files' bytes from its
    listings, the local walk (files unlooked at, as ``rm -rf``) only under an age
    rule."""
    served, base = service
    here = make_tree(tmp_path / "here", COUNTED)
    there = make_tree(served.data / "counted", COUNTED)
    counts = {}
    for dry in (["--dry-run"], []):
        for name, operand in (("here", str(here)), ("there", f"{base}{there}")):
            out = tmp_path / f"{name}.json"
            status, _, err = rrm(*dry, "--summary-json", str(out), operand)
            assert status == 0, err
            counts[name] = json.loads(out.read_text())["removed"]
        assert counts["there"]["bytes"] == 321_000, dry
        assert counts["here"]["bytes"] == 0, dry
        del counts["here"]["bytes"], counts["there"]["bytes"]
        assert counts["here"] == counts["there"], dry
        removed = counts["here"]
        assert removed["files"] == 4, dry
        assert (removed["symlinks"], removed["specials"]) == (1, 1), dry
        assert removed["dirs"] == 6, dry  # the root, d, d/e, f, f/g, f/g/h
    assert not here.exists()
    assert not there.exists()


@pytest.fixture
def immutable(service: tuple[services.Served, str]) -> Iterator[Path]:
    """``tree/old/a`` cannot be removed (``chattr +i``), even by root."""
    served, _ = service
    held = served.data / "tree" / "old" / "a"
    subprocess.run(["chattr", "+i", str(held)], check=True)
    try:
        yield held
    finally:
        subprocess.run(["chattr", "-i", str(held)], check=True)


@pytest.mark.privileged
def test_a_failure_on_a_service_keeps_its_entry_and_exits_1(
    rrm: Any,
    service: tuple[services.Served, str],
    immutable: Path,
    tmp_path: Path,
) -> None:
    served, base = service
    status, _, err = rrm(*summary_of(tmp_path), f"{base}{served.data}/tree")
    assert status == 1
    assert "remove" in err
    left = sorted(str(p.relative_to(served.data)) for p in served.data.rglob("*"))
    assert left == ["escape", "tree", "tree/old", "tree/old/a"]
    assert read_summary(tmp_path)["errors"] == 1


@pytest.fixture
def mounted(service: tuple[services.Served, str]) -> Iterator[Path]:
    """A small tmpfs mounted at ``tree/old/mnt``, holding ``kept/f``."""
    served, _ = service
    point = served.data / "tree" / "old" / "mnt"
    point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True
    )
    try:
        (point / "kept").mkdir()
        (point / "kept" / "f").write_bytes(b"f")
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)


@pytest.mark.privileged
def test_a_filesystem_mounted_in_a_services_tree_is_kept(
    rrm: Any, service: tuple[services.Served, str], mounted: Path
) -> None:
    served, base = service
    status, out, err = rrm(f"{base}{served.data}/tree")
    assert status == 0, err
    assert "another filesystem is mounted here; kept" in out + err
    assert (mounted / "kept" / "f").read_bytes() == b"f"
    left = sorted(str(p.relative_to(served.data)) for p in served.data.rglob("*"))
    assert left == [
        "escape",
        "tree",
        "tree/old",
        "tree/old/mnt",
        "tree/old/mnt/kept",
        "tree/old/mnt/kept/f",
    ]
    status, _, err = rrm(f"{base}{served.data}/tree/old/mnt")
    assert status == 2
    assert "refusing to remove a mount point (--force)" in err
    assert (mounted / "kept" / "f").read_bytes() == b"f"


@pytest.mark.privileged
def test_cross_devices_empties_a_filesystem_mounted_in_a_services_tree(
    rrm: Any, service: tuple[services.Served, str], mounted: Path
) -> None:
    served, base = service
    status, out, err = rrm("--cross-devices", f"{base}{served.data}/tree")
    # Everything in the mounted filesystem goes; its mount point cannot (EBUSY).
    assert status == 1, err
    assert "mnt" in out
    assert list(mounted.iterdir()) == []
    assert not (served.data / "tree" / "new").exists()


def test_cross_devices_is_refused_by_a_service_that_tells_no_devices(
    rrm: Any, service: tuple[services.Served, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service older than 1.12 sends no ``dev``: today's removal, and
    ``--cross-devices`` refused."""
    from rcp_core.remote import filewire

    def old(name: str, st: os.stat_result, target: str | None) -> dict[str, Any]:
        entry = filewire.meta_of(st)
        wire: dict[str, Any] = {"name": name, "meta": entry}
        if target is not None:
            wire["target"] = target
        return wire

    monkeypatch.setattr("rcp_core.remote.filerequests.entry_to_wire", old)
    monkeypatch.setattr("rcp_core.remote.listing.entry_to_wire", old)
    served, base = service
    status, _, err = rrm("--cross-devices", f"{base}{served.data}/tree")
    assert status == 2
    assert "--cross-devices" in err
    assert (served.data / "tree" / "new").exists()


# -- a site's backend -----------------------------------------------------------------


def test_a_site_backend_removes_through_its_port(rrm: Any, storage: Path) -> None:
    """``sitefs://``'s port removes the tree; an age rule, which its declaration
    does not offer (no listed times), is refused up front."""
    (storage / "t" / "d").mkdir(parents=True)
    (storage / "t" / "d" / "f").write_bytes(b"f")
    (storage / "t2").write_bytes(b"beside")
    refused = rrm("--modified-before", "1d", "sitefs://store/t")
    assert refused[0] == 2
    assert "sitefs://" in refused[2]
    assert (storage / "t" / "d" / "f").exists()
    status, _, err = rrm("sitefs://store/t")
    assert status == 0, err
    assert sorted(p.name for p in storage.iterdir()) == ["t2"]
