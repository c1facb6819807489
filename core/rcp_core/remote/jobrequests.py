"""What a job of ``rcpd serve`` asks for: a copy on its host, or a role of a copy
between hosts (send, receive), and what its database keeps of each
(:mod:`rcp_core.remote.jobstore`): a copy's request whole, so a restarted service can
run it again; of a role, what its view shows (:class:`RecordedRequest`).

A job's ``on_restart`` (:func:`on_restart_of`) says what a restarted service does
with it if it was queued or running: ``resume`` (run it again from its start) only
for a copy whose rerun converges, ``fail`` otherwise.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, ClassVar

from rcp_core.errors import PathRefusedError, ProtocolError, UsageError
from rcp_core.remote.settingswire import settings_from_wire, settings_to_wire
from rcp_core.settings import CopySettings, ExistingPolicy


@dataclass(frozen=True, slots=True)
class CopyRequest:
    """What a client asked for: ``rcp SOURCES... DESTINATION`` on the service's host,
    paths as the client wrote them (the service confines them)."""

    sources: tuple[str, ...]
    destination: str
    settings: CopySettings
    kind: ClassVar[str] = "copy"


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Be the source of a copy between hosts: send ``sources`` (``(path, name)``
    pairs) to the destination that connects to ``listener`` with the certificate
    ``peer_cert`` (``None``: no encryption), at most ``bwlimit`` bytes per second
    (0: unlimited)."""

    sources: tuple[tuple[str, str], ...]
    settings: CopySettings
    listener: socket.socket
    peer_cert: str | None
    connections: int
    bwlimit: int = 0
    kind: ClassVar[str] = "send"


@dataclass(frozen=True, slots=True)
class ReceiveRequest:
    """Be the destination of a copy between hosts: connect to the source at
    ``address`` (its certificate pinned to ``pin``) and write ``destination``
    (``into``: into that directory)."""

    destination: str
    into: bool
    settings: CopySettings
    address: tuple[str, int]
    pin: str | None
    connections: int
    kind: ClassVar[str] = "receive"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """What a restarted service knows of a job it cannot run again (a role of a
    copy between hosts, a finished job): what its view shows."""

    kind: str
    sources: tuple[str, ...] | None
    destination: str | None


Request = CopyRequest | SendRequest | ReceiveRequest | RecordedRequest

RESUME, FAIL = "resume", "fail"
"""A job's ``on_restart``: run it again after a restart, or fail it."""


def on_restart_of(request: Request, asked: str | None) -> str:
    """A job's ``on_restart``: as ``asked`` (``resume`` or ``fail``), else
    ``resume`` for a copy whose rerun converges (not ``existing=error``), ``fail``
    for the others.

    :raises UsageError: a value that is neither, or ``resume`` for a job that
        cannot run again.
    """
    resumable = isinstance(request, CopyRequest) and (
        request.settings.existing is not ExistingPolicy.ERROR
    )
    if asked is None:
        return RESUME if resumable else FAIL
    if asked not in (RESUME, FAIL):
        raise UsageError(f"on_restart {asked!r}: resume or fail")
    if asked == RESUME and not resumable:
        raise UsageError(
            "on_restart resume needs a copy whose rerun converges: existing "
            "overwrite, update or ignore-existing (a role of a copy between hosts "
            "cannot run again)"
        )
    return asked


def operands_of(request: Request) -> tuple[list[str] | None, str | None]:
    """A request's sources and destination as its view shows them."""
    if isinstance(request, RecordedRequest):
        sources = None if request.sources is None else list(request.sources)
        return sources, request.destination
    sources = (
        None
        if isinstance(request, ReceiveRequest)
        else [s if isinstance(s, str) else s[0] for s in request.sources]
    )
    destination = None if isinstance(request, SendRequest) else request.destination
    return sources, destination


def recorded(request: Request) -> dict[str, Any]:
    """What the store keeps of a request: all of a copy's, a view of the others."""
    sources, destination = operands_of(request)
    stored: dict[str, Any] = {"sources": sources, "destination": destination}
    if isinstance(request, CopyRequest):
        stored["settings"] = settings_to_wire(request.settings)
    return stored


def restored(kind: str, request: dict[str, Any]) -> Request:
    """A stored job's request (of ``kind``, as :func:`recorded` kept it): a copy's
    whole, a view of the others'."""
    sources, destination = request["sources"], request["destination"]
    if kind == CopyRequest.kind:
        return CopyRequest(
            tuple(sources), destination, settings_from_wire(request["settings"])
        )
    return RecordedRequest(
        kind, None if sources is None else tuple(sources), destination
    )


def copy_request(request: dict[str, Any]) -> CopyRequest:
    """A client's ``submit`` as a copy request.

    :raises ProtocolError: operands that are not paths.
    :raises PathRefusedError: settings that would follow symlinks.
    """
    sources, destination = request.get("sources"), request.get("destination")
    if (
        not isinstance(sources, list)
        or not sources
        or not all(isinstance(s, str) for s in sources)
        or not isinstance(destination, str)
    ):
        raise ProtocolError("submit: sources (a list of paths) and destination")
    settings = settings_from_wire(request.get("settings", {}))
    if settings.dereference:
        raise PathRefusedError("a service does not follow symlinks (dereference)")
    return CopyRequest(tuple(sources), destination, settings)


MAX_CLIENT_NAME = 128


def submit_options(request: dict[str, Any], host: str) -> tuple[str | None, str]:
    """A submit's ``on_restart`` (``None``: the default) and the client it is for:
    the ``client`` it names (up to :data:`MAX_CLIENT_NAME` printable characters:
    a name for fairness between the clients of one token, not an identity), else
    ``host``, the address it came from.

    :raises ProtocolError: either is not a string, or the name is no name.
    """
    on_restart, client = request.get("on_restart"), request.get("client")
    if on_restart is not None and not isinstance(on_restart, str):
        raise ProtocolError("submit: on_restart must be a string")
    if client is None:
        return on_restart, host
    if (
        not isinstance(client, str)
        or not 0 < len(client) <= MAX_CLIENT_NAME
        or not client.isprintable()
    ):
        raise ProtocolError(f"submit: client must be 1-{MAX_CLIENT_NAME} printable")
    return on_restart, client
