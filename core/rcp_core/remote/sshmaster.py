"""The master of a remote copy: starts the roles, hands out jobs, collects their results.

A remote side is an ``rcpd`` started over SSH (:mod:`rcp_core.remote.ssh`: the system
OpenSSH client with the user's configuration); a local side runs in this process, so
no sshd is needed on this host. The master never
touches file data: the destination connects to the source directly.

Addresses: the destination reaches a remote source at the address the source's SSH
server saw (``SSH_CONNECTION``) or its host name; it reaches a local source at
``bind_ip`` (``--bind-ip``), or else at the address from which this host's SSH
connection arrived on its side. Every listener takes a port of ``ports``
(``--port-ranges``); ``-v`` says which (:mod:`rcp_core.remote.listening`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rcp_core.backends.capabilities import DECLARED, refuse
from rcp_core.backends.operands import RemotePath, parse_operand
from rcp_core.backends.routing import Engine, Storage
from rcp_core.errors import RemoteError, UsageError
from rcp_core.paths import check_destination, plan_names
from rcp_core.remote import tls
from rcp_core.remote.hello import (
    BWLIMIT,
    DRY_RUN,
    FILTERS,
    LATE_DATA,
    RESUME,
    STOP,
    Role,
)
from rcp_core.remote.listening import (
    ANY_IPV4,
    PortRanges,
    listen,
    tell_listening,
)
from rcp_core.remote.outcome import RoleResult
from rcp_core.remote.receiving import Progress
from rcp_core.remote.roles import (
    run_destination,
    run_source,
)
from rcp_core.remote.settingswire import settings_to_wire
from rcp_core.remote.ssh import Launch
from rcp_core.remote.sshrole import RemoteRole
from rcp_core.settings import CopySettings

log = logging.getLogger("rcp_core")


def remote_copy(
    source: str | Sequence[str],
    destination: str,
    settings: CopySettings | None = None,
    *,
    connections: int = 4,
    timeout: float = 15.0,
    encrypt: bool = True,
    launch: Launch | None = None,
    on_progress: Progress | None = None,
    bwlimit: int = 0,
    ports: PortRanges | None = None,
    bind_ip: str | None = None,
) -> tuple[RoleResult, RoleResult]:
    """Copy ``source`` (one or several, all on one host or all local) to
    ``destination``, where a source or the destination is ``host:/path``.

    As with a local copy, a ``destination`` ending in ``/`` is a directory that
    receives the sources under their own names (needed for several sources);
    otherwise it is the exact name of the copy.

    :param on_progress: called about every second with the destination's counts so
        far (from a thread of this call).
    :param bwlimit: bytes per second the source sends at most, all its data
        connections together (0: unlimited; a source daemon older than protocol
        1.13 is refused one).
    :param ports: the ports every listener of the copy may take (the daemons' and
        this host's: ``--port-ranges``).
    :param bind_ip: this host's address for the copy: its own source listens on it
        and is reached there, its connections leave from it (``--bind-ip``).

    :returns: the source's and the destination's results.
    :raises UsageError: no operand is remote, the operands do not fit together,
        ``settings`` ask for what a remote copy does not do yet, or the destination
        breaks the operand rules (:func:`rcp_core.paths.check_destination`: checked
        here, or by a destination daemon before it announces itself); nothing was
        written.
    """
    settings = settings or CopySettings()
    launch = launch or Launch()
    sources = [source] if isinstance(source, str) else list(source)
    src, src_paths = _sources(sources)
    dst = parse_operand(destination)
    if src is None and dst is None:
        raise UsageError("remote_copy needs a host:/path operand")
    refuse(
        settings,
        Engine.REMOTE,
        DECLARED[Storage.HOST if src else Storage.LOCAL],
        DECLARED[Storage.HOST if dst else Storage.LOCAL],
    )
    dst_path = dst.path if dst else os.path.abspath(destination)
    into = destination.endswith("/")
    named = plan_names(src_paths, dst_path, into, settings)
    names = [name for _, name in named]
    if dst is None:  # here: checked now; on a host, by its daemon before it starts
        check_destination(destination, into, names, settings.existing)
    remotes: list[RemoteRole] = []
    try:
        # Both SSH logins run at once, and while this process makes its identity.
        src_remote = (
            RemoteRole(src, Role.SOURCE, launch, timeout, ports=ports) if src else None
        )
        if src_remote:
            remotes.append(src_remote)
        dst_remote = (
            RemoteRole(
                dst,
                Role.DESTINATION,
                launch,
                timeout,
                {"destination": _destination(dst.path, into, names, settings)},
                ports,
            )
            if dst
            else None
        )
        if dst_remote:
            remotes.append(dst_remote)
        me = tls.Identity.ephemeral("rcp-master")
        for remote in remotes:
            remote.connect(me, encrypt, bind_ip)
        local: list[Callable[[], RoleResult]] = []

        if src_remote is not None:
            src_host, src_port, src_pin = (
                src_remote.address,
                src_remote.port,
                tls.pem_fingerprint(src_remote.cert),
            )
        else:
            assert dst_remote is not None
            src_id = tls.Identity.ephemeral("rcp-source")
            reached = bind_ip or dst_remote.master_address
            any_address = "::" if ":" in (reached or "") else ANY_IPV4
            listener = listen(bind_ip or any_address, ports)
            src_host = reached or socket.gethostname()
            src_port, src_pin = listener.getsockname()[1], src_id.fingerprint
            tell_listening("the source here", src_host, src_port)
            dst_cert = dst_remote.cert

            def run_local_source() -> RoleResult:
                try:
                    ctx = tls.server_context(src_id, dst_cert) if encrypt else None
                    counts, errors = run_source(
                        listener,
                        ctx,
                        named,
                        settings,
                        connections=connections,
                        timeout=timeout,
                        bwlimit=bwlimit,
                    )
                    return RoleResult(Role.SOURCE, not errors, counts, errors)
                finally:
                    listener.close()

            local.append(run_local_source)

        for remote in remotes:
            needed = _needed_version(settings)
            if remote.control.version < needed:
                major, minor = remote.control.version
                raise UsageError(
                    f"{remote.name} speaks protocol {major}.{minor}; these options "
                    f"need {needed[0]}.{needed[1]}: install a newer rcp there"
                )
            if remote is src_remote and bwlimit and remote.control.version < BWLIMIT:
                major, minor = remote.control.version
                raise UsageError(
                    f"{remote.name} speaks protocol {major}.{minor}; --bwlimit needs "
                    f"{BWLIMIT[0]}.{BWLIMIT[1]}: install a newer rcp there"
                )
            remote.watch(on_progress if remote is dst_remote else None)
        if dst_remote is not None:
            dst_remote.send_job(
                dst=dst_path,
                into=into,
                host=src_host,
                port=src_port,
                pin=src_pin,
                settings=settings_to_wire(settings),
                connections=connections,
            )
        else:
            dst_id = tls.Identity.ephemeral("rcp-destination")

            def run_local_destination() -> RoleResult:
                counts, errors = run_destination(
                    (src_host, src_port),
                    src_pin if encrypt else None,
                    dst_id if encrypt else None,
                    dst_path,
                    settings,
                    connections=connections,
                    timeout=timeout,
                    on_progress=on_progress,
                    into=into,
                    local_address=bind_ip,
                )
                return RoleResult(Role.DESTINATION, not errors, counts, errors)

            local.append(run_local_destination)
        if src_remote is not None:
            peer_cert = dst_remote.cert if dst_remote is not None else dst_id.cert_pem
            src_remote.send_job(
                sources=[list(pair) for pair in named],
                peer_cert=peer_cert,
                settings=settings_to_wire(settings),
                connections=connections,
                **({"bwlimit": bwlimit} if bwlimit else {}),
            )
        results = _run_local(local)
        results += [remote.result() for remote in remotes]
    except (RemoteError, OSError):
        for remote in remotes:  # the next command logs in anew
            launch.forget(remote.where)
        raise
    finally:
        for remote in remotes:
            remote.stop()
    by_role = {r.role: r for r in results}
    return by_role[Role.SOURCE], by_role[Role.DESTINATION]


def _sources(sources: list[str]) -> tuple[RemotePath | None, list[str]]:
    """The sources' host (``None``: local) and their absolute paths there.

    :raises UsageError: there is none, or they are on several hosts.
    """
    if not sources:
        raise UsageError("need at least one source")
    parsed = [parse_operand(s) for s in sources]
    hosts = {(p.user, p.host, p.port) if p else None for p in parsed}
    if len(hosts) > 1:
        raise UsageError("sources must all be on one host, or all local")
    first = parsed[0]
    if first is None:
        return None, [os.path.abspath(s) for s in sources]
    return first, [p.path for p in parsed if p is not None]


def _destination(
    path: str, into: bool, names: list[str], settings: CopySettings
) -> dict[str, Any]:
    """What a destination daemon checks before it starts
    (:func:`rcp_core.paths.check_destination`)."""
    return {
        "dst": path,
        "into": into,
        "names": names,
        "existing": settings.existing.value,
    }


def _needed_version(settings: CopySettings) -> tuple[int, int]:
    """The oldest daemon that honours ``settings`` (an older one would ignore them:
    a dry run that writes, a mirror that deletes nothing)."""
    defaults = CopySettings()
    if settings.max_processes is not None:
        return LATE_DATA
    if settings.resume:
        return RESUME
    if (
        settings.fail_early
        or settings.ops_throttle
        or settings.retries != defaults.retries
        or settings.retry_delay != defaults.retry_delay
    ):
        return STOP
    if settings.dry_run is not None:
        return DRY_RUN
    if (
        settings.delete
        or settings.includes
        or settings.excludes
        or settings.filter_file
        or settings.gitignore
    ):
        return FILTERS
    return (1, 0)


def _run_local(jobs: list[Callable[[], RoleResult]]) -> list[RoleResult]:
    """Run the local roles in threads; their results, or their first error raised."""
    results: list[RoleResult] = []
    errors: list[BaseException] = []

    def run(job: Callable[[], RoleResult]) -> None:
        try:
            results.append(job())
        except (RemoteError, OSError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
