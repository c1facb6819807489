"""The filesystems a benchmark copies on: context managers yielding a :class:`Mounted`.

- ``ext4``: a directory on the work disk (this machine's root fs: ext4 without journal).
- ``xfs``: a sparse image on the work disk, ``mkfs.xfs -m reflink=1``, attached with
  ``losetup --direct-io=on`` (so blocks are not cached twice) and loop-mounted.
- ``tmpfs``: ``mount -t tmpfs -o size=...``; everything lives in memory, so a cold run
  means nothing there and is skipped.
- ``fuse``: ``benchmarks.latencyfs`` (0.5 ms per operation by default) mounted over the
  ext4 directory, our stand-in for NFS/Lustre: tools copy through the mount, while the
  harness generates, verifies and deletes through the backing directory, where the
  delay does not apply.

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
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

GiB: Final = 1024**3
_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"]
)
_TIMEOUT = 300.0


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

    @property
    def src(self) -> Path:
        """Where the filesets live (as tools see them)."""
        return self.root / "src"

    @property
    def dst(self) -> Path:
        """Where the tools write (as tools see it)."""
        return self.root / "dst"

    def direct(self, path: Path) -> Path:
        """``path`` (below ``root``) as seen through the backing tree."""
        return self.backing / path.relative_to(self.root)


@dataclass(frozen=True, slots=True)
class FsOptions:
    """Sizes and knobs of the filesystems."""

    xfs_bytes: int = 16 * GiB
    tmpfs_bytes: int = 6 * GiB
    fuse_delay_ms: float = 0.5


FsFactory = Callable[[Path, FsOptions], AbstractContextManager[Mounted]]


@contextmanager
def ext4_dir(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """A plain directory on the work disk."""
    root = work / "ext4"
    (root / "dst").mkdir(parents=True, exist_ok=True)
    fstype = fstype_of(root)
    note = "" if fstype == "ext4" else f" (the work disk is {fstype}, not ext4)"
    yield Mounted(
        "ext4",
        root,
        root,
        fstype,
        f"directory {root} on the work disk{note}",
        True,
        False,
    )


@contextmanager
def xfs_loop(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """An XFS with reflink on a sparse loop image, removed on exit."""
    _need_root("a loop mount")
    for tool in ("mkfs.xfs", "losetup", "mount", "umount"):
        if which(tool) is None:
            raise FsUnavailable(
                f"{tool} is not installed (apt-get install xfsprogs util-linux)"
            )
    image, mnt = work / "xfs.img", work / "xfs.mnt"
    _clear_mount(mnt)
    _detach_image(image)
    image.unlink(missing_ok=True)
    mnt.mkdir(parents=True, exist_ok=True)
    with open(image, "xb") as f:
        f.truncate(options.xfs_bytes)
    try:
        _run("mkfs.xfs", "-q", "-f", "-m", "reflink=1", str(image))
        device = _run(
            "losetup", "--find", "--show", "--direct-io=on", str(image)
        ).strip()
        try:
            _run("mount", "-t", "xfs", device, str(mnt))
            try:
                (mnt / "dst").mkdir()
                yield Mounted(
                    "xfs",
                    mnt,
                    mnt,
                    fstype_of(mnt),
                    f"{options.xfs_bytes / GiB:.0f} GiB sparse image on the work disk, "
                    "mkfs.xfs -m reflink=1, losetup --direct-io=on",
                    True,
                    True,
                )
            finally:
                _unmount(mnt)
        finally:
            _exec("losetup", "-d", device)
    finally:
        image.unlink(missing_ok=True)


@contextmanager
def tmpfs(work: Path, options: FsOptions) -> Iterator[Mounted]:
    """A size-capped tmpfs, unmounted (and so emptied) on exit."""
    _need_root("mount -t tmpfs")
    mnt = work / "tmpfs.mnt"
    _clear_mount(mnt)
    mnt.mkdir(parents=True, exist_ok=True)
    size_mib = options.tmpfs_bytes // (1024 * 1024)
    _run("mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", str(mnt))
    try:
        (mnt / "dst").mkdir()
        yield Mounted(
            "tmpfs",
            mnt,
            mnt,
            fstype_of(mnt),
            f"mount -t tmpfs -o size={size_mib}m",
            False,
            False,
        )
    finally:
        _unmount(mnt)


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
    _clear_mount(mnt)
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
            fstype_of(root),
            f"benchmarks.latencyfs, {options.fuse_delay_ms:g} ms per operation, "
            f"over {backing} (ext4); verify and delete go through the backing dir",
            True,
            False,
        )


FILESYSTEMS: Final[dict[str, FsFactory]] = {
    "ext4": ext4_dir,
    "xfs": xfs_loop,
    "tmpfs": tmpfs,
    "fuse": latency_fuse,
}


def which(tool: str) -> str | None:
    """Absolute path of ``tool`` in PATH or the sbin directories."""
    return shutil.which(tool, path=_SEARCH_PATH)


def fstype_of(path: Path) -> str:
    """The type of the filesystem holding ``path``, from /proc/self/mountinfo."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    found = "unknown"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if fields[2] == dev:  # the last match is the one on top
                found = fields[fields.index("-") + 1]
    return found


def is_mounted(path: Path) -> bool:
    """Whether ``path`` is a mount point (a dead FUSE mount included)."""
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        return any(_unescape(line.split()[4]) == target for line in f)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise FsUnavailable(f"needs root for {what}")


def _clear_mount(mnt: Path) -> None:
    """Unmount what a killed earlier run may have left at ``mnt``."""
    while is_mounted(mnt):
        if _exec("umount", str(mnt)).returncode != 0:
            _run("umount", "-l", str(mnt))


def _detach_image(image: Path) -> None:
    """Detach loop devices still attached to ``image`` (from a killed earlier run)."""
    if not image.exists():
        return
    for line in _exec("losetup", "-j", str(image)).stdout.splitlines():
        device = line.split(":", 1)[0]
        if device:
            _exec("losetup", "-d", device)


def _unmount(mnt: Path) -> None:
    for attempt in range(3):
        if _exec("umount", str(mnt)).returncode == 0:
            return
        time.sleep(0.2 * (attempt + 1))  # a just-killed child may still hold a file
    _run("umount", "-l", str(mnt))


def _run(tool: str, *args: str) -> str:
    proc = _exec(tool, *args)
    if proc.returncode != 0:
        raise FsUnavailable(
            f"{tool} {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
        )
    return proc.stdout


def _exec(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = which(tool)
    if exe is None:
        raise FsUnavailable(f"{tool} is not installed")
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=_TIMEOUT, check=False
    )


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
