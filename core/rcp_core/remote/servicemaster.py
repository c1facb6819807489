"""Copies between this host and ``rcpd serve`` services, or between two services.

The other launch mode of a copy between hosts (besides ``rcpd`` over SSH,
:mod:`rcp_core.remote.sshmaster`): the caller -- the Airflow hook, a script -- holds
authenticated :class:`~rcp_core.remote.client.ServiceClient` connections and asks a
service to *send* or *receive* (:mod:`rcp_core.remote.rolejobs`); a side that
is this host runs in this process. Data flows between the two sides directly.

Certificates are pinned both ways as over SSH: a service's is the one its client
pinned; this process's roles make fresh ones, and each side is told exactly the
other's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from rcp_core.backends.capabilities import DECLARED, refuse
from rcp_core.backends.routing import Engine, Storage
from rcp_core.errors import PeerTimeoutError, UsageError
from rcp_core.paths import check_destination, plan_names
from rcp_core.remote import tls
from rcp_core.remote.client import FINISHED, ServiceClient
from rcp_core.remote.hello import Role
from rcp_core.remote.listening import listen
from rcp_core.remote.outcome import RoleResult, role_result
from rcp_core.remote.receiving import Progress
from rcp_core.remote.roles import (
    STALL,
    run_destination,
    run_source,
)
from rcp_core.settings import CopySettings

POLL = 1.0
"""Seconds between looks at a service's job while it runs."""


def service_copy(
    sources: Sequence[str],
    destination: str,
    settings: CopySettings | None = None,
    *,
    source_service: ServiceClient | None = None,
    destination_service: ServiceClient | None = None,
    connections: int = 4,
    timeout: float = 15.0,
    on_progress: Progress | None = None,
    bwlimit: int = 0,
) -> tuple[RoleResult, RoleResult]:
    """Copy ``sources`` to ``destination`` by ``rcp``'s operand rules (a
    ``destination`` ending in ``/`` receives the sources under their names).

    :param source_service: where the sources are (``None``: this host).
    :param destination_service: where the destination is (``None``: this host).
    :param on_progress: the destination's counts about every second, when it is
        this host.
    :param bwlimit: bytes per second the source sends at most (0: unlimited).
    :returns: the source's and the destination's results.
    :raises UsageError: neither side is a service, bad operands, or a service
        refused a path; nothing was started.
    """
    settings = settings or CopySettings()
    if source_service is not None and destination_service is not None:
        sent, received = start_between(
            sources,
            destination,
            settings,
            source_service=source_service,
            destination_service=destination_service,
            connections=connections,
            bwlimit=bwlimit,
        )
        return _result(source_service, sent, Role.SOURCE), _result(
            destination_service, received, Role.DESTINATION
        )
    named, destination, into = _plan(
        sources, destination, settings, source_service, destination_service
    )
    if source_service is None:
        assert destination_service is not None
        return _push(
            named,
            destination,
            into,
            settings,
            destination_service,
            connections,
            timeout,
            bwlimit,
        )
    return _pull(
        named,
        destination,
        into,
        settings,
        source_service,
        connections,
        timeout,
        on_progress,
        bwlimit,
    )


