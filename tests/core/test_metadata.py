"""Preserve settings: mode, ns times, owner, xattrs and POSIX ACLs, per entry type.

``default`` keeps mode and times, ``all`` adds owner, user xattrs and ACLs, ``none``
keeps data only (new entries get ``0666``/``0777`` minus the umask, and a fresh mtime),
and a list keeps exactly what it names. Directories get their metadata after their
children, so their mtimes survive the copy.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import CopySettings, Preserve, Summary, UsageError, copy
from rcp_core.settings import PreserveAttr
from support.treecmp import TreeCompare
from support.treespec import Dir, Entry, Fifo, File, Spec, Symlink, make_tree

T = 1_600_000_000_123_456_789  # an mtime with a nanosecond part
T2 = 1_234_567_890_987_654_321
UMASK = 0o027
ACCESS = "system.posix_acl_access"
DEFAULT = "system.posix_acl_default"


def run(src: Path, dst: Path | str, preserve: str) -> Summary:
    return copy([str(src)], str(dst), CopySettings(preserve=Preserve.parse(preserve)))


def getfacl(path: Path) -> str:
    """The ACL of ``path`` as ``getfacl`` prints it (numeric ids, no header)."""
    out = subprocess.run(
        ["getfacl", "-c", "-n", "-p", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def setfacl(*args: str) -> None:
    subprocess.run(["setfacl", *args], capture_output=True, text=True, check=True)


def acl_names(path: Path) -> set[str]:
    return {n for n in os.listxattr(path) if n.startswith("system.posix_acl")}


@pytest.fixture
def known_umask() -> Iterator[int]:
    """Run the test under umask 027; restore the caller's umask afterwards."""
    old = os.umask(UMASK)
    try:
        yield UMASK
    finally:
        os.umask(old)


MIXED: Spec = {
    ".": Dir(mode=0o750, mtime_ns=T),
    "f": File(b"data", mode=0o640, mtime_ns=T),
    "exec": File(b"#!/bin/sh\n", mode=0o755, mtime_ns=T2),
    "ro": File(b"r", mode=0o400, mtime_ns=T + 1),
    "sub": Dir(mode=0o750, mtime_ns=T2),
    "sub/g": File(b"g" * 5000, mode=0o604, mtime_ns=T + 7),
    "sub/deep": Dir(mode=0o711, mtime_ns=T + 3),
    "sub/deep/h": File(b"", mode=0o660, mtime_ns=T + 9),
    "sub/link": Symlink("../f", mtime_ns=T + 5),
    "sub/dangling": Symlink("nowhere", mtime_ns=T2 + 11),
    "fifo": Fifo(mode=0o620, mtime_ns=T + 13),
}


def test_preserve_parse() -> None:
    """default is mode+times, all is everything, none is nothing, lists are exact."""
    assert Preserve.parse("default").attrs == {PreserveAttr.MODE, PreserveAttr.TIMES}
    assert Preserve.parse("all").attrs == set(PreserveAttr)
    assert Preserve.parse("none").attrs == frozenset()
    assert Preserve.parse("mode").attrs == {PreserveAttr.MODE}
    assert Preserve.parse("times,owner").attrs == {
        PreserveAttr.TIMES,
        PreserveAttr.OWNER,
    }
    with pytest.raises(UsageError, match="bad --preserve"):
        Preserve.parse("mode,colour")


