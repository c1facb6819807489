"""The roles of a copy over SSH once their logins run (:mod:`rcp_core.remote.sshmaster`
starts them, then imports this): the master's identity, the control connections, the
jobs, the local roles in threads, and their results.

Invariants: every daemon is stopped when this returns or raises; a copy that fails
with a connection's error forgets its hosts' shared SSH connections (the next command
logs in anew); a daemon older than the options need is refused before it is given a
job (:func:`needed_version`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rcp_core.errors import RemoteError, UsageError
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
from rcp_core.remote.listening import ANY_IPV4, PortRanges, listen, tell_listening
from rcp_core.remote.outcome import RoleResult
from rcp_core.remote.receiving import Progress
from rcp_core.remote.roles import run_destination, run_source
from rcp_core.remote.settingswire import settings_to_wire
from rcp_core.remote.ssh import Launch, SshDaemon
from rcp_core.remote.sshrole import RemoteRole
from rcp_core.settings import CopySettings


def run_roles(
    src_login: SshDaemon | None,
    dst_login: SshDaemon | None,
    dst_setup: dict[str, Any],
    named: Sequence[tuple[str, str]],
    dst_path: str,
    into: bool,
    settings: CopySettings,
    *,
    launch: Launch,
    connections: int,
    timeout: float,
    encrypt: bool,
    on_progress: Progress | None,
    bwlimit: int,
    ports: PortRanges | None,
    bind_ip: str | None,
) -> tuple[RoleResult, RoleResult]:
    """Run a copy whose remote roles are logging in (``src_login``, ``dst_login``;
    ``None``: that role runs here): :func:`rcp_core.remote.sshmaster.remote_copy`'s
    parameters, its sources ``named`` (path, name at the destination)."""
    src_remote = RemoteRole(src_login, Role.SOURCE, timeout) if src_login else None
    dst_remote = (
        RemoteRole(dst_login, Role.DESTINATION, timeout, dst_setup)
        if dst_login
        else None
    )
    remotes = [remote for remote in (src_remote, dst_remote) if remote is not None]
    try:
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
            needed = needed_version(settings)
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


def needed_version(settings: CopySettings) -> tuple[int, int]:
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
