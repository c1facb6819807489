"""A service as one side of a copy between hosts: ``send`` and ``receive`` requests.

A client (:func:`rcp_core.remote.servicemaster.service_copy`) asks one service to
*send* paths beneath its roots -- it opens a listener and answers with its port, and
only the destination whose certificate the client gave may connect -- and the other
side (a service asked to *receive*, or the client's own process) connects and
writes. Data flows between the two sides directly, never through the client.

Both are jobs of the service (state, progress, summary, cancel like a copy job) that
start at once: their peer is waiting. Paths are confined to the roots like every
path a service touches, and every wait is bounded by the service's timeout.
"""

from __future__ import annotations

import resource
import time
from typing import Any

from rcp_core.errors import PathRefusedError, ProtocolError, RcpError
from rcp_core.paths import check_destination
from rcp_core.remote import tls
from rcp_core.remote.job import Job, Outcome
from rcp_core.remote.jobrequests import ReceiveRequest, SendRequest
from rcp_core.remote.listening import PortRanges, listen
from rcp_core.remote.receivedtree import check_name
from rcp_core.remote.roles import job_bwlimit, run_destination, run_source
from rcp_core.remote.roots import Confined, Roots
from rcp_core.remote.settingswire import settings_from_wire
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Resources, Summary, merge
from rcp_core.settings import CopySettings

MAX_CONNECTIONS = 64


def send_request(
    request: dict[str, Any],
    roots: Roots,
    bind: str,
    encrypt: bool,
    ports: PortRanges | None = None,
) -> SendRequest:
    """A ``send`` request checked, its sources confined (now, to refuse at once),
    and its listener open on ``bind``, on a port of ``ports`` (the service's
    ``--port-ranges``).

    :raises PathRefusedError: a source is not beneath a root.
    """
    sources = request.get("sources")
    if not isinstance(sources, list) or not sources:
        raise ProtocolError("send: sources must be a non-empty list of [path, name]")
    pairs: list[tuple[str, str]] = []
    for pair in sources:
        if not isinstance(pair, list) or len(pair) != 2:
            raise ProtocolError("send: each source is a [path, name] pair")
        path, name = pair
        if not isinstance(path, str):
            raise ProtocolError("send: a source path must be a string")
        roots.source(path).close()
        pairs.append((path, check_name(name)))
    peer = request.get("peer_cert")
    if encrypt and not isinstance(peer, str):
        raise ProtocolError("send: the destination's certificate is missing")
    bwlimit = job_bwlimit(request)
    listener = listen(bind, ports)
    return SendRequest(
        tuple(pairs),
        _settings(request),
        listener,
        peer if encrypt else None,
        _connections(request),
        bwlimit,
    )


def receive_request(
    request: dict[str, Any], roots: Roots, encrypt: bool
) -> ReceiveRequest:
    """A ``receive`` request checked and its destination confined (now)."""
    destination, into = request.get("destination"), request.get("into", False)
    source = request.get("source")
    if not isinstance(destination, str) or not isinstance(into, bool):
        raise ProtocolError("receive: destination (a path) and into (a boolean)")
    if not isinstance(source, dict):
        raise ProtocolError("receive: source must be an object")
    host, port, pin = source.get("host"), source.get("port"), source.get("pin")
    if not isinstance(host, str) or not isinstance(port, int):
        raise ProtocolError("receive: the source's host and port are required")
    if encrypt and not isinstance(pin, str):
        raise ProtocolError("receive: the source's fingerprint is missing")
    settings = _settings(request)
    confined = _destination(roots, destination, into)
    try:
        check_destination(
            confined.path,
            into,
            _names(request),
            settings.existing,
            shown=destination.rstrip("/") or "/",
        )
    finally:
        confined.close()
    return ReceiveRequest(
        destination,
        into,
        settings,
        (host, port),
        pin if encrypt else None,
        _connections(request),
    )


