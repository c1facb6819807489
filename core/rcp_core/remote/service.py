"""``rcpd serve``: a long-running service that runs copy jobs on its host.

It is what an Airflow connection points at: clients submit copies between paths
beneath the service's roots, poll their status and progress, and cancel them
(``docs/remote_protocol.md``, "The service"). Clients may also look at, read and
write single entries beneath the roots (:mod:`rcp_core.remote.filerequests`, "File
requests"), what the ``rcp://host/path`` filesystem stands on.

Security, for every connection:

- TLS 1.3 with the service's stored identity (clients pin its fingerprint), unless
  the service was started with ``--no-encryption`` (logged);
- authentication: the client's certificate must be one of ``client_certs``
  (mutual TLS; the handshake fails otherwise), or its hello must carry the token
  (compared in constant time). A service with neither refuses to start;
- paths are confined to the roots (:mod:`rcp_core.remote.roots`) and settings that
  would follow symlinks out of them are refused;
- bounds: at most ``max_clients`` connections at once (more are turned away), the
  handshake and every frame within ``timeout``, an idle connection closed after
  ``idle`` seconds, at most ``max_running`` jobs copying at once; file requests are
  bounded per request and per connection (:mod:`rcp_core.remote.filewire`), and what
  a connection left unfinished (a file being written) is removed when it ends.

A client's request that cannot be served (a path outside the roots, an unknown job)
is answered ``refused`` and the connection stays usable; a frame that breaks the
protocol ends the connection.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import rcp_core
from rcp_core.errors import (
    CopyFailedError,
    PathRefusedError,
    ProtocolError,
    RcpError,
    RemoteError,
    ServiceClosingError,
    UsageError,
)
from rcp_core.remote import tls
from rcp_core.remote.filerequests import Answers, FileSession
from rcp_core.remote.filewire import REQUESTS
from rcp_core.remote.handshake import accept
from rcp_core.remote.hello import Role
from rcp_core.remote.job import Job, Outcome
from rcp_core.remote.jobrequests import (
    CopyRequest,
    ReceiveRequest,
    SendRequest,
    copy_request,
    submit_options,
)
from rcp_core.remote.jobstore import JobStore
from rcp_core.remote.jobtable import DAY, JobTable
from rcp_core.remote.listening import PortRanges
from rcp_core.remote.rolejobs import (
    receive_request,
    run_receive,
    run_send,
    send_request,
)
from rcp_core.remote.roles import SOFTWARE
from rcp_core.remote.roots import Operands, Roots, shown
from rcp_core.remote.wire import FrameKind
from rcp_core.run.summary import Summary

if TYPE_CHECKING:
    from rcp_core.remote.httpserver import StatusServer

log = logging.getLogger("rcp_core")

MAX_WAIT = 60.0
"""The longest a ``wait`` request holds its connection before answering."""


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """How a service runs.

    :param roots: the directories it serves.
    :param identity: its TLS identity (``None`` only with ``encrypt=False``).
    :param token: the shared secret clients must send, if any.
    :param client_certs: PEM certificates of the clients allowed in by mutual TLS.
    :param ports: the ports its jobs' listeners may take (``--port-ranges``; any
        free one when ``None``).
    :param state_dir: where its job database is (:mod:`rcp_core.remote.jobstore`):
        its jobs survive a restart; ``None``: they live in memory.
    :param keep_jobs: finished jobs remembered; ``keep_days``: for how long.
    :param http: where its HTTP port listens (metrics, status page:
        :mod:`rcp_core.remote.httpserver`); ``None``: it has none.
    :param name: how its status page names it.
    :param max_client_jobs: jobs a client may hold queued or running.
    """

    roots: Sequence[str]
    identity: tls.Identity | None
    token: str | None = None
    client_certs: Sequence[str] = ()
    encrypt: bool = True
    max_running: int = 2
    max_clients: int = 64
    timeout: float = 15.0
    idle: float = 300.0
    ports: PortRanges | None = None
    state_dir: str | None = None
    keep_jobs: int = 1000
    keep_days: float = 30.0
    http: tuple[str, int] | None = None
    name: str = "rcpd serve"
    max_client_jobs: int = 100

    def __post_init__(self) -> None:
        if not self.token and not self.client_certs:
            raise UsageError(
                "a service must authenticate its clients: give a token or client "
                "certificates"
            )
        if self.encrypt and self.identity is None:
            raise UsageError("an encrypting service needs an identity")
        if self.client_certs and not self.encrypt:
            raise UsageError("client certificates need encryption")
        if self.keep_jobs < 1 or self.keep_days <= 0:
            raise UsageError("a service keeps at least one job, for some time")


class Service:
    """A running service: :meth:`serve_forever` on a bound listener, :meth:`close`
    from any thread."""

    def __init__(self, config: ServiceConfig, listener: socket.socket) -> None:
        self.config = config
        self.listener = listener
        self.roots = Roots(config.roots)
        self.store = None if config.state_dir is None else JobStore(config.state_dir)
        self.jobs = JobTable(
            self._run,
            config.max_running,
            config.keep_jobs,
            config.keep_days * DAY,
            self.store,
            config.max_client_jobs,
        )
        self._answers = Answers()
        self._ctx: ssl.SSLContext | None = None
        if config.encrypt:
            assert config.identity is not None
            self._ctx = tls.server_context(
                config.identity, "".join(config.client_certs) or None
            )
        self._clients = threading.BoundedSemaphore(config.max_clients)
        self._closing = threading.Event()
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.http = None if config.http is None else self._http(config.http)

    def _http(self, address: tuple[str, int]) -> StatusServer:
        """The HTTP port, bound (its thread starts with :meth:`serve_forever`).

        :raises UsageError: ``prometheus-client`` is not installed.
        """
        try:
            from rcp_core.remote.httpserver import StatusServer
            from rcp_core.remote.metrics import ServiceMetrics
        except ImportError as exc:
            raise UsageError(
                f"the HTTP port needs {exc.name}: pip install 'airflow-provider-rcp"
                "[service]'"
            ) from exc
        return StatusServer(
            address,
            name=self.config.name,
            ctx=self._ctx,
            token=self.config.token,
            metrics=ServiceMetrics(self.jobs, lambda: len(self._connections)),
            views=self.jobs.views,
            timeout=self.config.timeout,
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.listener.getsockname()[:2]
        return host, port

    def serve_forever(self) -> None:
        """Accept clients until :meth:`close`."""
        if self.http is not None:
            self.http.start()
        while not self._closing.is_set():
            try:
                sock, address = self.listener.accept()
            except OSError:
                if self._closing.is_set():
                    return
                raise
            if not self._clients.acquire(blocking=False):
                log.warning("turning away %s: too many clients", address[0])
                sock.close()
                continue
            threading.Thread(
                target=self._client,
                args=(sock, address[0], f"client {address[0]}:{address[1]}"),
                name="rcpd-client",
                daemon=True,
            ).start()

    def close(self, timeout: float = 30.0) -> None:
        """Stop accepting, cancel the jobs (waiting at most ``timeout``), hang up."""
        self._closing.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        if self.http is not None:
            self.http.close()
        self.jobs.close(timeout)
        if self.store is not None:
            self.store.close()
        with self._lock:
            for sock in self._connections:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self.roots.close()

    # -- one client -----------------------------------------------------------

    def _client(self, sock: socket.socket, host: str, peer: str) -> None:
        with self._lock:
            self._connections.add(sock)
        try:
            conn = accept(
                sock,
                peer,
                role=Role.SERVICE,
                software=SOFTWARE,
                timeout=self.config.timeout,
                ctx=self._ctx,
                token=self.config.token,
            )
        except (RemoteError, OSError) as exc:
            log.warning("%s refused: %s", peer, exc)
            self._forget(sock)
            return
        files = FileSession(self.roots, self._answers)
        try:
            if conn.hello is None or conn.hello.role is not Role.CLIENT:
                raise ProtocolError(f"{peer} is not a client")
            conn.reader.idle_timeout = self.config.idle
            while not self._closing.is_set():
                frame = conn.read()
                if frame is None:
                    break
                type_ = frame.header.get("type")
                if isinstance(type_, str) and type_ in REQUESTS:
                    reply = files.answer(frame.kind, frame.header, frame.data)
                    conn.send(reply.kind, reply.header, reply.data)
                    continue
                if frame.kind is not FrameKind.CONTROL:
                    raise ProtocolError(f"{peer} sent {frame.kind.name} to a service")
                conn.send(FrameKind.CONTROL, self._answer(frame.header, host))
        except ProtocolError as exc:
            log.warning("%s: %s", peer, exc)
            conn.fail(str(exc))
        except (RemoteError, OSError) as exc:
            log.info("%s gone: %s", peer, exc)
        finally:
            try:
                files.close()  # a file still being written is removed
            finally:
                conn.close()
                self._forget(sock)

    def _forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._connections.discard(sock)
        self._clients.release()

    def _answer(self, request: dict[str, Any], host: str) -> dict[str, Any]:
        """The answer to one request of a client at ``host``; ``refused`` for what
        cannot be served."""
        kind = request.get("type")
        try:
            if kind in ("submit", "send", "receive"):
                key = request.get("key")
                if not isinstance(key, str) or not 16 <= len(key) <= 128:
                    raise ProtocolError(f"{kind}: key must be a string of 16-128")
                job = self.jobs.known(key) or self._submit(kind, key, request, host)
                answer = {"type": "submitted", "job": job.view()}
                if isinstance(job.request, SendRequest):
                    answer["port"] = job.request.listener.getsockname()[1]
                return answer
            if kind == "list":
                return {"type": "jobs", "jobs": self.jobs.views()}
            if kind in ("status", "cancel", "wait"):
                job_id = request.get("job")
                if not isinstance(job_id, str):
                    raise ProtocolError(f"{kind}: job must be a string")
                if kind == "cancel":
                    job = self.jobs.cancel(job_id)
                else:
                    job = self.jobs.get(job_id)
                if kind == "wait":
                    job.done.wait(_wait_time(request.get("timeout")))
                return {"type": "status", "job": job.view()}
        except KeyError:
            return {"type": "refused", "reason": f"no job {request.get('job')!r}"}
        except (UsageError, ServiceClosingError) as exc:
            return {"type": "refused", "reason": str(exc)}
        raise ProtocolError(f"unknown request {kind!r}")

    def _submit(self, kind: str, key: str, request: dict[str, Any], host: str) -> Job:
        """A new job: a copy here (queued), or a role of a copy between hosts
        (started now: its peer waits), for the client the request names (its
        host's address where it names none). Paths are confined now, so a bad one
        is refused at once."""
        encrypt = self.config.encrypt
        on_restart, client = submit_options(request, host)
        if kind == "send":
            bind = self.listener.getsockname()[0]
            send = send_request(request, self.roots, bind, encrypt, self.config.ports)
            return self.jobs.submit(send, key, now=True, client=client)
        if kind == "receive":
            receive = receive_request(request, self.roots, encrypt)
            return self.jobs.submit(receive, key, now=True, client=client)
        copy = copy_request(request)
        self._confine(copy).close()  # refused now, not once it is its turn
        return self.jobs.submit(copy, key, on_restart=on_restart, client=client)

    # -- running a job ------------------------------------------------------------

    def _confine(self, request: CopyRequest) -> Operands:
        """The request's operands resolved beneath the roots (close them after).

        :raises PathRefusedError: one of them is not beneath a root.
        """
        operands = Operands()
        try:
            operands.extend(self.roots.source(s) for s in request.sources)
            operands.append(self.roots.destination(request.destination))
        except BaseException:
            operands.close()
            raise
        return operands

    def _run(self, job: Job) -> Summary:
        """Run a job; a copy runs within the roots, through descriptors checked
        (again, now) to lie beneath them."""
        request = job.request
        identity, timeout = self.config.identity, self.config.timeout
        if isinstance(request, SendRequest):
            return run_send(job, request, self.roots, identity, timeout)
        if isinstance(request, ReceiveRequest):
            return run_receive(job, request, self.roots, identity, timeout)
        if not isinstance(request, CopyRequest):  # never queued: a view of a job
            raise Outcome(f"a {request.kind} job cannot run again")
        try:
            operands = self._confine(request)
        except PathRefusedError as exc:
            raise Outcome(str(exc)) from exc
        try:
            return rcp_core.copy(
                [c.path for c in operands[:-1]],
                operands[-1].path,
                request.settings,
                on_progress=job.report,
                cancel=job.cancel,
            )
        except CopyFailedError as exc:
            raise Outcome(shown(str(exc), operands), exc.summary) from exc
        except (RcpError, OSError) as exc:
            raise Outcome(shown(str(exc), operands)) from exc
        finally:
            operands.close()


def _wait_time(value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise ProtocolError("wait: timeout must be a non-negative number")
    return min(float(value), MAX_WAIT)
