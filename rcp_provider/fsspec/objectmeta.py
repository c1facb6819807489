"""The POSIX metadata ``rcp`` keeps in an object store's user metadata.

An object has no mode, settable modification time nor owner of its own, so a copy
to S3, GCS or Azure Blob writes them as user metadata on the upload itself (no
second request), under the keys rclone writes (its ``--metadata``), in the forms it
writes, so either tool reads what the other wrote:

========= ======================================= ==========================================
key       written as                              read as
========= ======================================= ==========================================
``mtime`` S3: decimal seconds, 9 fraction digits  either form, to the nanosecond (integer
          (``1700000000.123456789``); GCS and     arithmetic, never a float); GCS's
          Azure: RFC 3339 UTC with nanoseconds    ``goog-reserved-file-mtime`` (gsutil,
          (``2023-11-14T22:13:20.123456789Z``)    whole seconds) where ``mtime`` is absent
``mode``  octal with the type bits (``100644``)   the same; the permission bits are kept
``uid``   decimal (``1000``), with ``-p owner``   the same (``0`` to ``2**32 - 2``)
``gid``   decimal (``1000``), with ``-p owner``   the same
========= ======================================= ==========================================

S3 gives user metadata back with each key as ``x-amz-meta-KEY`` (lowercase), GCS in
the object resource's ``metadata``, Azure in the blob's ``metadata`` (its names must
be C# identifiers: these are). A value that does not parse is ignored (the object is
then as if it had none): metadata comes from outside and is never trusted further.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcp_core.backends.port import Entry, EntryKind
from rcp_provider.fsspec import azureblobs

MTIME, MODE, UID, GID = "mtime", "mode", "uid", "gid"
GSUTIL_MTIME = "goog-reserved-file-mtime"
"""gsutil's key (``gsutil -P``): whole seconds since the epoch."""

S3 = frozenset({"s3", "s3a"})
"""S3's fsspec protocols: its listings carry no user metadata."""
GCS = frozenset({"gs", "gcs"})
AZURE = frozenset({"az", "abfs", "abfss"})
"""Azure Blob's: adlfs's ``put_file`` sets metadata of its own."""
UPLOAD_KEYWORDS: dict[str, tuple[str, bool]] = {
    **dict.fromkeys(S3, ("Metadata", True)),
    **dict.fromkeys(GCS | AZURE, ("metadata", False)),
}
"""fsspec protocols whose objects keep this metadata: the keyword its client's
``open`` and ``put_file`` take it by, and whether the mtime is written as decimal
seconds."""

_DECIMAL = re.compile(r"(-?\d{1,12})(?:\.(\d{1,9}))?")
_RFC3339 = re.compile(
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", re.ASCII
)
_OCTAL = re.compile(r"[0-7]{1,7}")
_ID = re.compile(r"\d{1,10}")
_ID_MOST = 2**32 - 2
"""The largest owner id (``2**32 - 1`` is ``chown``'s "leave it")."""
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class Kept:
    """What an object's metadata says of the file it was made from: its permission
    bits (:func:`encode` writes the type bits too; :func:`decode` keeps only these),
    modification time and owner, each ``None`` where it says nothing."""

    mode: int | None = None
    mtime_ns: int | None = None
    uid: int | None = None
    gid: int | None = None


def encode(kept: Kept, *, decimal: bool) -> dict[str, str]:
    """``kept`` as user metadata: the mtime as decimal seconds (``decimal``: S3's
    form) or RFC 3339 (GCS's and Azure's); nothing for what is ``None``."""
    metadata: dict[str, str] = {}
    if kept.mtime_ns is not None:
        metadata[MTIME] = (
            _decimal(kept.mtime_ns) if decimal else _rfc3339(kept.mtime_ns)
        )
    if kept.mode is not None:
        metadata[MODE] = format(kept.mode, "o")
    if kept.uid is not None:
        metadata[UID] = str(kept.uid)
    if kept.gid is not None:
        metadata[GID] = str(kept.gid)
    return metadata


