"""Loop-mounted scratch filesystems (XFS with reflink, ext4) for tests that need root.

Invariants:
- `loop_mount` leaks nothing: whatever happens inside the `with` (a failing test, an
  interrupt, a failed `mount`), the mount is removed and the loop device detached on
  exit. A busy mount is unmounted lazily (`umount -l`) so exit never blocks;
  `losetup -d` on a device still in use sets autoclear, and the kernel frees it when the
  last user leaves.
- Devices come from `losetup --find --show`, which asks /dev/loop-control for a free
  one, so concurrent test sessions never share a device; devtmpfs creates /dev/loopN
  past the preallocated loop0..7. A lost race for a device is retried.
- Images are sparse files that are deleted once detached, so disk use stays small.
- Direct I/O on the loop device is asked for first (no double page cache, closer to a
  real disk); where the backing filesystem refuses it, the device is attached without.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

Fstype = Literal["xfs", "ext4"]

MIB = 1024 * 1024
# xfsprogs >= 5.19 refuses to make an XFS smaller than 300 MiB.
MIN_SIZE: dict[Fstype, int] = {"xfs": 300 * MIB, "ext4": 2 * MIB}
MKFS: dict[Fstype, tuple[str, ...]] = {
    "xfs": ("mkfs.xfs", "-q", "-f", "-m", "reflink=1"),
    # 256-byte inodes keep nanosecond timestamps even on tiny images (mke2fs would pick
    # 128 for "small" ones); no reserved blocks so ENOSPC means the disk is full.
    "ext4": ("mkfs.ext4", "-q", "-F", "-I", "256", "-b", "4096", "-m", "0"),
}
TOOLS = ("losetup", "mount", "umount")
# Root's PATH may lack the sbin directories (cron, CI runners); the tools live there.
_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"]
)
_TIMEOUT = 120.0


class SmallFs(Protocol):
    """The `small_fs` fixture: a fresh tiny filesystem per call, gone after the test."""

    def __call__(self, size_mib: int = 16, fstype: Fstype = "ext4") -> Path: ...


class LoopError(RuntimeError):
    """A loop-mount command failed; the message carries the command and its stderr."""


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether loop-mount tests can run here, and what to do if not."""

    action: Literal["run", "skip", "fail"]
    reason: str


def which(tool: str) -> str | None:
    """Absolute path of `tool`, looking in PATH and then the sbin directories."""
    return shutil.which(tool, path=_SEARCH_PATH)


def missing_tools(fstype: Fstype) -> list[str]:
    """The command-line tools needed to loop-mount `fstype` that are not installed."""
    return [t for t in (MKFS[fstype][0], *TOOLS) if which(t) is None]


def gate(euid: int, missing: Sequence[str]) -> Gate:
    """Decide run/skip/fail. Root must run these tests: a missing tool fails there."""
    if euid != 0:
        return Gate("skip", "needs root: loop mount")
    if missing:
        return Gate(
            "fail",
            f"loop-mount tests need {', '.join(missing)}, which are not installed; "
            "run `make system` (as root) to install xfsprogs, e2fsprogs and util-linux",
        )
    if not Path("/dev/loop-control").exists():
        return Gate(
            "fail", "no /dev/loop-control: load the loop module (modprobe loop)"
        )
    return Gate("run", "")


def fstype_of(path: Path) -> str:
    """The type of the filesystem holding `path`, read from /proc/self/mountinfo."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            # id parent major:minor root mountpoint options [optional...] - fstype ...
            if fields[2] == dev:
                return fields[fields.index("-") + 1]
    raise LookupError(f"no mount for device {dev} of {path}")


def is_mountpoint(path: Path) -> bool:
    """Whether `path` is listed as a mount point in /proc/self/mountinfo."""
    target = os.fsencode(os.path.realpath(path))
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            if _unescape(line.split()[4]) == target:
                return True
    return False


def backing_file(device: str) -> str | None:
    """The image a loop device is attached to, or None when it is free."""
    sys_file = Path("/sys/block", Path(device).name, "loop", "backing_file")
    try:
        return sys_file.read_text().rstrip("\n")
    except FileNotFoundError:
        return None


@contextmanager
def loop_mount(workdir: Path, fstype: Fstype, size: int) -> Iterator[Path]:
    """Make a `size`-byte `fstype` image in `workdir`, loop-mount it, yield the mount.

    Unmounts, detaches and deletes the image on exit, even when the body raised.
    """
    if size < MIN_SIZE[fstype]:
        raise ValueError(
            f"{fstype} needs at least {MIN_SIZE[fstype] // MIB} MiB, got {size} bytes"
        )
    image = workdir / f"{fstype}.img"
    mnt = workdir / f"{fstype}.mnt"
    with open(image, "xb") as f:
        f.truncate(size)
    try:
        _run(*MKFS[fstype], str(image))
        device = _attach(image)
        try:
            mnt.mkdir()
            _run("mount", "-t", fstype, device, str(mnt))
            try:
                yield mnt
            finally:
                _unmount(mnt)
        finally:
            _run("losetup", "-d", device)
    finally:
        image.unlink(missing_ok=True)


def _attach(image: Path) -> str:
    for attempt in range(5):
        for direct in (("--direct-io=on",), ()):
            proc = _exec("losetup", "--find", "--show", *direct, str(image))
            if proc.returncode == 0:
                return proc.stdout.strip()
        # Another session may have taken the free device between lookup and configure.
        if "busy" not in proc.stderr.lower():
            break
        time.sleep(0.05 * (attempt + 1))
    raise LoopError(
        f"losetup --find --show {image} failed: {proc.stderr.strip()} "
        f"(attached devices: {_exec('losetup', '-a').stdout.strip() or 'none'})"
    )


def _unmount(mnt: Path) -> None:
    if _exec("umount", str(mnt)).returncode != 0:
        # Busy (a test left a file open or a process inside): detach it from the
        # namespace now; the kernel finishes when the last reference goes.
        _run("umount", "-l", str(mnt))


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = _exec(*args)
    if proc.returncode != 0:
        raise LoopError(
            f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
        )
    return proc


def _exec(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    exe = which(tool)
    if exe is None:
        raise LoopError(f"{tool} is not installed: run `make system`")
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=_TIMEOUT, check=False
    )


def _unescape(field: bytes) -> bytes:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out = bytearray()
    i = 0
    while i < len(field):
        if field[i : i + 1] == b"\\" and field[i + 1 : i + 4].isdigit():
            out.append(int(field[i + 1 : i + 4], 8))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)
