"""Generate file trees for tests and benchmarks: the engine behind ``rcp-filegen``.

Two shapes:

- :func:`generate_tree` is the rcp tools' ``filegen ROOT DIRWIDTH NUMFILES FILESIZE``:
  ``dir_width=(3, 2)`` makes ``dir0..dir2``, each holding ``dir0..dir1``; every leaf
  directory (every directory, ROOT included, with ``leaf_only=False``) gets
  ``file0..`` of ``file_size`` bytes each.
- :func:`generate_preset` makes a named benchmark fileset (:data:`PRESETS`):
  uniform ones (``1k``, ``1m``, ``100m``, ``1g``) and ``mixed``, a realistic tree with
  every kind of entry a copy must preserve (see :func:`_generate_mixed`).

Invariants:

- Only ROOT and what is below it are written. ROOT is created (its parent must exist)
  or must be an empty directory; files are created with ``O_EXCL``, so nothing that
  existed before is ever overwritten. Bad input raises :class:`UsageError` before
  anything is written.
- Content is random but cheap: one 1 MiB block from ``random.Random(seed)`` (the seed
  comes from ``os.urandom`` when none is given), read through a per-file window, so
  writing is disk-bound, not CPU-bound. Windows of different files start at different
  offsets (for the first 2**20 files), and each MiB of a file starts at a new offset,
  so aligned 4 KiB blocks do not repeat within a file smaller than 4 GiB.
- Everything written (content, sizes, modes, times) is a function of the seed and of
  the entry's place in the tree, never of thread scheduling: one seed, one tree, for
  any number of workers.
- Memory does not grow with the file count: directories are made lazily by the calling
  thread while at most four batches per worker wait for the pool.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Final

from rcp_core.errors import UsageError
from rcp_core.summary import human_bytes

KiB: Final = 1024
MiB: Final = 1024 * KiB
GiB: Final = 1024 * MiB

_UNITS: Final = {"": 1, "K": KiB, "M": MiB, "G": GiB, "T": 1024 * GiB}
_SIZE: Final = re.compile(r"(\d+)\s*([KMGT]?)(?:iB)?", re.IGNORECASE)

_BLOCK: Final = MiB
# Both odd: ``stream * _SPREAD`` is a bijection modulo 2**20, and ``k * _STRIDE`` is a
# multiple of 4 KiB only when k is a multiple of 4096.
_SPREAD: Final = 0x9E3779B1 % _BLOCK
_STRIDE: Final = 0x2F0A3
# A pool task writes about this much (or one file); small files are batched per dir.
_BATCH_BYTES: Final = 16 * MiB
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


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


@dataclass(frozen=True, slots=True)
class _Uniform:
    """A uniform preset: ``dirs`` directories of ``files_per_dir`` files each."""

    dirs: int
    files_per_dir: int
    file_size: int

    def describe(self) -> str:
        total = self.dirs * self.files_per_dir
        return (
            f"{self.dirs} x {self.files_per_dir} files of"
            f" {human_bytes(self.file_size)}: {human_bytes(total * self.file_size)}"
        )


_UNIFORM: Final = {
    "1k": _Uniform(dirs=100, files_per_dir=1000, file_size=KiB),
    "1m": _Uniform(dirs=10, files_per_dir=100, file_size=MiB),
    "100m": _Uniform(dirs=1, files_per_dir=10, file_size=100 * MiB),
    "1g": _Uniform(dirs=1, files_per_dir=4, file_size=GiB),
}
# Name -> what it makes at scale 1 (for help texts); see _generate_mixed for "mixed".
PRESETS: Final[Mapping[str, str]] = {
    **{name: spec.describe() for name, spec in _UNIFORM.items()},
    "mixed": "3007 files in 87 dirs, symlinks, a hard link, sparse, FIFO: ~160 MiB",
}


def parse_size(text: str) -> int:
    """``"4096"`` -> 4096, ``"1K"`` -> 1024; K, M, G, T (or KiB, ...) are binary."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise UsageError(
            f"bad size {text!r}: expected bytes or a whole number with K, M, G or T"
            " (1K = 1024)"
        )
    return int(match[1]) * _UNITS[match[2].upper()]


