"""Symlinks, ``-L``, hard links and special files.

Symlinks are copied as links (never followed) unless ``dereference``; then they become
what they point at, and a loop is a counted error that does not stop the rest of the
tree. Hard links inside the copied tree stay hard links. FIFOs, sockets and devices
are recreated; a device a non-root user cannot create is an error, or a skip with
``--skip-specials``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.latencyfs import Faults, mounted
from rcp_core import CopyFailedError, CopySettings, DryRun, ExistingPolicy, copy
from support.nobody import NOBODY, rcp_as_nobody, world_dir
from support.treecmp import TreeCompare
from support.treespec import (
    Dir,
    Entry,
    Fifo,
    File,
    HardLink,
    Spec,
    Symlink,
    make_tree,
)

T = 1_600_000_000_123_456_789
DEREF = CopySettings(dereference=True)
OVERWRITE = CopySettings(existing=ExistingPolicy.OVERWRITE)


def is_link(path: Path) -> bool:
    return stat.S_ISLNK(os.lstat(path).st_mode)


def inode(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


# -- symlinks copied as links -----------------------------------------------------


def test_symlinks_copied_as_links(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """Relative, absolute, dangling and directory symlinks keep their exact target
    and ns mtime, and a link to a directory is not followed."""
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside")
    src = make_tree(
        tmp_path / "src",
        {
            "f": b"file",
            "sub": Dir(),
            "sub/g": b"g",
            "rel": Symlink("f", mtime_ns=T),
            "sub/up": Symlink("../f", mtime_ns=T + 1),
            "abs": Symlink(str(outside), mtime_ns=T + 2),
            "dangling": Symlink("does/not/exist", mtime_ns=T + 3),
            "to_dir": Symlink("sub", mtime_ns=T + 4),
            "odd": Symlink("a/./b//c/../", mtime_ns=T + 5),
        },
    )
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst))
    assert tree_compare(src, dst) == []
    assert summary["copied.symlinks"] == 6
    assert summary["copied.files"] == 2
    for name, target in [
        ("rel", "f"),
        ("abs", str(outside)),
        ("dangling", "does/not/exist"),
        ("to_dir", "sub"),
        ("odd", "a/./b//c/../"),
    ]:
        assert is_link(dst / name), name
        assert os.readlink(dst / name) == target
    assert os.readlink(dst / "sub" / "up") == "../f"
    assert os.lstat(dst / "to_dir").st_mtime_ns == T + 4
    assert outside.read_bytes() == b"outside"


@pytest.mark.parametrize("target_kind", ["dir", "file", "dangling"])
def test_symlink_root_operand_copied_as_link(tmp_path: Path, target_kind: str) -> None:
    """A symlink given as the source operand is copied as a link, not followed."""
    target = tmp_path / "target"
    if target_kind == "dir":
        target.mkdir()
        (target / "inside").write_bytes(b"x")
    elif target_kind == "file":
        target.write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to("target")
    os.utime(link, ns=(T, T), follow_symlinks=False)
    dst = tmp_path / "copy"
    summary = copy(str(link), str(dst))
    assert is_link(dst)
    assert os.readlink(dst) == "target"
    assert os.lstat(dst).st_mtime_ns == T
    assert summary["copied.symlinks"] == 1
    assert summary["copied.files"] == summary["copied.dirs"] == 0


# -- dereference ------------------------------------------------------------------


def test_dereference_files_become_regular_files(tmp_path: Path) -> None:
    """With -L, symlinks to files become regular files with the target's content
    and metadata; the targets themselves are copied too."""
    outside = make_tree(
        tmp_path / "out", {"o": File(b"outside data", mode=0o640, mtime_ns=T)}
    )
    src = make_tree(
        tmp_path / "src",
        {
            "f": File(b"inside data", mode=0o604, mtime_ns=T + 1),
            "rel": Symlink("f"),
            "abs": Symlink(str(outside / "o")),
            "chain": Symlink("rel"),
        },
    )
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst), DEREF)
    for name, data, mode, mtime in [
        ("f", b"inside data", 0o604, T + 1),
        ("rel", b"inside data", 0o604, T + 1),
        ("chain", b"inside data", 0o604, T + 1),
        ("abs", b"outside data", 0o640, T),
    ]:
        st = os.lstat(dst / name)
        assert stat.S_ISREG(st.st_mode), name
        assert (dst / name).read_bytes() == data
        assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (mode, mtime), name
    assert summary["copied.files"] == 4
    assert summary["copied.symlinks"] == 0


def test_dereference_dir_symlink_becomes_directory(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """With -L, a symlink to a directory (inside or outside the tree) is copied as
    a real directory holding the target's entries."""
    outside = make_tree(
        tmp_path / "outside",
        {".": Dir(mode=0o750, mtime_ns=T), "a": b"a", "b": Dir(), "b/c": b"c"},
    )
    src = make_tree(
        tmp_path / "src",
        {
            "real": Dir(),
            "real/x": b"x",
            "in": Symlink("real"),
            "out": Symlink(str(outside)),
        },
    )
    dst = tmp_path / "dst"
    copy(str(src), str(dst), DEREF)
    assert not is_link(dst / "out")
    assert tree_compare(outside, dst / "out") == []
    assert stat.S_ISDIR(os.lstat(dst / "in").st_mode)
    assert (dst / "in" / "x").read_bytes() == b"x"


