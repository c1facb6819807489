"""A client of an ``rcpd serve`` service: submit copy jobs, watch them, cancel them.

What the Airflow hook and trigger use. One connection, opened on first use and
reopened once if the service dropped it (it closes idle connections): the request is
then sent again, which is safe because every request is idempotent -- a submit
carries a key of its own, and the service answers a repeated key with the job it
already started. Every request and answer is bounded by ``timeout``, a ``wait`` by
its own timeout plus that.

A job is a dict as the service shows it (``docs/remote_protocol.md``): ``job`` (its
id), ``state`` (``queued``, ``running``, ``succeeded``, ``failed``, ``cancelled``),
``progress`` while it runs, ``summary`` and ``error`` when it ended.
"""

from __future__ import annotations

import secrets
import ssl
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from rcp_core.errors import (
    ConnectionLostError,
    ProtocolError,
    RemoteError,
    UsageError,
)
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection, dial
from rcp_core.remote.hello import Role
from rcp_core.remote.job import settings_to_wire
from rcp_core.remote.roles import SOFTWARE
from rcp_core.remote.wire import FrameKind
from rcp_core.settings import CopySettings

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
"""The states a job never leaves."""


class ServiceClient:
    """Talks to one service.

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

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def submit(
        self,
        sources: Sequence[str],
        destination: str,
        settings: CopySettings | None = None,
        *,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Start ``rcp SOURCES... DESTINATION`` on the service's host; the job.

        :param key: names the submit (a random one by default): the service answers
            a key it knows with that key's job instead of starting another, and shows
            it in the job (``key``), so a caller that lost track of a job can find it.
        :raises UsageError: the service refused it (a path outside its roots, bad
            settings); nothing was started.
        """
        return self._request(
            "submit",
            key=key or secrets.token_hex(16),
            sources=list(sources),
            destination=destination,
            settings=settings_to_wire(settings or CopySettings()),
        )

    def send(
        self,
        sources: Sequence[tuple[str, str]],
        settings: CopySettings,
        *,
        peer_cert: str | None,
        connections: int,
    ) -> tuple[dict[str, Any], int]:
        """Have the service send ``sources`` (``(path there, name at the
        destination)`` pairs) to the destination that connects with the certificate
        ``peer_cert``; the job and the port to connect to."""
        with self._lock:
            answer = self._answer(
                "send",
                {
                    "key": secrets.token_hex(16),
                    "sources": [list(pair) for pair in sources],
                    "settings": settings_to_wire(settings),
                    "peer_cert": peer_cert,
                    "connections": connections,
                },
            )
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
    ) -> dict[str, Any]:
        """Have the service connect to the source at ``source`` (pinned to ``pin``)
        and write ``destination`` on its host; the job."""
        return self._request(
            "receive",
            key=secrets.token_hex(16),
            destination=destination,
            into=into,
            settings=settings_to_wire(settings),
            source={"host": source[0], "port": source[1], "pin": pin},
            connections=connections,
        )

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

    def _answer(self, kind: str, fields: dict[str, Any]) -> dict[str, Any]:
        """The service's answer to one request (called with the lock held)."""
        fresh = self._conn is None
        if self._conn is None:
            self._conn = self._connect()
        try:
            return self._exchange(self._conn, kind, fields)
        except ConnectionLostError:
            self._conn.close()
            self._conn = None
            if fresh:
                raise
        self._conn = self._connect()
        return self._exchange(self._conn, kind, fields)

    def _exchange(
        self, conn: Connection, kind: str, fields: dict[str, Any]
    ) -> dict[str, Any]:
        wait = fields.get("timeout", 0.0) if kind == "wait" else 0.0
        conn.settimeout(self.timeout + wait)
        conn.send_control(kind, **fields)
        answer = conn.expect(FrameKind.CONTROL).header
        if answer.get("type") == "refused":
            raise UsageError(f"{conn.peer} refused: {answer.get('reason')}")
        return answer
