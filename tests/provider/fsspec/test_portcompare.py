"""Trees compared through their backend ports (``compare`` with ports): a local tree
against its copy in a generic store (memory://, a directory seen only through
fsspec), by metadata and by content; a store failing, and a comparison cancelled."""

from __future__ import annotations

import errno
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from rcp_core.engine.portcopy import copy_tree
from rcp_core.engine.posixport import PosixPort
from rcp_core.tools.verify.compare import compare
from rcp_core.tools.verify.differences import DiffKind
from rcp_provider.fsspec.storetree import Place, port_of_url
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a.txt": File(b"alpha", 0o640, T0),
    "sub": Dir(0o750, T0),
    "sub/b.bin": File(b"b" * 70_000, 0o604, T0),
    "sub/link": Symlink("b.bin", T0),
}


def local(path: Path) -> PosixPort:
    return PosixPort(str(path))


def test_a_memory_copy_is_the_same_by_content_and_a_change_is_found(
    tmp_path: Path,
) -> None:
    src = make_tree(
        tmp_path / "src", {k: v for k, v in TREE.items() if k != "sub/link"}
    )
    memory = port_of_url(f"memory://c{uuid.uuid4().hex}")
    assert isinstance(memory, Place)
    copy_tree(local(src), memory)
    same = compare(local(src), memory, checksum=True)
    assert same.same, same.differences
    assert same.files_hashed == 2
    memory.fs.pipe_file(f"{memory.path}/a.txt", b"ALPHA")  # same size
    memory.fs.pipe_file(f"{memory.path}/extra", b"x")
    found = compare(local(src), memory, checksum=True)
    kinds = {(d.path, d.kind) for d in found.differences}
    assert kinds == {("a.txt", DiffKind.CONTENT), ("extra", DiffKind.EXTRA)}


def test_a_store_with_modes_and_times_is_compared_on_them(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    dst = make_tree(tmp_path / "dst", TREE)
    store = Place(DirFileSystem(path=str(dst), fs=LocalFileSystem()), "/")
    assert compare(local(src), store, checksum=True).same
    (dst / "sub" / "b.bin").chmod(0o600)
    (dst / "sub" / "link").unlink()
    (dst / "sub" / "link").symlink_to("a.txt")
    found = compare(local(src), store)
    kinds = {(d.path, d.kind) for d in found.differences}
    assert ("sub/b.bin", DiffKind.MODE) in kinds
    assert ("sub/link", DiffKind.LINK) in kinds


class FaultyStore(MemoryFileSystem):  # type: ignore[misc]
    """A memory store whose listings (``ls``) and opens of chosen names fail: with
    the errno given, every time (``broken``) or the first time only (``flaky``).
    It records the paths it lists, and sets ``cancel_on_ls`` (if any) at each."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broken: dict[str, int] = {}
        self.flaky: dict[str, int] = {}
        self.failed: list[str] = []
        self.listed: list[str] = []
        self.cancel_on_ls: threading.Event | None = None

    def _fault(self, path: str) -> None:
        name = path.rstrip("/").rsplit("/", 1)[-1]
        code = self.broken.get(name) or self.flaky.pop(name, None)
        if code is not None:
            self.failed.append(name)
            raise OSError(code, os.strerror(code), path)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> Any:
        self.listed.append(path)
        if self.cancel_on_ls is not None:
            self.cancel_on_ls.set()
        self._fault(path)
        return super().ls(path, detail=detail, **kwargs)

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        if "r" in mode:
            self._fault(path)
        return super()._open(path, mode, **kwargs)


def faulty_copy(tmp_path: Path) -> tuple[Path, Place, FaultyStore]:
    """A local tree and its copy in a :class:`FaultyStore` (no fault yet)."""
    src = make_tree(
        tmp_path / "src", {k: v for k, v in TREE.items() if k != "sub/link"}
    )
    store = FaultyStore(skip_instance_cache=True)
    place = Place(store, f"/faulty{uuid.uuid4().hex}")
    copy_tree(local(src), place)
    return src, place, store


def test_a_store_failing_transiently_is_tried_again_and_the_same(
    tmp_path: Path,
) -> None:
    """A listing failing with EAGAIN and a read with ETIMEDOUT (transient, as the
    runtime classifies them) are tried again: the comparison is the same."""
    src, place, store = faulty_copy(tmp_path)
    store.flaky = {"sub": errno.EAGAIN, "b.bin": errno.ETIMEDOUT}
    result = compare(local(src), place, checksum=True, retry_delay=0)
    assert store.failed == ["sub", "b.bin"]  # each failed once
    assert result.same, result.differences
    assert result.files_hashed == 2


def test_a_permanent_failure_is_an_error_difference_and_the_rest_goes_on(
    tmp_path: Path,
) -> None:
    """A read failing with EACCES is an ``error`` difference of its file (tried
    once: not transient); a directory that cannot be listed is one of its own, and
    nothing below it is called missing."""
    src, place, store = faulty_copy(tmp_path)
    (src / "sub" / "more").write_bytes(b"below a directory not listed")
    store.broken = {"a.txt": errno.EACCES}
    found = compare(local(src), place, checksum=True, retries=3)
    assert [(d.path, d.kind, d.detail) for d in found.differences] == [
        ("a.txt", DiffKind.ERROR, "read destination: Permission denied"),
        ("sub/more", DiffKind.MISSING, "file missing in destination"),
    ]
    assert store.failed == ["a.txt"]
    assert found.files_hashed == 1
    store.broken = {"sub": errno.EACCES}
    found = compare(local(src), place, checksum=True)
    assert [(d.path, d.kind, d.detail) for d in found.differences] == [
        ("sub", DiffKind.ERROR, "read destination directory: Permission denied"),
    ]
    assert not found.cancelled


def test_cancel_stops_a_store_comparison(tmp_path: Path) -> None:
    """Cancel set while the store is listed: nothing more is listed or hashed, and
    the comparison is cancelled, not the same."""
    src, place, store = faulty_copy(tmp_path)
    store.cancel_on_ls = cancel = threading.Event()
    result = compare(local(src), place, checksum=True, cancel=cancel)
    assert result.cancelled
    assert not result.same
    assert store.listed == [place.path]  # the root's listing only: "sub" never
    assert result.files_hashed == 0
