"""Generate file trees for tests and benchmarks: the engine behind ``rcp-filegen``.

Two shapes:

- :func:`generate_tree` is the rcp tools' ``filegen ROOT DIRWIDTH NUMFILES FILESIZE``:
  ``dir_width=(3, 2)`` makes ``dir0..dir2``, each holding ``dir0..dir1``; every leaf
  directory (every directory, ROOT included, with ``leaf_only=False``) gets
  ``file0..`` of ``file_size`` bytes each.
- :func:`generate_preset` makes a named benchmark fileset (:data:`PRESETS`):
  uniform ones (``1k``, ``1m``, ``100m``, ``1g``) and ``mixed``, a realistic tree with
  every kind of entry a copy must preserve (see :mod:`rcp_core.tools.filegen.mixed`).

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

Modules:

===========  ===========================================================================
``uniform``  DIRWIDTH trees, size parsing, the uniform presets
``mixed``    the ``mixed`` preset: every kind of entry a copy must preserve
``write``    ROOT and its directories, content, metadata, the pool
===========  ===========================================================================
"""

from __future__ import annotations

from rcp_core.sizes import parse_size
from rcp_core.tools.filegen.uniform import (
    PRESETS,
    generate_preset,
    generate_tree,
    parse_dir_width,
)
from rcp_core.tools.filegen.write import GenStats

__all__ = [
    "PRESETS",
    "GenStats",
    "generate_preset",
    "generate_tree",
    "parse_dir_width",
    "parse_size",
]
