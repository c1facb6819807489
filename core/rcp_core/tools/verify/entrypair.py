"""Comparing one path present on both sides: type, attributes, target, contents.

:func:`judge` is the rule every comparison follows for such a path (two local trees
here, two backend ports in :mod:`rcp_core.tools.verify.portcompare`);
:class:`EntryPair` applies it to two local trees.

Invariants:

- both sides are ``lstat``-ed, relative to their open parent directory (the roots by
  path): nothing is followed; a destination entry gone since its listing is
  ``missing``;
- a path has at most one difference of each kind, and a type difference is the only
  one (nothing else of two different types is compared); an entry the copy's policy
  left alone (:attr:`~rcp_core.tools.verify.scope.Left.ALONE`) is not compared, nor anything
  below it; a directory it merged into keeping its attributes
  (:attr:`~rcp_core.tools.verify.scope.Left.METADATA`) has only its entries compared;
- one path's comparison is one unit of the run, as one entry's copy is one try of
  the copy: its ``lstat``-s, ``readlink``-s and contents
  (:mod:`rcp_core.tools.verify.hashing`) are tried again together on a transient error
  (:meth:`~rcp_core.tools.verify.comparerun.ComparisonRun.again`), so a try again sees the
  entry as it is then, and a file opened again (after ESTALE only a new open reads
  again). The unit reports nothing: it returns its differences, which the caller
  reports once it succeeded, so none is lost or reported twice. A try per entry, not
  per system call: it costs nothing until something fails.
"""

from __future__ import annotations

import enum
import os
import stat

from rcp_core.errors import EntryError
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import (
    DiffKind,
    Found,
    attr_differences,
    link_differences,
    same_type,
    type_name,
)
from rcp_core.tools.verify.hashing import Contents
from rcp_core.tools.verify.scope import Left, Scope


def _targets(
    src_dir: int | None, dst_dir: int | None, src: str, dst: str, rel: str
) -> tuple[str, str]:
    """Both symlinks' targets."""
    targets: list[str] = []
    for side, dir_fd, name in (("source", src_dir, src), ("destination", dst_dir, dst)):
        try:
            targets.append(os.readlink(name, dir_fd=dir_fd))
        except OSError as exc:
            raise EntryError(f"readlink {side}", rel, exc) from exc
    return targets[0], targets[1]


class Next(enum.Enum):
    """What a path present on both sides still needs once :func:`judge` has
    compared what their metadata says."""

    NOTHING = "nothing"
    ENTER = "enter"
    """Both directories: their entries are compared next."""
    TARGETS = "targets"
    """Both symlinks: their targets are compared."""
    CONTENTS = "contents"
    """Regular files of equal size, with ``checksum``: their contents are compared."""


_NOTHING = Next.NOTHING


def judge(
    scope: Scope,
    attrs: frozenset[CompareAttr],
    checksum: bool,
    rel: str,
    a: os.stat_result,
    b: os.stat_result,
    mtime_within: int = 1,
) -> tuple[Next, Found]:
    """The rule for one path on both sides, every comparison's (two local trees',
    two ports'): what else it needs, and the differences of their metadata (see the
    module's invariants; ``attrs``: those compared, ``mtime_within``: as
    :func:`~rcp_core.tools.verify.differences.attr_differences` takes it)."""
    left = scope.left(rel, a)
    if left is Left.ALONE:
        return Next.NOTHING, []
    if not same_type(a, b):
        return Next.NOTHING, [(DiffKind.TYPE, f"{type_name(a)} != {type_name(b)}")]
    found = attr_differences(attrs, a, b, mtime_within) if left is None else []
    mode = a.st_mode
    if stat.S_ISDIR(mode):
        return Next.ENTER, found
    if stat.S_ISLNK(mode):
        return Next.TARGETS, found
    if stat.S_ISREG(mode) and checksum:
        if a.st_size == b.st_size:
            return Next.CONTENTS, found
        if CompareAttr.SIZE not in attrs:  # else reported as a size
            detail = f"content differs: size {a.st_size} != {b.st_size}"
            found.append((DiffKind.CONTENT, detail))
    return _NOTHING, found


class EntryPair:
    """Compares the paths of one comparison run present on both sides."""

    def __init__(self, run: ComparisonRun, contents: Contents) -> None:
        self.scope = run.scope
        self.attrs = run.attrs
        self.checksum = run.checksum
        self.contents = contents

    def examine(
        self, src_dir: int | None, dst_dir: int | None, src: str, dst: str, rel: str
    ) -> tuple[bool, Found]:
        """The unit: compare one path present on both sides; whether both are
        directories (whose entries the caller compares next), and the differences.

        :raises EntryError: a side could not be read.
        """
        try:
            a = os.stat(src, dir_fd=src_dir, follow_symlinks=False)
        except OSError as exc:
            raise EntryError("lstat source", rel, exc) from exc
        try:
            b = os.stat(dst, dir_fd=dst_dir, follow_symlinks=False)
        except FileNotFoundError:
            return False, [(DiffKind.MISSING, f"{type_name(a)} missing in destination")]
        except OSError as exc:
            raise EntryError("lstat destination", rel, exc) from exc
        step, found = judge(self.scope, self.attrs, self.checksum, rel, a, b)
        if step is _NOTHING:  # the hot path: a module constant, not an enum lookup
            return False, found
        if step is Next.ENTER:
            return True, found
        if step is Next.TARGETS:
            found += link_differences(*_targets(src_dir, dst_dir, src, dst, rel))
        elif step is Next.CONTENTS:
            detail = self.contents.compare(src_dir, dst_dir, src, dst, rel, a.st_size)
            if detail is not None:
                found.append((DiffKind.CONTENT, detail))
        return False, found
