"""The ``rcp`` filesystem on a real ``rcpd serve`` process: fsspec's conformance suites
through ``rcp://host:port/path``, whole-file writes, bulk transfers that keep modes and
times, callbacks, confinement, URLs and options."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.callbacks import Callback
from fsspec.tests.abstract import (
    AbstractCopyTests,
    AbstractFixtures,
    AbstractGetTests,
    AbstractOpenTests,
    AbstractPipeTests,
    AbstractPutTests,
)

from rcp_core.errors import UsageError
from rcp_provider.fsspec.local import RcpFileSystem
from rcp_provider.fsspec.service import RcpServiceFileSystem
from support.services import TOKEN, RcpdServe, service_fs
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a.txt": File(b"alpha", 0o640, T0 + 1),
    "sub": Dir(0o750, T0 + 2),
    "sub/b.bin": File(os.urandom(70_000), 0o751, T0 + 3),
    "sub/link": Symlink("b.bin"),
    **{f"many/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(40)},
}


def url(rcpd: RcpdServe, path: Path | str) -> str:
    host, port = rcpd.address
    return f"rcp://{host}:{port}{path}"


class ServiceFixtures(AbstractFixtures):  # type: ignore[misc]
    """fsspec's suites with the service form as the filesystem under test."""

    @pytest.fixture
    def fs(self, served: tuple[RcpdServe, Path]) -> RcpServiceFileSystem:
        return service_fs(served[0])

    @pytest.fixture
    def fs_path(self, area: Path) -> str:
        return str(area)


class TestServiceCopy(AbstractCopyTests, ServiceFixtures):  # type: ignore[misc]
    pass


class TestServiceGet(AbstractGetTests, ServiceFixtures):  # type: ignore[misc]
    pass


class TestServicePut(AbstractPutTests, ServiceFixtures):  # type: ignore[misc]
    pass


class TestServiceOpen(AbstractOpenTests, ServiceFixtures):  # type: ignore[misc]
    pass


class TestServicePipe(AbstractPipeTests, ServiceFixtures):  # type: ignore[misc]
    pass


# -- beyond the suites -----------------------------------------------------------------


def test_a_url_opens_the_service_form_and_round_trips_bytes(
    served: tuple[RcpdServe, Path], area: Path
) -> None:
    rcpd, _ = served
    trust = {"fingerprint": rcpd.announce["fingerprint"], "token": TOKEN}
    data = os.urandom(9 << 20)  # more than one read and one write on the wire
    with fsspec.open(url(rcpd, area / "big.bin"), "wb", **trust) as f:
        f.write(data)
    assert (area / "big.bin").read_bytes() == data
    fs, path = fsspec.url_to_fs(url(rcpd, area / "big.bin"), **trust)
    assert isinstance(fs, RcpServiceFileSystem)
    assert path == str(area / "big.bin")
    with fs.open(path, "rb") as f:
        f.seek(5 << 20)
        assert f.read(10) == data[5 << 20 : (5 << 20) + 10]
    assert fs.cat_file(path, start=-4) == data[-4:]
    assert fs.unstrip_protocol(path) == url(rcpd, area / "big.bin")


def test_a_file_written_in_a_root_itself(served: tuple[RcpdServe, Path]) -> None:
    """fsspec makes a file's parent (``makedirs(parent, exist_ok=True)``) before it
    writes: a root's own files can be written (the root exists), and making the
    root without ``exist_ok`` is still refused."""
    rcpd, root = served
    trust = {"fingerprint": rcpd.announce["fingerprint"], "token": TOKEN}
    with fsspec.open(url(rcpd, root / "top.txt"), "w", **trust) as f:
        f.write("at the top")
    assert (root / "top.txt").read_text() == "at the top"
    (root / "top.txt").unlink()
    fs = service_fs(rcpd)
    fs.makedirs(str(root), exist_ok=True)
    with pytest.raises(UsageError, match="is a root"):
        fs.makedirs(str(root), exist_ok=False)


def write_then_fail(fs: RcpServiceFileSystem, path: Path, data: bytes) -> None:
    with fs.open(str(path), "wb") as f:
        f.write(data)
        raise RuntimeError("the writer failed half-way")


def test_a_write_that_raises_leaves_nothing_under_the_name(
    served: tuple[RcpdServe, Path], area: Path
) -> None:
    fs = service_fs(served[0])
    (area / "kept").write_bytes(b"before")
    with pytest.raises(RuntimeError):  # one block already sent to the service
        write_then_fail(fs, area / "kept", b"x" * (6 << 20))
    with pytest.raises(RuntimeError):  # nothing sent yet
        write_then_fail(fs, area / "new", b"half")
    assert (area / "kept").read_bytes() == b"before"
    assert sorted(p.name for p in area.iterdir()) == ["kept"]  # no temporaries