def run_send(
    job: Job,
    request: SendRequest,
    roots: Roots,
    identity: tls.Identity | None,
    timeout: float,
) -> Summary:
    """Send the confined sources to the destination that connects; the summary.
    Cancelling ``job`` stops the sending (and a wait for the destination)."""
    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    confined: list[Confined] = []
    try:
        try:
            confined.extend(roots.source(path) for path, _ in request.sources)
        except PathRefusedError as exc:
            raise Outcome(str(exc)) from exc
        ctx = (
            tls.server_context(identity, request.peer_cert)
            if identity is not None and request.peer_cert is not None
            else None
        )
        names = [name for _, name in request.sources]
        pairs = [(c.path, name) for c, name in zip(confined, names, strict=True)]
        try:
            counts, errors = run_source(
                request.listener,
                ctx,
                pairs,
                request.settings,
                connections=request.connections,
                timeout=timeout,
                bwlimit=request.bwlimit,
                cancel=job.cancel,
            )
        except (RcpError, OSError) as exc:
            raise Outcome(str(exc)) from exc
        return _unless_cancelled(
            job, _summary(counts, errors, started, (usage, children))
        )
    finally:
        request.listener.close()
        for c in confined:
            c.close()


def run_receive(
    job: Job,
    request: ReceiveRequest,
    roots: Roots,
    identity: tls.Identity | None,
    timeout: float,
) -> Summary:
    """Connect to the source and write the confined destination; the summary.
    Cancelling ``job`` tells the source to stop and finishes what arrived."""
    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        confined = _destination(roots, request.destination, request.into)
    except PathRefusedError as exc:
        raise Outcome(str(exc)) from exc

    def report(counts: dict[str, int]) -> None:
        elapsed = time.monotonic() - started
        job.report(Progress(merge([counts]), elapsed, pending=0))

    try:
        counts, errors = run_destination(
            request.address,
            request.pin,
            identity if request.pin is not None else None,
            confined.path,
            request.settings,
            connections=request.connections,
            timeout=timeout,
            on_progress=report,
            into=request.into,
            cancel=job.cancel,
        )
    except (RcpError, OSError) as exc:
        raise Outcome(str(exc)) from exc
    finally:
        confined.close()
    return _unless_cancelled(job, _summary(counts, errors, started, (usage, children)))


def _unless_cancelled(job: Job, summary: Summary) -> Summary:
    """``summary``, unless the job was cancelled: a role stopped by its cancel
    returns what it did, and cannot tell that from the whole copy, so it ends
    cancelled with that partial summary.

    :raises Outcome: the job was cancelled.
    """
    if job.cancel.is_set():
        raise Outcome("cancelled", summary)
    return summary


def _names(request: dict[str, Any]) -> list[str]:
    """The names a ``receive`` request's sources get under its destination (none
    from a client older than the field: the receiving role's entry errors are the
    backstop then), each one safe path component.

    :raises ProtocolError: not a list of such names.
    """
    names = request.get("names", [])
    if not isinstance(names, list):
        raise ProtocolError("receive: names must be a list")
    return [check_name(name) for name in names]


def _destination(roots: Roots, path: str, into: bool) -> Confined:
    """A destination confined: with ``into``, the directory itself."""
    return roots.destination(path.rstrip("/") + "/" if into else path)


def _summary(
    counts: dict[str, int],
    errors: list[str],
    started: float,
    usage: tuple[resource.struct_rusage, resource.struct_rusage],
) -> Summary:
    """A role's summary; :class:`Outcome` (with it) when anything failed."""
    summary = Summary(
        merge([counts]),
        Resources.since(started, *usage),
        errors=tuple((error, 1, "") for error in errors[:100]),
    )
    if errors or summary["errors"]:
        raise Outcome(f"{max(len(errors), summary['errors'])} error(s)", summary)
    return summary


def _settings(request: dict[str, Any]) -> CopySettings:
    settings = settings_from_wire(request.get("settings", {}))
    if settings.dereference:
        raise PathRefusedError("a service does not follow symlinks (dereference)")
    return settings


def _connections(request: dict[str, Any]) -> int:
    connections = request.get("connections", 4)
    if not isinstance(connections, int) or not 1 <= connections <= MAX_CONNECTIONS:
        raise ProtocolError(f"bad connection count {connections!r}")
    return connections