def test_dereference_root_operand_symlink_to_dir(tmp_path: Path) -> None:
    """With -L, a source operand that is a symlink to a directory is copied as a
    directory under the exact destination name."""
    make_tree(tmp_path / "target", {"f": b"f", "d": Dir(), "d/g": b"g"})
    (tmp_path / "link").symlink_to("target")
    copy(str(tmp_path / "link"), str(tmp_path / "copy"), DEREF)
    assert stat.S_ISDIR(os.lstat(tmp_path / "copy").st_mode)
    assert (tmp_path / "copy" / "d" / "g").read_bytes() == b"g"


def test_dereference_root_operand_into_keeps_link_name(tmp_path: Path) -> None:
    """``rcp -L link DST/`` copies as ``DST/link`` (the operand's name, as cp -L
    does), not under the name of the directory the link points to."""
    make_tree(tmp_path / "target", {"f": b"f"})
    (tmp_path / "link").symlink_to("target")
    into = tmp_path / "into"
    into.mkdir()
    copy(str(tmp_path / "link"), f"{into}/", DEREF)
    assert sorted(os.listdir(into)) == ["link"]
    assert (into / "link" / "f").read_bytes() == b"f"


@pytest.mark.timeout(60)
def test_dereference_dir_loop_is_counted_error(tmp_path: Path) -> None:
    """With -L, ``sub/a -> .`` (a directory containing itself) is one counted error;
    the run ends and every other entry is copied."""
    src = make_tree(
        tmp_path / "src",
        {
            "top": b"top",
            "sub": Dir(),
            "sub/a": Symlink("."),
            "sub/up": Symlink(".."),
            "sub/file": b"file",
            "sub/deeper": Dir(),
            "sub/deeper/g": b"g",
        },
    )
    dst = tmp_path / "dst"
    with pytest.raises(CopyFailedError) as info:
        copy(str(src), str(dst), DEREF)
    summary = info.value.summary
    assert summary["errors"] == 2
    assert (dst / "top").read_bytes() == b"top"
    assert (dst / "sub" / "file").read_bytes() == b"file"
    assert (dst / "sub" / "deeper" / "g").read_bytes() == b"g"
    assert not os.path.lexists(dst / "sub" / "a" / "a")


@pytest.mark.timeout(60)
def test_dereference_self_loop_is_counted_error(tmp_path: Path) -> None:
    """With -L, ``loop -> loop`` cannot be resolved (ELOOP): one counted error, and
    the siblings in the same directory and elsewhere are still copied."""
    spec: dict[str, Entry] = {"loop": Symlink("loop"), "d": Dir(), "d/g": b"g"}
    for i in range(20):
        spec[f"f{i:02}"] = b"f%d" % i
    src = make_tree(tmp_path / "src", spec)
    dst = tmp_path / "dst"
    with pytest.raises(CopyFailedError) as info:
        copy(str(src), str(dst), DEREF)
    summary = info.value.summary
    assert summary["errors"] == 1
    assert summary["copied.files"] == 21
    for i in range(20):
        assert (dst / f"f{i:02}").read_bytes() == b"f%d" % i
    assert (dst / "d" / "g").read_bytes() == b"g"
    assert not os.path.lexists(dst / "loop")


# -- hard links -------------------------------------------------------------------


HARDLINKS: Spec = {
    "a": Dir(),
    "b": Dir(),
    "c": Dir(),
    "a/one": File(b"pair" * 1000, mode=0o640, mtime_ns=T),
    "b/two": HardLink("a/one"),
    "a/x": File(b"triple", mode=0o600, mtime_ns=T + 1),
    "b/y": HardLink("a/x"),
    "c/z": HardLink("a/x"),
    "plain": File(b"plain", mtime_ns=T + 2),
}


