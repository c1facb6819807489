"""A client's connection to an ``rcpd serve`` service: what every request goes through.

One connection, opened on first use and reopened once if the service dropped it (it
closes idle connections): the request is then sent again, which is safe because every
request sent again is idempotent -- a submit, and a change of an entry (``mkdir``,
``remove``, ``rename``), carries a key of its own, and the service answers a repeated
key as it answered it first. A request about what a connection holds (a file being
written, the next page of a listing) is never sent on another connection: it fails
with :class:`~rcp_core.errors.ConnectionLostError`, and the service dropped what that
connection held. Every request and answer is bounded by ``timeout``, a ``wait`` by its
own timeout plus that; a connection that failed (lost, silent, out of step) is dropped.
A service that refuses a request raises :class:`~rcp_core.errors.UsageError`, a failed
file request the builtin error a local call would raise.

:class:`ClientConnection` is the base of :class:`~rcp_core.remote.client.ServiceClient`,
which has the requests.
"""

from __future__ import annotations

import secrets
import ssl
import threading
from types import TracebackType
from typing import Any, Self

from rcp_core.errors import (
    ConnectionLostError,
    ProtocolError,
    RemoteError,
    RemoteFileError,
    UsageError,
)
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection
from rcp_core.remote.filewire import REQUESTS, failure
from rcp_core.remote.handshake import dial
from rcp_core.remote.hello import (
    BWLIMIT,
    DIGESTS,
    FILE_REQUESTS,
    LATE_DATA,
    RESUME,
    SET_META,
    SYMLINK_REQUESTS,
    Role,
)
from rcp_core.remote.roles import SOFTWARE
from rcp_core.remote.wire import Frame, FrameKind