def test_default_keeps_mode_and_ns_times(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Files, dirs (root too), symlinks and FIFOs keep mode and ns mtimes by default."""
    src = make_tree(tmp_path / "src", MIXED)
    summary = run(src, tmp_path / "dst", "default")
    assert tree_compare(src, tmp_path / "dst", mode=True, times=True) == []
    assert summary["copied.files"] == 5
    assert summary["copied.dirs"] == 3
    assert summary["copied.symlinks"] == 2
    assert summary["copied.specials"] == 1
    # Spot-check that the compared values are the unusual ones we set.
    st = os.lstat(tmp_path / "dst" / "sub" / "link")
    assert st.st_mtime_ns == T + 5
    assert stat.S_IMODE(os.stat(tmp_path / "dst" / "sub").st_mode) == 0o750
    assert os.stat(tmp_path / "dst").st_mtime_ns == T


def test_dir_mtime_applied_after_children(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Many children created inside a directory do not leave its mtime at 'now'."""
    spec: dict[str, Entry] = {".": Dir(mtime_ns=T)}
    for d in range(5):
        spec[f"d{d}"] = Dir(mode=0o755, mtime_ns=T + d)
        spec[f"d{d}/inner"] = Dir(mode=0o700, mtime_ns=T2 + d)
        for i in range(40):
            spec[f"d{d}/inner/f{i}"] = File(b"x" * i, mtime_ns=T2)
    src = make_tree(tmp_path / "src", spec)
    run(src, tmp_path / "dst", "default")
    assert tree_compare(src, tmp_path / "dst") == []
    for d in range(5):
        assert os.stat(tmp_path / "dst" / f"d{d}").st_mtime_ns == T + d
        assert os.stat(tmp_path / "dst" / f"d{d}" / "inner").st_mtime_ns == T2 + d


@pytest.mark.privileged
def test_default_keeps_setid_modes_as_root(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Set-uid files and set-gid/sticky dirs keep their special bits (root's copy)."""
    src = make_tree(
        tmp_path / "src",
        {
            "suid": File(b"x", mode=0o4755, mtime_ns=T),
            "sgid": File(b"y", mode=0o2750, mtime_ns=T),
            "shared": Dir(mode=0o2775, mtime_ns=T),
            "shared/f": File(b"z", mode=0o640, mtime_ns=T),
            "tmp": Dir(mode=0o1777, mtime_ns=T),
        },
    )
    run(src, tmp_path / "dst", "default")
    assert tree_compare(src, tmp_path / "dst") == []
    assert stat.S_IMODE(os.stat(tmp_path / "dst" / "suid").st_mode) == 0o4755
    assert stat.S_IMODE(os.stat(tmp_path / "dst" / "shared").st_mode) == 0o2775


@pytest.mark.privileged
def test_default_does_not_copy_owner(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """Without ``owner``, the copy belongs to the copier (root), not 1234:5678."""
    owner = (1234, 5678)
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(mode=0o755, owner=owner),
            "f": File(b"data", mode=0o644, owner=owner),
            "d": Dir(mode=0o755, owner=owner),
            "d/link": Symlink("../f", owner=owner),
            "fifo": Fifo(mode=0o644, owner=owner),
        },
    )
    dst = tmp_path / "dst"
    run(src, dst, "default")
    assert tree_compare(src, dst) == []
    for rel in (".", "f", "d", "d/link", "fifo"):
        assert os.lstat(src / rel).st_uid == 1234
        st = os.lstat(dst / rel)
        assert (st.st_uid, st.st_gid) == (0, 0), rel


def test_default_does_not_copy_xattrs_or_acls(tmp_path: Path) -> None:
    """user.* xattrs and ACLs stay behind unless asked for."""
    src = make_tree(tmp_path / "src", {"f": File(b"x", xattrs={"user.k": b"v"})})
    setfacl("-m", "u:1234:rw", str(src / "f"))
    run(src, tmp_path / "dst", "default")
    assert os.listxattr(tmp_path / "dst" / "f") == []


@pytest.mark.privileged
def test_all_keeps_owner_on_every_type(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """``all`` keeps arbitrary uid:gid on files, dirs, symlinks, FIFOs and the root."""
    a, b = (1234, 5678), (4321, 8765)
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(mode=0o755, mtime_ns=T, owner=a),
            "f": File(b"data", mode=0o640, mtime_ns=T, owner=a),
            "suid": File(b"s", mode=0o4755, mtime_ns=T, owner=b),
            "d": Dir(mode=0o2750, mtime_ns=T2, owner=b),
            "d/g": File(b"g", mode=0o600, mtime_ns=T, owner=b),
            "d/link": Symlink("../f", mtime_ns=T, owner=a),
            "fifo": Fifo(mode=0o600, mtime_ns=T, owner=b),
        },
    )
    dst = tmp_path / "dst"
    run(src, dst, "all")
    assert tree_compare(src, dst, owner=True) == []
    st = os.lstat(dst / "d" / "link")
    assert (st.st_uid, st.st_gid) == a
    # chown clears set-id bits; mode goes on after it.
    st = os.stat(dst / "suid")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (4321, 0o4755)


def test_all_keeps_user_xattrs(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """``all`` copies user.* xattrs of files, directories and the root directory."""
    big = bytes(range(256)) * 8
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(xattrs={"user.root": b"r"}),
            "f": File(b"data", xattrs={"user.a": b"1", "user.empty": b""}),
            "g": File(b"", xattrs={"user.big": big}),
            "d": Dir(xattrs={"user.dir": b"\x00\xff binary"}),
            "d/h": File(b"h", xattrs={"user.nested.name": b"x"}),
            "plain": b"no xattrs",
        },
    )
    dst = tmp_path / "dst"
    run(src, dst, "all")
    assert tree_compare(src, dst, xattrs=True) == []
    assert os.getxattr(dst / "g", "user.big") == big
    assert os.getxattr(dst / "d", "user.dir") == b"\x00\xff binary"
    assert os.listxattr(dst / "plain") == []


def test_xattrs_list_copies_xattrs_not_acls(tmp_path: Path) -> None:
    """``xattrs`` alone copies user.* attributes but not the ACL attributes."""
    src = make_tree(tmp_path / "src", {"f": File(b"x", xattrs={"user.k": b"v"})})
    setfacl("-m", "u:1234:rw", str(src / "f"))
    run(src, tmp_path / "dst", "xattrs")
    assert os.listxattr(tmp_path / "dst" / "f") == ["user.k"]


