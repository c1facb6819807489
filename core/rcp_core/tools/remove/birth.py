"""Birth times: ``statx(2)``'s ``STATX_BTIME``, which Python's ``os.stat`` does not give.

Linux keeps a file's creation time on ext4, XFS, Btrfs, tmpfs (5.x+) and others; it is
only reachable through ``statx``. :func:`birth_time` calls glibc's ``statx`` wrapper
through ctypes, fd-relative and without following symlinks, and returns ``None`` where
the filesystem (or the C library) does not provide it, so a caller can decide what an
unknown birth time means instead of mistaking it for the epoch.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
from collections.abc import Callable

AT_SYMLINK_NOFOLLOW = 0x100
STATX_BTIME = 0x800
_STATX_SIZE = 256
"""``struct statx`` is 256 bytes; the kernel fills what it knows."""
_MASK = struct.Struct("=I")
_BTIME = struct.Struct("=qI")
_BTIME_OFFSET = 80
"""``stx_btime`` follows mask, blksize, attributes, nlink, uid, gid, mode, ino,
size, blocks, attributes_mask and ``stx_atime`` (``linux/stat.h``)."""

Statx = Callable[[int, bytes, int, int, ctypes.Array[ctypes.c_char]], int]


@functools.cache
def _statx() -> Statx | None:
    """glibc's ``statx`` (2.28+), or ``None`` without it."""
    import ctypes.util  # only when a birth time is asked for: it costs 8 ms to import

    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    fn = getattr(libc, "statx", None)
    if fn is None:
        return None
    fn.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_char_p,
    ]
    fn.restype = ctypes.c_int
    statx: Statx = fn
    return statx


def birth_time(dir_fd: int, name: str) -> float | None:
    """The birth time of ``name`` in ``dir_fd`` (a symlink's own), in seconds since the
    epoch; ``None`` where it is not known.

    :raises OSError: ``statx`` failed (the entry is gone, no permission, ...).
    """
    statx = _statx()
    if statx is None:
        return None
    buffer = ctypes.create_string_buffer(_STATX_SIZE)
    path = os.fsencode(name)
    if statx(dir_fd, path, AT_SYMLINK_NOFOLLOW, STATX_BTIME, buffer) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), name)
    (mask,) = _MASK.unpack_from(buffer, 0)
    if not mask & STATX_BTIME:
        return None
    seconds, nanoseconds = _BTIME.unpack_from(buffer, _BTIME_OFFSET)
    return float(seconds + nanoseconds / 1e9)