class ClientConnection:
    """One service's connection, as trusted.

    :param fingerprint: the service certificate's SHA-256 (pinned); ``None`` only
        with ``encrypt=False``.
    :param token: the service's shared secret, if it wants one.
    :param identity: this client's certificate, for a service that admits clients
        by certificate.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        fingerprint: str | None,
        token: str | None = None,
        identity: tls.Identity | None = None,
        encrypt: bool = True,
        timeout: float = 15.0,
    ) -> None:
        if encrypt and not fingerprint:
            raise UsageError("the service's certificate fingerprint is required")
        self.address = (host, port)
        self.fingerprint = fingerprint if encrypt else None
        self.token = token
        self.identity = identity
        self.timeout = timeout
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def certificate(self) -> str | None:
        """The service's certificate (PEM) as this connection pinned it; ``None``
        without encryption."""
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            sock = self._conn.sock
        der = (
            sock.getpeercert(binary_form=True)
            if isinstance(sock, ssl.SSLSocket)
            else None
        )
        return ssl.DER_cert_to_PEM_cert(der) if der else None

    def local_address(self) -> str:
        """This host's address as the service sees it (where it can connect back)."""
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            address: str = self._conn.sock.getsockname()[0]
            return address

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connect(self) -> Connection:
        conn = dial(
            self.address,
            role=Role.CLIENT,
            software=SOFTWARE,
            timeout=self.timeout,
            pin=self.fingerprint,
            identity=self.identity,
            token=self.token,
        )
        if conn.hello is None or conn.hello.role is not Role.SERVICE:
            conn.close()
            raise RemoteError(f"{conn.peer} is not an rcpd service")
        return conn

    def _request(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send one request about a job; the job as the answer shows it."""
        with self._lock:
            job = self._answer(kind, fields).get("job")
        if not isinstance(job, dict):
            raise ProtocolError(f"{self.address[0]}: an answer without its job")
        return job

    def _change(self, kind: str, **fields: Any) -> None:
        """A change of one entry, with a key of its own: the service remembers its
        answer, so sending it again after a lost answer changes nothing twice."""
        with self._lock:
            self._answer(kind, {"key": secrets.token_hex(16), **fields})

    def _held(
        self,
        conn: Connection,
        kind: str,
        fields: dict[str, Any],
        data: bytes | memoryview = b"",
    ) -> dict[str, Any]:
        """The answer to a request about what ``conn`` holds (see :meth:`_on`)."""
        with self._lock:
            return self._on(conn, kind, fields, data).header

    def _answer(self, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        """The header of the service's ``CONTROL`` answer (called with the lock
        held)."""
        return self._frame(kind, fields).header

    def _frame(
        self,
        kind: str,
        fields: dict[str, Any],
        *,
        expect: FrameKind = FrameKind.CONTROL,
    ) -> Frame:
        """The service's answer to one request (called with the lock held), sent
        again once on a new connection if the old one turned out dropped."""
        fresh = self._conn is None
        if self._conn is None:
            self._conn = self._connect()
        try:
            return self._on(self._conn, kind, fields, expect=expect)
        except ConnectionLostError:
            if fresh:
                raise
        self._conn = self._connect()
        return self._on(self._conn, kind, fields, expect=expect)

    def _on(
        self,
        conn: Connection,
        kind: str,
        fields: dict[str, Any],
        data: bytes | memoryview = b"",
        *,
        expect: FrameKind = FrameKind.CONTROL,
    ) -> Frame:
        """One request on ``conn``, never sent again elsewhere: a request that names
        what ``conn`` holds (a file being written, a listing) goes there or nowhere.
        A connection that fails is dropped (called with the lock held).

        :raises ConnectionLostError: ``conn`` is no longer this client's connection.
        """
        if conn is not self._conn:
            raise ConnectionLostError(
                f"{conn.peer}: the connection of this {kind} was lost "
                "(the service dropped what it held)"
            )
        try:
            return self._exchange(conn, kind, fields, data, expect)
        except (UsageError, RemoteFileError):
            raise  # an answer: the connection is fine
        except RemoteError:
            conn.close()
            self._conn = None
            raise

    def _exchange(
        self,
        conn: Connection,
        kind: str,
        fields: dict[str, Any],
        data: bytes | memoryview,
        expect: FrameKind,
    ) -> Frame:
        needed, what = _needed(kind, fields)
        if conn.version < needed:
            raise RemoteError(
                f"{conn.peer} speaks rcp protocol {conn.version[0]}.{conn.version[1]}; "
                f"{what} needs {needed[0]}.{needed[1]}: upgrade the service"
            )
        wait = fields.get("timeout", 0.0) if kind == "wait" else 0.0
        conn.settimeout(self.timeout + wait)
        frame_kind = FrameKind.CHUNK if kind == "write" else FrameKind.CONTROL
        conn.send(frame_kind, {"type": kind, **fields}, data)
        answer = conn.read()
        if answer is None:
            raise ConnectionLostError(f"{conn.peer} closed the connection")
        type_ = answer.header.get("type")
        if type_ == "refused":
            raise UsageError(f"{conn.peer} refused: {answer.header.get('reason')}")
        if type_ == "failed":
            raise failure(answer.header, conn.peer, fields.get("path"))
        if answer.kind is not expect:
            raise ProtocolError(f"{conn.peer} answered {kind} with {answer.kind.name}")
        return answer


def _needed(kind: str, fields: dict[str, Any]) -> tuple[tuple[int, int], str]:
    """The oldest service that answers this request as asked (an older one would
    end the connection at an unknown request, or ignore a newer field), and what
    needs it (the request, or the option)."""
    if kind == "digest":
        return DIGESTS, kind
    if kind == "setmeta":
        return SET_META, kind
    if kind == "symlink":
        return SYMLINK_REQUESTS, kind
    if kind in REQUESTS:
        return FILE_REQUESTS, kind
    settings = fields.get("settings")
    if isinstance(settings, dict) and settings.get("max_processes") is not None:
        return LATE_DATA, "--max-processes"
    if isinstance(settings, dict) and settings.get("resume"):
        return RESUME, "--partial"
    if "bwlimit" in fields:
        return BWLIMIT, "--bwlimit"
    return (1, 0), kind
