"""Page-cache control between runs: settle (sync + drop caches) and warm a tree.

Why every run starts with :meth:`CacheControl.settle`, warm runs included: this
machine's ext4 has no journal, and ext4 then skips inodes freed in the last 60 s while
their inode-table block is cached (``recently_deleted()`` in ``fs/ext4/ialloc.c``);
back-to-back "delete, copy again" runs were 3-6x slower in system time until the
caches were dropped after the delete. So: delete the previous destination, ``sync``,
``echo 3 > /proc/sys/vm/drop_caches``, then (warm runs) read the source back in.

Invariants: :func:`warm` only reads (never follows symlinks, never writes); a settle
without permission to drop caches is an error the caller sees at start-up
(:meth:`CacheControl.problem`), never a silent no-op in the middle of a run.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
_READ = 1 << 20
_WARM_WORKERS = 8
_buffers = threading.local()


@dataclass(frozen=True, slots=True)
class CacheControl:
    """Sync and (when ``drop``) drop the page, dentry and inode caches."""

    drop: bool = True

    def problem(self) -> str | None:
        """Why dropping caches cannot work here, or ``None`` when it can (or is off)."""
        if not self.drop:
            return None
        if not os.access(DROP_CACHES, os.W_OK):
            return f"cannot write {DROP_CACHES} (needs root)"
        return None

    def settle(self) -> None:
        """Write back dirty data, then (if enabled) drop clean caches."""
        os.sync()
        if self.drop:
            DROP_CACHES.write_text("3\n")


def warm(root: Path) -> int:
    """Read every regular file under ``root`` once (8 threads); return bytes read.

    Directories are listed and every entry is stat'ed, so dentries and inodes are
    cached as well as data.
    """
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            os.lstat(os.path.join(dirpath, name))
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path) and os.path.isfile(path):
                files.append(path)
    with ThreadPoolExecutor(_WARM_WORKERS) as pool:
        return sum(pool.map(_read_all, files, chunksize=64))


def _read_all(path: str) -> int:
    # One reused buffer per thread: os.read would allocate 1 MiB per tiny file.
    buf: bytearray | None = getattr(_buffers, "buf", None)
    if buf is None:
        buf = _buffers.buf = bytearray(_READ)
    total = 0
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        while n := os.readv(fd, [buf]):
            total += n
    finally:
        os.close(fd)
    return total