def test_all_keeps_access_and_default_acls(tmp_path: Path) -> None:
    """Named-user access ACLs on files and dirs, and default ACLs on dirs, survive."""
    src = make_tree(
        tmp_path / "src",
        {"f": File(b"x", mode=0o640), "d": Dir(mode=0o750), "d/g": b"g"},
    )
    setfacl("-m", "u:1234:rw,g:5678:r", str(src / "f"))
    setfacl("-m", "u:1234:rwx", str(src / "d"))
    setfacl("-d", "-m", "u:4321:rx,g:5678:rwx", str(src / "d"))
    dst = tmp_path / "dst"
    run(src, dst, "all")
    for rel in ("f", "d", "d/g"):
        assert getfacl(dst / rel) == getfacl(src / rel), rel
    assert "user:1234:rw-" in getfacl(dst / "f")
    assert "default:user:4321:r-x" in getfacl(dst / "d")
    assert os.getxattr(dst / "f", ACCESS) == os.getxattr(src / "f", ACCESS)
    assert os.getxattr(dst / "d", DEFAULT) == os.getxattr(src / "d", DEFAULT)
    # The mask is part of the mode: the group bits the ACL mask set must match.
    assert os.stat(dst / "f").st_mode == os.stat(src / "f").st_mode


def test_acls_do_not_leak_from_destination_default_acl(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A destination dir's default ACL does not give inherited ACLs to copies whose
    source has none: rcp clears them, so access is exactly the source's."""
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(mode=0o750, mtime_ns=T),
            "f": File(b"x", mode=0o600, mtime_ns=T),
            "sub": Dir(mode=0o700, mtime_ns=T),
            "sub/g": File(b"g", mode=0o640, mtime_ns=T),
        },
    )
    into = tmp_path / "into"
    into.mkdir()
    setfacl("-d", "-m", "u:1234:rwx,g::rwx,o::rwx", str(into))
    # The destination really does hand its default ACL to new entries.
    (into / "probe").write_bytes(b"")
    assert ACCESS in os.listxattr(into / "probe")
    run(src, f"{into}/", "all")
    dst = into / "src"
    for rel in (".", "f", "sub", "sub/g"):
        assert acl_names(dst / rel) == set(), rel
        assert "1234" not in getfacl(dst / rel), rel
    assert tree_compare(src, dst, mode=True, times=True, xattrs=True) == []


def test_none_uses_umask_and_fresh_times(
    tmp_path: Path, known_umask: int, tree_compare: TreeCompare
) -> None:
    """``none``: files 0666 & ~umask, dirs 0777 & ~umask, mtimes are the copy's own."""
    src = make_tree(tmp_path / "src", MIXED)
    before = time.time_ns() - 2 * 10**9  # file times use a coarse clock
    run(src, tmp_path / "dst", "none")
    dst = tmp_path / "dst"
    # Contents, types and link targets are still copied.
    assert tree_compare(src, dst, mode=False, times=False) == []
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in [".", *dirnames, *filenames]:
            path = Path(dirpath, name)
            st = os.lstat(path)
            assert st.st_mtime_ns >= before, path
            if stat.S_ISDIR(st.st_mode):
                assert stat.S_IMODE(st.st_mode) == 0o777 & ~known_umask, path
            elif not stat.S_ISLNK(st.st_mode):
                assert stat.S_IMODE(st.st_mode) == 0o666 & ~known_umask, path
    assert stat.S_IMODE(os.stat(dst / "exec").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(dst / "sub" / "deep").st_mode) == 0o750


def test_mode_only_keeps_mode_not_times(
    tmp_path: Path, known_umask: int, tree_compare: TreeCompare
) -> None:
    """``mode`` alone: every mode is the source's, every mtime is fresh."""
    src = make_tree(tmp_path / "src", MIXED)
    before = time.time_ns() - 2 * 10**9
    run(src, tmp_path / "dst", "mode")
    dst = tmp_path / "dst"
    assert tree_compare(src, dst, mode=True, times=False) == []
    for dirpath, dirnames, filenames in os.walk(dst):
        for name in [".", *dirnames, *filenames]:
            assert os.lstat(Path(dirpath, name)).st_mtime_ns >= before
    assert stat.S_IMODE(os.stat(dst / "exec").st_mode) == 0o755


def test_times_only_keeps_times_not_mode(
    tmp_path: Path, known_umask: int, tree_compare: TreeCompare
) -> None:
    """``times`` alone: every mtime is the source's, modes come from the umask."""
    src = make_tree(tmp_path / "src", MIXED)
    run(src, tmp_path / "dst", "times")
    dst = tmp_path / "dst"
    assert tree_compare(src, dst, mode=False, times=True) == []
    assert stat.S_IMODE(os.stat(dst / "exec").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(dst / "ro").st_mode) == 0o640
    assert stat.S_IMODE(os.stat(dst / "sub").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(dst / "fifo").st_mode) == 0o640
