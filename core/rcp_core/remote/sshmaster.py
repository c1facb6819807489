"""The master of a remote copy: checks the operands, starts the roles' SSH logins, and
hands the rest to :mod:`rcp_core.remote.sshcopy` (jobs, results), imported while the
logins run: this module imports only what starting them needs, so a one-file copy's
fixed cost overlaps the login instead of preceding it.

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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rcp_core.backends.capabilities import DECLARED, refuse
from rcp_core.backends.operands import RemotePath, parse_operand
from rcp_core.backends.routing import Engine, Storage
from rcp_core.errors import UsageError
from rcp_core.paths import check_destination, plan_names
from rcp_core.remote.hello import Role
from rcp_core.remote.ssh import Launch, SshDaemon, login
from rcp_core.settings import CopySettings

if TYPE_CHECKING:
    from rcp_core.remote.listening import PortRanges
    from rcp_core.remote.outcome import RoleResult
    from rcp_core.remote.receiving import Progress

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
    daemons: list[SshDaemon] = []
    try:
        # Both SSH logins run at once, while this process imports the rest of the
        # master and makes its identity (a login takes some hundreds of ms, they
        # tens).
        src_login = (
            login(launch, src, Role.SOURCE.value, timeout, ports) if src else None
        )
        daemons += [src_login] if src_login else []
        dst_login = (
            login(launch, dst, Role.DESTINATION.value, timeout, ports) if dst else None
        )
        daemons += [dst_login] if dst_login else []
        from rcp_core.remote.sshcopy import run_roles
    except BaseException:
        for daemon in daemons:
            daemon.stop()
        raise
    return run_roles(
        src_login,
        dst_login,
        {"destination": _destination(dst.path, into, names, settings)} if dst else {},
        named,
        dst_path,
        into,
        settings,
        launch=launch,
        connections=connections,
        timeout=timeout,
        encrypt=encrypt,
        on_progress=on_progress,
        bwlimit=bwlimit,
        ports=ports,
        bind_ip=bind_ip,
    )


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
