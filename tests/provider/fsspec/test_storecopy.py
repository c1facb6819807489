"""Trees between POSIX and any fsspec store (``memory://``, a local directory seen only
through fsspec): operands, existing files, metadata, errors, bounds, progress."""

from __future__ import annotations

import errno
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from rcp_core.engine.portcopy import copy_tree
from rcp_core.engine.posixport import PosixPort
from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.run.progress import Progress
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_core.site.hookspecs import hookimpl
from rcp_provider.fsspec.storetree import Place, port_of, port_of_url
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a.txt": File(b"alpha", 0o640, T0 + 1_000_000_000),
    "sub": Dir(0o750, T0 + 2_000_000_000),
    "sub/b.bin": File(os.urandom(300_000), 0o604, T0 + 3_000_000_000),
    "many": Dir(0o700, T0 + 4_000_000_000),
    **{f"many/f{i}": File(b"%d" % i, 0o600, T0 + i * 10**9) for i in range(50)},
}
"""Whole seconds: fsspec's infos carry times as floats, exact for these."""


@pytest.fixture
def memory() -> Place:
    """A fresh directory of the process's ``memory://`` store."""
    place = port_of_url(f"memory://t{uuid.uuid4().hex}")
    assert isinstance(place, Place)
    return place


def local(path: Path) -> PosixPort:
    return PosixPort(str(path))


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_a_tree_goes_to_memory_and_back_exactly(tmp_path: Path, memory: Place) -> None:
    src = make_tree(tmp_path / "src", TREE)
    summary = copy_tree(local(src), memory)
    assert summary["copied.files"] == 52
    assert summary["copied.dirs"] == 3
    assert summary["copied.bytes"] == sum(len(b) for b in files_of(src).values())
    assert (
        memory.fs.cat_file(f"{memory.path}/sub/b.bin")
        == (src / "sub/b.bin").read_bytes()
    )
    back = copy_tree(memory, local(tmp_path / "back"))
    assert back["copied.files"] == 52
    assert files_of(tmp_path / "back") == files_of(src)
    assert not list((tmp_path / "back").rglob(".rcp-*"))  # no temporaries


def test_a_generic_store_keeps_modes_and_times_where_it_has_them(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A local directory seen only through fsspec (DirFileSystem) is a generic
    store whose infos carry mode and mtime: a POSIX copy of it gets both."""
    src = make_tree(tmp_path / "src", TREE)
    store = port_of(DirFileSystem(path=str(src), fs=LocalFileSystem()), "/")
    assert isinstance(store, Place)  # not this host's files, as fsspec shows them
    copy_tree(store, local(tmp_path / "dst"))
    assert tree_compare(src, tmp_path / "dst") == []


def test_into_and_the_operand_rules(tmp_path: Path, memory: Place) -> None:
    src = make_tree(tmp_path / "src", TREE)
    memory.fs.makedirs(memory.path, exist_ok=True)
    copy_tree(local(src), memory, into=True)
    assert memory.fs.isfile(f"{memory.path}/src/a.txt")
    with pytest.raises(UsageError, match="exists"):  # the default policy
        copy_tree(local(src), memory, into=True)
    with pytest.raises(UsageError, match="No such file or directory"):
        copy_tree(local(tmp_path / "missing"), memory)
    with pytest.raises(UsageError, match="inside the source"):
        copy_tree(local(src), local(src / "sub" / "again"))
    with pytest.raises(UsageError, match="parent"):
        copy_tree(memory, local(tmp_path / "no" / "such" / "dir"))
    assert not (tmp_path / "no").exists()


def test_existing_files_follow_the_policy(tmp_path: Path, memory: Place) -> None:
    src = make_tree(tmp_path / "src", TREE)
    copy_tree(local(src), memory)
    overwrite = CopySettings(existing=ExistingPolicy.OVERWRITE)
    again = copy_tree(local(src), memory, overwrite)
    assert (again["copied.files"], again["unchanged.files"]) == (0, 52)
    (src / "a.txt").write_bytes(b"a longer alpha")
    kept = copy_tree(
        local(src), memory, CopySettings(existing=ExistingPolicy.IGNORE_EXISTING)
    )
    assert kept["copied.files"] == 0
    assert memory.fs.cat_file(f"{memory.path}/a.txt") == b"alpha"
    replaced = copy_tree(local(src), memory, overwrite)
    assert replaced["copied.files"] == 1
    assert memory.fs.cat_file(f"{memory.path}/a.txt") == b"a longer alpha"


def test_symlinks_of_a_posix_source(tmp_path: Path, memory: Place) -> None:
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(0o755, T0),
            "real": File(b"the file", 0o644, T0),
            "to_file": Symlink("real"),
            "to_dir": Symlink("."),  # a loop, if followed
            "dangling": Symlink("nowhere"),
        },
    )
    summary = copy_tree(local(src), memory)
    assert memory.fs.cat_file(f"{memory.path}/to_file") == b"the file"
    assert summary["copied.files"] == 2
    assert summary["skipped.symlinks"] == 2
    assert not memory.fs.exists(f"{memory.path}/to_dir")


class FaultyMemory(MemoryFileSystem):  # type: ignore[misc]
    """A memory store whose opens of chosen names fail: ``EIO`` every time, or
    ``EAGAIN`` the first time only. It also counts opens in flight at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broken: set[str] = set()
        self.flaky: set[str] = set()
        self.busy = self.most = 0
        self.lock = threading.Lock()

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        name = path.rsplit("/", 1)[-1]
        if name in self.broken:
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)
        if name in self.flaky:
            self.flaky.discard(name)
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)
        with self.lock:
            self.busy += 1
            self.most = max(self.most, self.busy)
        try:
            threading.Event().wait(0.005)  # an object store's round trip
            return super()._open(path, mode, **kwargs)
        finally:
            with self.lock:
                self.busy -= 1


