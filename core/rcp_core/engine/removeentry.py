"""Removing destination entries: fd-relative, iterative, never following symlinks.

Used to replace an entry of the wrong type and by ``--delete``. A symlink is removed,
never its target; a directory is emptied depth-first with one open descriptor per level
(no recursion limit, no path longer than a name). Entries that ``protect`` claims (the
filters' excluded names under ``--delete``) are kept, and so are the directories that
still hold them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from rcp_core.engine.tree import DIR_FLAGS, joined
from rcp_core.run.summary import Tally

Protect = Callable[[str, bool], bool]
"""``protect(rel, is_dir)``: keep this entry; ``rel`` is relative to the parent of the
removed entry, like the paths the filters see."""


@dataclass(slots=True)
class _Level:
    parent_fd: int
    name: str
    rel: str
    fd: int = -1
    kept: set[str] = field(default_factory=set)


def count_removed(tally: Tally, st: os.stat_result) -> None:
    """Count one removed non-directory entry."""
    if stat.S_ISREG(st.st_mode):
        tally["removed.files"] += 1
        tally["removed.bytes"] += st.st_size
    elif stat.S_ISLNK(st.st_mode):
        tally["removed.symlinks"] += 1
    else:
        tally["removed.specials"] += 1


def remove_entry(
    dir_fd: int,
    name: str,
    st: os.stat_result,
    tally: Tally,
    *,
    rel: str = "",
    protect: Protect | None = None,
) -> bool:
    """Remove ``name`` in ``dir_fd`` (a whole tree if it is a directory).

    :param rel: ``name``'s path as ``protect`` sees it.
    :returns: ``True`` when the entry is gone, ``False`` when protected entries kept it.
    """
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        count_removed(tally, st)
        return True
    stack = [_Level(dir_fd, name, rel)]
    gone = True
    while stack:
        level = stack[-1]
        if level.fd < 0:
            level.fd = os.open(
                level.name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=level.parent_fd
            )
        child = _next_child(level, tally, protect)
        if child is not None:
            stack.append(child)
            continue
        os.close(level.fd)
        stack.pop()
        if level.kept:
            if stack:
                stack[-1].kept.add(level.name)
            else:
                gone = False
            continue
        os.rmdir(level.name, dir_fd=level.parent_fd)
        tally["removed.dirs"] += 1
    return gone


def _next_child(level: _Level, tally: Tally, protect: Protect | None) -> _Level | None:
    """Unlink the non-directories of ``level``; return the first subdirectory to empty."""
    with os.scandir(level.fd) as it:
        for entry in it:
            name = entry.name
            if name in level.kept:
                continue
            rel = joined(level.rel, name)
            is_dir = entry.is_dir(follow_symlinks=False)
            if protect is not None and protect(rel, is_dir):
                level.kept.add(name)
                continue
            if is_dir:
                return _Level(level.fd, name, rel)
            child = entry.stat(follow_symlinks=False)
            os.unlink(name, dir_fd=level.fd)
            count_removed(tally, child)
    return None
