"""What removing a directory of an fsspec store removes, decided before anything goes.

:func:`removal` lists the subtree once (``find``) and sorts it into the files to
remove, the directories to remove and the directories that stay. Invariants: a name
that is not safe (:mod:`rcp_core.names`) is never joined to a path nor removed, and
the directories holding it stay; an entry the engine protects stays, with
everything below it and the directories holding it.
"""

from __future__ import annotations

from typing import Any

from rcp_core.backends.port import Protect
from rcp_core.engine.tree import joined
from rcp_core.errors import UnsafeNameError
from rcp_core.names import check_relative


def relative(path: str, root: str) -> str | None:
    """``path`` relative to ``root``, as the filesystem names both (a store's root may
    be ``""``); ``None`` outside it."""
    root = root.rstrip("/")
    if not root:
        return path.lstrip("/")
    if path.rstrip("/") == root:
        return ""
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


def removal(
    fs: Any, path: str, rel: str, protect: Protect | None
) -> tuple[list[tuple[str, int]], list[str], set[str]]:
    """What removing the store directory ``path`` (at ``rel``) removes: its files
    (path, size) and directories (relative paths, ``rel`` itself included), and the
    directories that stay because they hold an entry ``protect`` claims or one whose
    name is not safe (never joined, never removed)."""
    files: list[tuple[str, int]] = []
    dirs: list[str] = [rel]
    kept: set[str] = set()
    protected: list[str] = []
    for listed, info in sorted(fs.find(path, withdirs=True, detail=True).items()):
        sub = relative(listed, path)
        if not sub:
            continue
        is_dir = info.get("type") == "directory" or sub.endswith("/")
        sub = sub.rstrip("/") if is_dir else sub
        try:
            entry_rel = joined(rel, check_relative(sub))
        except UnsafeNameError:
            kept.update(_holding(rel, sub))
            continue
        if any(entry_rel.startswith(p + "/") for p in protected) or (
            protect is not None and protect(entry_rel, is_dir)
        ):
            protected.append(entry_rel)
            kept.update(_holding(rel, sub))
            continue
        if is_dir:
            dirs.append(entry_rel)
        else:
            files.append((listed, int(info.get("size") or 0)))
    return files, dirs, kept


def _holding(rel: str, sub: str) -> set[str]:
    """``rel`` and the directories between it and its entry ``sub``."""
    found, current = {rel}, rel
    for part in sub.split("/")[:-1]:
        current = joined(current, part)
        found.add(current)
    return found