def test_errors_are_collected_transient_ones_retried(tmp_path: Path) -> None:
    store = FaultyMemory(skip_instance_cache=True)
    store.store.clear()
    store.pseudo_dirs.clear()
    store.pseudo_dirs.append("")
    src = make_tree(tmp_path / "src", TREE)
    copy_tree(local(src), Place(store, "/tree"))
    store.broken, store.flaky = {"f3", "f4"}, {"f5"}
    with pytest.raises(CopyFailedError) as failed:
        copy_tree(Place(store, "/tree"), local(tmp_path / "dst"))
    summary = failed.value.summary
    assert summary["errors"] == 2
    assert summary["copied.files"] == 50  # f5 made it on its second try
    assert failed.value.errors[0][1] == 2  # one kind of error, seen twice
    assert not (tmp_path / "dst" / "many" / "f3").exists()
    assert (tmp_path / "dst" / "many" / "f5").read_bytes() == b"5"


def test_files_in_flight_are_bounded_and_progress_is_reported(tmp_path: Path) -> None:
    store = FaultyMemory(skip_instance_cache=True)
    src = make_tree(tmp_path / "src", TREE)
    copy_tree(local(src), Place(store, "/bounded"))
    store.most = 0
    seen: list[Progress] = []
    summary = copy_tree(
        Place(store, "/bounded"),
        local(tmp_path / "dst"),
        CopySettings(max_workers=3),
        on_progress=seen.append,
        progress_interval=0.01,
    )
    assert 1 < store.most <= 3
    assert seen[-1].final
    assert seen[-1].counts["copied.files"] == summary["copied.files"] == 52


def test_urls_name_ports() -> None:
    """A store's URL is a place on it; this host's files are the engine's own port,
    through fsspec's local filesystem and the rcp filesystem's local form alike."""
    place = port_of_url("memory://bucket/key")
    assert isinstance(place, Place)
    assert isinstance(place.fs, MemoryFileSystem)
    assert place.path == "/bucket/key"
    for url in ("/tmp", "file:///tmp", "rcp:///tmp"):
        local_port = port_of_url(url)
        assert isinstance(local_port, PosixPort)
        assert local_port.root == "/tmp"
    assert isinstance(fsspec.filesystem("memory"), MemoryFileSystem)


class BrokenOpenFileSystem(MemoryFileSystem):
    """A memory store whose ``open`` of one key fails with a non-OSError, as an
    fsspec implementation's bug would."""

    protocol = "brokenopen"

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if path.endswith("/b") and "r" in mode:
            raise ValueError("this store cannot open b")
        return super()._open(path, mode, **kwargs)


def test_an_unexpected_failure_in_a_worker_fails_the_copy(tmp_path: Path) -> None:
    """A worker's exception that is no OSError is not an entry error the run can
    count: the copy raises it, never ends as if every file had been copied."""
    store = BrokenOpenFileSystem()
    root = f"/t{uuid.uuid4().hex}"
    for name in ("a", "b", "c"):
        store.pipe_file(f"{root}/set/{name}", name.encode())
    with pytest.raises(ValueError, match="cannot open b"):
        copy_tree(Place(store, f"{root}/set"), local(tmp_path / "dst"))


