"""A service's file requests on the wire: their limits, entries and failures.

Shared by the service (:mod:`rcp_core.remote.filerequests`) and its client
(:mod:`rcp_core.remote.client`); the requests are documented in
``docs/remote_protocol.md`` ("File requests", version 1.7).

Limits, which the service enforces and the client keeps to by splitting its work:

- ``read`` answers at most :data:`MAX_READ` bytes, and a ``write`` carries at most
  :data:`MAX_WRITE`; a ``digest`` (1.8) hashes at most :data:`MAX_DIGEST` bytes;
- a ``listdir`` answer holds at most :data:`MAX_ENTRIES` entries whose JSON is at most
  :data:`MAX_LIST_BYTES` (a name escapes to at most 1.5 KB and a link target to 25 KB,
  so an answer stays far below the frame limit of :mod:`rcp_core.remote.wire`); the
  rest of a directory follows a ``cursor``;
- a connection has at most :data:`MAX_WRITERS` files open for writing and
  :data:`MAX_LISTINGS` listings in progress;
- a path is at most :data:`MAX_PATH` bytes.

An entry is the metadata of :mod:`rcp_core.remote.meta` (``lstat``: the type is in
``mode``) with its ``name``, the device it is on (``dev``, protocol 1.12: a client
tells a mount point by it; an older client ignores it, an older service sends none)
and, for a symlink, its ``target``. A request that fails
with an OS error is answered ``failed`` with the errno's *name* (hosts number errnos
differently) and the client raises the matching :class:`RemoteFileError` subclass.

A request's fields are read as their wire form requires (``request_path``, ...): a
malformed one is a :class:`~rcp_core.errors.ProtocolError`, a path beyond
:data:`MAX_PATH` a :class:`~rcp_core.errors.UsageError`.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import Any, Literal

from rcp_core.backends.port import DIGEST_RANGE
from rcp_core.errors import (
    ProtocolError,
    RemoteFileError,
    UsageError,
    remote_file_error,
)
from rcp_core.remote.meta import meta_of, stat_of
from rcp_core.remote.receivedtree import check_name

MAX_READ = 4 << 20
MAX_WRITE = 4 << 20
MAX_DIGEST = DIGEST_RANGE
"""Bytes one ``digest`` hashes at most: about a quarter second of BLAKE3 on one core,
well within an answer's timeout (what a backend port's digest is asked for at once)."""
MAX_ENTRIES = 1000
MAX_LIST_BYTES = 1 << 20
MAX_WRITERS = 16
MAX_LISTINGS = 8
MAX_PATH = 4096

REQUESTS = frozenset(
    {
        "stat",
        "listdir",
        "read",
        "create",
        "write",
        "commit",
        "abort",
        "mkdir",
        "remove",
        "rename",
        "digest",
        "setmeta",
        "symlink",
    }
)
"""The file requests (version 1.7; ``digest`` 1.8, ``setmeta`` 1.17, ``symlink``
1.18); ``write`` is a ``CHUNK`` frame, the rest ``CONTROL``."""

EntryKind = Literal["file", "directory", "symlink", "other"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry as a service saw it.

    :param name: its name: the last component of the path asked about, or a name in
        the directory listed.
    :param stat: its ``lstat`` (its ``stat`` when a symlink was followed), rebuilt by
        :func:`rcp_core.remote.meta.stat_of`: inode and device are zero, and ``ctime``
        is the ``mtime``.
    :param target: a symlink's target as ``readlink`` gives it; ``None`` otherwise.
    :param dev: the device it is on (``st_dev`` on the service's host, where
        :attr:`stat` has zero); ``None`` from a service older than 1.12.
    """

    name: str
    stat: os.stat_result
    target: str | None = None
    dev: int | None = None

    @property
    def kind(self) -> EntryKind:
        mode = self.stat.st_mode
        if stat.S_ISREG(mode):
            return "file"
        if stat.S_ISDIR(mode):
            return "directory"
        if stat.S_ISLNK(mode):
            return "symlink"
        return "other"


