"""A service's file requests: look at, read and change single entries beneath its roots.

What a filesystem layer (``rcp://host/path`` in fsspec) needs besides copy jobs:
``stat``, ``listdir``, ``read``, ``digest``, ``create``/``write``/``commit``/``abort``,
``mkdir``, ``remove``, ``rename``, ``setmeta`` and ``symlink``
(``docs/remote_protocol.md``, "File
requests"; limits and the wire form of entries in :mod:`rcp_core.remote.filewire`, a
file being written in :mod:`rcp_core.remote.upload`).

Invariants:

- every path is confined by :class:`rcp_core.remote.roots.Roots` as a copy job's
  operands are: what reads (``stat``, ``listdir``, ``read``, ``digest``) as a source,
  what changes as a destination (never a root itself), but for ``setmeta``, which
  changes only an entry's own mode and times, a root's too (named as a source). No
  symlink is followed on the way (the walk refuses it) nor at the end
  (``O_NOFOLLOW``, ``lstat``), except by ``stat`` with ``follow``, which reads the
  link's target as a path and confines it again, so a link never leads out of the
  roots either;
- ``read`` and ``digest`` open only regular files: the entry is checked through an
  ``O_PATH`` descriptor and reopened through it, so a device or FIFO swapped in is
  never opened;
- answers are bounded (:mod:`rcp_core.remote.filewire`): a large directory is listed
  in pages that follow a cursor, a read answers a bounded range;
- what a connection holds (files being written, listings in progress) is bounded per
  connection and released by :meth:`FileSession.close` when it ends: an unfinished
  write is removed, never left under its name;
- a change sent with a ``key`` is answered once and remembered (:class:`Answers`,
  shared by the service's connections): a client that lost the answer and sends it
  again on a new connection gets the same answer instead of a second change.

A request that cannot be served (outside the roots, a symlink on the way, beyond a
limit) is answered ``refused``; one that fails with an OS error ``failed`` with its
errno; a malformed one is a :class:`ProtocolError` and ends the connection.
"""

from __future__ import annotations

import collections
import errno
import itertools
import logging
import os
import stat
import threading
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from rcp_core.errors import PathRefusedError, ProtocolError, UnsafeNameError, UsageError
from rcp_core.names import check_link_target
from rcp_core.remote.entryfds import (
    make_own_symlink,
    open_regular,
    pread_all,
    set_own_meta,
)
from rcp_core.remote.filewire import (
    MAX_DIGEST,
    MAX_LISTINGS,
    MAX_READ,
    MAX_WRITE,
    MAX_WRITERS,
    entry_to_wire,
    failed,
    request_count,
    request_flag,
    request_id,
    request_mode,
    request_name,
    request_path,
    request_time,
)
from rcp_core.remote.listing import Listing
from rcp_core.remote.roots import Roots, link_target, walk_errno
from rcp_core.remote.upload import Upload
from rcp_core.remote.wire import FrameKind
from rcp_core.tools.verify.digests import at_offset, blake3_of

log = logging.getLogger("rcp_core")

