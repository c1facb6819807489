"""What both shapes of :mod:`rcp_core.tools.filegen` write with: ROOT and its directories,
file content and metadata, the worker pool, and the :class:`GenStats` they report.

Invariants (the package docstring has the whole list):

- :func:`prepare_root` accepts only a new or an empty ROOT, and :data:`CREATE_FLAGS`
  has ``O_EXCL``: nothing that existed before is overwritten.
- :class:`Content` is one random 1 MiB block per seed, read through a window per data
  stream: different streams start at different offsets (for the first 2**20 streams),
  and each MiB of a stream starts at a new offset, so aligned 4 KiB blocks do not
  repeat within a file smaller than 4 GiB.
- :func:`run_tasks` keeps at most four tasks per worker queued, so a lazy task source
  (and :func:`make_dirs` behind it) stays lazy.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rcp_core.errors import UsageError
from rcp_core.sizes import MiB

_BLOCK: Final = MiB
# Both odd: ``stream * _SPREAD`` is a bijection modulo 2**20, and ``k * _STRIDE`` is a
# multiple of 4 KiB only when k is a multiple of 4096.
_SPREAD: Final = 0x9E3779B1 % _BLOCK
_STRIDE: Final = 0x2F0A3
CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class GenStats:
    """What one generation created below ROOT (ROOT itself is not counted).

    ``files`` counts regular-file inodes and ``hardlinks`` the extra names of them, so
    ``find ROOT -type f | wc -l`` is ``files + hardlinks``; ``bytes`` is the apparent
    size of those inodes (a sparse file counts its holes); ``specials`` are FIFOs.
    """

    dirs: int
    files: int
    symlinks: int
    hardlinks: int
    specials: int
    bytes: int
    seconds: float


def pool_size(workers: int | None) -> int:
    if workers is None:
        return os.cpu_count() or 1
    if workers < 1:
        raise UsageError(f"bad workers {workers}: expected at least 1")
    return workers


def seed_or_random(seed: int | None) -> int:
    return int.from_bytes(os.urandom(16)) if seed is None else seed


def prepare_root(root: Path) -> None:
    """Create ``root``, or accept it if it is an empty directory."""
    try:
        os.mkdir(root)
    except FileExistsError:
        if not root.is_dir():
            raise UsageError(f"ROOT exists and is not a directory: {root}") from None
        with os.scandir(root) as entries:
            if next(entries, None) is not None:
                raise UsageError(f"ROOT exists and is not empty: {root}") from None
    except (FileNotFoundError, NotADirectoryError):
        raise UsageError(f"the parent of ROOT is not a directory: {root}") from None


def make_dirs(directory: Path, widths: tuple[int, ...]) -> Iterator[tuple[Path, bool]]:
    """Yield ``(dir, is_leaf)`` in pre-order, making each child just before its turn."""
    yield directory, not widths
    for i in range(widths[0] if widths else 0):
        child = directory / f"dir{i}"
        os.mkdir(child)
        yield from make_dirs(child, widths[1:])


def run_tasks(tasks: Iterable[Callable[[], int]], workers: int) -> int:
    """Run ``tasks`` on ``workers`` threads and return the sum of their results.

    At most ``4 * workers`` tasks are queued, so a lazy ``tasks`` stays lazy. The first
    failure (of a task or of ``tasks`` itself) cancels what has not started and is
    re-raised once running tasks have finished.
    """
    total = 0
    pending: set[Future[int]] = set()
    with ThreadPoolExecutor(workers, thread_name_prefix="rcp-filegen") as pool:
        try:
            for task in tasks:
                if len(pending) >= 4 * workers:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    total += sum(future.result() for future in done)
                pending.add(pool.submit(task))
            done, pending = wait(pending)
            total += sum(future.result() for future in done)
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    return total


@dataclass(frozen=True, slots=True)
class Content:
    """File data: a random 1 MiB block stored twice, so that a window of up to 1 MiB
    starting anywhere in the first copy is one contiguous slice (no copying)."""

    doubled: bytes
    base: int

    @classmethod
    def from_seed(cls, seed: int) -> Content:
        rng = random.Random(seed)
        block = rng.randbytes(_BLOCK)
        return cls(block + block, rng.randrange(_BLOCK))

    def write(self, fd: int, size: int, stream: int, at: int = 0) -> None:
        """Write ``size`` bytes of data stream number ``stream`` at offset ``at``."""
        view = memoryview(self.doubled)
        done = 0
        while done < size:
            k = done // _BLOCK
            start = (self.base + stream * _SPREAD + k * _STRIDE) % _BLOCK
            chunk = view[start : start + min(_BLOCK, size - done)]
            while chunk:
                written = os.pwrite(fd, chunk, at + done)
                chunk = chunk[written:]
                done += written


@dataclass(frozen=True, slots=True)
class Meta:
    """Mode and mtime (also used as atime) to set on an entry after its data."""

    mode: int
    mtime_ns: int

    @classmethod
    def draw(cls, rng: random.Random, modes: Sequence[int]) -> Meta:
        """A mode from ``modes`` and a time in 2017-2023 with non-zero nanoseconds."""
        seconds = 1_500_000_000 + rng.randrange(6 * 365 * 86400)
        return cls(rng.choice(modes), seconds * 10**9 + rng.randrange(1, 10**9))

    def apply(self, target: int | Path, *, link: bool = False) -> None:
        """Set both on ``target``; only the time on a symlink itself if ``link``."""
        if not link:
            os.chmod(target, self.mode)
        ns = (self.mtime_ns, self.mtime_ns)
        os.utime(target, ns=ns, follow_symlinks=not link)


def write_file(
    content: Content,
    path: str | Path,
    size: int,
    stream: int,
    meta: Meta | None = None,
    *,
    dir_fd: int | None = None,
) -> int:
    """Create ``path`` (0644 less umask, or exactly ``meta``); return its size.

    Batches pass a bare name and their directory's ``dir_fd``: a third of the cost of a
    path lookup per file.
    """
    fd = os.open(path, CREATE_FLAGS, 0o644 if meta is None else 0o600, dir_fd=dir_fd)
    try:
        content.write(fd, size, stream)
        if meta is not None:
            meta.apply(fd)
    finally:
        os.close(fd)
    return size


@contextmanager
def opened_dir(directory: Path) -> Iterator[int]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)
