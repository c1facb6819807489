"""The mount table and loop-mounted images: one implementation for the benchmark
harness, the latency filesystem and the tests.

Invariants:
- :func:`loop_mount` leaks nothing: whatever happens inside the ``with`` (a failing
  body, an interrupt, a failed ``mount``), the mount is removed, the loop device
  detached and the image deleted on exit. A busy mount is unmounted lazily
  (``umount -l``) so exit never blocks; ``losetup -d`` on a device still in use sets
  autoclear, and the kernel frees it when the last user leaves.
- Devices come from ``losetup --find --show``, which asks /dev/loop-control for a free
  one, so concurrent sessions never share a device; a lost race is retried. Direct I/O
  on the device is asked for first (no double page cache, closer to a real disk); where
  the backing filesystem refuses it, the device is attached without.
- Images are sparse files. Every external tool runs with a timeout; a tool that is not
  installed or fails raises :class:`MountError` with its stderr.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

TIMEOUT = 300.0
SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"]
)
"""Root's PATH may lack the sbin directories (cron, CI runners); the tools live there."""


class MountError(RuntimeError):
    """A mount tool is missing or failed; the message says which and why."""


def which(tool: str) -> str | None:
    """Absolute path of ``tool`` in PATH or the sbin directories."""
    return shutil.which(tool, path=SEARCH_PATH)


def attempt(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``tool`` and return what happened (a non-zero exit is not an error)."""
    exe = which(tool)
    if exe is None:
        raise MountError(f"{tool} is not installed: run `make system`")
    return subprocess.run(
        [exe, *args], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def run(tool: str, *args: str) -> str:
    """Run ``tool``; its stdout, or :class:`MountError` when it fails."""
    proc = attempt(tool, *args)
    if proc.returncode != 0:
        raise MountError(
            f"{tool} {' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}"
        )
    return proc.stdout


def _mount_lines() -> Iterator[list[bytes]]:
    # id parent major:minor root mountpoint options [optional...] - fstype source ...
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            yield line.split()


def unescape(field: bytes) -> bytes:
    """A mountinfo field with its ``\\ooo`` octal escapes (space, tab, ...) undone."""
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


def fstype_of(path: Path) -> str:
    """The type of the filesystem holding ``path`` (the mount on top wins)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}".encode()
    found = [
        fields[fields.index(b"-") + 1] for fields in _mount_lines() if fields[2] == dev
    ]
    if not found:
        raise LookupError(f"no mount for device {dev.decode()} of {path}")
    return os.fsdecode(found[-1])


def is_mountpoint(path: Path) -> bool:
    """Whether ``path`` is a mount point (a dead FUSE mount included)."""
    target = os.fsencode(os.path.realpath(path))
    return any(unescape(fields[4]) == target for fields in _mount_lines())


def unmount(mnt: Path) -> None:
    """Unmount ``mnt``, retrying briefly, else lazily (never blocks)."""
    for pause in (0.0, 0.2, 0.4):
        time.sleep(pause)  # a just-killed child may still hold a file
        if attempt("umount", str(mnt)).returncode == 0:
            return
    run("umount", "-l", str(mnt))


def clear(mnt: Path) -> None:
    """Unmount whatever a killed earlier run left mounted at ``mnt``."""
    while is_mountpoint(mnt):
        unmount(mnt)


def attach(image: Path) -> str:
    """Attach ``image`` to a free loop device (direct I/O where possible)."""
    for tries in range(5):
        for direct in (("--direct-io=on",), ()):
            proc = attempt("losetup", "--find", "--show", *direct, str(image))
            if proc.returncode == 0:
                return proc.stdout.strip()
        # Another session may have taken the free device between lookup and configure.
        if "busy" not in proc.stderr.lower():
            break
        time.sleep(0.05 * (tries + 1))
    raise MountError(
        f"losetup --find --show {image} failed: {proc.stderr.strip()} "
        f"(attached devices: {attempt('losetup', '-a').stdout.strip() or 'none'})"
    )


def detach_image(image: Path) -> None:
    """Detach every loop device still attached to ``image`` (a killed earlier run's)."""
    if not image.exists():
        return
    for line in attempt("losetup", "-j", str(image)).stdout.splitlines():
        device = line.split(":", 1)[0]
        if device:
            attempt("losetup", "-d", device)


class Volume:
    """A loop-mounted filesystem on an attached device, which can be re-made empty.

    :meth:`renew` unmounts, runs ``mkfs`` on the device again and mounts the new
    filesystem: a fresh filesystem in about a second, where deleting a large tree
    takes minutes on a disk that discards, and leaves freed inodes behind that
    change how the next copy allocates (see the harness's ``filesystems``).

    When ``mkfs`` finds the device still in use after the unmount, another mount
    namespace holds the old filesystem: a process that unshared its mounts (``ip netns
    exec``, say) while it was mounted keeps a copy of the mount until it exits, and
    the machine's ``/`` is a private mount here, so our unmount does not reach it.
    The old device is then left to that holder (detached with autoclear, its image
    unlinked: both go when it exits) and the volume moves to a new image and device.
    """

    def __init__(
        self,
        device: str,
        mnt: Path,
        mkfs: Sequence[str],
        fstype: str,
        options: str,
        image: Path | None = None,
        size: int = 0,
    ) -> None:
        self.device, self.mnt, self.mkfs = device, mnt, tuple(mkfs)
        self.fstype, self.options = fstype, options
        self.image, self.size = image, size

    def make(self) -> None:
        """``mkfs`` the device and mount it (it must not be mounted)."""
        run(*self.mkfs, self.device)
        options = ("-o", self.options) if self.options else ()
        run("mount", "-t", self.fstype, *options, self.device, str(self.mnt))

    def renew(self) -> None:
        """Replace the filesystem by an empty one (every file on it is gone)."""
        unmount(self.mnt)
        try:
            self.make()
        except MountError:
            if self.image is None or is_mountpoint(self.mnt):
                raise
            self._move()

    def _move(self) -> None:
        """Make the volume on a new image and device (see the class docstring)."""
        assert self.image is not None
        attempt("losetup", "-d", self.device)
        self.image.unlink(missing_ok=True)
        with open(self.image, "xb") as f:
            f.truncate(self.size)
        self.device = attach(self.image)
        self.make()


@contextmanager
def loop_volume(
    image: Path,
    mnt: Path,
    mkfs: Sequence[str],
    fstype: str,
    size: int,
    options: str = "",
) -> Iterator[Volume]:
    """Make a sparse ``size``-byte image, ``mkfs`` it, loop-mount it at ``mnt``.

    :param mkfs: the mkfs command line without the device (``["mkfs.xfs", "-q"]``).
    :param options: mount options (``-o``), if any.
    :raises FileExistsError: ``image`` exists (it is never overwritten).
    """
    with open(image, "xb") as f:
        f.truncate(size)
    try:
        volume = Volume(attach(image), mnt, mkfs, fstype, options, image, size)
        try:
            mnt.mkdir(parents=True, exist_ok=True)
            volume.make()
            try:
                yield volume
            finally:
                if is_mountpoint(mnt):  # a renew that failed midway left none
                    unmount(mnt)
        finally:
            attempt("losetup", "-d", volume.device)  # the device renew moved to
    finally:
        image.unlink(missing_ok=True)


@contextmanager
def loop_mount(
    image: Path, mnt: Path, mkfs: Sequence[str], fstype: str, size: int
) -> Iterator[Path]:
    """:func:`loop_volume` for callers that only need the mount point."""
    with loop_volume(image, mnt, mkfs, fstype, size) as volume:
        yield volume.mnt
