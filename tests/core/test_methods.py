"""The data path on real filesystems: which method copies a file, and what it keeps.

The engine tries reflink first, then ``copy_file_range``, then (for files with holes)
a sparse-aware copy, then plain read/write (see ``rcp_core.engine.methods``). These tests
copy between a loop-mounted XFS with reflink, a loop-mounted ext4 and the root filesystem,
and check the method counters of the summary against what the kernel allows for each
pair, the bytes (holes included), the allocated blocks, and what happens when the
source changes under the copy.
"""

from __future__ import annotations

import fcntl
import os
import platform
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import rcp_core.engine.methods
from benchmarks.latencyfs import Faults, mounted
from benchmarks.mounts import which
from rcp_core import (
    CopyFailedError,
    CopySettings,
    DryRun,
    ExistingPolicy,
    Summary,
    copy,
)
from rcp_core.run.summary import METHODS
from support.treecmp import TreeCompare
from support.treespec import File, Sparse, Spec

MIB = 1024 * 1024
OLD_NS = 1_000_000_000 * 10**9  # 2001-09-09: a fixed mtime no "now" can equal
WRITER_NS = 1_100_000_000 * 10**9  # what the simulated concurrent writer leaves
# Allocation a copy may have beyond its source's: one extent's worth of metadata or
# partial block rounding, far below the 1 MiB data extents and 20+ MiB holes used here.
SLACK = 64 * 1024

Where = Callable[[str], Path]


def kernel() -> tuple[int, int]:
    """The running kernel's (major, minor) version."""
    m = re.match(r"(\d+)\.(\d+)", platform.release())
    assert m is not None, platform.release()
    return int(m.group(1)), int(m.group(2))


def cross_fs_method() -> str:
    """What a file copied between two different filesystems gets, by kernel version.

    Reflink never works across mounts (FICLONERANGE answers EXDEV). For
    ``copy_file_range``, Linux 5.3 to 5.18 fell back to an in-kernel splice between
    any two filesystems; since 5.19 the VFS answers EXDEV unless both files belong to
    one filesystem driver that implements cross-superblock copies (NFS, CIFS, ...).
    Neither ext4 nor XFS has a ``->copy_file_range`` of its own, so ext4 <-> XFS and
    ext4 <-> another ext4 superblock end in the read/write fallback.
    """
    return "copy_file_range" if (5, 3) <= kernel() < (5, 19) else "readwrite"


def methods(summary: Summary) -> dict[str, int]:
    """The method counters of ``summary``, without the ``method.`` prefix."""
    return {m: summary[f"method.{m}"] for m in METHODS}


def only(method: str, n: int = 1) -> dict[str, int]:
    """The method counters when ``n`` files all went through ``method``."""
    return {m: n if m == method else 0 for m in METHODS}


def data_ranges(path: Path) -> list[tuple[int, int]]:
    """The data segments of a file, as ``(start, end)`` from SEEK_DATA/SEEK_HOLE."""
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole remains
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, end))
            offset = end
    finally:
        os.close(fd)
    return out


def extents(path: Path) -> list[tuple[int, int, int, list[str]]]:
    """``filefrag -v``: (logical start, physical start, length, flags) per extent."""
    exe = which("filefrag")
    assert exe is not None, "filefrag (e2fsprogs) is needed: run `make system`"
    out = subprocess.run(
        [exe, "-v", "-b4096", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = []
    line_re = re.compile(
        r"^\s*\d+:\s+(\d+)\.\.\s*\d+:\s+(\d+)\.\.\s*\d+:\s+(\d+):\s*(?:\d+\s+)?(\S*)$"
    )
    for line in out.splitlines():
        m = line_re.match(line)
        if m:
            flags = m.group(4).split(",") if m.group(4) else []
            rows.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), flags))
    assert rows, f"no extents parsed from filefrag output:\n{out}"
    return rows


