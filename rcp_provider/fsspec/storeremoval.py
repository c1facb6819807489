"""What removing a directory of an fsspec store removes, decided before anything goes,
and S3 objects removed a thousand in a request.

:func:`removal` lists the subtree once (``find``) and sorts it into the files to
remove, the directories to remove and the directories that stay. Invariants: a name
that is not safe (:mod:`rcp_core.names`) is never joined to a path nor removed, and
the directories holding it stay; an entry the engine protects stays, with
everything below it and the directories holding it.

:func:`delete_s3_objects` removes up to :data:`S3_BATCH` objects of a bucket in one
``DeleteObjects`` request (its quiet form: only the failures are answered), where
s3fs's ``rm_file`` is a request per object; each key's failure is its own error.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
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


S3_BATCH = 1000
"""Keys one ``DeleteObjects`` request removes at most (the API's limit)."""


def delete_s3_objects(fs: Any, paths: Sequence[str]) -> dict[str, OSError]:
    """Remove the S3 objects ``paths`` (``bucket/key``, of one bucket, at most
    :data:`S3_BATCH`) in one request; what it could not remove, by path (an absent
    key is removed: S3 answers so for it).

    :raises OSError: the request failed (s3fs's translation of the store's error).
    """
    keys = {fs.split_path(path)[1]: path for path in paths}
    bucket = fs.split_path(paths[0])[0]
    objects = [{"Key": key} for key in keys]
    answer = fs.call_s3(
        "delete_objects", Bucket=bucket, Delete={"Objects": objects, "Quiet": True}
    )
    failed: dict[str, OSError] = {}
    for error in answer.get("Errors") or ():
        path = keys.get(error.get("Key", ""))
        if path is None:
            continue  # no key asked for: nothing of ours
        code = str(error.get("Code", ""))
        number = errno.EACCES if code == "AccessDenied" else errno.EIO
        failed[path] = OSError(number, f"{code}: {error.get('Message', '')}", path)
    return failed


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