def test_info_and_ls_describe_entries_like_the_local_filesystem(
    served: tuple[RcpdServe, Path], area: Path
) -> None:
    src = make_tree(area / "src", TREE)
    fs = service_fs(served[0])
    local = fsspec.filesystem("file")
    for name in ("a.txt", "sub", "sub/link", "sub/b.bin"):
        mine, theirs = fs.info(str(src / name)), local.info(str(src / name))
        for key in ("name", "type", "size", "mode", "islink"):
            assert mine[key] == theirs[key], (name, key)
    assert fs.ls(str(src / "sub"), detail=False) == [
        str(src / "sub" / "b.bin"),
        str(src / "sub" / "link"),
    ]
    listed = {i["name"]: (i["type"], i["size"]) for i in fs.ls(str(src / "sub"))}
    assert listed == {
        i["name"]: (i["type"], i["size"])
        for i in local.ls(str(src / "sub"), detail=True)
    }  # a listed symlink is "other": a walk never enters one
    (src / "loop").symlink_to(".")
    (src / "dangling").symlink_to("nowhere")
    assert fs.find(str(src)) == sorted(local.find(str(src)))
    for name in ("missing", "dangling"):
        with pytest.raises(FileNotFoundError):
            fs.info(str(src / name))


@pytest.mark.parametrize("form", ["put", "get", "copy"])
def test_bulk_transfers_keep_modes_and_times(
    served: tuple[RcpdServe, Path],
    area: Path,
    tmp_path: Path,
    form: str,
    tree_compare: TreeCompare,
) -> None:
    fs = service_fs(served[0])
    if form == "put":
        src = make_tree(tmp_path / "src", TREE)
        dst = area / "dst"
        fs.put(str(src), str(dst), recursive=True)
    elif form == "get":
        src = make_tree(area / "src", TREE)
        dst = tmp_path / "dst"
        fs.get(str(src), str(dst), recursive=True)
    else:
        src = make_tree(area / "src", TREE)
        dst = area / "dst"
        fs.copy(url(served[0], src), url(served[0], dst), recursive=True)
    assert tree_compare(src, dst) == []  # modes, times and the symlink too


class Recorder(Callback):  # type: ignore[misc]
    """Records the outer size and each file's child: its size and bytes seen."""

    def __init__(self) -> None:
        super().__init__()
        self.children: dict[str, tuple[int | None, int]] = {}

    def branched(self, path_1: str, path_2: str, **kwargs: Any) -> Callback:
        recorder = self

        class Child(Callback):  # type: ignore[misc]
            def call(self, *args: Any, **kwargs: Any) -> None:
                recorder.children[path_1] = (self.size, self.value)

        return Child()


@pytest.mark.parametrize("form", ["put", "get"])
def test_a_callback_gets_a_child_per_file_with_its_bytes(
    served: tuple[RcpdServe, Path], area: Path, tmp_path: Path, form: str
) -> None:
    fs = service_fs(served[0])
    here = make_tree(tmp_path / "src", TREE)
    there = make_tree(area / "src", TREE)
    recorder = Recorder()
    if form == "put":
        fs.put(str(here), str(area / "dst"), recursive=True, callback=recorder)
        src = here
    else:
        fs.get(str(there), str(tmp_path / "dst"), recursive=True, callback=recorder)
        src = there
    big = str(src / "sub" / "b.bin")
    assert recorder.children[big] == (70_000, 70_000)
    assert recorder.size == len(recorder.children) + 3  # and one per directory
    assert recorder.value == recorder.size


def test_paths_outside_the_roots_are_refused(
    served: tuple[RcpdServe, Path], tmp_path: Path
) -> None:
    fs = service_fs(served[0])
    (tmp_path / "secret").write_text("no")
    with pytest.raises(UsageError):
        fs.cat_file(str(tmp_path / "secret"))
    with pytest.raises(UsageError):
        fs.pipe_file(str(tmp_path / "planted"), b"x")
    assert not (tmp_path / "planted").exists()


def test_mv_renames_in_one_step(served: tuple[RcpdServe, Path], area: Path) -> None:
    fs = service_fs(served[0])
    make_tree(area / "src", TREE)
    (area / "into").mkdir()
    fs.mv(str(area / "src"), str(area / "into"))
    assert (area / "into" / "src" / "sub" / "b.bin").is_file()
    fs.rm(str(area / "into"), recursive=True)
    assert list(area.iterdir()) == []


def test_urls_options_and_the_local_form(served: tuple[RcpdServe, Path]) -> None:
    rcpd, _ = served
    host, port = rcpd.address
    assert RcpFileSystem._get_kwargs_from_urls("rcp://u@[::1]:7451/x") == {
        "host": "::1",
        "port": 7451,
        "username": "u",
    }
    assert RcpFileSystem._get_kwargs_from_urls("rcp:///x") == {}
    with pytest.raises(UsageError, match="rcpd service"):
        RcpFileSystem()._strip_protocol(f"rcp://{host}:{port}/x")
    fs = fsspec.filesystem(
        "rcp",
        host=host,
        port=str(port),
        fingerprint=rcpd.announce["fingerprint"],
        token=TOKEN,
        timeout="5",
        max_workers="4",
        skip_instance_cache=True,
    )
    assert (fs.port, fs.timeout, fs.settings.max_workers) == (port, 5.0, 4)
    with pytest.raises(UsageError, match="fingerprint"):
        fsspec.filesystem("rcp", host=host, port=port, skip_instance_cache=True)
    with pytest.raises(UsageError, match="encrypt"):
        fsspec.filesystem("rcp", host=host, encrypt="perhaps", skip_instance_cache=True)
