"""Deciding what happens to a destination entry that already exists.

The decision is made from ``lstat`` results before anything is changed (plan, then
mutate): an unreadable source never costs the user an existing file, because the
replacement is written under a temporary name first and renamed over the old entry
only when complete.

- ``overwrite``: identical under the compare attributes -> unchanged; else replace.
- ``update``: like overwrite, but a destination at least as new (mtime) is kept.
- ``ignore-existing``: always kept.
- An existing directory where a directory goes is always reused (merged into).
- An entry of the wrong type (a file where a directory goes, ...) is replaced under
  overwrite and update, kept under ignore-existing.
"""

from __future__ import annotations

import enum
import os
import stat

from rcp_core.settings import CompareAttr, ExistingPolicy

COMPARE_CHUNK = 1 << 20
NEW = "new"
"""The reason for creating an entry the destination does not have (dry runs say it,
local and remote alike)."""


class Action(enum.Enum):
    """The outcome for one existing destination entry."""

    REPLACE = "replace"
    REUSE = "reuse"
    """Directories: merge into the existing directory."""
    UNCHANGED = "unchanged"
    KEEP = "keep"
    """Left alone by policy (ignore-existing, or update with a newer destination)."""


def _same_type(src: os.stat_result, dst: os.stat_result) -> bool:
    return stat.S_IFMT(src.st_mode) == stat.S_IFMT(dst.st_mode)


def decide(
    policy: ExistingPolicy,
    compare: frozenset[CompareAttr],
    src: os.stat_result,
    dst: os.stat_result,
) -> tuple[Action, str]:
    """Decide for an existing ``dst`` from metadata alone.

    Content comparison (``checksum``) is the caller's job after a metadata match:
    :func:`decide` answers ``UNCHANGED`` with reason ``"checksum"`` to ask for it.

    :returns: the action and a short reason for dry-run explanations.
    """
    if stat.S_ISDIR(src.st_mode) and stat.S_ISDIR(dst.st_mode):
        return Action.REUSE, "directory exists"
    if policy is ExistingPolicy.IGNORE_EXISTING:
        return Action.KEEP, "destination exists (ignore-existing)"
    if not _same_type(src, dst):
        if policy is ExistingPolicy.UPDATE and dst.st_mtime_ns >= src.st_mtime_ns:
            return Action.KEEP, "destination is not older (update)"
        return Action.REPLACE, "destination has another type"
    if policy is ExistingPolicy.UPDATE and dst.st_mtime_ns >= src.st_mtime_ns:
        return Action.KEEP, "destination is not older (update)"
    if stat.S_ISLNK(src.st_mode):
        return Action.REPLACE, "exists"  # the caller compares link targets
    if not stat.S_ISREG(src.st_mode):
        if src.st_rdev != dst.st_rdev:
            return Action.REPLACE, "device number differs"
        return Action.UNCHANGED, "same special file"
    for attr in compare:
        if not attr_equal(attr, src, dst):
            return Action.REPLACE, f"{attr.value} differs"
    if CompareAttr.CHECKSUM in compare:
        return Action.UNCHANGED, "checksum"
    return Action.UNCHANGED, "identical " + ",".join(sorted(a.value for a in compare))


def attrs_equal(
    attrs: frozenset[CompareAttr], src: os.stat_result, dst: os.stat_result
) -> bool:
    """Whether ``src`` and ``dst`` agree on every one of ``attrs``."""
    return all(attr_equal(attr, src, dst) for attr in attrs)


def attr_equal(attr: CompareAttr, src: os.stat_result, dst: os.stat_result) -> bool:
    if attr is CompareAttr.SIZE or attr is CompareAttr.CHECKSUM:
        return src.st_size == dst.st_size
    if attr is CompareAttr.MTIME:
        return src.st_mtime_ns == dst.st_mtime_ns
    if attr is CompareAttr.MODE:
        return stat.S_IMODE(src.st_mode) == stat.S_IMODE(dst.st_mode)
    if attr is CompareAttr.UID:
        return src.st_uid == dst.st_uid
    if attr is CompareAttr.GID:
        return src.st_gid == dst.st_gid
    return src.st_ctime_ns == dst.st_ctime_ns


def same_content(src_fd: int, dst_dir_fd: int, name: str, size: int) -> bool:
    """Compare the first ``size`` bytes of ``src_fd`` with the file ``name``."""
    dst_fd = os.open(
        name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dst_dir_fd
    )
    try:
        offset = 0
        while offset < size:
            want = min(COMPARE_CHUNK, size - offset)
            a = os.pread(src_fd, want, offset)
            if not a or a != os.pread(dst_fd, want, offset):
                return False
            offset += len(a)
        return True
    finally:
        os.close(dst_fd)
