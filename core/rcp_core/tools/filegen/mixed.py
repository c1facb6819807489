"""The ``mixed`` preset: a realistic tree with every kind of entry a copy must preserve.

Invariants: every random choice (the spread of small files, sizes, modes, times, the
content seed) comes from the one ``rng`` in a fixed order, or from per-directory seeds
drawn from it before the pool starts; so the tree depends on the seed alone, never on
thread scheduling. Directory metadata is applied last, children before parents.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from functools import partial
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Final

from rcp_core.sizes import KiB, MiB
from rcp_core.tools.filegen.write import (
    CREATE_FLAGS,
    Content,
    GenStats,
    Meta,
    make_dirs,
    opened_dir,
    run_tasks,
    write_file,
)

_WIDTHS: Final = (4, 4, 4)
_SMALL_FILES: Final = 3000
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


def generate_mixed(
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
    content = Content.from_seed(rng.getrandbits(64))
    tree = [directory for directory, _ in make_dirs(base, _WIDTHS)][1:]
    large, special = base / "large", base / "special"
    os.mkdir(large)
    os.mkdir(special)
    dirs = [*tree, large, special, special / "empty_dir"]
    dir_meta = [Meta.draw(rng, _DIR_MODES) for _ in dirs]
    # Uneven but exact: cut the small-file count at cumulative random weights.
    small = max(1, round(_SMALL_FILES * scale))
    cumulative = list(accumulate(rng.expovariate(1.0) for _ in tree))
    edges = [0, *(round(small * c / cumulative[-1]) for c in cumulative)]
    large_size = max(_LARGE_MIN, round(_LARGE_SIZE * scale))
    # Data streams: 0 sparse, 1-2 large, then one per small file, then the specials.
    tasks: list[Callable[[], int]] = [
        partial(_write_sparse, content, special / "sparse", 0, _draw_file(rng)),
        *(
            partial(
                write_file,
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
    total = run_tasks(tasks, workers)
    files = [("hard_a", True), ("empty_file", False)]
    files += [("with space.txt", True), ("ünïcødé-名前.txt", True)]
    for stream, (name, has_data) in enumerate(files, start=3 + small):
        size = rng.randrange(_SMALL_MIN, _SMALL_MAX) if has_data else 0
        total += write_file(content, special / name, size, stream, _draw_file(rng))
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
        Meta.draw(rng, _LINK_MODES).apply(special / name, link=True)
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


def _draw_file(rng: random.Random) -> Meta:
    return Meta.draw(rng, _FILE_MODES)


def _write_small(
    content: Content, directory: Path, count: int, seed: int, first_stream: int
) -> int:
    """Write ``file0..`` of random small sizes, modes and times, drawn from ``seed``."""
    rng = random.Random(seed)
    low, high = math.log(_SMALL_MIN), math.log(_SMALL_MAX)
    total = 0
    with opened_dir(directory) as dir_fd:
        for i in range(count):
            size = int(math.exp(rng.uniform(low, high)))
            meta = _draw_file(rng)
            stream = first_stream + i
            total += write_file(content, f"file{i}", size, stream, meta, dir_fd=dir_fd)
    return total


def _write_sparse(content: Content, path: Path, stream: int, meta: Meta) -> int:
    """Write the data extents of a sparse file; everything else stays a hole."""
    fd = os.open(path, CREATE_FLAGS, 0o600)
    try:
        for offset, length in _SPARSE_EXTENTS:
            content.write(fd, length, stream, at=offset)
        os.ftruncate(fd, _SPARSE_SIZE)
        meta.apply(fd)
    finally:
        os.close(fd)
    return _SPARSE_SIZE
