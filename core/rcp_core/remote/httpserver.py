"""The HTTP port of ``rcpd serve`` (``--http-listen``, off by default): ``/metrics``
for Prometheus (:mod:`rcp_core.remote.metrics`), ``/`` the status page
(:mod:`rcp_core.remote.statuspage`) and ``/jobs`` the jobs as JSON, read-only.

Security, as the service's own port:

- TLS 1.3 with the service's identity and its client-certificate rule (the same
  context), unless the service runs ``--no-encryption``; the handshake happens in the
  request's thread, bounded by ``timeout``, never in the accepting one;
- the service's token is required when it has one: as ``Authorization: Bearer
  TOKEN`` (Prometheus' ``authorization``) or as the password of HTTP Basic
  authentication (a browser asks for it; any user name), compared in constant time;
  anything else is answered 401;
- at most ``max_clients`` requests at once (more are closed unanswered), each within
  ``timeout`` seconds; only ``GET`` and ``HEAD``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import json
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from rcp_core.remote.metrics import CONTENT_TYPE, ServiceMetrics
from rcp_core.remote.statuspage import render

log = logging.getLogger("rcp_core")

REFRESH = 2.0
"""Seconds between two reloads of the status page."""


class StatusServer(ThreadingHTTPServer):
    """The HTTP port, bound to ``address`` when made; :meth:`start` serves it in a
    thread of its own, :meth:`close` (from any thread, started or not) stops it.

    :param views: the jobs as clients see them, newest last.
    """

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        name: str,
        ctx: ssl.SSLContext | None,
        token: str | None,
        metrics: ServiceMetrics,
        views: Callable[[], Sequence[dict[str, Any]]],
        timeout: float,
        max_clients: int = 16,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)
        self.name, self.ctx, self.token = name, ctx, token
        self.metrics, self.views, self.request_timeout = metrics, views, timeout
        self._clients = threading.BoundedSemaphore(max_clients)
        self._serving: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server_address[:2]
        return str(host), int(port)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._clients.acquire(blocking=False):
            log.warning("http: turning away %s: too many requests", client_address[0])
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(self.request_timeout)
            if self.ctx is not None:
                try:
                    request = self.ctx.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError) as exc:
                    log.info("http: %s refused: %s", client_address[0], exc)
                    with contextlib.suppress(OSError):
                        request.close()
                    return
            super().process_request_thread(request, client_address)
        finally:
            self._clients.release()

    def start(self) -> None:
        self._serving = threading.Thread(
            target=self.serve_forever, name="rcpd-http", daemon=True
        )
        self._serving.start()

    def close(self) -> None:
        if self._serving is not None:  # shutdown() waits for a loop that runs
            self.shutdown()
        self.server_close()

    def allowed(self, authorization: str | None) -> bool:
        """Whether a request with this ``Authorization`` header may be answered."""
        if self.token is None:
            return True  # mutual TLS admitted the client
        if authorization is None:
            return False
        scheme, _, credentials = authorization.partition(" ")
        given = ""
        if scheme.lower() == "bearer":
            given = credentials.strip()
        elif scheme.lower() == "basic":
            with contextlib.suppress(binascii.Error, UnicodeDecodeError):
                given = base64.b64decode(credentials.strip()).decode().partition(":")[2]
        return hmac.compare_digest(given.encode(), self.token.encode())


class _Handler(BaseHTTPRequestHandler):
    server: StatusServer
    server_version = "rcpd"
    sys_version = ""

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _answer(self, head: bool) -> None:
        server = self.server
        if not server.allowed(self.headers.get("Authorization")):
            self.send_response(HTTPStatus.UNAUTHORIZED)
            self.send_header("WWW-Authenticate", 'Basic realm="rcpd", charset="UTF-8"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = self.path.partition("?")[0]
        if path == "/metrics":
            body, kind = server.metrics.exposition(), CONTENT_TYPE
        elif path == "/":
            page = render(server.name, server.views(), REFRESH)
            body, kind = page.encode(), "text/html; charset=utf-8"
        elif path == "/jobs":
            body = json.dumps({"jobs": list(server.views())}).encode()
            kind = "application/json"
        else:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http: %s %s", self.address_string(), format % args)