def test_hardlinks_stay_linked(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """Groups of 2 and 3 names across directories share one inode in the copy;
    data is copied once per inode and the extra names are counted as hard links."""
    src = make_tree(tmp_path / "src", HARDLINKS)
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst))
    assert tree_compare(src, dst, hardlinks=True) == []
    assert inode(dst / "a" / "one") == inode(dst / "b" / "two")
    assert inode(dst / "a" / "x") == inode(dst / "b" / "y") == inode(dst / "c" / "z")
    assert inode(dst / "a" / "one") != inode(dst / "a" / "x")
    assert os.stat(dst / "a" / "x").st_nlink == 3
    assert os.stat(dst / "plain").st_nlink == 1
    assert summary["copied.files"] == 3
    assert summary["copied.hardlinks"] == 3
    assert summary["copied.bytes"] == 4000 + 6 + 5


def test_hardlinks_rerun_unchanged(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """A rerun with overwrite leaves hard links alone and reports them unchanged."""
    src = make_tree(tmp_path / "src", HARDLINKS)
    dst = tmp_path / "dst"
    copy(str(src), str(dst))
    before = {rel: inode(dst / rel) for rel in ("a/one", "b/two", "a/x", "c/z")}
    summary = copy(str(src), str(dst), OVERWRITE)
    assert summary["unchanged.files"] == 3
    assert summary["unchanged.hardlinks"] == 3
    assert summary["copied.files"] == summary["copied.hardlinks"] == 0
    assert summary["copied.bytes"] == 0
    assert {rel: inode(dst / rel) for rel in before} == before
    assert tree_compare(src, dst, hardlinks=True) == []


def test_hardlink_with_name_outside_tree_copied_as_file(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A name whose other links are all outside the tree becomes a plain file; an
    inode with two names inside and one outside keeps the two inside linked."""
    src = make_tree(
        tmp_path / "src",
        {"lonely": File(b"lonely", mtime_ns=T), "d": Dir(), "d/p": b"p", "q": b""},
    )
    os.link(src / "d" / "p", src / "q2")
    os.unlink(src / "q")
    os.link(src / "lonely", tmp_path / "outside1")
    os.link(src / "d" / "p", tmp_path / "outside2")
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst))
    assert tree_compare(src, dst, hardlinks=True) == []
    st = os.stat(dst / "lonely")
    assert stat.S_ISREG(st.st_mode)
    assert st.st_nlink == 1
    assert (dst / "lonely").read_bytes() == b"lonely"
    assert st.st_mtime_ns == T
    assert inode(dst / "d" / "p") == inode(dst / "q2")
    assert os.stat(dst / "q2").st_nlink == 2
    assert summary["copied.files"] == 2
    assert summary["copied.hardlinks"] == 1
    again = copy(str(src), str(dst), OVERWRITE)
    assert again["unchanged.files"] == 2
    assert again["unchanged.hardlinks"] == 1
    assert again["copied.bytes"] == 0


def linked_symlinks(root: Path, target_kind: str) -> Path:
    """A tree whose symlinks have two names each (``ln`` of a symlink): ``a/l`` and
    ``a/l2`` in one directory, ``a/m`` and ``b/m2`` in two; they point at a file, a
    directory or nothing, as ``target_kind`` says."""
    target = {"file": "../f", "dir": "../d", "dangling": "../nowhere"}[target_kind]
    src = make_tree(
        root,
        {
            "f": File(b"the target", mtime_ns=T),
            "d/inside": b"inside",
            "a/l": Symlink(target, mtime_ns=T + 1),
            "a/l2": HardLink("a/l"),
            "a/m": Symlink(target, mtime_ns=T + 2),
            "b/m2": HardLink("a/m"),
        },
    )
    assert inode(src / "a/l") == inode(src / "a/l2")
    return src


def assert_linked_symlinks(dst: Path, target_kind: str) -> None:
    """The copy of :func:`linked_symlinks`: each pair one symlink inode of two names."""
    target = {"file": "../f", "dir": "../d", "dangling": "../nowhere"}[target_kind]
    for first, second in [("a/l", "a/l2"), ("a/m", "b/m2")]:
        assert is_link(dst / first)
        assert inode(dst / first) == inode(dst / second), (first, second)
        assert os.lstat(dst / first).st_nlink == 2
        assert os.readlink(dst / second) == target
    assert inode(dst / "a/l") != inode(dst / "a/m")


@pytest.mark.parametrize("target_kind", ["file", "dir", "dangling"])
def test_hard_linked_symlinks_stay_one_inode(
    tmp_path: Path, tree_compare: TreeCompare, target_kind: str
) -> None:
    """Two names of one symlink stay two names of one symlink (``cp -a``, ``rsync
    -H``), in one directory and across two; a rerun with overwrite changes nothing."""
    src = linked_symlinks(tmp_path / "src", target_kind)
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst))
    assert tree_compare(src, dst) == []  # link groups compared too
    assert_linked_symlinks(dst, target_kind)
    assert summary["copied.symlinks"] == 2
    assert summary["copied.hardlinks"] == 2
    before = {rel: inode(dst / rel) for rel in ("a/l", "a/l2", "a/m", "b/m2")}
    again = copy(str(src), str(dst), OVERWRITE)
    assert again["unchanged.symlinks"] == again["unchanged.hardlinks"] == 2
    assert again["copied.symlinks"] == again["copied.hardlinks"] == 0
    assert {rel: inode(dst / rel) for rel in before} == before
    assert tree_compare(src, dst) == []


def test_separate_symlinks_are_joined_by_an_overwrite(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """A destination holding two separate symlinks where the source has two names of
    one (an older copy's) gets the second name linked to the first under overwrite."""
    src = linked_symlinks(tmp_path / "src", "file")
    dst = tmp_path / "dst"
    copy(str(src), str(dst))
    for second, first in [("a/l2", "a/l"), ("b/m2", "a/m")]:
        (dst / second).unlink()
        (dst / second).symlink_to("../f")
        st = os.lstat(src / first)
        os.utime(
            dst / second, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False
        )
    assert tree_compare(src, dst) != []
    summary = copy(str(src), str(dst), OVERWRITE)
    assert summary["copied.hardlinks"] == 2
    assert summary["copied.symlinks"] == 0
    assert tree_compare(src, dst) == []
    assert_linked_symlinks(dst, "file")


def test_a_dry_run_counts_hard_linked_symlinks_as_the_copy_does(
    tmp_path: Path,
) -> None:
    src = linked_symlinks(tmp_path / "src", "dangling")
    dry = copy(str(src), str(tmp_path / "dry"), CopySettings(dry_run=DryRun.ALL))
    assert not (tmp_path / "dry").exists()
    real = copy(str(src), str(tmp_path / "dst"))
    for key in ("copied.symlinks", "copied.hardlinks", "copied.files"):
        assert dry[key] == real[key], key
    assert dry["copied.hardlinks"] == 2


def test_dereference_makes_hard_linked_symlinks_separate_files(tmp_path: Path) -> None:
    """With -L a symlink is followed: its two names become two copies of the file it
    leads to (a file of one name), not two names of one inode."""
    src = make_tree(
        tmp_path / "src",
        {"f": File(b"the target", mtime_ns=T), "l": Symlink("f"), "l2": HardLink("l")},
    )
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst), DEREF)
    inodes = set()
    for name in ("f", "l", "l2"):
        st = os.lstat(dst / name)
        assert stat.S_ISREG(st.st_mode), name
        assert st.st_nlink == 1, name
        assert (dst / name).read_bytes() == b"the target"
        inodes.add(st.st_ino)
    assert len(inodes) == 3
    assert summary["copied.files"] == 3
    assert summary["copied.hardlinks"] == summary["copied.symlinks"] == 0


# -- special files ----------------------------------------------------------------


def test_fifo_recreated(tmp_path: Path, tree_compare: TreeCompare) -> None:
    """A FIFO is recreated as a FIFO with its mode and mtime (never opened)."""
    src = make_tree(
        tmp_path / "src", {"p": Fifo(mode=0o640, mtime_ns=T), "d": Dir(), "d/q": Fifo()}
    )
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst))
    assert stat.S_ISFIFO(os.lstat(dst / "p").st_mode)
    assert stat.S_ISFIFO(os.lstat(dst / "d" / "q").st_mode)
    assert tree_compare(src, dst) == []
    assert summary["copied.specials"] == 2