def start_between(
    sources: Sequence[str],
    destination: str,
    settings: CopySettings,
    *,
    source_service: ServiceClient,
    destination_service: ServiceClient,
    connections: int = 4,
    bwlimit: int = 0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start a copy from one service to another and return at once: the send job
    (of ``source_service``) and the receive job (of ``destination_service``), which
    go on without this process; once both ended,
    :func:`rcp_core.remote.outcome.roles_summary` judges them as
    :func:`service_copy` does.

    :raises UsageError: bad operands, or a service refused a path; nothing runs.
    """
    named, destination, into = _plan(
        sources, destination, settings, source_service, destination_service
    )
    job, port = source_service.send(
        named,
        settings,
        peer_cert=destination_service.certificate(),
        connections=connections,
        bwlimit=bwlimit,
    )
    try:
        received = destination_service.receive(
            destination,
            settings,
            into=into,
            source=(source_service.address[0], port),
            pin=source_service.fingerprint,
            connections=connections,
            names=[name for _, name in named],
        )
    except BaseException:
        source_service.cancel(job["job"])
        raise
    return job, received


def _plan(
    sources: Sequence[str],
    destination: str,
    settings: CopySettings,
    source_service: ServiceClient | None,
    destination_service: ServiceClient | None,
) -> tuple[list[tuple[str, str]], str, bool]:
    """The ``(source, name)`` pairs, the destination (absolute where it is this
    host) and whether it receives the sources under their names.

    :raises UsageError: neither side is a service, a setting the sides cannot
        honour, or bad operands.
    """
    if source_service is None and destination_service is None:
        raise UsageError("service_copy needs a source or destination service")
    refuse(
        settings,
        Engine.REMOTE,
        DECLARED[Storage.SERVICE if source_service else Storage.LOCAL],
        DECLARED[Storage.SERVICE if destination_service else Storage.LOCAL],
    )
    into = destination.endswith("/")
    if destination_service is None:
        destination = os.path.abspath(destination)
    if source_service is None:
        sources = [os.path.abspath(s) for s in sources]
    named = plan_names(sources, destination.rstrip("/") or "/", into, settings)
    return named, destination, into


def _push(
    named: list[tuple[str, str]],
    destination: str,
    into: bool,
    settings: CopySettings,
    service: ServiceClient,
    connections: int,
    timeout: float,
    bwlimit: int,
) -> tuple[RoleResult, RoleResult]:
    """This host sends; the service receives (it connects back to this host)."""
    service_cert = service.certificate()
    me = tls.Identity.ephemeral("rcp-source") if service_cert else None
    here = service.local_address()
    listener = listen(here)
    try:
        job = service.receive(
            destination,
            settings,
            into=into,
            source=(here, listener.getsockname()[1]),
            pin=me.fingerprint if me else None,
            connections=connections,
            names=[name for _, name in named],
        )
        ctx = tls.server_context(me, service_cert) if me and service_cert else None
        try:
            counts, errors = run_source(
                listener,
                ctx,
                named,
                settings,
                connections=connections,
                timeout=timeout,
                bwlimit=bwlimit,
            )
        except BaseException:
            service.cancel(job["job"])
            raise
    finally:
        listener.close()
    sent = RoleResult(Role.SOURCE, not errors, counts, errors)
    return sent, _result(service, job, Role.DESTINATION)


def _pull(
    named: list[tuple[str, str]],
    destination: str,
    into: bool,
    settings: CopySettings,
    service: ServiceClient,
    connections: int,
    timeout: float,
    on_progress: Progress | None,
    bwlimit: int,
) -> tuple[RoleResult, RoleResult]:
    """The service sends; this host receives (it connects to the service)."""
    check_destination(destination, into, [name for _, name in named], settings.existing)
    me = tls.Identity.ephemeral("rcp-destination") if service.fingerprint else None
    job, port = service.send(
        named,
        settings,
        peer_cert=me.cert_pem if me else None,
        connections=connections,
        bwlimit=bwlimit,
    )
    try:
        counts, errors = run_destination(
            (service.address[0], port),
            service.fingerprint,
            me,
            destination,
            settings,
            connections=connections,
            timeout=timeout,
            on_progress=on_progress,
            into=into,
        )
    except BaseException:
        service.cancel(job["job"])
        raise
    written = RoleResult(Role.DESTINATION, not errors, counts, errors)
    return _result(service, job, Role.SOURCE), written


class StallWatch:
    """The one stall rule of the jobs of a copy between services, whoever waits
    on them (this module, the Airflow trigger): stalled once none of them showed
    new progress for ``STALL`` seconds."""

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}
        self._deadline = time.monotonic() + STALL

    def stalled(self, job_id: str, progress: Any) -> bool:
        """Whether the jobs stalled, told ``job_id``'s latest ``progress``."""
        if self._seen.get(job_id) != progress:
            self._seen[job_id] = progress
            self._deadline = time.monotonic() + STALL
        return time.monotonic() > self._deadline


def _result(service: ServiceClient, job: dict[str, Any], role: Role) -> RoleResult:
    """A service's role job once it ended; waits at most ``STALL`` seconds after
    the job last made progress."""
    watch = StallWatch()
    while job.get("state") not in FINISHED:
        job = service.wait(job["job"], POLL)
        if watch.stalled(job["job"], job.get("progress")):
            service.cancel(job["job"])
            raise PeerTimeoutError(f"{role.value} job {job['job']} stalled")
    return role_result(job, role)
