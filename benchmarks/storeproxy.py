"""A counting, delaying HTTP proxy in front of an object-store emulator.

An emulator answers in microseconds and its CPU bounds every tool's wall time on
this machine, while a real store answers each request in tens of milliseconds and
bills each one. :func:`proxied` puts this proxy between the clients and a running
:class:`~benchmarks.objectstores.Store`: it holds each request for ``delay`` seconds
(20 ms by default: a real store's latency) before passing it on, and counts requests
by what they do (:class:`Kind`) and the bytes of object data each way, so a test or
a benchmark cell states what a tool asked of the store, not only how long it took.

Invariants: a request reaches the emulator unchanged (method, path, query, headers
but the hop-by-hop ones, body), its body and its answer's streamed through as they
come (a large object's first bytes reach the client while its last are still
leaving the store), its ``Host`` the proxy's as the client sent it: a
signature made for the proxy's address stays valid, and a URL the emulator builds
from it (the GCS emulator's resumable-upload session) leads back through the proxy,
so every request of an upload is delayed and counted;
the proxy listens on 127.0.0.1 only, in a thread of its own, and stops with the
block.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from aiohttp import web

from benchmarks.objectstores import Store
from benchmarks.sshd import free_port

DELAY = 0.020
"""Seconds each request waits before it is passed on (a real store's latency)."""
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "upgrade"}
)
"""Headers that belong to one connection, not to the request."""
PIECE = 1 << 20
"""Bytes of a body passed on at a time: a body streams through, never gathered."""


class Kind(enum.Enum):
    """What a request asks of the store, whichever store's API it speaks."""

    LIST = "list"
    HEAD = "head"
    """An object's properties without its data (S3's HEAD, GCS's object GET)."""
    GET = "get"
    """An object's data."""
    PUT = "put"
    """A whole object's upload (a single PUT, GCS's media or multipart upload)."""
    PART = "part"
    """One part of an upload in parts (S3's UploadPart, Azure's Put Block, GCS's
    resumable chunk)."""
    START = "start"
    """The start of an upload in parts (S3's CreateMultipartUpload, GCS's resumable
    session)."""
    COMMIT = "commit"
    """The end of one (S3's CompleteMultipartUpload, Azure's Put Block List)."""
    COPY = "copy"
    """A copy within the store, no data through the client."""
    DELETE = "delete"
    """An object's removal, or many objects' in one request (S3's DeleteObjects,
    a ``POST ?delete``)."""
    OTHER = "other"


def kind_of(
    method: str, path: str, query: dict[str, str], headers: dict[str, str]
) -> Kind:
    """What the request ``method path?query`` (``headers`` lowercased) does."""
    if method == "DELETE" or (method == "POST" and "delete" in query):
        return Kind.DELETE
    if method == "HEAD":
        return Kind.HEAD
    if "x-amz-copy-source" in headers or "x-ms-copy-source" in headers:
        return Kind.COPY
    if "rewriteTo" in path or "copyTo" in path:
        return Kind.COPY
    if method == "GET":
        return _read_kind(path, query)
    if method in ("PUT", "POST"):
        return _write_kind(method, path, query)
    return Kind.OTHER


def _read_kind(path: str, query: dict[str, str]) -> Kind:
    if "list-type" in query or query.get("comp") == "list":
        return Kind.LIST
    if path.startswith("/storage/v1/b/"):  # GCS's JSON API: /b/B/o is a listing
        if path.rstrip("/").endswith("/o"):
            return Kind.LIST
        return Kind.GET if query.get("alt") == "media" else Kind.HEAD
    if path.startswith("/download/"):
        return Kind.GET
    if path.count("/") <= 1 and not query.get("restype"):
        return Kind.LIST  # S3's ListObjects (v1) on a bucket
    return Kind.GET


def _write_kind(method: str, path: str, query: dict[str, str]) -> Kind:
    if "partNumber" in query or query.get("comp") == "block":
        return Kind.PART
    if "uploads" in query:
        return Kind.START
    if "uploadId" in query or query.get("comp") == "blocklist":
        return Kind.COMMIT
    if path.startswith("/upload/"):  # GCS: media and multipart whole, resumable parts
        if query.get("uploadType") == "resumable":
            return Kind.PART if "upload_id" in query else Kind.START
        return Kind.PUT
    if query.get("restype") == "container" or query.get("comp"):
        return Kind.OTHER
    return Kind.PUT if method == "PUT" else Kind.OTHER


@dataclasses.dataclass
class Counts:
    """What went through the proxy: requests by :class:`Kind`, the body bytes sent
    to the store and received from it, the method and path of each request that
    changed something (what a count that is off by one names), and the most
    requests it held at once."""

    requests: collections.Counter[Kind] = dataclasses.field(
        default_factory=collections.Counter
    )
    sent: int = 0
    received: int = 0
    changes: list[str] = dataclasses.field(default_factory=list)
    peak: int = 0
    """The most requests in the proxy at once (arrived, not yet answered)."""

    def of(self, *kinds: Kind) -> int:
        """How many requests of these kinds."""
        return sum(self.requests[kind] for kind in kinds)

    @property
    def total(self) -> int:
        return sum(self.requests.values())