def parse_dir_width(text: str) -> tuple[int, ...]:
    """``"3,2"`` -> ``(3, 2)``: 3 top-level directories of 2 subdirectories each."""
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        widths = ()
    if not widths or min(widths) < 0:
        raise UsageError(
            f"bad DIRWIDTH {text!r}: expected comma-separated counts, e.g. 3,2"
        )
    return widths


def generate_tree(
    root: str | os.PathLike[str],
    dir_width: Sequence[int],
    files_per_dir: int,
    file_size: int,
    *,
    leaf_only: bool = True,
    workers: int | None = None,
    seed: int | None = None,
) -> GenStats:
    """Make the rcp ``filegen`` tree under ``root``; see the module docstring.

    A zero width ends the tree at that level: ``(3, 0, 2)`` is the same as ``(3,)``.
    """
    if min((*dir_width, files_per_dir, file_size), default=0) < 0:
        raise UsageError("DIRWIDTH, NUMFILES and FILESIZE cannot be negative")
    pool_size = _pool_size(workers)
    started = time.perf_counter()
    base = Path(root)
    _prepare_root(base)
    widths = tuple(dir_width)
    if 0 in widths:
        widths = widths[: widths.index(0)]
    levels = [1]
    for width in widths:
        levels.append(levels[-1] * width)
    targets = levels[-1] if leaf_only else sum(levels)
    content = _Content.from_seed(_seed(seed))
    per_task = max(1, _BATCH_BYTES // max(1, file_size))

    def tasks() -> Iterator[Callable[[], int]]:
        chosen = (d for d, is_leaf in _tree(base, widths) if is_leaf or not leaf_only)
        for ordinal, directory in enumerate(chosen):
            for first in range(0, files_per_dir, per_task):
                numbers = range(first, min(first + per_task, files_per_dir))
                first_stream = ordinal * files_per_dir
                yield partial(
                    _write_uniform, content, directory, numbers, file_size, first_stream
                )

    total = _run(tasks(), pool_size)
    return GenStats(
        dirs=sum(levels) - 1,
        files=targets * files_per_dir,
        symlinks=0,
        hardlinks=0,
        specials=0,
        bytes=total,
        seconds=time.perf_counter() - started,
    )


def generate_preset(
    root: str | os.PathLike[str],
    name: str,
    *,
    scale: float = 1.0,
    workers: int | None = None,
    seed: int | None = None,
) -> GenStats:
    """Make the preset ``name`` (one of :data:`PRESETS`) under ``root``.

    ``scale`` multiplies the number of files per directory of a uniform preset (at least
    one is kept; the directories and the file size are fixed), and for ``mixed`` the
    number of small files and the size of the large ones.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise UsageError(f"bad scale {scale}: expected a positive number")
    if name in _UNIFORM:
        spec = _UNIFORM[name]
        count = max(1, round(spec.files_per_dir * scale))
        return generate_tree(
            root, (spec.dirs,), count, spec.file_size, workers=workers, seed=seed
        )
    if name != "mixed":
        raise UsageError(
            f"unknown preset {name!r}: expected one of {', '.join(PRESETS)}"
        )
    pool_size = _pool_size(workers)
    started = time.perf_counter()
    base = Path(root).absolute()
    _prepare_root(base)
    return _generate_mixed(base, random.Random(_seed(seed)), scale, pool_size, started)


def _pool_size(workers: int | None) -> int:
    if workers is None:
        return os.cpu_count() or 1
    if workers < 1:
        raise UsageError(f"bad workers {workers}: expected at least 1")
    return workers


def _seed(seed: int | None) -> int:
    return int.from_bytes(os.urandom(16)) if seed is None else seed


def _prepare_root(root: Path) -> None:
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


def _tree(directory: Path, widths: tuple[int, ...]) -> Iterator[tuple[Path, bool]]:
    """Yield ``(dir, is_leaf)`` in pre-order, making each child just before its turn."""
    yield directory, not widths
    for i in range(widths[0] if widths else 0):
        child = directory / f"dir{i}"
        os.mkdir(child)
        yield from _tree(child, widths[1:])


def _run(tasks: Iterable[Callable[[], int]], workers: int) -> int:
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
class _Content:
    """File data: a random 1 MiB block stored twice, so that a window of up to 1 MiB
    starting anywhere in the first copy is one contiguous slice (no copying)."""

    doubled: bytes
    base: int

    @classmethod
    def from_seed(cls, seed: int) -> _Content:
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
class _Meta:
    """Mode and mtime (also used as atime) to set on an entry after its data."""

    mode: int
    mtime_ns: int

    @classmethod
    def draw(cls, rng: random.Random, modes: Sequence[int]) -> _Meta:
        """A mode from ``modes`` and a time in 2017-2023 with non-zero nanoseconds."""
        seconds = 1_500_000_000 + rng.randrange(6 * 365 * 86400)
        return cls(rng.choice(modes), seconds * 10**9 + rng.randrange(1, 10**9))

    def apply(self, target: int | Path, *, link: bool = False) -> None:
        """Set both on ``target``; only the time on a symlink itself if ``link``."""
        if not link:
            os.chmod(target, self.mode)
        ns = (self.mtime_ns, self.mtime_ns)
        os.utime(target, ns=ns, follow_symlinks=not link)


def _write_file(
    content: _Content,
    path: str | Path,
    size: int,
    stream: int,
    meta: _Meta | None = None,
    *,
    dir_fd: int | None = None,
) -> int:
    """Create ``path`` (0644 less umask, or exactly ``meta``); return its size.

    Batches pass a bare name and their directory's ``dir_fd``: a third of the cost of a
    path lookup per file.
    """
    fd = os.open(path, _CREATE, 0o644 if meta is None else 0o600, dir_fd=dir_fd)
    try:
        content.write(fd, size, stream)
        if meta is not None:
            meta.apply(fd)
    finally:
        os.close(fd)
    return size


@contextmanager
def _opened(directory: Path) -> Iterator[int]:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _write_uniform(
    content: _Content, directory: Path, numbers: range, size: int, first_stream: int
) -> int:
    with _opened(directory) as dir_fd:
        for i in numbers:
            _write_file(content, f"file{i}", size, first_stream + i, dir_fd=dir_fd)
    return len(numbers) * size


_MIXED_WIDTHS: Final = (4, 4, 4)
_MIXED_SMALL_FILES: Final = 3000
_SMALL_MIN: Final = 100
_SMALL_MAX: Final = 64 * KiB
_LARGE_SIZE: Final = 32 * MiB
_LARGE_MIN: Final = 2 * MiB
_LARGE_TAIL: Final = 4321
_SPARSE_SIZE: Final = 64 * MiB
_SPARSE_EXTENTS: Final = ((8 * MiB, MiB), (40 * MiB, MiB))
_FILE_MODES: Final = (0o644, 0o644, 0o600, 0o755, 0o640)
_DIR_MODES: Final = (0o755, 0o755, 0o750, 0o700)
# Linux symlinks are always 0777; only their times can be set.
_LINK_MODES: Final = (0o777,)


def _generate_mixed(
    base: Path, rng: random.Random, scale: float, workers: int, started: float
) -> GenStats:
    """Make the ``mixed`` preset under ``base`` (an absolute path).

    At scale 1: 3007 files, 87 dirs, about 160 MiB apparent and 95 MiB of data::

        dir0..dir3/dir0..dir3/dir0..dir3/   84 dirs; modes 0755, 0750, 0700
            file0..            3000 files of 100 B - 64 KiB (log-uniform), spread
                               unevenly over the 84 dirs; modes 0644, 0600, 0755, 0640
        dir0/hard_b            second name of special/hard_a (same inode)
        large/big0, big1       32 MiB, and 32 MiB + 4321 B (a tail not 4 KiB aligned)
        special/
            sparse             64 MiB apparent: 1 MiB of data at 8 MiB and at 40 MiB
            hard_a, empty_file, "with space.txt", "ünïcødé-名前.txt", fifo, empty_dir/
            rel_link -> ../large/big1, rel_dir_link -> ../dir0
            abs_link -> <ROOT>/large/big0, dangling_link -> ../no/such/file

    ``scale`` multiplies the 3000 small files and the large files' size (2 MiB at
    least). Every entry gets a mode and an mtime with non-zero nanoseconds (symlinks
    only the mtime); directories get theirs last, children before parents, because
    creating a child bumps its parent's mtime.
    """
    content = _Content.from_seed(rng.getrandbits(64))
    tree = [directory for directory, _ in _tree(base, _MIXED_WIDTHS)][1:]
    large, special = base / "large", base / "special"
    os.mkdir(large)
    os.mkdir(special)
    dirs = [*tree, large, special, special / "empty_dir"]
    dir_meta = [_Meta.draw(rng, _DIR_MODES) for _ in dirs]
    # Uneven but exact: cut the small-file count at cumulative random weights.
    small = max(1, round(_MIXED_SMALL_FILES * scale))
    cumulative = list(accumulate(rng.expovariate(1.0) for _ in tree))
    edges = [0, *(round(small * c / cumulative[-1]) for c in cumulative)]
    large_size = max(_LARGE_MIN, round(_LARGE_SIZE * scale))
    # Data streams: 0 sparse, 1-2 large, then one per small file, then the specials.
    tasks: list[Callable[[], int]] = [
        partial(_write_sparse, content, special / "sparse", 0, _draw_file(rng)),
        *(
            partial(
                _write_file,
                content,
                large / f"big{i}",
                large_size + i * _LARGE_TAIL,
                1 + i,
                _draw_file(rng),
            )
            for i in range(2)
        ),
        *(
            partial(
                _write_small, content, d, end - begin, rng.getrandbits(64), 3 + begin
            )
            for d, (begin, end) in zip(tree, pairwise(edges), strict=True)
        ),
    ]
    total = _run(tasks, workers)
    files = [("hard_a", True), ("empty_file", False)]
    files += [("with space.txt", True), ("ünïcødé-名前.txt", True)]
    for stream, (name, has_data) in enumerate(files, start=3 + small):
        size = rng.randrange(_SMALL_MIN, _SMALL_MAX) if has_data else 0
        total += _write_file(content, special / name, size, stream, _draw_file(rng))
    os.link(special / "hard_a", tree[0] / "hard_b")
    os.mkfifo(special / "fifo")
    _draw_file(rng).apply(special / "fifo")
    os.mkdir(special / "empty_dir")
    links = {
        "rel_link": "../large/big1",
        "rel_dir_link": "../dir0",
        "abs_link": str(large / "big0"),
        "dangling_link": "../no/such/file",
    }
    for name, target in links.items():
        os.symlink(target, special / name)
        _Meta.draw(rng, _LINK_MODES).apply(special / name, link=True)
    for directory, meta in reversed(list(zip(dirs, dir_meta, strict=True))):
        meta.apply(directory)
    return GenStats(
        dirs=len(dirs),
        files=small + 3 + len(files),
        symlinks=len(links),
        hardlinks=1,
        specials=1,
        bytes=total,
        seconds=time.perf_counter() - started,
    )


def _draw_file(rng: random.Random) -> _Meta:
    return _Meta.draw(rng, _FILE_MODES)


def _write_small(
    content: _Content, directory: Path, count: int, seed: int, first_stream: int
) -> int:
    """Write ``file0..`` of random small sizes, modes and times, drawn from ``seed``."""
    rng = random.Random(seed)
    low, high = math.log(_SMALL_MIN), math.log(_SMALL_MAX)
    total = 0
    with _opened(directory) as dir_fd:
        for i in range(count):
            size = int(math.exp(rng.uniform(low, high)))
            meta = _draw_file(rng)
            stream = first_stream + i
            total += _write_file(content, f"file{i}", size, stream, meta, dir_fd=dir_fd)
    return total


def _write_sparse(content: _Content, path: Path, stream: int, meta: _Meta) -> int:
    """Write the data extents of a sparse file; everything else stays a hole."""
    fd = os.open(path, _CREATE, 0o600)
    try:
        for offset, length in _SPARSE_EXTENTS:
            content.write(fd, length, stream, at=offset)
        os.ftruncate(fd, _SPARSE_SIZE)
        meta.apply(fd)
    finally:
        os.close(fd)
    return _SPARSE_SIZE