class ListingMemory(MemoryFileSystem):
    """A memory store that records each listing and refuses whole-tree ones."""

    protocol = "listingmemory"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed: list[str] = []

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        self.listed.append(self._strip_protocol(path))
        return super().ls(path, detail=detail, **kwargs)

    def find(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the store copy listed a whole tree")


def test_a_store_is_listed_one_directory_at_a_time(tmp_path: Path) -> None:
    """Each source directory is listed once, one level (memory follows the
    directories in flight, not the tree); a destination directory is listed only
    when it existed before the copy."""
    store = ListingMemory(skip_instance_cache=True)
    root = f"/t{uuid.uuid4().hex}"
    copy_tree(local(make_tree(tmp_path / "src", TREE)), Place(store, root))
    assert sorted(store.listed) == []  # a fresh destination: nothing to list
    store.listed.clear()
    copy_tree(Place(store, root), local(tmp_path / "dst"))
    assert sorted(store.listed) == [root, f"{root}/many", f"{root}/sub"]
    store.listed.clear()
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    copy_tree(local(tmp_path / "dst"), Place(store, root), settings)
    assert sorted(store.listed) == [root, f"{root}/many", f"{root}/sub"]


def test_filters_and_delete_through_the_api(tmp_path: Path, memory: Place) -> None:
    """``includes``/``excludes``/``gitignore`` choose what a store copy copies, and
    ``delete`` removes what the source does not have but the excluded names."""
    src = make_tree(
        tmp_path / "src",
        {
            "keep.txt": File(b"k"),
            "skip.log": File(b"l"),
            ".gitignore": File(b"*.ign\n"),
            "x.ign": File(b"i"),
            "sub/keep.txt": File(b"s"),
        },
    )
    settings = CopySettings(excludes=("*.log",), gitignore=True)
    copy_tree(local(src), memory, settings)
    fs = memory.fs
    assert sorted(fs.find(memory.path)) == [
        f"{memory.path}/{rel}" for rel in (".gitignore", "keep.txt", "sub/keep.txt")
    ]
    fs.pipe_file(f"{memory.path}/sub/extra", b"only here")
    fs.pipe_file(f"{memory.path}/mine.log", b"excluded: kept")
    mirror = CopySettings(
        existing=ExistingPolicy.OVERWRITE, delete=True, excludes=("*.log",)
    )
    summary = copy_tree(local(src), memory, mirror)
    assert (summary["removed.files"], summary["copied.files"]) == (1, 1)  # x.ign
    assert sorted(fs.find(memory.path)) == [
        f"{memory.path}/{rel}"
        for rel in (".gitignore", "keep.txt", "mine.log", "sub/keep.txt", "x.ign")
    ]


def test_a_symlink_where_a_directory_goes_is_replaced_not_followed(
    tmp_path: Path, memory: Place
) -> None:
    """``-o`` from a store: the destination's symlink named like a source directory
    is replaced by the directory; nothing is written where it pointed."""
    fs = memory.fs
    fs.pipe_file(f"{memory.path}/d/f", b"from the store")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "d").symlink_to(elsewhere)
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    copy_tree(memory, local(dst), settings)
    assert not (dst / "d").is_symlink()
    assert (dst / "d" / "f").read_bytes() == b"from the store"
    assert list(elsewhere.iterdir()) == []
    kept = CopySettings(existing=ExistingPolicy.IGNORE_EXISTING)
    (dst / "e").symlink_to(elsewhere)
    fs.pipe_file(f"{memory.path}/e/g", b"not followed")
    summary = copy_tree(memory, local(dst), kept)
    assert summary["skipped.dirs"] == 1
    assert list(elsewhere.iterdir()) == []


class FlakyListing(MemoryFileSystem):
    """A memory store whose listing of chosen directories fails once with
    ``EAGAIN`` (a store's throttling answer), then succeeds."""

    protocol = "flakylisting"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flaky: set[str] = set()

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        name = self._strip_protocol(path).rsplit("/", 1)[-1]
        if name in self.flaky:
            self.flaky.discard(name)
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)
        return super().ls(path, detail=detail, **kwargs)


def test_a_listing_failing_once_is_tried_again(tmp_path: Path) -> None:
    """A transient error listing a source directory, or the destination's, is
    retried: the copy is whole, with no error."""
    store = FlakyListing(skip_instance_cache=True)
    root = f"/t{uuid.uuid4().hex}"
    copy_tree(local(make_tree(tmp_path / "src", TREE)), Place(store, root))
    store.flaky = {"many", "sub"}
    summary = copy_tree(Place(store, root), local(tmp_path / "dst"))
    assert summary["errors"] == 0
    assert not store.flaky
    assert files_of(tmp_path / "dst") == files_of(tmp_path / "src")
    store.flaky = {"many"}
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    summary = copy_tree(local(tmp_path / "src"), Place(store, root), settings)
    assert summary["errors"] == 0
    assert not store.flaky


class Finished:
    """A site plugin that records what ``rcp_run_finished`` is told."""

    def __init__(self) -> None:
        self.told: list[tuple[Any, BaseException | None]] = []

    @hookimpl
    def rcp_run_finished(self, summary: Any, error: BaseException | None) -> None:
        self.told.append((summary, error))


def test_a_site_plugin_sees_a_store_copy_finish(tmp_path: Path, memory: Place) -> None:
    """``rcp_run_finished`` sees a store copy's summary, and its failure, as it sees
    a local copy's."""
    src = make_tree(tmp_path / "src", TREE)
    finished = Finished()
    summary = copy_tree(local(src), memory, plugins=[finished])
    assert finished.told == [(summary, None)]
    os.mkfifo(src / "pipe")  # no store can hold it: an entry error
    settings = CopySettings(existing=ExistingPolicy.OVERWRITE)
    with pytest.raises(CopyFailedError) as failed:
        copy_tree(local(src), memory, settings, plugins=[finished])
    assert finished.told[-1] == (failed.value.summary, failed.value)
