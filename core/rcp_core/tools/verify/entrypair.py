"""Comparing one path present on both sides: type, attributes, target, contents.

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

import os
import stat

from rcp_core.errors import EntryError
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import (
    DiffKind,
    attr_differences,
    same_type,
    type_name,
)
from rcp_core.tools.verify.hashing import Contents
from rcp_core.tools.verify.scope import Left

Found = list[tuple[DiffKind, str]]
"""The differences of one path, as ``(kind, detail)``."""


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
        left = self.scope.left(rel, a)
        if left is Left.ALONE:
            return False, []
        if not same_type(a, b):
            return False, [(DiffKind.TYPE, f"{type_name(a)} != {type_name(b)}")]
        found = attr_differences(self.attrs, a, b) if left is None else []
        if stat.S_ISDIR(a.st_mode):
            return True, found
        if stat.S_ISLNK(a.st_mode):
            targets = _targets(src_dir, dst_dir, src, dst, rel)
            if targets[0] != targets[1]:
                found.append((DiffKind.LINK, f"link {targets[0]!r} != {targets[1]!r}"))
        elif stat.S_ISREG(a.st_mode) and self.checksum:
            if a.st_size == b.st_size:
                detail = self.contents.compare(
                    src_dir, dst_dir, src, dst, rel, a.st_size
                )
                if detail is not None:
                    found.append((DiffKind.CONTENT, detail))
            elif CompareAttr.SIZE not in self.attrs:  # else reported as a size
                detail = f"content differs: size {a.st_size} != {b.st_size}"
                found.append((DiffKind.CONTENT, detail))
        return False, found