class Proxy:
    """The running proxy (:func:`proxied`): its store and its counts. A request is
    counted in the window (between two :meth:`reset` calls) in which it arrived,
    the bytes of its answer when they come: a request its client gave up on (timed
    out, then sent again) and the store answers late is the window's where it was
    sent, never the next run's."""

    def __init__(self, upstream: Store, delay: float) -> None:
        self.upstream, self.delay = upstream, delay
        self.counts = Counts()
        self.session: aiohttp.ClientSession | None = None
        self._lock = threading.Lock()
        self._in_flight = 0
        self.port = free_port()
        origin = upstream.endpoint.split("/", 3)
        self._origin = "/".join(origin[:3])  # http://127.0.0.1:PORT
        suffix = f"/{origin[3]}" if len(origin) > 3 else ""
        self.store = _rebased(upstream, f"http://127.0.0.1:{self.port}{suffix}")
        """The store as a client reaches it through this proxy."""

    def reset(self) -> Counts:
        """The counts so far; they start again from zero."""
        with self._lock:
            counts, self.counts = self.counts, Counts()
        return counts

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP
        }
        lowered = {k.lower(): v for k, v in headers.items()}
        kind = kind_of(request.method, request.path, dict(request.query), lowered)
        with self._lock:  # counted where it arrived (see the class)
            counts = self.counts
            counts.requests[kind] += 1
            if request.method not in ("GET", "HEAD"):
                counts.changes.append(f"{request.method} {request.path_qs}")
            self._in_flight += 1
            counts.peak = max(counts.peak, self._in_flight)
        try:
            return await self._forwarded(request, headers, counts)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _forwarded(
        self, request: web.Request, headers: dict[str, str], counts: Counts
    ) -> web.StreamResponse:
        """``request`` held :attr:`delay`, sent on to the store, its answer sent
        back as it comes."""
        await asyncio.sleep(self.delay)
        url = f"{self._origin}{request.raw_path}"  # as sent: encoded, as signed
        assert self.session is not None, "handled only while serving"
        body = self._sent(request, counts) if request.body_exists else None
        async with self.session.request(
            request.method,
            url,
            headers=headers,
            data=body,
            allow_redirects=False,
            auto_decompress=False,
        ) as answer:
            reply = web.StreamResponse(
                status=answer.status,
                headers={
                    k: v
                    for k, v in answer.headers.items()
                    if k.lower() not in HOP_BY_HOP
                },
            )
            await reply.prepare(request)
            if request.method != "HEAD":
                async for piece in answer.content.iter_chunked(PIECE):
                    with self._lock:
                        counts.received += len(piece)
                    await reply.write(piece)
            await reply.write_eof()
        return reply

    async def _sent(self, request: web.Request, counts: Counts) -> AsyncIterator[bytes]:
        """The request's body as it comes, counted as it passes."""
        async for piece in request.content.iter_chunked(PIECE):
            with self._lock:
                counts.sent += len(piece)
            yield piece


def _rebased(store: Store, endpoint: str) -> Store:
    """``store`` as reached at ``endpoint``: every option naming its endpoint (the
    URL, a connection string) names ``endpoint`` instead."""

    def swap(options: dict[str, Any]) -> dict[str, Any]:
        return {
            k: v.replace(store.endpoint, endpoint) if isinstance(v, str) else v
            for k, v in options.items()
        }

    return dataclasses.replace(
        store,
        endpoint=endpoint,
        options=swap(store.options),
        config=swap(store.config),
    )


@contextmanager
def proxied(store: Store, delay: float = DELAY) -> Iterator[Proxy]:
    """A :class:`Proxy` in front of ``store`` for the duration of the block."""
    proxy = Proxy(store, delay)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    failure: list[BaseException] = []

    async def serve() -> None:
        app = web.Application(client_max_size=1 << 40)
        proxy.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=120),
            skip_auto_headers=("User-Agent", "Content-Type"),
        )
        app.router.add_route("*", "/{tail:.*}", proxy.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", proxy.port).start()
        ready.set()
        try:
            await stop.wait()
        finally:
            await proxy.session.close()
            await runner.cleanup()

    def run() -> None:
        try:
            loop.run_until_complete(serve())
        except OSError as exc:  # its port taken: reported to the caller below
            failure.append(exc)
            ready.set()
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="store-proxy", daemon=True)
    thread.start()
    if not ready.wait(30) or failure:
        cause = failure[0] if failure else None
        raise RuntimeError("the store proxy did not start") from cause
    try:
        yield proxy
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
