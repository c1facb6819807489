"""Uniform trees (:func:`generate_tree`, the rcp tools' ``filegen``) and the named
presets (:func:`generate_preset`): the uniform ones here, ``mixed`` in
:mod:`rcp_core.tools.filegen.mixed`.

Invariants: bad input raises :class:`UsageError` before anything is written; a file's
data stream is its place in the tree (``ordinal * files_per_dir + i`` over the chosen
directories in pre-order), never the order in which the pool happens to run.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final

from rcp_core.errors import UsageError
from rcp_core.run.summary import human_bytes
from rcp_core.sizes import GiB, KiB, MiB
from rcp_core.tools.filegen.mixed import generate_mixed
from rcp_core.tools.filegen.write import (
    Content,
    GenStats,
    make_dirs,
    opened_dir,
    pool_size,
    prepare_root,
    run_tasks,
    seed_or_random,
    write_file,
)

# A pool task writes about this much (or one file); small files are batched per dir.
_BATCH_BYTES: Final = 16 * MiB


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
# Name -> what it makes at scale 1 (for help texts); see generate_mixed for "mixed".
PRESETS: Final[Mapping[str, str]] = {
    **{name: spec.describe() for name, spec in _UNIFORM.items()},
    "mixed": "3007 files in 87 dirs, symlinks, a hard link, sparse, FIFO: ~160 MiB",
}


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
    """Make the rcp ``filegen`` tree under ``root``; see :mod:`rcp_core.tools.filegen`.

    A zero width ends the tree at that level: ``(3, 0, 2)`` is the same as ``(3,)``.
    """
    if min((*dir_width, files_per_dir, file_size), default=0) < 0:
        raise UsageError("DIRWIDTH, NUMFILES and FILESIZE cannot be negative")
    threads = pool_size(workers)
    started = time.perf_counter()
    base = Path(root)
    prepare_root(base)
    widths = tuple(dir_width)
    if 0 in widths:
        widths = widths[: widths.index(0)]
    levels = [1]
    for width in widths:
        levels.append(levels[-1] * width)
    targets = levels[-1] if leaf_only else sum(levels)
    content = Content.from_seed(seed_or_random(seed))
    per_task = max(1, _BATCH_BYTES // max(1, file_size))

    def tasks() -> Iterator[Callable[[], int]]:
        chosen = (
            d for d, is_leaf in make_dirs(base, widths) if is_leaf or not leaf_only
        )
        for ordinal, directory in enumerate(chosen):
            for first in range(0, files_per_dir, per_task):
                numbers = range(first, min(first + per_task, files_per_dir))
                first_stream = ordinal * files_per_dir
                yield partial(
                    _write_uniform, content, directory, numbers, file_size, first_stream
                )

    total = run_tasks(tasks(), threads)
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
    threads = pool_size(workers)
    started = time.perf_counter()
    base = Path(root).absolute()
    prepare_root(base)
    rng = random.Random(seed_or_random(seed))
    return generate_mixed(base, rng, scale, threads, started)


def _write_uniform(
    content: Content, directory: Path, numbers: range, size: int, first_stream: int
) -> int:
    with opened_dir(directory) as dir_fd:
        for i in numbers:
            write_file(content, f"file{i}", size, first_stream + i, dir_fd=dir_fd)
    return len(numbers) * size