def entry_to_wire(name: str, st: os.stat_result, target: str | None) -> dict[str, Any]:
    """The wire form of an entry (``target`` only for a symlink)."""
    entry: dict[str, Any] = {"name": name, "meta": meta_of(st), "dev": st.st_dev}
    if target is not None:
        entry["target"] = target
    return entry


def entry_from_wire(value: Any) -> Entry:
    """An :class:`Entry` from its wire form; :class:`ProtocolError` if malformed."""
    if not isinstance(value, dict):
        raise ProtocolError(f"an entry is a {type(value).__name__}, not an object")
    name, target = check_name(value.get("name")), value.get("target")
    st = stat_of(value.get("meta"))
    if stat.S_ISLNK(st.st_mode) != isinstance(target, str):
        raise ProtocolError(f"entry {name!r}: a target belongs to symlinks only")
    dev = value.get("dev")
    if dev is not None and (
        not isinstance(dev, int) or isinstance(dev, bool) or not 0 <= dev < 2**64
    ):
        raise ProtocolError(f"entry {name!r}: bad dev {dev!r}")
    return Entry(name, st, target, dev)


def failed(exc: OSError) -> dict[str, Any]:
    """The ``failed`` answer to a request that ``exc`` ended."""
    code = exc.errno if exc.errno is not None else errno.EIO
    return {
        "type": "failed",
        "errno": errno.errorcode.get(code, "EIO"),
        "reason": exc.strerror or os.strerror(code),
    }


def failure(answer: dict[str, Any], peer: str, path: str | None) -> RemoteFileError:
    """The error a ``failed`` answer stands for, with this host's errno of that name
    (``EIO`` for a name this host does not know)."""
    name, reason = answer.get("errno"), answer.get("reason")
    code = getattr(errno, name, errno.EIO) if isinstance(name, str) else errno.EIO
    if not isinstance(code, int):
        code = errno.EIO
    return remote_file_error(code, f"{reason or os.strerror(code)} (on {peer})", path)


def request_path(request: dict[str, Any], field: str = "path") -> str:
    path = request.get(field)
    if not isinstance(path, str):
        raise ProtocolError(f"{request['type']}: {field} must be a string")
    try:
        size = len(os.fsencode(path))
    except UnicodeEncodeError:
        raise ProtocolError(f"{request['type']}: {field} is not a POSIX name") from None
    if size > MAX_PATH:
        raise UsageError(f"{request['type']}: a path longer than {MAX_PATH} bytes")
    return path


def request_name(request: dict[str, Any], field: str = "path") -> str:
    """A path that names an entry to change: a trailing ``/`` is dropped."""
    return request_path(request, field).rstrip("/") or "/"


def request_flag(request: dict[str, Any], field: str) -> bool:
    value = request.get(field, False)
    if not isinstance(value, bool):
        raise ProtocolError(f"{request['type']}: {field} must be true or false")
    return value


def request_count(request: dict[str, Any], field: str) -> int:
    """A byte count or offset: ``0 <= value < 2**63``, as files have."""
    value = request.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise ProtocolError(f"{request['type']}: {field} must be an offset or size")
    return value


def request_time(request: dict[str, Any], field: str) -> int | None:
    """Nanoseconds since the epoch (before it too: ``-2**63 <= value < 2**63``), or
    ``None`` when not given."""
    value = request.get(field)
    if value is not None and (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not -(2**63) <= value < 2**63
    ):
        raise ProtocolError(f"{request['type']}: {field} must be nanoseconds")
    return value


def request_id(request: dict[str, Any], field: str) -> int | None:
    """An owner or group id (``0 <= value < 2**32 - 1``), or ``None`` when not
    given."""
    value = request.get(field)
    if value is not None and (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not 0 <= value < 2**32 - 1
    ):
        raise ProtocolError(f"{request['type']}: {field} must be an id")
    return value


def request_mode(request: dict[str, Any]) -> int | None:
    """Permission bits (``0o777`` at most: a client never makes setuid files), or
    ``None`` when not given."""
    value = request.get("mode")
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or value & ~0o777
    ):
        raise ProtocolError(f"{request['type']}: mode must be permission bits")
    return value