MAX_LINKS = 40
"""Symlinks ``stat`` follows before it fails with ELOOP, as Linux does."""
MAX_KEYS = 4096
"""Keyed answers a service remembers."""
DIGEST_READ = 1 << 20
"""Bytes a ``digest`` reads at a time."""
_KEYED = frozenset({"mkdir", "remove", "rename", "setmeta", "symlink"})


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: a ``CONTROL`` frame, or a ``CHUNK`` with data (``read``)."""

    header: dict[str, Any]
    kind: FrameKind = FrameKind.CONTROL
    data: bytes = b""


class Answers:
    """The answers to the latest keyed changes (at most :data:`MAX_KEYS`), for all
    connections of a service."""

    def __init__(self) -> None:
        self._answers: collections.OrderedDict[str, dict[str, Any]] = (
            collections.OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._answers.get(key)

    def put(self, key: str, answer: dict[str, Any]) -> None:
        with self._lock:
            self._answers[key] = answer
            while len(self._answers) > MAX_KEYS:
                self._answers.popitem(last=False)


class FileSession:
    """The file requests of one connection and what they hold open.

    :param roots: the service's roots.
    :param answers: the service's remembered answers to keyed changes.
    """

    def __init__(self, roots: Roots, answers: Answers) -> None:
        self.roots = roots
        self.answers = answers
        self._uploads: dict[int, Upload] = {}
        self._listings: collections.OrderedDict[int, Listing] = (
            collections.OrderedDict()
        )
        self._ids = itertools.count(1)

    def answer(
        self, kind: FrameKind, request: dict[str, Any], data: memoryview
    ) -> Reply:
        """The answer to one file request (``request["type"]`` is one of
        :data:`rcp_core.remote.filewire.REQUESTS`)."""
        type_ = request["type"]
        if kind is not (FrameKind.CHUNK if type_ == "write" else FrameKind.CONTROL):
            raise ProtocolError(f"{type_} in a {kind.name} frame")
        key = request.get("key") if type_ in _KEYED else None
        if key is not None:
            if not isinstance(key, str) or not 16 <= len(key) <= 128:
                raise ProtocolError(f"{type_}: key must be a string of 16-128")
            known = self.answers.get(key)
            if known is not None:
                return Reply(known)
        reply = self._answer(type_, request, data)
        if key is not None:
            self.answers.put(key, reply.header)
        return reply

    def close(self) -> None:
        """Remove the files still being written; end the listings."""
        held: list[Upload | Listing] = [*self._uploads.values()]
        held.extend(self._listings.values())
        self._uploads.clear()
        self._listings.clear()
        for item in held:
            try:
                item.close()
            except OSError as exc:  # the others are still released
                log.warning("releasing a file request's state: %s", exc)

    def _answer(self, type_: str, request: dict[str, Any], data: memoryview) -> Reply:
        try:
            return self._serve(type_, request, data)
        except PathRefusedError as exc:
            code = walk_errno(exc)
            if code is None:
                return _refused(str(exc))
            return Reply(failed(OSError(code, os.strerror(code))))
        except UsageError as exc:
            return _refused(str(exc))
        except OSError as exc:
            return Reply(failed(exc))

    def _serve(self, type_: str, request: dict[str, Any], data: memoryview) -> Reply:
        done = Reply({"type": "done"})
        match type_:
            case "stat":
                return self._stat(
                    request_path(request), request_flag(request, "follow")
                )
            case "listdir":
                return self._listdir(request)
            case "read":
                return self._read(request)
            case "digest":
                return self._digest(request)
            case "create":
                return self._create(request)
            case "write":
                upload = self._upload(request)
                if len(data) > MAX_WRITE:
                    raise UsageError(f"write: at most {MAX_WRITE} bytes per request")
                try:
                    upload.write(request_count(request, "offset"), data)
                except OSError:  # some of it may be in the file: the upload is over
                    self._uploads.pop(request["handle"]).close()
                    raise
                return Reply({"type": "written", "size": upload.size})
            case "commit":
                upload = self._upload(request)
                del self._uploads[request["handle"]]
                st = upload.commit(request_flag(request, "sync"))
                return Reply({"type": "committed", "size": st.st_size})
            case "abort":
                self._upload(request)
                self._uploads.pop(request["handle"]).close()
                return done
            case "mkdir":
                self._mkdir(request)
                return done
            case "remove":
                with closing(self.roots.destination(request_name(request))) as at:
                    try:
                        os.unlink(at.name, dir_fd=at.fd)
                    except IsADirectoryError:
                        os.rmdir(at.name, dir_fd=at.fd)
                return done
            case "setmeta":
                self._set_meta(request)
                return done
            case "symlink":
                self._symlink(request)
                return done
            case "rename":
                with (
                    closing(self.roots.destination(request_name(request))) as old,
                    closing(self.roots.destination(request_name(request, "to"))) as new,
                ):
                    os.rename(old.name, new.name, src_dir_fd=old.fd, dst_dir_fd=new.fd)
                return done
        raise ProtocolError(f"unknown file request {type_!r}")

    def _stat(self, path: str, follow: bool) -> Reply:
        """``lstat`` (or, with ``follow``, ``stat``) of ``path``; a link's target is
        confined like any path the client sends."""
        name = path.rstrip("/").rsplit("/", 1)[-1]
        for _ in range(MAX_LINKS):
            with closing(self.roots.source(path)) as at:
                st = os.stat(at.name, dir_fd=at.fd, follow_symlinks=False)
                target = None
                if stat.S_ISLNK(st.st_mode):
                    target = os.readlink(at.name, dir_fd=at.fd)
            if target is None or not follow:
                return Reply(
                    {"type": "entry", "entry": entry_to_wire(name, st, target)}
                )
            path = link_target(path, target)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))

    def _listdir(self, request: dict[str, Any]) -> Reply:
        """A page of a directory's entries, and the cursor of the rest (``None``
        once it is all listed). A new listing beyond :data:`MAX_LISTINGS` ends the
        oldest one (its client abandoned it, or will be told its cursor is gone)."""
        cursor = request.get("cursor")
        if cursor is None:
            listing = Listing(self.roots, request_path(request))
            cursor = next(self._ids)
        elif isinstance(cursor, int) and cursor in self._listings:
            listing = self._listings.pop(cursor)
        else:
            raise UsageError(f"listdir: no listing {cursor!r} on this connection")
        try:
            entries = listing.page()
        except BaseException:
            listing.close()
            raise
        if listing.done:
            listing.close()
            return Reply({"type": "entries", "entries": entries, "cursor": None})
        self._listings[cursor] = listing
        while len(self._listings) > MAX_LISTINGS:
            self._listings.popitem(last=False)[1].close()
        return Reply({"type": "entries", "entries": entries, "cursor": cursor})

    def _read(self, request: dict[str, Any]) -> Reply:
        """Up to ``length`` bytes of a regular file from ``offset`` (fewer only where
        the file ends), and its size."""
        path = request_path(request)
        offset, length = (
            request_count(request, "offset"),
            request_count(request, "length"),
        )
        if length > MAX_READ:
            raise UsageError(f"read: at most {MAX_READ} bytes per request")
        with closing(self.roots.source(path)) as at:
            fd, st = open_regular(at)
        try:
            # No file reaches past 2**63 - 1: there, a read ends like at a file's end.
            data = pread_all(fd, offset, min(length, 2**63 - 1 - offset))
        finally:
            os.close(fd)
        header = {"type": "data", "offset": offset, "size": st.st_size}
        return Reply(header, FrameKind.CHUNK, data)

    def _digest(self, request: dict[str, Any]) -> Reply:
        """The BLAKE3 digest of up to ``length`` bytes of a regular file from
        ``offset`` (fewer only where the file ends), hashed here: the bytes never
        cross the connection. ``hashed`` says how many were."""
        path = request_path(request)
        offset, length = (
            request_count(request, "offset"),
            request_count(request, "length"),
        )
        if length > MAX_DIGEST:
            raise UsageError(f"digest: at most {MAX_DIGEST} bytes per request")
        with closing(self.roots.source(path)) as at:
            fd, st = open_regular(at)
        try:
            digest, hashed = blake3_of(
                at_offset(fd, offset), length, bytearray(DIGEST_READ)
            )
        finally:
            os.close(fd)
        return Reply(
            {
                "type": "digest",
                "offset": offset,
                "hashed": hashed,
                "size": st.st_size,
                "blake3": digest.hex(),
            }
        )

    def _create(self, request: dict[str, Any]) -> Reply:
        """Start writing a file: its handle on this connection."""
        if len(self._uploads) >= MAX_WRITERS:
            raise UsageError(
                f"create: at most {MAX_WRITERS} files open for writing per connection"
            )
        mode, exclusive = request_mode(request), request_flag(request, "exclusive")
        upload = Upload(self.roots.destination(request_name(request)), mode, exclusive)
        handle = next(self._ids)
        self._uploads[handle] = upload
        return Reply({"type": "created", "handle": handle})

    def _upload(self, request: dict[str, Any]) -> Upload:
        handle = request.get("handle")
        if not isinstance(handle, int) or handle not in self._uploads:
            raise UsageError(f"no file {handle!r} being written on this connection")
        return self._uploads[handle]

    def _mkdir(self, request: dict[str, Any]) -> None:
        """``mkdir`` (``mode``, less the umask), with ``parents`` as ``mkdir -p``;
        an existing directory is an error unless ``exist_ok`` (a root always
        exists: with ``exist_ok``, nothing to do; without, refused)."""
        path, asked = request_name(request), request_mode(request)
        if request_flag(request, "exist_ok") and self.roots.is_root(path):
            return
        mode = 0o777 if asked is None else asked
        if request_flag(request, "parents"):
            at = self.roots.parents_made(path, mode)
        else:
            at = self.roots.destination(path)
        with closing(at):
            try:
                os.mkdir(at.name, mode, dir_fd=at.fd)
            except FileExistsError:
                st = os.stat(at.name, dir_fd=at.fd, follow_symlinks=False)
                if not request_flag(request, "exist_ok") or not stat.S_ISDIR(
                    st.st_mode
                ):
                    raise

    def _set_meta(self, request: dict[str, Any]) -> None:
        """``setmeta``: the entry's own owner (where permitted), permission bits
        and times (``mtime_ns`` as both), through an ``O_PATH`` descriptor of it
        (:func:`~rcp_core.remote.entryfds.set_own_meta`), so a symlink (refused)
        or an entry swapped in on the way is never what changes; a root is named
        through its parent, as a source is."""
        owner = request_id(request, "uid"), request_id(request, "gid")
        mode, mtime_ns = request_mode(request), request_time(request, "mtime_ns")
        with closing(self.roots.source(request_name(request))) as at:
            set_own_meta(at, owner, mode, mtime_ns)

    def _symlink(self, request: dict[str, Any]) -> None:
        """``symlink``: the destination ``path`` made the symlink to ``target``
        (any text ``symlink(2)`` takes: never followed here) with its own owner
        (where permitted) and time, whole
        (:func:`~rcp_core.remote.entryfds.make_own_symlink`)."""
        try:
            target = check_link_target(request.get("target"))
        except UnsafeNameError as exc:
            raise ProtocolError(f"symlink: {exc}") from exc
        owner = request_id(request, "uid"), request_id(request, "gid")
        mtime_ns = request_time(request, "mtime_ns")
        with closing(self.roots.destination(request_name(request))) as at:
            make_own_symlink(at, target, owner, mtime_ns)


def _refused(reason: str) -> Reply:
    return Reply({"type": "refused", "reason": reason})
