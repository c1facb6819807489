"""An fsspec info (what a store's listing or ``info`` gives of one path) as a backend
port's :class:`~rcp_core.backends.port.Entry`.

- the kind (a ``mode``'s where the filesystem gives one), size, mode, mtime
  (fsspec's float seconds, to the nanosecond), owner and a symlink's target where
  the info has them;
- the store's modification time (:func:`mtime_of`: an object's upload time, a
  service's ``mtime``), where its protocol gives one (:data:`TIMED`);
- on S3, GCS and Azure the mode and mtime an object's metadata kept
  (:mod:`~rcp_provider.fsspec.objectmeta`; an S3 listing carries none), and the MD5
  its store recorded of its bytes (:func:`checksum_of`: an S3 ETag, GCS's
  ``md5Hash``, Azure's ``Content-MD5``).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import stat
from typing import Any

from rcp_core.backends.checksums import StoreChecksum, of_etag
from rcp_core.backends.port import Entry, EntryKind
from rcp_provider.fsspec import objectmeta

TIMED = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "rcp"})
"""fsspec protocols whose listings say when each file last changed (what
:func:`mtime_of` reads: an object's upload time, a service's ``mtime``); elsewhere
(``memory://``, ...) a rule on ages is refused, never guessed."""


def _int(value: Any) -> int | None:
    """An info's integer field, if it is one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def entry_of(info: dict[str, Any]) -> Entry:
    """An fsspec info as a port's entry: its kind (a ``mode``'s where the
    filesystem gives one), size, mode, mtime (fsspec's float seconds, to the
    nanosecond), the store's modification time (:func:`mtime_of`), and the owner and
    a symlink's target where the info has them."""
    mode = _int(info.get("mode"))
    kind = EntryKind.DIRECTORY if info.get("type") == "directory" else EntryKind.FILE
    if info.get("type") == "other":
        kind = EntryKind.OTHER
    if mode is not None and stat.S_IFMT(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), EntryKind.OTHER)
    mtime = info.get("mtime")
    mtime_ns = None
    if isinstance(mtime, (int, float)) and not isinstance(mtime, bool):
        mtime_ns = round(mtime * 1e9)
    modified = mtime_of(info)
    modified_ns = round(modified * 1e9) if modified is not None else None
    target = info.get("destination") if info.get("islink") else None
    entry = Entry(
        kind,
        int(info.get("size") or 0),
        mode,
        mtime_ns,
        modified_ns,
        _int(info.get("uid")),
        _int(info.get("gid")),
        target if isinstance(target, str) else None,
        checksum=checksum_of(info) if kind is EntryKind.FILE else None,
    )
    metadata = info.get("metadata")
    if kind is EntryKind.FILE and isinstance(metadata, dict):
        entry = objectmeta.applied(entry, objectmeta.decode(metadata))
    return entry


_KINDS = {
    stat.S_IFDIR: EntryKind.DIRECTORY,
    stat.S_IFREG: EntryKind.FILE,
    stat.S_IFLNK: EntryKind.SYMLINK,
}


def mtime_of(info: dict[str, Any]) -> float | None:
    """An entry's modification time in seconds, if its filesystem gives one."""
    for key in ("mtime", "LastModified", "last_modified", "updated"):
        value = info.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
    return None


def checksum_of(info: dict[str, Any]) -> StoreChecksum | None:
    """The MD5 a store recorded of an object's bytes, as its info gives it: an S3
    ETag (:func:`~rcp_core.backends.checksums.of_etag`), GCS's base64
    ``md5Hash``, Azure's ``content_settings.content_md5``; ``None`` where it gives
    none (a GCS composite, an Azure blob uploaded in blocks, another store)."""
    if "ETag" in info:
        return of_etag(info["ETag"])
    recorded: Any = info.get("md5Hash")
    if isinstance(recorded, str):
        try:
            recorded = base64.b64decode(recorded, validate=True)
        except binascii.Error:
            return None
    else:
        settings = info.get("content_settings")  # a dict listed, the SDK's own stat'd
        recorded = (
            settings.get("content_md5")
            if isinstance(settings, dict)
            else getattr(settings, "content_md5", None)
        )
    if isinstance(recorded, (bytes, bytearray)) and len(recorded) == 16:
        return StoreChecksum(bytes(recorded))
    return None
