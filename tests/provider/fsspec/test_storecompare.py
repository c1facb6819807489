"""Trees compared through fsspec: a local tree against its copy in a generic store
(memory://, a directory seen only through fsspec), by metadata and by content."""

from __future__ import annotations

import uuid
from pathlib import Path

from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from rcp_core.comparison import DiffKind
from rcp_provider.fsspec.storecompare import compare_places
from rcp_provider.fsspec.storecopy import copy_tree
from rcp_provider.fsspec.storetree import Place
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a.txt": File(b"alpha", 0o640, T0),
    "sub": Dir(0o750, T0),
    "sub/b.bin": File(b"b" * 70_000, 0o604, T0),
    "sub/link": Symlink("b.bin", T0),
}


def local(path: Path) -> Place:
    return Place(LocalFileSystem(), str(path))


def test_a_memory_copy_is_the_same_by_content_and_a_change_is_found(
    tmp_path: Path,
) -> None:
    src = make_tree(
        tmp_path / "src", {k: v for k, v in TREE.items() if k != "sub/link"}
    )
    memory = Place.of(f"memory://c{uuid.uuid4().hex}")
    copy_tree(local(src), memory)
    same = compare_places(local(src), memory, checksum=True)
    assert same.same, same.differences
    assert same.files_hashed == 2
    memory.fs.pipe_file(f"{memory.path}/a.txt", b"ALPHA")  # same size
    memory.fs.pipe_file(f"{memory.path}/extra", b"x")
    found = compare_places(local(src), memory, checksum=True)
    kinds = {(d.path, d.kind) for d in found.differences}
    assert kinds == {("a.txt", DiffKind.CONTENT), ("extra", DiffKind.EXTRA)}


def test_a_store_with_modes_and_times_is_compared_on_them(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    dst = make_tree(tmp_path / "dst", TREE)
    store = Place(DirFileSystem(path=str(dst), fs=LocalFileSystem()), "/")
    assert compare_places(local(src), store, checksum=True).same
    (dst / "sub" / "b.bin").chmod(0o600)
    (dst / "sub" / "link").unlink()
    (dst / "sub" / "link").symlink_to("a.txt")
    found = compare_places(local(src), store)
    kinds = {(d.path, d.kind) for d in found.differences}
    assert ("sub/b.bin", DiffKind.MODE) in kinds
    assert ("sub/link", DiffKind.LINK) in kinds
