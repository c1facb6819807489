"""A tree on a real ``rcpd serve`` process as a backend port (``ServicePlace``): its
listings are what ``lstat`` says on the service's host, its digests are taken there,
and a comparison through it finds what the trees hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from blake3 import blake3

from rcp_core.engine.posixport import PosixPort
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.compare import compare
from rcp_core.tools.verify.differences import DiffKind
from rcp_provider.fsspec.serviceport import ServicePlace
from rcp_provider.fsspec.storetree import port_of
from support.services import RcpdServe, service_fs
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_600_000_000 * 10**9
DATA = os.urandom(70_000)
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a.txt": File(b"alpha", 0o640, T0 + 1, owner=(1234, 5678)),
    "sub": Dir(0o750, T0 + 2),
    "sub/b.bin": File(DATA, 0o751, T0 + 3),
    "sub/link": Symlink("b.bin", T0 + 4),
    "sub/up": Symlink("..", T0 + 5),
    "sub/dangling": Symlink("nowhere", T0 + 6),
    "many": Dir(0o755, T0 + 7),
    **{f"many/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(40)},
}
EVERY_ATTR = frozenset(CompareAttr) - {CompareAttr.CTIME, CompareAttr.CHECKSUM}


@pytest.fixture
def tree(served: tuple[RcpdServe, Path], area: Path) -> tuple[ServicePlace, Path]:
    """:data:`TREE` beneath the service's root, and its place there."""
    path = make_tree(area / "tree", TREE)
    place = port_of(service_fs(served[0]), str(path))
    assert isinstance(place, ServicePlace)
    return place, path


@pytest.mark.privileged
@pytest.mark.parametrize("follow", [False, True])
def test_a_listing_is_what_lstat_says_there(
    tree: tuple[ServicePlace, Path], follow: bool
) -> None:
    """Entry for entry what this host's port lists of the same directory: type,
    mode, owner, mtime to the nanosecond, symlink targets; followed, a link to a
    file is the file, one to a directory or nowhere skipped and counted."""
    place, path = tree
    local = PosixPort(str(path))
    for rel in ("", "sub"):
        assert place.list(rel, follow=follow) == local.list(rel, follow=follow)
    assert place.list("sub", follow=True).skipped_links == 2
    assert place.stat("a.txt") == local.stat("a.txt")
    assert place.stat("nothing") is None
    assert place.backend.time_precision_ns == 1


def test_a_link_out_of_the_roots_is_not_followed(
    tree: tuple[ServicePlace, Path],
) -> None:
    place, path = tree
    (path / "out").symlink_to("/etc/hostname")
    listing = place.list("", follow=True)
    assert "out" not in listing.entries
    assert listing.skipped_links == 1
    assert place.list("", follow=False).entries["out"].target == "/etc/hostname"


def test_a_digest_is_taken_where_the_data_is(tree: tuple[ServicePlace, Path]) -> None:
    """The service's BLAKE3 of a range, as this host's hasher makes it of the same
    bytes (fewer where the file ends)."""
    place, _ = tree
    assert place.digest("sub/b.bin", 0, 1000) == blake3(DATA[:1000]).digest()
    assert place.digest("sub/b.bin", 69_000, 5000) == blake3(DATA[69_000:]).digest()


@pytest.mark.privileged
def test_a_tree_and_its_copy_on_a_service_compare(
    tree: tuple[ServicePlace, Path], tmp_path: Path
) -> None:
    """Every attribute and every file's contents the same; then what changes on the
    service's side is found, each by its kind."""
    place, path = tree
    src = PosixPort(str(make_tree(tmp_path / "src", TREE)))
    same = compare(src, place, checksum=True, attrs=EVERY_ATTR, max_workers=4)
    assert same.same, same.differences
    assert same.files_hashed == 42
    data = bytearray(DATA)
    data[-1] ^= 1
    (path / "sub" / "b.bin").write_bytes(bytes(data))
    os.utime(path / "sub" / "b.bin", ns=(T0, T0 + 3))
    (path / "many" / "f7").chmod(0o644)
    os.chown(path / "a.txt", 1234, 999)
    (path / "sub" / "link").unlink()
    (path / "sub" / "link").symlink_to("../a.txt")
    os.utime(path / "sub", ns=(T0, T0 + 2))
    found = compare(src, place, checksum=True, attrs=EVERY_ATTR)
    assert [(d.path, d.kind) for d in found.differences] == [
        ("a.txt", DiffKind.OWNER),
        ("many/f7", DiffKind.MODE),
        ("sub/b.bin", DiffKind.CONTENT),
        ("sub/link", DiffKind.LINK),
        ("sub/link", DiffKind.MTIME),
    ]
