"""Symlinks on S3, GCS and Azure: the object ``NAME.rclonelink`` holding the target.

An object store has no symlinks. rclone's ``--links`` (``-l``) keeps one as an
object named after the link with :data:`SUFFIX` appended, its body the target's
bytes; ``rcp`` writes and reads the same, so either tool reads what the other wrote,
with the link's own metadata on the object (:mod:`~rcp_provider.fsspec.objectmeta`:
its mtime, mode ``120777``, owner with ``-p owner``).

- a listed object ``NAME.rclonelink`` is the symlink ``NAME``
  (:meth:`~rcp_provider.fsspec.storetree.Place.list`), never a file of that name:
  so a file whose name ends in :data:`SUFFIX` is not written to such a store (it
  would read back as a symlink: an entry error, :func:`refuse_file_name`);
- a link's target is read whole in one request (on S3 the ``GetObject`` that also
  carries its metadata) and checked as a target
  (:func:`rcp_core.names.check_link_target`: an object of more than
  :data:`~rcp_core.names.LINK_TARGET_MOST` bytes, or with a NUL, is no symlink's);
- a link is written in one request (:func:`objectmeta.put_object
  <rcp_provider.fsspec.objectmeta.put_object>`), so it appears whole.

Invariants: a link object's key is exactly the link's key with :data:`SUFFIX`
after it, so it sorts before the link's prefix namesake (``NAME/``: ``.`` is before
``/``), and a paged walk's window (:mod:`rcp_core.engine.portpages`) that reaches
``NAME/`` has read it.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from typing import Any

from rcp_core.backends.port import Entry, EntryKind
from rcp_core.errors import UnsafeNameError
from rcp_core.names import LINK_TARGET_MOST, check_link_target
from rcp_provider.fsspec import objectmeta, s3stream

SUFFIX = ".rclonelink"
"""What rclone appends to a symlink's name to name its object."""
KEPT_ON = frozenset(objectmeta.UPLOAD_KEYWORDS)
"""The fsspec protocols whose trees keep symlinks as these objects."""


def linked(name: str) -> str | None:
    """The symlink the object ``name`` (one component) stands for, if it is a
    link's object."""
    if name.endswith(SUFFIX) and len(name) > len(SUFFIX):
        return name[: -len(SUFFIX)]
    return None


def as_link(entry: Entry) -> Entry:
    """A link object's entry (a file, as listed) as the symlink's: its mode's type
    bits a link's; its checksum, where listed, is the MD5 of its target's bytes
    (what tells an unchanged link without reading it)."""
    mode = None if entry.mode is None else stat.S_IFLNK | stat.S_IMODE(entry.mode)
    return dataclasses.replace(entry, kind=EntryKind.SYMLINK, mode=mode)


def refuse_file_name(protocol: str, path: str) -> None:
    """Refuse to write a file at ``path`` whose name a link's object has.

    :raises OSError: ``EINVAL``, on a store that keeps links.
    """
    if protocol in KEPT_ON and linked(path.rsplit("/", 1)[-1]) is not None:
        raise OSError(
            errno.EINVAL,
            f"a file named '*{SUFFIX}' would read back as a symlink on this store",
        )


def read(fs: Any, protocol: str, path: str, entry: Entry) -> Entry:
    """The symlink at ``path`` (its object's key less :data:`SUFFIX`), as listed
    (``entry``), with its target, and on S3 the metadata its ``GetObject`` carries
    (a GCS or Azure listing gave it already).

    :raises OSError: the store's error, or ``EINVAL`` for an object that holds no
        symlink's target.
    """
    key = path + SUFFIX
    if entry.size > LINK_TARGET_MOST:
        raise OSError(errno.EINVAL, f"{entry.size} bytes: no symlink's target", key)
    if protocol in objectmeta.S3:
        with s3stream.get_object(fs, key) as (stream, metadata):
            body = stream.read(LINK_TARGET_MOST + 1)
        entry = objectmeta.applied(entry, objectmeta.decode(metadata))
    else:
        body = fs.cat_file(key)
    try:
        target = check_link_target(os.fsdecode(body))
    except UnsafeNameError as exc:
        raise OSError(
            errno.EINVAL, f"not a symlink's target: {exc.reason}", key
        ) from exc
    return dataclasses.replace(entry, target=target)


def write(fs: Any, protocol: str, path: str, link: Entry) -> None:
    """Make ``path`` the symlink ``link`` (its target, with its mode, mtime and
    owner where ``link`` has them), replacing the link there.

    :raises OSError: the store's error, or ``EINVAL`` for a target no symlink can
        have.
    """
    try:
        target = check_link_target(link.target)
    except UnsafeNameError as exc:
        raise OSError(errno.EINVAL, f"not a symlink's target: {exc.reason}") from exc
    mode = None if link.mode is None else stat.S_IFLNK | stat.S_IMODE(link.mode)
    kept = objectmeta.Kept(mode, link.mtime_ns, link.uid, link.gid)
    metadata = objectmeta.encode(kept, decimal=protocol in objectmeta.S3)
    bucket, key, _ = fs.split_path(path + SUFFIX)
    objectmeta.put_object(fs, protocol, bucket, key, os.fsencode(target), metadata)