def fiemap_flags(path: Path) -> list[int]:
    """``xfs_io -c "fiemap -v"``: the FIEMAP flags of each data extent."""
    exe = which("xfs_io")
    assert exe is not None, "xfs_io (xfsprogs) is needed: run `make system`"
    out = subprocess.run(
        [exe, "-r", "-c", "fiemap -v", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    flags = []
    for line in out.splitlines():
        fields = line.split()
        # "   0: [0..16383]:      96..16479        16384   0x2001"; holes say "hole".
        if fields and fields[0].rstrip(":").isdigit() and "hole" not in line:
            flags.append(int(fields[-1], 16))
    assert flags, f"no extents parsed from xfs_io output:\n{out}"
    return flags


@pytest.fixture
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    """``where("xfs" | "ext4" | "root")``: a fresh directory on that filesystem."""
    made: dict[str, Path] = {}

    def get(fs: str) -> Path:
        if fs not in made:
            if fs == "root":
                made[fs] = tmp_path
            else:
                made[fs] = request.getfixturevalue(f"{fs}_tmp_path")
        return made[fs]

    return get


def random_file(
    path: Path, size: int, mtime_ns: int = OLD_NS, mode: int = 0o640
) -> bytes:
    data = os.urandom(size)
    path.write_bytes(data)
    path.chmod(mode)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return data


# -- reflink ------------------------------------------------------------------------


def test_reflink_within_xfs_shares_extents(xfs_tmp_path: Path) -> None:
    """A large file copied within one XFS is a reflink: same bytes, shared extents."""
    src, dst = xfs_tmp_path / "big", xfs_tmp_path / "copy"
    data = random_file(src, 8 * MIB)
    summary = copy(src, dst)
    assert methods(summary) == only("reflink")
    assert summary["copied.bytes"] == 8 * MIB
    assert dst.read_bytes() == data
    src_ext, dst_ext = extents(src), extents(dst)
    assert all("shared" in flags for *_, flags in dst_ext), dst_ext
    # Shared means the same physical blocks, extent by extent.
    assert [e[:3] for e in dst_ext] == [e[:3] for e in src_ext]
    assert sum(length for _, _, length, _ in dst_ext) * 4096 == 8 * MIB
    assert all(flag & 0x2000 for flag in fiemap_flags(dst))  # FIEMAP_EXTENT_SHARED
    st = dst.stat()
    assert (st.st_mode & 0o7777, st.st_mtime_ns) == (0o640, OLD_NS)


def test_reflink_of_unaligned_file(xfs_tmp_path: Path) -> None:
    """A size that is not a block multiple still reflinks (the tail block is shared)."""
    src, dst = xfs_tmp_path / "odd", xfs_tmp_path / "copy"
    data = random_file(src, 3 * MIB + 123)
    summary = copy(src, dst)
    assert methods(summary) == only("reflink")
    assert dst.read_bytes() == data
    assert all(flag & 0x2000 for flag in fiemap_flags(dst))


# -- methods by filesystem pair -------------------------------------------------------


@pytest.mark.parametrize(
    ("src_fs", "dst_fs", "method"),
    [
        ("xfs", "xfs", "reflink"),
        # ext4 has no reflink (EOPNOTSUPP); within one superblock the VFS copies with
        # an in-kernel splice.
        ("ext4", "ext4", "copy_file_range"),
        ("ext4", "xfs", cross_fs_method()),
        ("xfs", "ext4", cross_fs_method()),
        # Two ext4 superblocks are still two filesystems: EXDEV, like ext4 -> XFS.
        ("root", "ext4", cross_fs_method()),
    ],
)
def test_method_by_filesystem_pair(
    where: Where, tree_compare: TreeCompare, src_fs: str, dst_fs: str, method: str
) -> None:
    """Each pair of filesystems gets the fastest method its kernel allows."""
    src = where(src_fs) / "src"
    src.mkdir()
    random_file(src / "a", 2 * MIB + 7)
    random_file(src / "b", 100_000, mode=0o600)
    dst = where(dst_fs) / "dst"
    summary = copy(src, dst)
    assert methods(summary) == only(method, 2)
    assert summary["copied.bytes"] == 2 * MIB + 7 + 100_000
    assert tree_compare(src, dst) == []


def test_unsupported_cache_gives_every_file_the_same_fallback(
    where: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across filesystems, every file of a tree falls back alike; refusals are probed
    at most once per worker, not once per file."""
    src = where("ext4") / "src"
    for d in range(4):
        (src / f"d{d}").mkdir(parents=True)
        for i in range(25):
            (src / f"d{d}" / f"f{i}").write_bytes(os.urandom(10_000 + i))
    probes = {"ioctl": 0, "copy_file_range": 0}
    real_ioctl, real_cfr = fcntl.ioctl, os.copy_file_range

    def ioctl(fd: int, request: int, arg: bytes) -> bytes:
        probes["ioctl"] += 1
        return real_ioctl(fd, request, arg)

    def cfr(
        src_fd: int,
        dst_fd: int,
        count: int,
        offset_src: int | None = None,
        offset_dst: int | None = None,
    ) -> int:
        probes["copy_file_range"] += 1
        return real_cfr(src_fd, dst_fd, count, offset_src, offset_dst)

    monkeypatch.setattr(fcntl, "ioctl", ioctl)
    monkeypatch.setattr(os, "copy_file_range", cfr)
    workers = 4
    summary = copy(src, where("xfs") / "dst", CopySettings(max_workers=workers))
    assert summary["copied.files"] == 100
    assert methods(summary) == only(cross_fs_method(), 100)
    # A race between workers costs one probe each, never one per file.
    assert probes["ioctl"] <= workers
    if cross_fs_method() == "readwrite":
        assert probes["copy_file_range"] <= workers


def test_refusal_is_remembered_per_device_pair(where: Where) -> None:
    """One run with an ext4 source and an XFS source into XFS: the ext4 files' refusal
    to reflink does not stop the XFS files from reflinking."""
    on_ext4, on_xfs = where("ext4") / "e", where("xfs") / "x"
    for root in (on_ext4, on_xfs):
        root.mkdir()
        for i in range(10):
            (root / f"f{i}").write_bytes(os.urandom(50_000))
    into = where("xfs") / "into"
    into.mkdir()
    summary = copy([on_ext4, on_xfs], f"{into}/")
    expected = only(cross_fs_method(), 10)
    expected["reflink"] += 10
    assert methods(summary) == expected
    for root in (on_ext4, on_xfs):
        for i in range(10):
            name = f"f{i}"
            assert (into / root.name / name).read_bytes() == (root / name).read_bytes()


# -- sparse files ---------------------------------------------------------------------


SPARSE_SIZE = 64 * MIB


def sparse_spec() -> Spec:
    """64 MiB: a hole, 1 MiB data at 4 MiB, a hole, 1 MiB at 40 MiB, a hole to the end."""
    return {
        "s": Sparse(SPARSE_SIZE, {4 * MIB: os.urandom(MIB), 40 * MIB: os.urandom(MIB)}),
    }


SPARSE_CASES = [
    # Reflink comes first and keeps holes as holes: it wins on one XFS.
    ("xfs", "xfs", "reflink"),
    ("ext4", "ext4", "sparse"),
    ("ext4", "xfs", "sparse"),
    ("xfs", "ext4", "sparse"),
]
"""(source fs, destination fs, the method a sparse file is copied with)."""


@pytest.mark.parametrize(("src_fs", "dst_fs", "method"), SPARSE_CASES)
def test_sparse_file_keeps_its_holes(
    where: Where,
    make_tree: Callable[[Path, Spec], Path],
    tree_compare: TreeCompare,
    src_fs: str,
    dst_fs: str,
    method: str,
) -> None:
    """Holes stay holes within and across filesystems: same bytes (zeros in the holes),
    same length including the trailing hole, no more blocks than the source."""
    src = make_tree(where(src_fs) / "src", sparse_spec())
    dst = where(dst_fs) / "dst"
    summary = copy(src, dst)
    assert methods(summary) == only(method)
    assert tree_compare(src, dst, sparse=True, sparse_slack=SLACK) == []
    a, b = (src / "s").stat(), (dst / "s").stat()
    assert b.st_size == SPARSE_SIZE
    assert a.st_blocks * 512 < 3 * MIB  # the source really is sparse
    assert b.st_blocks * 512 <= a.st_blocks * 512 + SLACK
    assert data_ranges(dst / "s") == data_ranges(src / "s")


@pytest.mark.parametrize(("src_fs", "dst_fs", "method"), SPARSE_CASES)
def test_copied_bytes_of_sparse_file_do_not_depend_on_method(
    where: Where,
    make_tree: Callable[[Path, Spec], Path],
    src_fs: str,
    dst_fs: str,
    method: str,
) -> None:
    """``copied.bytes`` of a sparse file is its size, whichever method copied it: the
    reflink path and a dry run both count the size, so the sparse path must too (else
    the same tree reports different byte counts by destination filesystem)."""
    src = make_tree(where(src_fs) / "src", sparse_spec())
    planned = copy(src, where(dst_fs) / "dst", CopySettings(dry_run=DryRun.BRIEF))
    assert planned["copied.bytes"] == SPARSE_SIZE
    summary = copy(src, where(dst_fs) / "dst")
    assert methods(summary) == only(method)
    assert summary["copied.bytes"] == SPARSE_SIZE


@pytest.mark.parametrize(
    ("src_fs", "dst_fs", "method"),
    [("xfs", "xfs", "reflink"), ("ext4", "ext4", "sparse"), ("ext4", "xfs", "sparse")],
)
def test_all_hole_file_keeps_full_length(
    where: Where,
    make_tree: Callable[[Path, Spec], Path],
    tree_compare: TreeCompare,
    src_fs: str,
    dst_fs: str,
    method: str,
) -> None:
    """A file that is one hole (no data at all) is copied at its full length, and
    allocates nothing."""
    src = make_tree(where(src_fs) / "src", {"h": Sparse(16 * MIB)})
    dst = where(dst_fs) / "dst"
    summary = copy(src, dst)
    assert methods(summary) == only(method)
    assert tree_compare(src, dst, sparse=True, sparse_slack=SLACK) == []
    st = (dst / "h").stat()
    assert st.st_size == 16 * MIB
    assert st.st_blocks * 512 <= SLACK
    assert data_ranges(dst / "h") == []


@pytest.mark.parametrize(("src_fs", "dst_fs"), [("ext4", "ext4"), ("xfs", "ext4")])
def test_sparse_file_with_data_at_both_ends(
    where: Where,
    make_tree: Callable[[Path, Spec], Path],
    tree_compare: TreeCompare,
    src_fs: str,
    dst_fs: str,
) -> None:
    """Data at offset 0 and up to the last byte (an unaligned end), a hole between."""
    size = 32 * MIB + 1000
    spec: Spec = {
        "s": Sparse(size, {0: os.urandom(MIB), size - 5000: os.urandom(5000)})
    }
    src = make_tree(where(src_fs) / "src", spec)
    dst = where(dst_fs) / "dst"
    summary = copy(src, dst)
    assert methods(summary) == only("sparse")
    assert tree_compare(src, dst, sparse=True, sparse_slack=SLACK) == []
    assert (dst / "s").stat().st_size == size


# -- empty files ----------------------------------------------------------------------


@pytest.mark.parametrize(("src_fs", "dst_fs"), [("xfs", "xfs"), ("ext4", "xfs")])
def test_empty_files_use_no_method(
    where: Where, make_tree: Callable[[Path, Spec], Path], src_fs: str, dst_fs: str
) -> None:
    """Empty files are created with their mode and times, and count no data method."""
    spec: Spec = {
        f"e{i}": File(b"", mode=0o600 + i, mtime_ns=OLD_NS + i * 1_000_003)
        for i in range(5)
    }
    src = make_tree(where(src_fs) / "src", spec)
    dst = where(dst_fs) / "dst"
    summary = copy(src, dst)
    assert methods(summary) == only("reflink", 0)
    assert summary["copied.files"] == 5
    assert summary["copied.bytes"] == 0
    for i in range(5):
        st = (dst / f"e{i}").stat()
        assert (st.st_size, st.st_mode & 0o7777, st.st_mtime_ns) == (
            0,
            0o600 + i,
            OLD_NS + i * 1_000_003,
        )


# -- the source changes during the copy -----------------------------------------------


def concurrent_writer(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]
) -> list[int]:
    """Make the next data copy first run ``change`` on the real source, like a writer
    racing the copy after the file was opened and its size read. Returns the sizes
    the engine asked to copy (the size seen at open)."""
    real = rcp_core.engine.methods.DataCopier.copy
    asked: list[int] = []

    def racing(
        self: rcp_core.engine.methods.DataCopier,
        src: int,
        dst: int,
        size: int,
        sparse: bool,
        devs: tuple[int, int],
        *args: Any,
    ) -> tuple[str | None, int]:
        if not asked:
            change()
        asked.append(size)
        return real(self, src, dst, size, sparse, devs, *args)

    monkeypatch.setattr(rcp_core.engine.methods.DataCopier, "copy", racing)
    return asked


def assert_source_changed(exc: CopyFailedError) -> None:
    assert exc.summary["errors"] == 1
    assert not exc.stopped  # one changed file does not stop the run
    assert len(exc.errors) == 1
    key, count, _ = exc.errors[0]
    assert "source changed" in key
    assert count == 1


def rerun_with_overwrite(src: Path, dst: Path, tree_compare: TreeCompare) -> None:
    """A rerun with overwrite sees the unfinished file as different and redoes it."""
    summary = copy(src, dst, CopySettings(existing=ExistingPolicy.OVERWRITE))
    assert summary["copied.files"] == 1
    assert summary["errors"] == 0
    assert tree_compare(src, dst) == []


@pytest.mark.parametrize("fs", ["xfs", "ext4"])
def test_source_shrinking_during_copy(
    where: Where,
    monkeypatch: pytest.MonkeyPatch,
    tree_compare: TreeCompare,
    fs: str,
) -> None:
    """A source that shrank after open: the copy ends at the real end, keeps no
    source times, is reported, and a rerun with overwrite finishes it."""
    base = where(fs)
    src, dst = base / "f", base / "copy"
    data = random_file(src, 2 * MIB + 333)
    real_end = 700_001

    def shrink() -> None:
        os.truncate(src, real_end)
        os.utime(src, ns=(WRITER_NS, WRITER_NS))

    asked = concurrent_writer(monkeypatch, shrink)
    with pytest.raises(CopyFailedError) as info:
        copy(src, dst)
    assert asked == [2 * MIB + 333]
    assert_source_changed(info.value)
    assert dst.read_bytes() == data[:real_end]
    assert dst.stat().st_mtime_ns not in (OLD_NS, WRITER_NS)
    monkeypatch.undo()
    rerun_with_overwrite(src, dst, tree_compare)


@pytest.mark.parametrize("fs", ["xfs", "ext4"])
def test_source_growing_during_copy(
    where: Where,
    monkeypatch: pytest.MonkeyPatch,
    tree_compare: TreeCompare,
    fs: str,
) -> None:
    """A source that grew after open: at most the size seen at open is copied."""
    base = where(fs)
    src, dst = base / "f", base / "copy"
    data = random_file(src, MIB + 123)

    def grow() -> None:
        with open(src, "ab") as f:
            f.write(os.urandom(MIB))
        os.utime(src, ns=(WRITER_NS, WRITER_NS))

    asked = concurrent_writer(monkeypatch, grow)
    with pytest.raises(CopyFailedError) as info:
        copy(src, dst)
    assert asked == [MIB + 123]
    assert_source_changed(info.value)
    assert dst.read_bytes() == data
    assert dst.stat().st_mtime_ns not in (OLD_NS, WRITER_NS)
    monkeypatch.undo()
    rerun_with_overwrite(src, dst, tree_compare)


def test_refused_clone_of_one_file_is_not_remembered(
    xfs_tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone refused for one file only (EINVAL: its source grew, so the unaligned
    length no longer ends at EOF) falls back for that file; later files still reflink."""
    src = xfs_tmp_path / "src"
    src.mkdir()
    for i in range(10):
        random_file(src / f"f{i}", 100_000 + i)
    grown: list[str] = []
    real = rcp_core.engine.methods.DataCopier.copy

    def racing(
        self: rcp_core.engine.methods.DataCopier,
        src_fd: int,
        dst_fd: int,
        size: int,
        sparse: bool,
        devs: tuple[int, int],
        *args: Any,
    ) -> tuple[str | None, int]:
        if not grown:  # the first file copied grows after it was opened
            grown.append(os.readlink(f"/proc/self/fd/{src_fd}"))
            with open(grown[0], "ab") as f:
                f.write(b"more")
        return real(self, src_fd, dst_fd, size, sparse, devs, *args)

    monkeypatch.setattr(rcp_core.engine.methods.DataCopier, "copy", racing)
    dst = xfs_tmp_path / "dst"
    with pytest.raises(CopyFailedError) as info:
        copy(src, dst, CopySettings(max_workers=1))
    assert_source_changed(info.value)
    counts = methods(info.value.summary)
    # The grown file: reflink refused (EINVAL), then the in-kernel copy.
    assert counts == {**only("reflink", 9), "copy_file_range": 1}
    name = Path(grown[0]).name
    assert (dst / name).read_bytes() == (src / name).read_bytes()[:-4]


@pytest.mark.parametrize("fs", ["xfs", "ext4"])
def test_sparse_source_shrinking_during_copy(
    where: Where,
    monkeypatch: pytest.MonkeyPatch,
    make_tree: Callable[[Path, Spec], Path],
    tree_compare: TreeCompare,
    fs: str,
) -> None:
    """A sparse source cut inside a hole: the copy is truncated to the real end."""
    first = os.urandom(MIB)
    spec: Spec = {"s": Sparse(16 * MIB, {0: first, 12 * MIB: os.urandom(MIB)})}
    root = make_tree(where(fs) / "src", spec)
    src, dst = root / "s", where(fs) / "copy"
    real_end = 5 * MIB + 17

    def shrink() -> None:
        os.truncate(src, real_end)
        os.utime(src, ns=(WRITER_NS, WRITER_NS))

    concurrent_writer(monkeypatch, shrink)
    with pytest.raises(CopyFailedError) as info:
        copy(src, dst)
    assert_source_changed(info.value)
    assert dst.stat().st_size == real_end
    assert dst.read_bytes() == first + bytes(real_end - MIB)
    assert dst.stat().st_mtime_ns != WRITER_NS
    monkeypatch.undo()
    rerun_with_overwrite(src, dst, tree_compare)


@pytest.mark.parametrize("start", [None, "readwrite", "sparse"])
def test_progress_is_reported_as_a_large_file_is_written(
    tmp_path: Path, start: str | None
) -> None:
    """The controller measures work as it goes: a large file reports its bytes in
    steps, not once at the end; the steps add up to the data written."""
    from rcp_core.engine.methods import STEP, DataCopier

    size = 2 * STEP + 12345
    (tmp_path / "src").write_bytes(
        os.urandom(1 << 20) * (size >> 20) + b"x" * (size % (1 << 20))
    )
    steps: list[int] = []
    src = os.open(tmp_path / "src", os.O_RDONLY)
    dst = os.open(tmp_path / "dst", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        st = os.fstat(src)
        _, copied = DataCopier().copy(
            src, dst, size, False, (st.st_dev, st.st_dev), start, None, steps.append
        )
    finally:
        os.close(src)
        os.close(dst)
    assert copied == size
    assert sum(steps) == size
    assert len(steps) >= 3
    assert max(steps) <= STEP
    assert (tmp_path / "dst").read_bytes() == (tmp_path / "src").read_bytes()


def test_a_run_moves_as_many_bytes_as_it_copies(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i, size in enumerate((0, 10, 70 << 20)):
        (tmp_path / "src" / f"f{i}").write_bytes(b"z" * size)
    summary = copy(tmp_path / "src", tmp_path / "dst")
    assert summary.counts["moved.bytes"] == summary["copied.bytes"] == (70 << 20) + 10


@pytest.fixture
def faulty(tmp_path: Path) -> Callable[[list[str]], ContextManager[Path]]:
    """``faulty(rules)``: a latencyfs mount over ``tmp_path/backing`` (holding ``src``
    with a dense and a sparse 300,000-byte file) whose requests meet ``rules``."""
    backing = tmp_path / "backing"
    (backing / "src").mkdir(parents=True)
    (backing / "src" / "dense").write_bytes(os.urandom(300_000))
    with open(backing / "src" / "sparse", "wb") as f:
        f.seek(200_000)
        f.write(os.urandom(100_000))
    (tmp_path / "mnt").mkdir()

    @contextmanager
    def mount(rules: list[str]) -> Iterator[Path]:
        faults = Faults.table(tmp_path, rules)
        with mounted(backing, tmp_path / "mnt", delay_ms=0, faults=faults) as mnt:
            yield mnt

    return mount


@pytest.mark.privileged
@pytest.mark.parametrize(
    "rules",
    [
        ["copy_file_range * short", "read * short"],
        ["copy_file_range * EOPNOTSUPP", "read * short"],  # the kernel's own copy
    ],
)
def test_a_copy_that_ends_early_is_finished_by_reads(
    faulty: Callable[[list[str]], ContextManager[Path]],
    rules: list[str],
    tree_compare: TreeCompare,
) -> None:
    """copy_file_range ending at a short read (FUSE, the kernel's fallback copy) is
    not the end of the file: every byte arrives."""
    with faulty(rules) as mnt:
        summary = copy(str(mnt / "src"), str(mnt / "dst"))
        assert summary["errors"] == 0
        assert tree_compare(mnt / "src", mnt / "dst") == []


@pytest.mark.privileged
def test_a_source_that_ends_before_its_size_is_an_error_not_a_short_copy(
    faulty: Callable[[list[str]], ContextManager[Path]],
) -> None:
    """Reads that find the end of a file its size says goes on (nothing changed):
    the entry fails with EIO and no cut-off file is kept under its name."""
    rules = ["copy_file_range /src/dense eof", "read /src/dense eof"]
    with faulty(rules) as mnt:
        with pytest.raises(CopyFailedError) as failed:
            copy(str(mnt / "src"), str(mnt / "dst"))
        assert failed.value.summary["errors"] == 1
        assert "ended after 0 of its 300000 bytes" in str(failed.value.errors)
        assert sorted(os.listdir(mnt / "dst")) == ["sparse"]
