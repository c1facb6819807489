"""What kind of storage a path lives on: filesystem type (statfs magic) and disk kind.

Detection reads ``fstatfs(2)``'s ``f_type`` through ctypes (Python's ``os.statvfs``
lacks it) and names it from :data:`MAGIC`; a magic we do not know falls back to the
type name in ``/proc/self/mountinfo`` (e.g. ``wekafs`` or ``fuse.sshfs``). Rotational
disks are read from ``/sys/dev/block/MAJ:MIN/.../queue/rotational`` when visible.
Nothing here changes state; every failure degrades to "unknown".
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

MAGIC: dict[int, str] = {
    0xEF53: "ext4",
    0x58465342: "xfs",
    0x9123683E: "btrfs",
    0x2FC12FC1: "zfs",
    0x01021994: "tmpfs",
    0x794C7630: "overlay",
    0x65735546: "fuse",
    0x6969: "nfs",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",
    0x00C36400: "cephfs",
    0x19830326: "beegfs",
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
}
SHARED = frozenset(
    {"nfs", "nfs4", "lustre", "gpfs", "wekafs", "cephfs", "beegfs", "cifs", "smb2"}
)
"""Network and parallel filesystems: every operation pays a round trip."""


STORE = "store:"
"""How a store's ``fstype`` begins (``store:s3``, ``store:rcp``, ...)."""


@dataclass(frozen=True, slots=True)
class StorageInfo:
    """The storage behind one path.

    :param fstype: a short name (``ext4``, ``nfs``, ``fuse.sshfs``, ``unknown``; a
        store's ``store:`` and its URL scheme).
    :param magic: ``f_type`` from statfs (0 if unknown).
    :param rotational: a spinning disk; ``None`` when not visible (network, FUSE).
    """

    fstype: str
    magic: int = 0
    rotational: bool | None = None

    @property
    def store(self) -> bool:
        """A store reached through the generic engine (:func:`store_storage`):
        every operation is a request."""
        return self.fstype.startswith(STORE)

    @property
    def shared(self) -> bool:
        """A network or parallel filesystem (or FUSE, which behaves like one)."""
        return self.fstype in SHARED or self.fstype.startswith("fuse")


class _StatFs(ctypes.Structure):
    _fields_ = (
        ("f_type", ctypes.c_long),
        ("_rest", ctypes.c_byte * 112),
    )


def _libc() -> ctypes.CDLL:
    # The symbols already loaded into this process, libc's among them: no search
    # (ctypes.util.find_library runs ldconfig, a few ms at every start-up).
    return ctypes.CDLL(None, use_errno=True)


def statfs_magic(fd: int) -> int:
    """``f_type`` of the filesystem holding ``fd`` (0 when it cannot be read)."""
    buf = _StatFs()
    if _libc().fstatfs(fd, ctypes.byref(buf)) != 0:
        return 0
    return int(buf.f_type) & 0xFFFFFFFF


def _mountinfo_type(dev: int) -> str | None:
    """The fs type of the mount whose device is ``dev``, from mountinfo."""
    wanted = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[2] == wanted and " - " in line:
            return line.split(" - ", 1)[1].split()[0]
    return None


def _rotational(dev: int) -> bool | None:
    base = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        device = base.resolve()
    except OSError:
        return None
    for candidate in (device, device.parent):  # a partition's queue is its disk's
        flag = candidate / "queue" / "rotational"
        try:
            return flag.read_text().strip() == "1"
        except OSError:
            continue
    return None


def detect(fd: int) -> StorageInfo:
    """Describe the storage of the open file or directory ``fd``."""
    dev = os.fstat(fd).st_dev
    magic = statfs_magic(fd)
    name = MAGIC.get(magic)
    if name is None or name == "fuse" or name == "nfs":
        name = _mountinfo_type(dev) or name or "unknown"
    return StorageInfo(fstype=name, magic=magic, rotational=_rotational(dev))
