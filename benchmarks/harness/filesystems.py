"""The filesystems a benchmark copies on: context managers yielding a :class:`Mounted`.

- ``ext4``: a directory on the work disk (this machine's root fs: ext4 without journal)
  holds the sources and the copies of large files; copies of many files go to a *fresh*
  ext4 made like the work disk (no journal) on a loop device, re-made empty before
  every run or round instead of deleting the copies. Why: ext4 without a journal does
  not reuse an inode freed in the last 60 s (360 s while its inode-table block is
  dirty, as it is during a copy) and scans past each one (``recently_deleted()`` in
  ``fs/ext4/ialloc.c``); a copy of 50k files right after deleting earlier copies spent
  45% of its CPU time in that scan (perf), so every run's time depended on the runs
  before it. Deleting is also slow here (``discard``: ~80 s for 800k inodes).
- ``ext4busy``: ``ext4`` with one busy loop spinning beside every run (:func:`busy_loop`)
  in a session of its own, as a neighbour in another session or cgroup: the kernel's
  autogroup scheduling gives each session an equal share, so the copy gets one of the
  two cores whatever its thread count, and automatic settings must not thrash when
  more workers cannot win more CPU.
- ``ext4shared``: the same, but the busy loop and every tool share one cpu cgroup
  (:mod:`.cpugroup`), as the tasks of one container or systemd service do: there the
  scheduler shares the CPUs thread by thread, so more workers win more of them.
- ``xfs``: a sparse image on the work disk, ``mkfs.xfs -m reflink=1``, attached with
  ``losetup --direct-io=on`` (so blocks are not cached twice) and loop-mounted.
- ``tmpfs``: ``mount -t tmpfs -o size=...``; everything lives in memory, so a cold run
  means nothing there and is skipped.
- ``fuse``: ``benchmarks.latencyfs`` (0.5 ms per operation by default) mounted over the
  ext4 directory, our stand-in for NFS/Lustre: tools copy through the mount, while the
  harness generates, verifies and deletes through the backing directory, where the
  delay does not apply.
- ``netns`` and ``netns1g``: copies between two hosts (:mod:`.hosts`): network
  namespaces on a private bridge, sshd and an rsync daemon in ``h2``, the tools run
  in ``h1`` (``Mounted.prefix``) and pull from ``h2`` (``Mounted.env`` says where it
  is). ``netns1g`` caps ``h2``'s link with ``tbf`` at 1 Gbit/s both ways. Sources are
  the ext4 directory's (the same files), destinations are placed as on ``ext4``:
  copies of many files on a fresh no-journal ext4 of their own, re-made per round,
  copies of large files in the ext4 directory.

Invariants: every mount made here is undone on exit from its ``with``, whatever
happened inside (a busy mount is detached lazily, ``losetup -d`` on a busy device sets
autoclear); the XFS image is deleted. Leftovers of a killed earlier run (a mount, an
attached image) are cleaned at entry. A filesystem that cannot be made here raises
:class:`FsUnavailable` with the reason before yielding, and the runner reports it as
skipped. Tools write below ``Mounted.dst`` only; fileset sources live below
``Mounted.src``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from benchmarks import mounts
from benchmarks.harness import cpugroup, hosts

GiB: Final = 1024**3
XFS_MKFS: Final = ("mkfs.xfs", "-q", "-f", "-m", "reflink=1")
EXT4_MKFS: Final = ("mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "nodiscard")
BUSY_LOOP: Final = ("sh", "-c", "while :; do :; done")
"""The neighbour of ``ext4busy``: a shell loop that only burns a core."""
EXT4_OPTIONS: Final = "noinit_itable"
"""No background zeroing of inode tables (it would write during the runs)."""


class FsUnavailable(RuntimeError):
    """This filesystem cannot be set up here; the message says why."""


@dataclass(frozen=True, slots=True)
class Mounted:
    """A filesystem ready for the benchmark."""

    name: str
    root: Path  # tools read and write below it
    backing: Path  # the same tree without the FUSE layer (== root elsewhere)
    fstype: str
    detail: str
    cold: bool  # whether dropping caches makes a run cold here
    reflink: bool
    fresh: mounts.Volume | None = None  # copies of many files go here, re-made empty
    prefix: tuple[str, ...] = ()  # every tool run starts with this (another host)
    env: Mapping[str, str] = field(default_factory=dict)  # and gets this environment

    @property
    def src(self) -> Path:
        """Where the filesets live (as tools see them)."""
        return self.root / "src"

    @property
    def dst(self) -> Path:
        """Where the tools write (as tools see it)."""
        return self.root / "dst"

    def fresh_for(self, large: bool) -> mounts.Volume | None:
        """The fresh volume where copies of a fileset go (many files), if any."""
        return None if large else self.fresh

    def dst_for(self, large: bool) -> Path:
        """Where tools write copies of a fileset (as tools see it)."""
        fresh = self.fresh_for(large)
        return self.dst if fresh is None else fresh.mnt

    def direct(self, path: Path) -> Path:
        """``path`` (below ``root``) as seen through the backing tree."""
        return self.backing / path.relative_to(self.root)


@dataclass(frozen=True, slots=True)
class FsOptions:
    """Sizes and knobs of the filesystems."""

    xfs_bytes: int = 16 * GiB
    ext4_bytes: int = 24 * GiB
    tmpfs_bytes: int = 6 * GiB
    fuse_delay_ms: float = 0.5


FsFactory = Callable[[Path, FsOptions], AbstractContextManager[Mounted]]


@contextmanager
def ext4_dir(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """A directory on the work disk, with a fresh ext4 for copies of many files."""
    _need_root("a loop mount")
    _need_ext4_tools()
    root = work / "ext4"
    (root / "dst").mkdir(parents=True, exist_ok=True)
    fstype = mounts.fstype_of(root)
    note = "" if fstype == "ext4" else f" (the work disk is {fstype}, not ext4)"
    with ExitStack() as stack:
        fresh = _fresh_ext4(stack, work / "ext4-fresh.img", root / "fresh", options)
        yield Mounted(
            "ext4",
            root,
            root,
            fstype,
            f"directory {root} on the work disk{note}; {_fresh_detail(options)}",
            True,
            False,
            fresh,
        )


@contextmanager
def busy_ext4(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """The ``ext4`` directory while one busy loop spins beside every run."""
    with ext4_dir(work, options) as mounted, busy_loop():
        yield _beside_busy_loop(
            mounted,
            "ext4busy",
            "in a session of its own (autogroup: it keeps a core, whatever the copy's "
            "thread count)",
        )


@contextmanager
def shared_ext4(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """The ``ext4`` directory with a busy loop and every tool in one cpu cgroup."""
    try:
        with (
            cpugroup.shared_cpu_group() as group,
            ext4_dir(work, options) as mounted,
            busy_loop(),
        ):
            yield _beside_busy_loop(
                mounted,
                "ext4shared",
                f"in the same cpu cgroup ({group}): the CPUs are shared thread by thread",
            )
    except cpugroup.CgroupUnavailable as e:
        raise FsUnavailable(str(e)) from e


def _beside_busy_loop(mounted: Mounted, name: str, where: str) -> Mounted:
    """``mounted`` renamed, its detail saying where the busy loop spins."""
    loop = " ".join(BUSY_LOOP[2:])
    detail = f"{mounted.detail}; one busy loop ({loop}) spins beside every run {where}"
    return replace(mounted, name=name, detail=detail)


@contextmanager
def busy_loop() -> Iterator[subprocess.Popen[bytes]]:
    """A process that spins on a core until the ``with`` ends (then it is gone)."""
    spinner = subprocess.Popen(BUSY_LOOP, start_new_session=True)
    try:
        yield spinner
    finally:
        spinner.kill()
        spinner.wait(timeout=10)


def _fresh_ext4(
    stack: ExitStack, image: Path, mnt: Path, options: FsOptions
) -> mounts.Volume:
    """A fresh no-journal ext4 on a loop image (left by a killed run: cleaned first),
    unmounted and deleted when ``stack`` closes."""
    mounts.clear(mnt)
    mounts.detach_image(image)
    image.unlink(missing_ok=True)
    try:
        return stack.enter_context(
            mounts.loop_volume(
                image, mnt, EXT4_MKFS, "ext4", options.ext4_bytes, EXT4_OPTIONS
            )
        )
    except mounts.MountError as e:
        raise FsUnavailable(str(e)) from e


def _fresh_detail(options: FsOptions) -> str:
    return (
        "copies of many files go to a fresh ext4 "
        f"({options.ext4_bytes / GiB:.0f} GiB sparse image on the work disk, "
        "mkfs.ext4 -O ^has_journal like the work disk, losetup --direct-io=on), "
        "re-made empty instead of deleting copies"
    )


def _need_ext4_tools() -> None:
    for tool in ("mkfs.ext4", "losetup", "mount", "umount"):
        if mounts.which(tool) is None:
            raise FsUnavailable(
                f"{tool} is not installed (apt-get install e2fsprogs util-linux)"
            )


@contextmanager
def xfs_loop(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """An XFS with reflink on a sparse loop image, removed on exit."""
    _need_root("a loop mount")
    for tool in ("mkfs.xfs", "losetup", "mount", "umount"):
        if mounts.which(tool) is None:
            raise FsUnavailable(
                f"{tool} is not installed (apt-get install xfsprogs util-linux)"
            )
    image, mnt = work / "xfs.img", work / "xfs.mnt"
    mounts.clear(mnt)
    mounts.detach_image(image)
    image.unlink(missing_ok=True)
    with ExitStack() as stack:
        try:
            root = stack.enter_context(
                mounts.loop_mount(image, mnt, XFS_MKFS, "xfs", options.xfs_bytes)
            )
        except mounts.MountError as e:
            raise FsUnavailable(str(e)) from e
        (root / "dst").mkdir()
        yield Mounted(
            "xfs",
            root,
            root,
            mounts.fstype_of(root),
            f"{options.xfs_bytes / GiB:.0f} GiB sparse image on the work disk, "
            "mkfs.xfs -m reflink=1, losetup --direct-io=on",
            True,
            True,
        )


@contextmanager
def tmpfs(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """A size-capped tmpfs, unmounted (and so emptied) on exit."""
    _need_root("mount -t tmpfs")
    mnt = work / "tmpfs.mnt"
    mounts.clear(mnt)
    mnt.mkdir(parents=True, exist_ok=True)
    size_mib = options.tmpfs_bytes // (1024 * 1024)
    try:
        mounts.run(
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={size_mib}m,mode=0755",
            "tmpfs",
            str(mnt),
        )
    except mounts.MountError as e:
        raise FsUnavailable(str(e)) from e
    try:
        (mnt / "dst").mkdir()
        yield Mounted(
            "tmpfs",
            mnt,
            mnt,
            mounts.fstype_of(mnt),
            f"mount -t tmpfs -o size={size_mib}m",
            False,
            False,
        )
    finally:
        mounts.unmount(mnt)


@contextmanager
def latency_fuse(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """``benchmarks.latencyfs`` over the ext4 directory (sources shared with ``ext4``)."""
    _need_root("a FUSE mount with allow_other")
    try:
        from benchmarks import latencyfs
    except ImportError as e:  # mfusepy or libfuse3 missing, or the module itself
        raise FsUnavailable(f"benchmarks.latencyfs cannot be imported: {e}") from e
    if not Path("/dev/fuse").exists():
        raise FsUnavailable("no /dev/fuse (modprobe fuse)")
    backing = work / "ext4"
    (backing / "dst").mkdir(parents=True, exist_ok=True)
    mnt = work / "fuse.mnt"
    mounts.clear(mnt)
    mnt.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        try:
            root = stack.enter_context(
                latencyfs.mounted(backing, mnt, delay_ms=options.fuse_delay_ms)
            )
        except (OSError, ValueError, latencyfs.LatencyFsError) as e:
            raise FsUnavailable(f"latencyfs did not mount: {e}") from e
        yield Mounted(
            "fuse",
            root,
            backing,
            mounts.fstype_of(root),
            f"benchmarks.latencyfs, {options.fuse_delay_ms:g} ms per operation, "
            f"over {backing} (ext4); verify and delete go through the backing dir",
            True,
            False,
        )


LINK_1G: Final = "1gbit"


@contextmanager
def _two_hosts(
    name: str, work: Path, options: FsOptions, rate: str | None
) -> Iterator[Mounted]:
    """Two hosts pulling from the ext4 directory's sources (see :mod:`.hosts`)."""
    _need_root("network namespaces and a loop mount")
    why = hosts.missing()
    if why is not None:
        raise FsUnavailable(why)
    _need_ext4_tools()
    root = work / "ext4"
    (root / "dst").mkdir(parents=True, exist_ok=True)
    (root / "src").mkdir(exist_ok=True)
    scratch = work / name
    if scratch.exists():  # keys of an earlier run: ssh-keygen never overwrites
        shutil.rmtree(scratch)
    with ExitStack() as stack:
        try:
            pair = stack.enter_context(hosts.pair(scratch, work, rate))
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            raise FsUnavailable(f"two hosts could not be set up: {e}") from e
        fresh = _fresh_ext4(stack, work / f"{name}-fresh.img", root / name, options)
        yield Mounted(
            name,
            root,
            root,
            mounts.fstype_of(root),
            f"{pair.describe()}; tools run in h1 and pull from h2; sources: the "
            f"ext4 directory {root / 'src'}; {_fresh_detail(options)}, copies of "
            "large files go to the ext4 directory",
            True,
            False,
            fresh,
            pair.prefix,
            pair.env(),
        )


@contextmanager
def netns_veth(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """Two hosts on an uncapped veth link."""
    with _two_hosts("netns", work, options, None) as mounted:
        yield mounted


@contextmanager
def netns_1g(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """Two hosts, the source host's link capped at 1 Gbit/s both ways."""
    with _two_hosts("netns1g", work, options, LINK_1G) as mounted:
        yield mounted


FILESYSTEMS: Final[dict[str, FsFactory]] = {
    "ext4": ext4_dir,
    "ext4busy": busy_ext4,
    "ext4shared": shared_ext4,
    "xfs": xfs_loop,
    "tmpfs": tmpfs,
    "fuse": latency_fuse,
    "netns": netns_veth,
    "netns1g": netns_1g,
}
REMOTE: Final = ("netns", "netns1g")
"""Filesystems between two hosts: only the remote tools run there, and only there."""


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise FsUnavailable(f"needs root for {what}")