def decode(metadata: Mapping[str, object]) -> Kept:
    """What user metadata (any store's, keys in any case) says; a value that does
    not parse says nothing."""
    lowered = {str(k).lower(): v for k, v in metadata.items() if isinstance(v, str)}
    mtime_ns = _parse_time(lowered.get(MTIME))
    if mtime_ns is None:
        mtime_ns = _parse_whole_seconds(lowered.get(GSUTIL_MTIME))
    return Kept(
        _parse_mode(lowered.get(MODE)),
        mtime_ns,
        _parse_id(lowered.get(UID)),
        _parse_id(lowered.get(GID)),
    )


def upload_options(protocol: str, kept: Kept) -> dict[str, Any]:
    """The keyword argument that uploads ``kept`` as an object's metadata with a
    client of ``protocol`` (:data:`UPLOAD_KEYWORDS`); none on another store."""
    found = UPLOAD_KEYWORDS.get(protocol)
    if found is None:
        return {}
    keyword, decimal = found
    metadata = encode(kept, decimal=decimal)
    return {keyword: metadata} if metadata else {}


def applied(entry: Entry, kept: Kept) -> Entry:
    """The object ``entry`` (a file, a directory by its marker, a symlink by its
    object) with the mode, mtime and owner its metadata kept, where it kept
    them (the type bits its kind's)."""
    kind = _TYPE_BITS.get(entry.kind, stat.S_IFREG)
    return dataclasses.replace(
        entry,
        mode=entry.mode if kept.mode is None else kind | kept.mode,
        mtime_ns=entry.mtime_ns if kept.mtime_ns is None else kept.mtime_ns,
        uid=entry.uid if kept.uid is None else kept.uid,
        gid=entry.gid if kept.gid is None else kept.gid,
    )


_TYPE_BITS = {EntryKind.DIRECTORY: stat.S_IFDIR, EntryKind.SYMLINK: stat.S_IFLNK}


def put_object(
    fs: Any,
    protocol: str,
    bucket: str,
    key: str,
    body: bytes,
    metadata: Mapping[str, str],
) -> None:
    """The object ``key`` (any key: one ending in ``/`` too, which fsspec names on
    no store) in ``bucket`` made ``body`` with the user ``metadata``, in one
    request through the client's own call (replacing one there): a directory's
    marker, a symlink's object. On a store of :data:`UPLOAD_KEYWORDS`."""
    if protocol in S3:
        fs.call_s3(
            "put_object", Bucket=bucket, Key=key, Body=body, Metadata=dict(metadata)
        )
    elif protocol in GCS:
        fs.pipe_file(f"{bucket}/{key}", body, metadata=dict(metadata))
    else:
        azureblobs.put(fs, bucket, key, body, dict(metadata))


def _decimal(ns: int) -> str:
    """Sign and magnitude (``-1.500000000``), as it is read back."""
    seconds, fraction = divmod(abs(ns), 10**9)
    return f"{'-' if ns < 0 else ''}{seconds}.{fraction:09d}"


def _rfc3339(ns: int) -> str:
    seconds, fraction = divmod(ns, 10**9)
    when = _EPOCH + datetime.timedelta(seconds=seconds)
    return f"{when:%Y-%m-%dT%H:%M:%S}.{fraction:09d}Z"


def _parse_time(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    decimal = _DECIMAL.fullmatch(value)
    if decimal is not None:
        whole, fraction = decimal.groups()
        ns = int((fraction or "").ljust(9, "0"))
        return int(whole) * 10**9 + (-ns if whole.startswith("-") else ns)
    dated = _RFC3339.fullmatch(value)
    if dated is None:
        return None
    base, fraction, zone = dated.groups()
    try:
        when = datetime.datetime.fromisoformat(
            base + ("+00:00" if zone == "Z" else zone)
        )
    except ValueError:
        return None
    seconds = (when - _EPOCH) // datetime.timedelta(seconds=1)
    return seconds * 10**9 + int((fraction or "").ljust(9, "0"))


def _parse_whole_seconds(value: str | None) -> int | None:
    if value is None or not value.strip().isdigit():
        return None
    return int(value.strip()) * 10**9


def _parse_id(value: str | None) -> int | None:
    if value is None or _ID.fullmatch(value.strip()) is None:
        return None
    found = int(value.strip())
    return found if found <= _ID_MOST else None


def _parse_mode(value: str | None) -> int | None:
    """Its permission bits (the type bits are the object's kind's, not a value's)."""
    if value is None or _OCTAL.fullmatch(value.strip()) is None:
        return None
    return stat.S_IMODE(int(value.strip(), 8))