@pytest.mark.privileged
def test_char_device_recreated_as_root(tmp_path: Path) -> None:
    """As root, a character device is recreated with the same device number."""
    src = tmp_path / "src"
    src.mkdir()
    os.mknod(src / "null", stat.S_IFCHR | 0o640, os.makedev(1, 3))
    os.utime(src / "null", ns=(T, T))
    dst = tmp_path / "dst"
    summary = copy(str(src), str(dst))
    st = os.lstat(dst / "null")
    assert stat.S_ISCHR(st.st_mode)
    assert st.st_rdev == os.makedev(1, 3)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_mtime_ns == T
    assert summary["copied.specials"] == 1


def test_unix_socket_recreated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree_compare: TreeCompare
) -> None:
    """A UNIX socket bound in the source is recreated as a socket node."""
    src = tmp_path / "src"
    src.mkdir()
    monkeypatch.chdir(src)  # sun_path is short: bind by a relative name
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind("sock")
        os.chmod(src / "sock", 0o750)
        os.utime(src / "sock", ns=(T, T))
        dst = tmp_path / "dst"
        summary = copy(str(src), str(dst))
    assert stat.S_ISSOCK(os.lstat(dst / "sock").st_mode)
    assert tree_compare(src, dst) == []
    assert summary["copied.specials"] == 1


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    with world_dir() as path:
        yield path


