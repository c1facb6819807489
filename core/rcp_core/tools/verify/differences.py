"""What a verification finds: the differences between two trees, and their sum.

The values :func:`rcp_core.tools.verify.compare.compare` returns, and the rule that decides
which attributes of two entries of the same type differ:

- equality is the one ``--overwrite`` uses (:mod:`rcp_core.engine.existing`): mtime to the
  nanosecond, permission bits (``S_IMODE``), uid and gid;
- size is compared for regular files only (a directory's size is the filesystem's
  business), mode for all but symlinks (Linux ignores a symlink's mode);
- uid and gid make one ``owner`` difference, so a path has at most one difference of
  each kind.

A :class:`Comparison` keeps at most :data:`MAX_KEPT` differences; its counts are
always complete.
"""

from __future__ import annotations

import enum
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcp_core.engine.existing import attr_equal
from rcp_core.settings import CompareAttr

MAX_KEPT = 1000
"""Differences a :class:`Comparison` keeps (the first found); the counts cover all."""

DEFAULT_ATTRS = frozenset({CompareAttr.SIZE, CompareAttr.MTIME, CompareAttr.MODE})

_ATTR_ORDER = (
    CompareAttr.SIZE,
    CompareAttr.MTIME,
    CompareAttr.MODE,
    CompareAttr.UID,
    CompareAttr.GID,
)

_TYPES = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "directory",
    stat.S_IFLNK: "symlink",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "char device",
    stat.S_IFBLK: "block device",
}


class DiffKind(enum.Enum):
    """What differs at one path."""

    MISSING = "missing"
    """In the source, not in the destination."""
    EXTRA = "extra"
    """In the destination only."""
    TYPE = "type"
    """Different types, or devices with different numbers."""
    SIZE = "size"
    MTIME = "mtime"
    MODE = "mode"
    OWNER = "owner"
    LINK = "link"
    """Symlinks with different targets."""
    CONTENT = "content"
    ERROR = "error"
    """The entry could not be read on one side, so it was not (fully) compared."""


Found = list[tuple[DiffKind, str]]
"""The differences of one path, as ``(kind, detail)``."""


@dataclass(frozen=True, slots=True)
class Difference:
    """One difference at ``path``: relative to the roots, POSIX, ``"."`` for the roots
    themselves (a name's non-UTF-8 bytes as surrogate escapes, like ``os.fsdecode``).

    ``detail`` is for humans, source side first: ``"size 10 != 12"``.
    """

    path: str
    kind: DiffKind
    detail: str

    def __str__(self) -> str:
        return f"{self.kind.value} {self.path}: {self.detail}"

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "kind": self.kind.value, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Comparison:
    """The result of a comparison.

    :param entries: paths examined, each once (a path on one side only counts; the
        subtree of a missing, extra or retyped directory is not entered).
    :param files_hashed: pairs of regular files whose contents were compared.
    :param bytes_hashed: bytes read and hashed, both sides together.
    :param counts: differences by kind, every kind present; complete.
    :param differences: the first :data:`MAX_KEPT` differences found, sorted by path.
    :param cancelled: the comparison stopped early; it is then never :attr:`same`.
    :param walltime: seconds it took.
    """

    entries: int
    files_hashed: int
    bytes_hashed: int
    counts: Mapping[DiffKind, int]
    differences: tuple[Difference, ...]
    cancelled: bool = False
    walltime: float = 0.0

    @property
    def total(self) -> int:
        """All differences found, also those not kept."""
        return sum(self.counts.values())

    @property
    def same(self) -> bool:
        """No difference of any kind (errors included), and not cancelled."""
        return not self.total and not self.cancelled

    @property
    def truncated(self) -> bool:
        """More differences were found than kept."""
        return self.total > len(self.differences)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what Airflow pushes to XCom)."""
        return {
            "same": self.same,
            "cancelled": self.cancelled,
            "entries": self.entries,
            "files_hashed": self.files_hashed,
            "bytes_hashed": self.bytes_hashed,
            "differences_total": self.total,
            "by_kind": {kind.value: self.counts.get(kind, 0) for kind in DiffKind},
            "differences": [d.as_dict() for d in self.differences],
            "truncated": self.truncated,
            "walltime_s": round(self.walltime, 6),
        }


def type_name(st: os.stat_result) -> str:
    """``"file"``, ``"directory"``, ... and a device's number: ``"char device 1:3"``."""
    name = _TYPES.get(stat.S_IFMT(st.st_mode), "entry")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return f"{name} {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    return name


def entry_type(entry: os.DirEntry[str]) -> str:
    """The type of a listed entry, from the listing's ``d_type`` where it tells."""
    try:
        if entry.is_symlink():
            return "symlink"
        if entry.is_dir(follow_symlinks=False):
            return "directory"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        return "entry"
    return "special file"


def same_type(a: os.stat_result, b: os.stat_result) -> bool:
    """Same file type, and for devices the same device number."""
    return stat.S_IFMT(a.st_mode) == stat.S_IFMT(b.st_mode) and a.st_rdev == b.st_rdev


def _ns(ns: int) -> str:
    return f"{ns // 10**9}.{ns % 10**9:09d}"


def attr_differences(
    attrs: frozenset[CompareAttr],
    a: os.stat_result,
    b: os.stat_result,
    mtime_within: int = 1,
) -> Found:
    """The attributes of ``attrs`` that apply to two entries of ``a``'s type and
    differ, as ``(kind, detail)`` in a fixed order (see the module docstring); two
    mtimes differ when they are ``mtime_within`` nanoseconds apart or more (a
    storage that gives them less exactly than to the nanosecond)."""
    fmt = stat.S_IFMT(a.st_mode)
    out: Found = []
    owner: list[str] = []
    for attr in _ATTR_ORDER:
        if attr not in attrs or attr_equal(attr, a, b):
            continue
        if attr is CompareAttr.SIZE:
            if fmt == stat.S_IFREG:
                out.append((DiffKind.SIZE, f"size {a.st_size} != {b.st_size}"))
        elif attr is CompareAttr.MTIME:
            if abs(a.st_mtime_ns - b.st_mtime_ns) >= mtime_within:
                detail = f"mtime {_ns(a.st_mtime_ns)} != {_ns(b.st_mtime_ns)}"
                out.append((DiffKind.MTIME, detail))
        elif attr is CompareAttr.MODE:
            if fmt != stat.S_IFLNK:
                modes = stat.S_IMODE(a.st_mode), stat.S_IMODE(b.st_mode)
                out.append((DiffKind.MODE, "mode {:04o} != {:04o}".format(*modes)))
        elif attr is CompareAttr.UID:
            owner.append(f"uid {a.st_uid} != {b.st_uid}")
        else:
            owner.append(f"gid {a.st_gid} != {b.st_gid}")
    if owner:
        out.append((DiffKind.OWNER, ", ".join(owner)))
    return out


def link_differences(a: str, b: str) -> Found:
    """The difference of two symlinks' targets, if they differ."""
    return [] if a == b else [(DiffKind.LINK, f"link {a!r} != {b!r}")]


def content_differs(size: int, segment: int, offset: int, length: int) -> str:
    """The detail of a ``content`` difference found in the bytes ``offset`` to
    ``offset + length`` of files of ``size`` bytes hashed per ``segment``: where,
    when the files have more than one."""
    where = f" in bytes {offset}-{offset + length - 1}" if size > segment else ""
    return "content differs" + where
