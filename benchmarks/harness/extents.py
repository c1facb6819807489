"""Whether a copy shares its data with the source: FIEMAP's "shared" extent flag.

A reflinked (FICLONE) copy on XFS or btrfs points at the source's blocks, and FIEMAP
marks those extents ``FIEMAP_EXTENT_SHARED``. :func:`shared_fraction` reports the part
of a tree's mapped bytes that is shared, so the report can say "reflinked" from
evidence rather than from a fast time.

Invariants: read only, never follows symlinks; files without mapped extents (empty,
all holes) add nothing to either side; ``None`` when the filesystem has no FIEMAP
(tmpfs, FUSE) or nothing was mapped, so "unknown" is never reported as 0 %.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
FIEMAP_EXTENT_SHARED = 0x2000
_HEADER = struct.Struct(
    "=QQLLLL"
)  # fm_start, fm_length, flags, mapped, count, reserved
_EXTENT = struct.Struct(
    "=QQQQQLLLL"
)  # logical, physical, length, 2x reserved, flags, 3x
_BATCH = 256
_WHOLE = 0xFFFFFFFFFFFFFFFF


def file_extents(fd: int) -> tuple[int, int]:
    """``(mapped bytes, shared bytes)`` of the open regular file ``fd``.

    Raises ``OSError`` (EOPNOTSUPP/ENOTTY) where the filesystem has no FIEMAP.
    """
    mapped = shared = 0
    start = 0
    while True:
        request = bytearray(_HEADER.size + _BATCH * _EXTENT.size)
        _HEADER.pack_into(
            request, 0, start, _WHOLE - start, FIEMAP_FLAG_SYNC, 0, _BATCH, 0
        )
        fcntl.ioctl(fd, FS_IOC_FIEMAP, request)
        count = _HEADER.unpack_from(request, 0)[3]
        if count == 0:
            return mapped, shared
        last = False
        for i in range(count):
            logical, _, length, _, _, flags, *_ = _EXTENT.unpack_from(
                request, _HEADER.size + i * _EXTENT.size
            )
            mapped += length
            if flags & FIEMAP_EXTENT_SHARED:
                shared += length
            start = logical + length
            last = bool(flags & FIEMAP_EXTENT_LAST)
        if last:
            return mapped, shared


def shared_fraction(root: Path) -> float | None:
    """Shared bytes / mapped bytes over the regular files under ``root``."""
    mapped = shared = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                m, s = file_extents(fd)
            except OSError as e:
                if e.errno in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL):
                    return None
                raise
            finally:
                os.close(fd)
            mapped += m
            shared += s
    return shared / mapped if mapped else None
