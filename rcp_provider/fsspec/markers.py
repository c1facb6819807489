"""Directory markers on S3, GCS and Azure: the empty object ``DIR/`` that stands for a
directory.

An object store has key prefixes, not directories: an empty directory has no key,
and a directory's mode and mtime have no object to be kept on. A copy to one of
these stores writes a marker for each directory it copies, the zero-byte object
``DIR/`` (what rclone's ``--*-directory-markers`` and the stores' consoles write),
carrying the directory's metadata (:mod:`rcp_provider.fsspec.objectmeta`). fsspec
names no key ending in ``/`` on every store, so each marker is made, read and
removed through its client's own call, one request each.

Invariants: a marker's key is exactly the directory's key with one ``/`` after it;
reading a missing marker is ``None``, removing one is a success.
"""

from __future__ import annotations

import dataclasses
import stat
from collections.abc import Mapping
from typing import Any

import fsspec.asyn

from rcp_provider.fsspec import azureblobs
from rcp_provider.fsspec.objectmeta import (
    GCS,
    S3,
    UPLOAD_KEYWORDS,
    Kept,
    decode,
    encode,
    put_object,
)

KEPT_ON = frozenset(UPLOAD_KEYWORDS)
"""The fsspec protocols whose directories get markers."""


def _key(fs: Any, path: str) -> tuple[str, str]:
    """The bucket (container) and the marker's key of the directory ``path``."""
    bucket, key, _ = fs.split_path(path)
    return bucket, key.rstrip("/") + "/"


def put(fs: Any, protocol: str, path: str, metadata: Mapping[str, str]) -> None:
    """Write the marker of the directory ``path`` with ``metadata`` (replacing
    one there)."""
    bucket, key = _key(fs, path)
    if protocol not in S3 | GCS:
        metadata = {**metadata, **azureblobs.DIRECTORY}
    put_object(fs, protocol, bucket, key, b"", metadata)


def keep(fs: Any, protocol: str, path: str, kept: Kept, *, new: bool = False) -> None:
    """Give the directory ``path`` a marker with ``kept`` (its permission bits,
    mtime and owner, each where given), unless its marker says the same already (an
    unchanged rerun reads it and writes nothing); a ``new`` directory (made by this
    run) has none to read."""
    mode = None if kept.mode is None else stat.S_IFDIR | stat.S_IMODE(kept.mode)
    marked = dataclasses.replace(kept, mode=mode)
    wanted = encode(marked, decimal=protocol in S3)
    there = None if new else read(fs, protocol, path)
    if there is None or decode(there) != decode(wanted):
        put(fs, protocol, path, wanted)


def read(fs: Any, protocol: str, path: str) -> dict[str, str] | None:
    """The metadata of the marker of the directory ``path``; ``None`` when there is
    no marker."""
    bucket, key = _key(fs, path)
    try:
        if protocol in S3:
            head = fs.call_s3("head_object", Bucket=bucket, Key=key)
            return dict(head.get("Metadata") or {})
        if protocol in GCS:
            found = fsspec.asyn.sync(
                fs.loop, fs._call, "GET", "b/{}/o/{}", bucket, key, json_out=True
            )
            return dict(found.get("metadata") or {})
        return azureblobs.metadata(fs, bucket, key)
    except FileNotFoundError:
        return None


def remove(fs: Any, protocol: str, path: str) -> None:
    """Remove the marker of the directory ``path``, if there is one."""
    bucket, key = _key(fs, path)
    if protocol in S3:
        fs.call_s3("delete_object", Bucket=bucket, Key=key)
        return
    try:
        if protocol in GCS:
            fsspec.asyn.sync(fs.loop, fs._call, "DELETE", "b/{}/o/{}", bucket, key)
        else:
            azureblobs.remove(fs, bucket, key)
    except FileNotFoundError:
        return
