"""A client of an ``rcpd serve`` service: submit copy jobs, watch them, cancel them;
look at, read, hash and write single entries beneath its roots (file requests, 1.7;
``digest``, 1.8).

What the Airflow hook and trigger use, and the ``rcp://host/path`` filesystem; every
request goes through one connection
(:class:`~rcp_core.remote.clientconnection.ClientConnection`: opened on first use,
reopened once, bounded in time).

A job is a dict as the service shows it (``docs/remote_protocol.md``): ``job`` (its
id), ``state`` (``queued``, ``running``, ``succeeded``, ``failed``, ``cancelled``),
``progress`` while it runs, ``summary`` and ``error`` when it ended.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any

from rcp_core.errors import ProtocolError, UsageError
from rcp_core.remote import SERVICE_PORT as SERVICE_PORT  # the clients' default
from rcp_core.remote.clientconnection import ClientConnection
from rcp_core.remote.clientupload import FileWriter
from rcp_core.remote.filewire import (
    MAX_DIGEST,
    MAX_READ,
    Entry,
    entry_from_wire,
)
from rcp_core.remote.settingswire import settings_to_wire
from rcp_core.remote.wire import FrameKind
from rcp_core.settings import CopySettings

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
"""The states a job never leaves."""
RESTART_GRACE = 300.0
"""How long a waiter on a job waits for its service to come back (a restart: a
service with a job database keeps its jobs, ``rcpd serve --state-dir``)."""
REACHED_AGAIN = 2.0
"""Seconds between two tries to reach a service that is away."""

log = logging.getLogger("rcp_core")


class ServiceClient(ClientConnection):
    """Talks to one service (its parameters: :class:`ClientConnection`'s)."""

    def submit(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings | None = None,
        *,
        key: str | None = None,
        on_restart: str | None = None,
        client: str | None = None,
    ) -> dict[str, Any]:
        """Start ``rcp SOURCES... DESTINATION`` on the service's host; the job.

        :param key: names the submit (a random one by default): the service answers
            a key it knows with that key's job instead of starting another, and shows
            it in the job (``key``), so a caller that lost track of a job can find it.
        :param on_restart: ``resume`` or ``fail`` the job if the service restarts
            while it is queued or running (a service with a ``--state-dir``); by
            default ``resume`` where a rerun converges (``existing`` not ``error``).
        :param client: the name the service knows this client by, for its fair
            order and its bound of jobs per client (default: this host's address).
        :raises UsageError: the service refused it (a path outside its roots, bad
            settings); nothing was started.
        """
        given = {"on_restart": on_restart, "client": client}
        extra = {name: value for name, value in given.items() if value is not None}
        return self._request(
            "submit",
            key=key or secrets.token_hex(16),
            sources=list(sources),
            destination=destination,
            settings=settings_to_wire(settings or CopySettings()),
            **extra,
        )

    def send(
        self,
        sources: Sequence[tuple[str, str]],
        settings: CopySettings,
        *,
        peer_cert: str | None,
        connections: int,
        bwlimit: int = 0,
    ) -> tuple[dict[str, Any], int]:
        """Have the service send ``sources`` (``(path there, name at the
        destination)`` pairs) to the destination that connects with the certificate
        ``peer_cert``, at most ``bwlimit`` bytes per second (0: unlimited; a
        service older than protocol 1.13 is refused one); the job and the port to
        connect to."""
        request: dict[str, Any] = {
            "key": secrets.token_hex(16),
            "sources": [list(pair) for pair in sources],
            "settings": settings_to_wire(settings),
            "peer_cert": peer_cert,
            "connections": connections,
        }
        if bwlimit:
            request["bwlimit"] = bwlimit
        with self._lock:
            answer = self._answer("send", request)
        job, port = answer.get("job"), answer.get("port")
        if not isinstance(job, dict) or not isinstance(port, int):
            raise ProtocolError(f"{self.address[0]}: a send answer without job or port")
        return job, port

    def receive(
        self,
        destination: str,
        settings: CopySettings,
        *,
        into: bool,
        source: tuple[str, int],
        pin: str | None,
        connections: int,
        names: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Have the service connect to the source at ``source`` (pinned to ``pin``)
        and write ``destination`` on its host; the job.

        :param names: the names the sources get under ``destination`` (with
            ``into``), for the service to check the operand rules before it starts.
        :raises UsageError: the service refused (a path outside its roots, a missing
            ``DST/`` or parent, an existing copy without a policy).
        """
        return self._request(
            "receive",
            key=secrets.token_hex(16),
            destination=destination,
            into=into,
            names=list(names),
            settings=settings_to_wire(settings),
            source={"host": source[0], "port": source[1], "pin": pin},
            connections=connections,
        )

    def status(self, job: str) -> dict[str, Any]:
        return self._request("status", job=job)

    def cancel(self, job: str) -> dict[str, Any]:
        return self._request("cancel", job=job)

    def jobs(self) -> list[dict[str, Any]]:
        with self._lock:
            answer = self._answer("list", {})
        jobs = answer.get("jobs")
        if not isinstance(jobs, list):
            raise ProtocolError(f"{self.address[0]}: a job list is not a list")
        return jobs

    def wait(self, job: str, timeout: float) -> dict[str, Any]:
        """The job once it finished, or as it is after ``timeout`` seconds (the
        service answers within at most a minute; call again to wait longer)."""
        return self._request("wait", job=job, timeout=timeout)

    def wait_through_restarts(
        self, job: str, timeout: float, grace: float = RESTART_GRACE
    ) -> dict[str, Any]:
        """:meth:`wait`, on through the service's absence of at most ``grace``
        seconds (it could not be reached or went away: refused, reset, lost,
        silent; a refused token or request is an answer): a restarted service
        with a job database answers for the job again.

        :raises ConnectionError: the service stayed away ``grace`` seconds.
        """
        away: float | None = None
        while True:
            try:
                return self.wait(job, timeout)
            except (ConnectionError, TimeoutError) as exc:
                now = time.monotonic()
                if away is None:
                    away = now
                    log.warning(
                        "%s:%d went away (%s); waiting up to %.0f s for it",
                        *self.address[:2],
                        exc,
                        grace,
                    )
                if now - away > grace:
                    raise
            time.sleep(REACHED_AGAIN)

    def another(self) -> ServiceClient:
        """A client of the same service, as trusted, on a connection of its own
        (requests of several threads then run at once, not one after another)."""
        return ServiceClient(
            *self.address,
            fingerprint=self.fingerprint,
            token=self.token,
            identity=self.identity,
            encrypt=self.fingerprint is not None,
            timeout=self.timeout,
        )

    # -- file requests (protocol 1.7) ---------------------------------------------

    def stat(self, path: str, *, follow: bool = False) -> Entry:
        """``lstat`` of ``path`` on the service's host; ``stat`` with ``follow``, which
        follows a symlink only to a target beneath the roots.

        :raises RemoteFileNotFoundError: it does not exist (nor, with ``follow``, what
            it points at); other :class:`RemoteFileError` subclasses for other errnos.
        :raises UsageError: the path (or the target followed) is not beneath the
            service's roots, or has a symlink on the way.
        """
        with self._lock:
            answer = self._answer("stat", {"path": path, "follow": follow})
        return entry_from_wire(answer.get("entry"))

    def listdir(self, path: str) -> list[Entry]:
        """The entries of the directory ``path`` (``lstat`` each, no ``.`` or ``..``),
        in the directory's order. A symlink to a directory is not followed (it is not
        a directory: list its target instead).

        The service answers in pages of at most 1000 entries; they are fetched in
        turn on one connection.

        :raises RemoteNotADirectoryError: ``path`` is not a directory.
        """
        with self._lock:
            answer = self._answer("listdir", {"path": path})
            conn = self._conn
            assert conn is not None  # it just answered
            entries = _entries(answer)
            while (cursor := answer.get("cursor")) is not None:
                answer = self._on(conn, "listdir", {"cursor": cursor}).header
                entries.extend(_entries(answer))
        return entries

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of the regular file ``path`` from ``offset``; fewer only
        where the file ends.

        A range longer than the service's bound (4 MiB) is read in several requests:
        a file that changes meanwhile may give some bytes from before and some from
        after the change.

        :raises RemoteIsADirectoryError: ``path`` is a directory.
        :raises UsageError: it is a symlink or not a regular file, or not beneath the
            roots.
        """
        if offset < 0 or length < 0:
            raise UsageError("read_range: offset and length must not be negative")
        pieces: list[bytes] = []
        got = 0
        while got < length:
            want = min(MAX_READ, length - got)
            fields = {"path": path, "offset": offset + got, "length": want}
            with self._lock:
                frame = self._frame("read", fields, expect=FrameKind.CHUNK)
                piece = bytes(frame.data)  # the frame's data lives until the next read
            if frame.header.get("offset") != offset + got or len(piece) > want:
                raise ProtocolError(f"{self.address[0]}: a read answered another range")
            pieces.append(piece)
            got += len(piece)
            if len(piece) < want:
                break
        return b"".join(pieces)

    def digest(self, path: str, offset: int, length: int) -> tuple[str, int]:
        """The BLAKE3 digest (hex) of ``length`` bytes of the regular file ``path``
        from ``offset``, hashed by the service, and how many bytes it hashed (fewer
        only where the file ends). At most :data:`MAX_DIGEST` bytes at a time.

        :raises UsageError: a longer range, a path that is not a regular file beneath
            the roots; or a service older than 1.8 (:class:`RemoteError`).
        """
        if offset < 0 or not 0 <= length <= MAX_DIGEST:
            raise UsageError(f"digest: a range of at most {MAX_DIGEST} bytes")
        fields = {"path": path, "offset": offset, "length": length}
        with self._lock:
            answer = self._answer("digest", fields)
        digest, hashed = answer.get("blake3"), answer.get("hashed")
        if (
            not isinstance(digest, str)
            or not isinstance(hashed, int)
            or hashed > length
        ):
            raise ProtocolError(f"{self.address[0]}: a malformed digest answer")
        return digest, hashed

    def open_write(
        self, path: str, *, mode: int | None = None, exclusive: bool = False
    ) -> FileWriter:
        """Start writing the file ``path``: a :class:`FileWriter`, whose
        :meth:`FileWriter.commit` puts it under its name in one step.

        :param mode: its permission bits (at most ``0o777``); by default those of the
            file it replaces, else ``0o644``.
        :param exclusive: fail if ``path`` exists (now, or at the commit).
        :raises RemoteFileNotFoundError: the directory of ``path`` does not exist.
        :raises RemoteIsADirectoryError: ``path`` is a directory.
        :raises RemoteFileExistsError: ``exclusive`` and ``path`` exists.
        :raises UsageError: not beneath the roots, or this connection already writes
            16 files.
        """
        fields: dict[str, Any] = {"path": path, "exclusive": exclusive}
        if mode is not None:
            fields["mode"] = mode
        with self._lock:
            handle = self._answer("create", fields).get("handle")
            conn = self._conn
        if not isinstance(handle, int) or conn is None:
            raise ProtocolError(f"{self.address[0]}: a create answer without a handle")
        return FileWriter(functools.partial(self._held, conn), handle, path)

    def mkdir(
        self, path: str, *, parents: bool = False, exist_ok: bool = False
    ) -> None:
        """Make the directory ``path`` (``0o777`` less the service's umask).

        :param parents: make missing directories on the way too (``mkdir -p``).
        :param exist_ok: a directory already there is no error.
        :raises RemoteFileExistsError: it exists (and ``exist_ok`` is false, or it is
            not a directory).
        :raises RemoteFileNotFoundError: its parent is missing (without ``parents``).
        """
        self._change("mkdir", path=path, parents=parents, exist_ok=exist_ok)

    def remove(self, path: str) -> None:
        """Remove the file, symlink or empty directory ``path`` (never a tree).

        :raises RemoteFileError: with ``ENOTEMPTY`` for a directory that is not empty.
        """
        self._change("remove", path=path)

    def set_meta(
        self,
        path: str,
        *,
        mode: int | None = None,
        mtime_ns: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
    ) -> None:
        """Give the file or directory ``path`` (a root too) the owner ``uid`` and
        group ``gid`` (where the service is permitted to), the permission bits
        ``mode`` (at most ``0o777``) and the modification time ``mtime_ns`` (its
        access time the same), where given; never through a symlink.

        :raises UsageError: ``path`` is a symlink or not beneath the roots; or a
            service older than 1.17.
        """
        fields: dict[str, Any] = {"path": path}
        if mode is not None:
            fields["mode"] = mode
        if mtime_ns is not None:
            fields["mtime_ns"] = mtime_ns
        if uid is not None:
            fields["uid"] = uid
        if gid is not None:
            fields["gid"] = gid
        self._change("setmeta", **fields)

    def symlink(
        self,
        path: str,
        target: str,
        *,
        mtime_ns: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
    ) -> None:
        """Make ``path`` (beneath the roots) the symlink to ``target``, with its own
        time ``mtime_ns`` and owner (where the service is permitted), each where
        given; made whole, replacing a file or symlink there.

        :raises UsageError: ``path`` is not beneath the roots; or a service older
            than 1.18.
        """
        given = {"mtime_ns": mtime_ns, "uid": uid, "gid": gid}
        fields = {k: v for k, v in given.items() if v is not None}
        self._change("symlink", path=path, target=target, **fields)

    def rename(self, path: str, to: str) -> None:
        """Rename ``path`` to ``to`` (both beneath the roots), replacing a file there
        as ``rename(2)`` does."""
        self._change("rename", path=path, to=to)


def _entries(answer: dict[str, Any]) -> list[Entry]:
    entries = answer.get("entries")
    if not isinstance(entries, list):
        raise ProtocolError("a listdir answer without its entries")
    return [entry_from_wire(entry) for entry in entries]