@pytest.mark.privileged
@pytest.mark.parametrize("skip", [False, True])
def test_device_as_non_root(shared_dir: Path, skip: bool) -> None:
    """A non-root user cannot mknod a device: without --skip-specials it is a counted
    error (exit 1), with it a counted skip (exit 0); the rest is copied either way."""
    src = make_tree(
        shared_dir / "src",
        {
            ".": Dir(mode=0o755),
            "f": File(b"data", mode=0o644),
            "d": Dir(mode=0o755),
            "d/g": File(b"g", mode=0o644),
            "p": Fifo(mode=0o644),
        },
    )
    os.mknod(src / "d" / "dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    out = shared_dir / "summary.json"
    args = ["--summary-json", str(out), str(src), str(shared_dir / "dst")]
    result = rcp_as_nobody(shared_dir, *(["--skip-specials"] if skip else []), *args)
    data = json.loads(out.read_text())
    dst = shared_dir / "dst"
    assert os.stat(dst).st_uid == NOBODY
    assert (dst / "f").read_bytes() == b"data"
    assert (dst / "d" / "g").read_bytes() == b"g"
    assert stat.S_ISFIFO(os.lstat(dst / "p").st_mode)
    assert not os.path.lexists(dst / "d" / "dev")
    assert data["copied"]["files"] == 2
    assert data["copied"]["specials"] == 1
    if skip:
        assert result.returncode == 0, result.stderr
        assert data["skipped"]["specials"] == 1
        assert data["errors"] == 0
    else:
        assert result.returncode == 1, result.stderr
        assert data["errors"] == 1
        assert data["skipped"]["specials"] == 0
        assert "dev" in result.stderr + json.dumps(data["error_list"])


def test_a_hard_link_between_two_sources_of_one_run_stays_a_link(
    tmp_path: Path,
) -> None:
    """``rcp A B DST/`` where B is another name of a file inside A: the later name
    links to the earlier copy even after A's job ended and closed its directories
    (a follower must not use a descriptor of a finished job: the number may since
    name any other file)."""
    src = tmp_path / "src"
    (src / "pair" / "deep").mkdir(parents=True)
    (src / "pair" / "deep" / "x").write_bytes(b"shared" * 1000)
    for i in range(50):  # other files, so descriptors are opened and reused meanwhile
        (src / "pair" / f"f{i}").write_bytes(b"%d" % i)
    os.link(src / "pair" / "deep" / "x", src / "far")
    (tmp_path / "dst").mkdir()
    for attempt in range(5):
        dst = tmp_path / "dst" / str(attempt)
        dst.mkdir()
        copy([str(src / "pair"), str(src / "far")], f"{dst}/")
        first, second = dst / "pair" / "deep" / "x", dst / "far"
        assert first.read_bytes() == b"shared" * 1000
        assert os.stat(first).st_ino == os.stat(second).st_ino
        assert sorted(os.listdir(dst)) == ["far", "pair"]


@pytest.mark.privileged
def test_a_leader_that_fails_transiently_keeps_its_links(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """The first name of a linked file meets EAGAIN while the other names wait for
    it (latencyfs: 20 ms per request, so they do wait): its retry must link to the
    copy they then make, not make a second one."""
    backing = tmp_path / "backing"
    make_tree(
        backing / "src",
        {
            "d/a": File(os.urandom(300_000)),
            "d/b": HardLink("d/a"),
            "d/c": HardLink("d/a"),
        },
    )
    (tmp_path / "mnt").mkdir()
    faults = Faults.table(tmp_path, ["copy_file_range /src/d/* EAGAIN times=1"])
    with mounted(backing, tmp_path / "mnt", delay_ms=20, faults=faults) as mnt:
        summary = copy(str(mnt / "src"), str(mnt / "dst"))
        assert [op for op, _, _ in faults.injected()] == ["copy_file_range"]
        assert summary["errors"] == 0
        assert tree_compare(mnt / "src", mnt / "dst") == []
        assert os.stat(mnt / "dst" / "d" / "a").st_nlink == 3
