"""The test helpers themselves: tree builder, tree diff, strategies, loop mounts."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings

from benchmarks import mounts
from support import loopfs
from support.strategies import names, trees
from support.treecmp import TreeCompare, compare_trees
from support.treespec import (
    Dir,
    Entry,
    Fifo,
    File,
    HardLink,
    Sparse,
    Spec,
    Symlink,
    make_tree,
)

T = 1_600_000_000_123_456_789  # an mtime with a nanosecond part
MIB = 1024 * 1024
FICLONE = 0x40049409  # _IOW(0x94, 9, int), linux/fs.h

BASE: Spec = {
    ".": Dir(0o755, T),
    "a.txt": File(b"hello\n", 0o644, T + 1),
    "dir": Dir(0o750, T + 2),
    "dir/b.bin": File(bytes(range(256)) * 64, 0o600, T + 3),
    "dir/link": Symlink("../a.txt", T + 4),
    "dir/hard": HardLink("a.txt"),
    "fifo": Fifo(0o640, T + 5),
    "sparse": Sparse(MIB, {0: b"head", 512 * 1024: b"middle"}, 0o644, T + 6),
    "empty": Dir(0o700, T + 7),
}


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """Two trees built from BASE, equal under every check."""
    src = make_tree(tmp_path / "src", BASE)
    dst = make_tree(tmp_path / "dst", BASE)
    assert compare_trees(src, dst, xattrs=True, sparse=True) == []
    return src, dst


@contextmanager
def same_times(*paths: Path) -> Iterator[None]:
    """Restore atime/mtime of `paths` (not following symlinks) after the block."""
    saved = [(p, os.lstat(p)) for p in paths]
    yield
    for p, st in saved:
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


# compare_trees ------------------------------------------------------------------------


def test_tree_equals_itself(pair: tuple[Path, Path]) -> None:
    src, _ = pair
    assert compare_trees(src, src, owner=True, xattrs=True, sparse=True) == []


def test_detects_content(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst / "dir/b.bin"), open(dst / "dir/b.bin", "r+b") as f:
        f.seek(1000)
        f.write(b"X")
    assert compare_trees(src, dst) == ["'dir/b.bin': content differs from byte 1000"]


def test_detects_size(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst / "dir/b.bin"), open(dst / "dir/b.bin", "ab") as f:
        f.write(b"more")
    assert compare_trees(src, dst) == ["'dir/b.bin': size 16384 != 16388"]


def test_detects_mode_unless_disabled(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    (dst / "dir/b.bin").chmod(0o640)
    (dst / "dir").chmod(0o755)
    assert compare_trees(src, dst) == [
        "'dir': mode 0o750 != 0o755",
        "'dir/b.bin': mode 0o600 != 0o640",
    ]
    assert compare_trees(src, dst, mode=False) == []


def test_detects_mtime_of_files_dirs_symlinks_and_root(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    os.utime(dst / "dir/b.bin", ns=(T, T + 3 + 1))
    os.utime(dst / "dir/link", ns=(T, T), follow_symlinks=False)
    os.utime(dst / "empty", ns=(T, T + 7 - 1000))
    os.utime(dst, ns=(T, T - 1))
    assert compare_trees(src, dst) == [
        f"'.': mtime_ns {T} != {T - 1}",
        f"'dir/b.bin': mtime_ns {T + 3} != {T + 4}",
        f"'dir/link': mtime_ns {T + 4} != {T}",
        f"'empty': mtime_ns {T + 7} != {T + 7 - 1000}",
    ]
    assert compare_trees(src, dst, times=False) == []


def test_detects_missing_entry(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst):
        (dst / "fifo").unlink()
    assert compare_trees(src, dst) == ["'fifo': missing in dst"]


def test_detects_extra_entry(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst / "empty"):
        (dst / "empty/new").write_bytes(b"")
    assert compare_trees(src, dst) == ["'empty/new': extra in dst"]


def test_detects_type(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst):
        (dst / "empty").rmdir()
        (dst / "empty").write_bytes(b"")
        (dst / "fifo").unlink()
        (dst / "fifo").symlink_to("a.txt")
    assert compare_trees(src, dst) == [
        "'empty': type dir != file",
        "'fifo': type fifo != symlink",
    ]


def test_detects_symlink_target(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst / "dir"):
        (dst / "dir/link").unlink()
        make_tree(dst, {"dir/link": Symlink("a.txt", T + 4)})
    assert compare_trees(src, dst) == [
        "'dir/link': symlink target '../a.txt' != 'a.txt'"
    ]


def test_detects_broken_and_extra_hard_link_groups(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    with same_times(dst / "dir"):
        (dst / "dir/hard").unlink()
        shutil.copy2(dst / "a.txt", dst / "dir/hard")
    assert compare_trees(src, dst) == [
        "hard links: src group {'a.txt', 'dir/hard'} not linked so in dst"
    ]
    assert compare_trees(src, dst, hardlinks=False) == []
    assert compare_trees(dst, src) == [
        "hard links: dst group {'a.txt', 'dir/hard'} not linked so in src"
    ]


def test_detects_symlinks_that_should_be_one_inode(tmp_path: Path) -> None:
    """Two names of one symlink (``ln`` of a symlink) are a link group like a file's;
    two separate symlinks with the same target are not that group."""
    src = make_tree(
        tmp_path / "src",
        {
            ".": Dir(0o755, T),
            "to-a": Symlink("a.txt", T),
            "dir": Dir(0o755, T),
            "dir/again": HardLink("to-a"),
        },
    )
    assert os.lstat(src / "to-a").st_ino == os.lstat(src / "dir/again").st_ino
    dst = make_tree(
        tmp_path / "dst",
        {
            ".": Dir(0o755, T),
            "to-a": Symlink("a.txt", T),
            "dir": Dir(0o755, T),
            "dir/again": Symlink("a.txt", T),
        },
    )
    assert compare_trees(src, dst) == [
        "hard links: src group {'dir/again', 'to-a'} not linked so in dst"
    ]
    assert compare_trees(src, src) == []


def test_detects_xattrs_when_asked(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    os.setxattr(src / "dir/b.bin", "user.same", b"1")
    os.setxattr(dst / "dir/b.bin", "user.same", b"1")
    os.setxattr(src / "dir/b.bin", "user.gone", b"x")
    os.setxattr(src / "empty", "user.v", b"old")
    os.setxattr(dst / "empty", "user.v", b"new")
    expected = [
        "'dir/b.bin': xattr user.gone missing in dst",
        "'empty': xattr user.v b'old' != b'new'",
    ]
    if os.geteuid() == 0:  # trusted.* needs CAP_SYS_ADMIN; fifos cannot hold user.*
        os.setxattr(dst / "fifo", "trusted.extra", b"")
        expected.append("'fifo': xattr trusted.extra extra in dst")
    assert compare_trees(src, dst, xattrs=True) == expected
    assert compare_trees(src, dst) == []


def test_detects_filled_holes_when_asked(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    sparse = dst / "sparse"
    content = sparse.read_bytes()
    with same_times(sparse), open(sparse, "r+b") as f:
        f.write(content)  # same bytes, but every block now allocated
    allocated = os.stat(sparse).st_blocks * 512
    src_allocated = os.stat(src / "sparse").st_blocks * 512
    assert compare_trees(src, dst) == []
    assert compare_trees(src, dst, sparse=True) == [
        f"'sparse': allocated {allocated} bytes > src's {src_allocated} "
        "+ 65536 slack (holes not kept)"
    ]
    assert compare_trees(src, dst, sparse=True, sparse_slack=MIB) == []


@pytest.mark.privileged
def test_detects_owner_when_asked(pair: tuple[Path, Path]) -> None:
    src, dst = pair
    os.chown(dst / "dir/link", 1234, 5678, follow_symlinks=False)
    assert compare_trees(src, dst) == []
    assert compare_trees(src, dst, owner=True) == ["'dir/link': owner 0:0 != 1234:5678"]


@pytest.mark.privileged
def test_detects_device_numbers(tmp_path: Path) -> None:
    for side, minor in (("src", 3), ("dst", 5)):
        (tmp_path / side).mkdir()
        os.mknod(tmp_path / side / "dev", stat.S_IFCHR | 0o600, os.makedev(1, minor))
        os.utime(tmp_path / side / "dev", ns=(T, T))
        os.utime(tmp_path / side, ns=(T, T))
    assert compare_trees(tmp_path / "src", tmp_path / "dst") == [
        "'dev': device 1:3 != 1:5"
    ]


def test_handles_non_utf8_and_newline_names(tmp_path: Path) -> None:
    spec: Spec = {
        ".": Dir(0o755, T),
        "bad\udcff": Dir(0o755, T),
        "bad\udcff/new\nline": File(b"x", 0o644, T),
        "bad\udcff/lost\udcfe": File(b"y", 0o644, T),
    }
    src = make_tree(tmp_path / "src", spec)
    dst = make_tree(tmp_path / "dst", spec)
    assert os.listdir(os.fsencode(src)) == [b"bad\xff"]
    assert compare_trees(src, dst) == []
    with same_times(dst / "bad\udcff"):
        (dst / "bad\udcff/lost\udcfe").unlink()
    assert compare_trees(src, dst) == ["'bad\\udcff/lost\\udcfe': missing in dst"]


def test_compares_single_files(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a": File(b"1", 0o600, T), "b": File(b"2", 0o600, T)})
    assert compare_trees(tmp_path / "a", tmp_path / "b") == [
        "'.': content differs from byte 0"
    ]


def test_tree_compare_fixture_is_compare_trees(tree_compare: TreeCompare) -> None:
    assert tree_compare is compare_trees


# make_tree ----------------------------------------------------------------------------


def test_make_tree_builds_what_the_spec_says(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "t", BASE)
    st = {rel: os.lstat(root / rel) for rel in BASE}
    assert (stat.S_IMODE(st["."].st_mode), st["."].st_mtime_ns) == (0o755, T)
    assert (root / "a.txt").read_bytes() == b"hello\n"
    assert (stat.S_IMODE(st["a.txt"].st_mode), st["a.txt"].st_mtime_ns) == (
        0o644,
        T + 1,
    )
    assert stat.S_ISDIR(st["dir"].st_mode)
    assert (stat.S_IMODE(st["dir"].st_mode), st["dir"].st_mtime_ns) == (0o750, T + 2)
    assert (root / "dir/b.bin").read_bytes() == bytes(range(256)) * 64
    assert os.readlink(root / "dir/link") == "../a.txt"
    assert st["dir/link"].st_mtime_ns == T + 4
    assert (st["dir/hard"].st_ino, st["dir/hard"].st_nlink) == (st["a.txt"].st_ino, 2)
    assert stat.S_ISFIFO(st["fifo"].st_mode)
    assert (stat.S_IMODE(st["fifo"].st_mode), st["fifo"].st_mtime_ns) == (0o640, T + 5)
    assert st["sparse"].st_size == MIB
    assert st["sparse"].st_blocks * 512 <= 64 * 1024  # two small extents, rest holes
    data = (root / "sparse").read_bytes()
    assert data == Sparse(MIB, {0: b"head", 512 * 1024: b"middle"}).content()
    assert data[512 * 1024 : 512 * 1024 + 6] == b"middle"
    assert os.listdir(root / "empty") == []


def test_make_tree_creates_parents_and_defaults(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        root = make_tree(tmp_path, {"x/y/z.txt": b"1", "x/f": Fifo()})
    finally:
        os.umask(umask)
    assert (root / "x/y/z.txt").read_bytes() == b"1"
    assert stat.S_IMODE(os.stat(root / "x/y/z.txt").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(root / "x/y").st_mode) == 0o755
    assert stat.S_ISFIFO(os.stat(root / "x/f").st_mode)


def test_make_tree_hard_link_may_precede_its_target(tmp_path: Path) -> None:
    root = make_tree(tmp_path, {"a": HardLink("z"), "z": File(b"z", 0o600, T)})
    assert os.stat(root / "a").st_ino == os.stat(root / "z").st_ino
    assert os.stat(root / "a").st_mtime_ns == T


def test_make_tree_sets_xattrs(tmp_path: Path) -> None:
    root = make_tree(
        tmp_path,
        {
            "f": File(b"", 0o400, xattrs={"user.k": b"v"}),
            "d": Dir(xattrs={"user.d": b""}),
        },
    )
    assert os.getxattr(root / "f", "user.k") == b"v"
    assert os.getxattr(root / "d", "user.d") == b""
    assert stat.S_IMODE(os.stat(root / "f").st_mode) == 0o400


@pytest.mark.privileged
def test_make_tree_sets_owner_before_setuid_mode(tmp_path: Path) -> None:
    spec: Spec = {
        "f": File(b"#!", 0o4755, owner=(1234, 5678)),
        "l": Symlink("f", owner=(4321, 8765)),
    }
    root = make_tree(tmp_path, spec)
    st = os.stat(root / "f")
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (1234, 5678, 0o4755)
    lst = os.lstat(root / "l")
    assert (lst.st_uid, lst.st_gid) == (4321, 8765)


@pytest.mark.parametrize(
    "spec",
    [
        {"../up": b""},
        {"/abs": b""},
        {"a//b": b""},
        {"a/./b": b""},
        {"a/": b""},
        {".": File(b"")},
        {"h": HardLink("missing")},
        {"d": Dir(), "h": HardLink("d")},
    ],
)
def test_make_tree_rejects_bad_specs(tmp_path: Path, spec: dict[str, Entry]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        make_tree(tmp_path, spec)


def test_sparse_rejects_data_outside_size_or_overlapping() -> None:
    with pytest.raises(ValueError, match="outside 10"):
        Sparse(10, {8: b"abc"})
    with pytest.raises(ValueError, match="overlaps"):
        Sparse(10, {1: b"a", 0: b"ab"})


def test_make_tree_fixture_is_make_tree(request: pytest.FixtureRequest) -> None:
    assert request.getfixturevalue("make_tree") is make_tree


# strategies ---------------------------------------------------------------------------


def _check_built(spec: Spec, root: Path) -> None:
    for rel, entry in spec.items():
        st = os.lstat(root / rel)
        if isinstance(entry, Dir):
            assert stat.S_ISDIR(st.st_mode)
            assert st.st_mode & 0o700 == 0o700  # the tree stays traversable
        elif isinstance(entry, Symlink):
            assert os.readlink(root / rel) == entry.target
        elif isinstance(entry, Fifo):
            assert stat.S_ISFIFO(st.st_mode)
        elif isinstance(entry, HardLink):
            assert st.st_ino == os.lstat(root / entry.target).st_ino
        else:
            assert stat.S_ISREG(st.st_mode)
            if isinstance(entry, bytes):
                data = entry
            else:
                data = entry.content() if isinstance(entry, Sparse) else entry.data
            assert st.st_size == len(data)
            assert (root / rel).read_bytes() == data
        if not isinstance(entry, bytes | HardLink):
            assert st.st_mtime_ns == entry.mtime_ns
        if len(rel.split("/")) > 4:
            pytest.fail(f"{rel!r} deeper than 4")


@settings(max_examples=25, deadline=None)
@given(spec=trees())
def test_trees_are_buildable_and_deterministic(
    tmp_path_factory: pytest.TempPathFactory, spec: dict[str, Entry]
) -> None:
    base = tmp_path_factory.mktemp("trees")
    try:
        a = make_tree(base / "a", spec)
        b = make_tree(base / "b", spec)
        _check_built(spec, a)
        assert len(spec) <= 31  # 30 entries and the root
        assert compare_trees(a, b, sparse=True) == []
    finally:
        shutil.rmtree(base)


@pytest.mark.privileged
@settings(max_examples=15, deadline=None)
@given(spec=trees(owners=True, xattrs=True, max_entries=15))
def test_trees_with_owners_and_xattrs(
    tmp_path_factory: pytest.TempPathFactory, spec: dict[str, Entry]
) -> None:
    base = tmp_path_factory.mktemp("trees")
    try:
        a = make_tree(base / "a", spec)
        b = make_tree(base / "b", spec)
        _check_built(spec, a)
        assert compare_trees(a, b, owner=True, xattrs=True, sparse=True) == []
    finally:
        shutil.rmtree(base)


@settings(max_examples=200, deadline=None)
@given(name=names())
def test_names_are_valid_components(name: str) -> None:
    raw = os.fsencode(name)
    assert 1 <= len(raw) <= 255
    assert b"/" not in raw
    assert b"\0" not in raw
    assert name not in (".", "..")


# loop-mounted filesystems -------------------------------------------------------------


def test_gate_skips_non_root_and_fails_root_without_tools() -> None:
    assert loopfs.gate(1000, []) == loopfs.Gate("skip", "needs root: loop mount")
    assert loopfs.gate(1000, ["mkfs.xfs"]).action == "skip"
    failed = loopfs.gate(0, ["mkfs.xfs", "losetup"])
    assert failed.action == "fail"
    assert "mkfs.xfs, losetup" in failed.reason
    assert "make system" in failed.reason


@pytest.mark.privileged
def test_root_has_every_loop_tool() -> None:
    # In CI (root) the loop-mount tests must run; this fails loudly if they cannot.
    assert loopfs.missing_tools("xfs") == []
    assert loopfs.missing_tools("ext4") == []
    assert loopfs.gate(os.geteuid(), []).action == "run"


def test_xfs_reflink_is_real(xfs_reflink: Path) -> None:
    assert mounts.fstype_of(xfs_reflink) == "xfs"
    assert mounts.is_mountpoint(xfs_reflink)
    xfs_info = mounts.which("xfs_info")
    assert xfs_info is not None
    info = subprocess.run(
        [xfs_info, str(xfs_reflink)], capture_output=True, text=True, check=True
    )
    assert "reflink=1" in info.stdout
    # And the kernel really clones: FICLONE succeeds and shares the data.
    src, dst = xfs_reflink / "clone-src", xfs_reflink / "clone-dst"
    src.write_bytes(os.urandom(MIB))
    try:
        with open(src, "rb") as fs, open(dst, "wb") as fd:
            fcntl.ioctl(fd.fileno(), FICLONE, fs.fileno())
        assert dst.read_bytes() == src.read_bytes()
    finally:
        src.unlink()
        dst.unlink(missing_ok=True)


def test_xfs_tmp_path_is_a_fresh_dir_on_xfs(
    xfs_tmp_path: Path, xfs_reflink: Path
) -> None:
    assert xfs_tmp_path.parent == xfs_reflink
    assert list(xfs_tmp_path.iterdir()) == []


def test_ext4_fs_keeps_holes_and_nanoseconds(
    ext4_tmp_path: Path, ext4_fs: Path
) -> None:
    assert mounts.fstype_of(ext4_fs) == "ext4"
    assert ext4_tmp_path.parent == ext4_fs
    root = make_tree(ext4_tmp_path, {"s": Sparse(4 * MIB, {MIB: b"x"}, 0o644, T)})
    fd = os.open(root / "s", os.O_RDONLY)
    try:
        assert os.lseek(fd, 0, os.SEEK_DATA) == MIB
        assert os.lseek(fd, MIB, os.SEEK_HOLE) < 4 * MIB
    finally:
        os.close(fd)
    assert os.stat(root / "s").st_mtime_ns == T


def test_small_fs_runs_out_of_space(small_fs: loopfs.SmallFs) -> None:
    mnt = small_fs(16)
    assert mounts.fstype_of(mnt) == "ext4"
    other = small_fs(8)
    assert os.stat(other).st_dev != os.stat(mnt).st_dev
    chunk = os.urandom(MIB)
    written, failure = 0, None
    fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while written < 32 * MIB:
            written += os.write(fd, chunk)
        os.fsync(fd)
    except OSError as e:
        failure = e.errno
    finally:
        os.close(fd)
    assert failure == errno.ENOSPC, f"wrote {written} bytes, then errno {failure}"
    assert 4 * MIB <= written < 16 * MIB


def test_small_fs_refuses_too_small_xfs(small_fs: loopfs.SmallFs) -> None:
    with pytest.raises(ValueError, match="xfs needs at least 300 MiB"):
        small_fs(16, fstype="xfs")


def _loop_device(mnt: Path) -> str:
    st_dev = os.stat(mnt).st_dev
    assert os.major(st_dev) == 7, "not a loop device"
    return f"/dev/loop{os.minor(st_dev)}"


def _still_ours(device: str, image: Path) -> bool:
    backing = loopfs.backing_file(device)
    return backing is not None and backing.startswith(str(image))


@pytest.mark.privileged
def test_loop_mount_cleans_up_when_the_body_fails(tmp_path: Path) -> None:
    seen: list[tuple[Path, str]] = []

    def failing_test() -> None:
        with loopfs.loop_mount(tmp_path, "ext4", 16 * MIB) as mnt:
            seen.append((mnt, _loop_device(mnt)))
            assert _still_ours(seen[0][1], tmp_path / "ext4.img")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_test()
    [(mnt, device)] = seen
    assert not mounts.is_mountpoint(mnt)
    assert not _still_ours(device, tmp_path / "ext4.img")
    assert not (tmp_path / "ext4.img").exists()


@pytest.mark.privileged
def test_loop_mount_busy_mount_is_lazily_released(tmp_path: Path) -> None:
    with loopfs.loop_mount(tmp_path, "ext4", 16 * MIB) as mnt:
        device = _loop_device(mnt)
        held = open(mnt / "held", "wb")  # noqa: SIM115 - kept open past the unmount
    try:
        assert not mounts.is_mountpoint(mnt)
        assert _still_ours(device, tmp_path / "ext4.img")  # autoclear waits for us
    finally:
        held.close()
    deadline = time.monotonic() + 10
    while _still_ours(device, tmp_path / "ext4.img") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _still_ours(device, tmp_path / "ext4.img")


@pytest.mark.privileged
def test_non_root_skips_loop_fixtures_with_a_reason() -> None:
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "util-linux setpriv is needed: run `make system`"
    repo = Path(__file__).resolve().parents[2]
    scratch = tempfile.mkdtemp(prefix="rcp-nonroot-")
    try:
        os.chmod(scratch, 0o777)
        proc = subprocess.run(
            [
                *(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"),
                *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider"),
                *("--rootdir", str(repo), "-c", str(repo / "pyproject.toml")),
                *("--basetemp", os.path.join(scratch, "base"), "-rs"),
                *(str(Path(__file__).resolve()), "-k", "xfs_reflink_is_real"),
            ],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        shutil.rmtree(scratch)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout
    assert "needs root: loop mount" in proc.stdout
