"""Loop-mounted scratch filesystems (XFS with reflink, ext4) for tests that need root.

The mechanics (sparse image, ``losetup --find``, mount, and the guarantee that nothing
leaks past the ``with``) are :mod:`benchmarks.mounts`, shared with the benchmark
harness; this module adds the test policy: which filesystems, their minimum sizes,
and whether loop-mount tests run, skip or fail here (:func:`gate`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import pytest

from benchmarks import mounts
from benchmarks.mounts import which

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


class SmallFs(Protocol):
    """The `small_fs` fixture: a fresh tiny filesystem per call, gone after the test."""

    def __call__(self, size_mib: int = 16, fstype: Fstype = "ext4") -> Path: ...


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether loop-mount tests can run here, and what to do if not."""

    action: Literal["run", "skip", "fail"]
    reason: str


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


def require(fstype: Fstype) -> None:
    """Skip the calling test when not root; fail it when root but tools are missing."""
    verdict = gate(os.geteuid(), missing_tools(fstype))
    if verdict.action == "skip":
        pytest.skip(verdict.reason)
    if verdict.action == "fail":
        pytest.fail(verdict.reason, pytrace=False)


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
    with mounts.loop_mount(
        image, workdir / f"{fstype}.mnt", MKFS[fstype], fstype, size
    ) as mnt:
        yield mnt
