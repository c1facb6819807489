"""``rcp`` with a ``[user@]host[:port]:/path`` operand: the remote-copy master.

The options here only matter for remote copies. What a remote copy cannot do yet is
refused up front with the flags named (a usage error, nothing started). The remote
machinery (TLS, SSH) is imported only when an operand is remote, so a local copy's
start-up does not pay for it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import resource
import shlex
import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from rcp_core import CopySettings, Summary, UsageError
from rcp_core.backends import routing
from rcp_core.backends.operands import parse_operand
from rcp_core.backends.routing import Operand, Route, Storage
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Resources, human_bytes, merge
from rcp_provider.cli.launch import Interrupted

if TYPE_CHECKING:
    from rcp_core.backends.port import Port
    from rcp_core.remote.client import ServiceClient
    from rcp_core.remote.listening import PortRanges
    from rcp_core.remote.outcome import RoleResult
    from rcp_core.remote.ssh import Launch

log = logging.getLogger("rcp_core")


def add_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("remote copies ([user@]host[:port]:/path)")
    group.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        default=4,
        help="data connections between the daemons (default 4)",
    )
    group.add_argument(
        "--no-encryption",
        action="store_true",
        help="plain TCP without TLS or authentication, for trusted networks only",
    )
    group.add_argument(
        "--bwlimit",
        metavar="RATE",
        help="bytes per second the copy sends, all its connections together "
        "(K, M, G: 1024-based, as rsync reads them; 0 or none: unlimited)",
    )
    group.add_argument(
        "--port-ranges",
        metavar="RANGES",
        help="ports the copy's listeners may take on every host, e.g. "
        "40000-40099,41000:41009 (default: any free port; -v says which)",
    )
    group.add_argument(
        "--bind-ip",
        metavar="IP",
        help="this host's address for the copy: its listener binds to it and is "
        "reached there, its connections leave from it (default: the kernel's choice)",
    )
    add_launch_options(group)


def add_launch_options(group: argparse._ArgumentGroup) -> None:
    """The options that start ``rcpd`` on another host: ``rcp``'s and ``rcmp``'s."""
    group.add_argument(
        "--remote-timeout",
        type=float,
        metavar="SECONDS",
        default=15.0,
        help="seconds for each connection step and each stalled frame (default 15)",
    )
    group.add_argument(
        "--ssh",
        default="ssh -o BatchMode=yes",
        metavar="COMMAND",
        help="the SSH command that starts rcpd (default: %(default)s)",
    )
    group.add_argument(
        "--rcpd-path",
        default="rcpd",
        metavar="COMMAND",
        help="rcpd's command on the remote hosts (default: rcpd)",
    )
    group.add_argument(
        "--no-ssh-reuse",
        action="store_true",
        help="log in anew for every daemon (default: one SSH connection per host, "
        "kept 60 s for the next command, where your ssh config sets no "
        "ControlMaster or ControlPath)",
    )


REMOTE_OPTIONS = (
    "max_connections",
    "no_encryption",
    "bwlimit",
    "port_ranges",
    "bind_ip",
    "remote_timeout",
    "ssh",
    "rcpd_path",
    "no_ssh_reuse",
)
"""The options of :func:`add_options` and :func:`add_launch_options` (their ``dest``;
each is the long flag ``--dest-with-dashes``): they shape a copy between hosts only."""


SERVICE_OPTIONS = ("max_connections", "remote_timeout", "bwlimit")
"""The options of :data:`REMOTE_OPTIONS` that shape ``rcp``'s copy with a service
(``rcp://host/path``) too; encryption is the service URL's (its storage options),
a service's ports its own (``rcpd serve --port-ranges``)."""


def refuse_unused(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    storages: Collection[Storage],
    for_services: Collection[str] = (),
) -> None:
    """Refuse remote-copy options that would change nothing for operands on
    ``storages``: all of them without a ``host:/path``, all but ``for_services``
    with a service. A value equal to the default changes nothing, and passes.

    :raises UsageError: naming each such flag.
    """
    if Storage.HOST in storages:
        return
    honoured = set(for_services) if Storage.SERVICE in storages else set()
    given = [
        "--" + dest.replace("_", "-")
        for dest in REMOTE_OPTIONS
        if dest not in honoured
        and hasattr(args, dest)
        and getattr(args, dest) != parser.get_default(dest)
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)}: only for operands on another host (host:/path)"
        )


def launch_of(args: argparse.Namespace) -> Launch:
    """How to start ``rcpd``, from :func:`add_launch_options`'s options."""
    from rcp_core.remote.ssh import Launch

    return Launch(
        ssh=shlex.split(args.ssh), rcpd=args.rcpd_path, reuse=not args.no_ssh_reuse
    )


def port(
    operand: str,
    args: argparse.Namespace,
    sessions: contextlib.ExitStack,
    root: str | None = None,
) -> Port:
    """The backend port of the tree ``operand`` names (a path, a URL:
    :func:`rcp_provider.ports.port`); for ``host:/path``, a place on an ``rcpd
    serve --session`` started there over SSH (:func:`add_launch_options`), confined
    to ``root`` (default: the path), for as long as ``sessions`` lasts.

    :raises UsageError: no backend opens the URL.
    :raises RemoteError: the session could not be started.
    """
    from rcp_core.remote.ssh import ssh_service
    from rcp_provider.fsspec.service import RcpServiceFileSystem
    from rcp_provider.fsspec.serviceport import ServicePlace

    where = parse_operand(operand)
    if where is None:
        from rcp_provider.ports import port

        return port(routing.operand(operand))
    confined = dataclasses.replace(where, path=root or where.path)
    timeout = args.remote_timeout
    session = sessions.enter_context(ssh_service(confined, launch_of(args), timeout))
    fs = RcpServiceFileSystem(
        session.host,
        session.port,
        fingerprint=session.fingerprint,
        token=session.token,
        timeout=timeout,
        skip_instance_cache=True,
    )
    return ServicePlace.on(fs, where.path)


def run(
    args: argparse.Namespace,
    route: Route,
    settings: CopySettings,
    renderer: Callable[[Progress], None] | None,
) -> tuple[Summary, bool, RoleResult, RoleResult]:
    """Copy between hosts (``host:/path`` over SSH, or ``rcp://host/path``
    services): the summary, whether everything was copied, and the source's and the
    destination's results (:func:`render_roles`, :func:`roles_json`). ``renderer``
    shows the destination's progress.

    :raises UsageError: bad operands or options a remote copy does not support.
    :raises RemoteError: a daemon could not be started or reached, or failed.
    """
    if not 1 <= args.max_connections <= 256:
        raise UsageError("--max-connections must be between 1 and 256")
    bwlimit, ports, bind_ip = network_controls(args)
    if args.no_encryption:
        log.warning("rcp: --no-encryption: data and control travel in plain text")
    # Imported here: TLS and SSH cost a local copy's start-up nothing.
    from rcp_core.remote.outcome import merged_counts, role_summary
    from rcp_core.remote.sshmaster import remote_copy

    started, usage = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # a destination's writers

    seen: dict[str, int] = {}

    def show(counts: dict[str, int], final: bool = False) -> None:
        seen.update(counts)
        if renderer is not None:
            elapsed = time.monotonic() - started
            renderer(Progress(merge([counts]), elapsed, pending=0, final=final))

    try:
        if Storage.SERVICE in route.storages:
            source, destination = _with_services(args, route, settings, show, bwlimit)
        else:
            source, destination = remote_copy(
                route.paths[:-1],
                route.paths[-1],
                settings,
                connections=args.max_connections,
                timeout=args.remote_timeout,
                encrypt=not args.no_encryption,
                launch=launch_of(args),
                on_progress=show,
                bwlimit=bwlimit,
                ports=ports,
                bind_ip=bind_ip,
            )
    except KeyboardInterrupt as exc:  # the roles were stopped on the way out
        done = Summary(merge([seen]), Resources.since(started, usage, children))
        raise Interrupted.of(exc, done) from None
    show(merged_counts(source, destination), final=True)
    for result in (source, destination):
        if result.resources:  # a daemon's errors: its log lines stayed on its host
            for error in result.errors:
                log.error("%s: %s", result.role.value, error)
    summary = role_summary(
        source, destination, Resources.since(started, usage, children)
    )
    return summary, source.ok and destination.ok, source, destination


def network_controls(
    args: argparse.Namespace,
) -> tuple[int, PortRanges | None, str | None]:
    """``--bwlimit`` in bytes per second (0: none), ``--port-ranges`` and
    ``--bind-ip``, checked before anything starts.

    :raises UsageError: naming the flag whose value is bad.
    """
    # Imported here: a local copy's start-up does not pay for them.
    import ipaddress

    from rcp_core.remote.listening import port_ranges
    from rcp_core.sizes import parse_size

    bwlimit = 0
    if args.bwlimit is not None:
        try:
            bwlimit = parse_size(args.bwlimit)
        except UsageError as exc:
            raise UsageError(f"--bwlimit: {exc}") from None
    if args.bind_ip is not None:
        try:
            ipaddress.ip_address(args.bind_ip)
        except ValueError:
            raise UsageError(
                f"--bind-ip {args.bind_ip!r} is not an IP address"
            ) from None
    return bwlimit, port_ranges(args.port_ranges), args.bind_ip


def _with_services(
    args: argparse.Namespace,
    route: Route,
    settings: CopySettings,
    show: Callable[[dict[str, int]], None],
    bwlimit: int,
) -> tuple[RoleResult, RoleResult]:
    """The copy of a route with a service on one side or both: its roles run by
    the services (:func:`rcp_core.remote.servicemaster.service_copy`), a side of this
    host in this process. A service is reached as fsspec's ``rcp`` filesystem
    reaches it (the URL's host and port, the fingerprint and token of its storage
    options), on a connection of this copy's own, closed at its end."""
    from rcp_core.remote.servicemaster import service_copy
    from rcp_provider.fsspec.storage_options import service_path, service_url_options
    from rcp_provider.fsspec.storetree import filesystem_of

    with contextlib.ExitStack() as connections:

        def side(
            operands: Sequence[Operand],
        ) -> tuple[ServiceClient | None, list[str]]:
            if operands[0].storage is not Storage.SERVICE:
                return None, [o.path for o in operands]
            services = {str(service_url_options(o.text)) for o in operands}
            if len(services) > 1:
                raise UsageError("the sources must all be on one service")
            fs, _ = filesystem_of(operands[0].text, skip_instance_cache=True)
            connections.callback(fs.client.close)
            return fs.client, [service_path(o.text) for o in operands]

        source_service, sources = side(route.sources)
        destination_service, (destination,) = side([route.destination])
        if route.destination.text.endswith("/"):
            destination = destination.rstrip("/") + "/"
        return service_copy(
            sources,
            destination,
            settings,
            source_service=source_service,
            destination_service=destination_service,
            connections=args.max_connections,
            timeout=args.remote_timeout,
            on_progress=show if destination_service is None else None,
            bwlimit=bwlimit,
        )


def render_roles(source: RoleResult, destination: RoleResult) -> str:
    """One line per role: its CPU time and peak RSS (as rcp's remote summary)."""
    lines = []
    for result in (source, destination):
        r = result.resources
        if not r:
            lines.append(f"{result.role.value + ':':<13}in this process")
            continue
        lines.append(
            f"{result.role.value + ':':<13}cpu user {r.get('cpu_user', 0):.2f}s"
            f"  system {r.get('cpu_system', 0):.2f}s"
            f"  peak RSS {human_bytes(r.get('peak_rss', 0))}"
        )
    return "\n".join(lines)


def roles_json(source: RoleResult, destination: RoleResult) -> dict[str, Any]:
    """Each role's CPU time and peak RSS for the JSON summary (``null`` for a role
    that ran in this process: its figures are the summary's own)."""
    roles: dict[str, Any] = {}
    for result in (source, destination):
        r = result.resources
        roles[result.role.value] = (
            {
                "cpu_user_s": round(r.get("cpu_user", 0.0), 6),
                "cpu_system_s": round(r.get("cpu_system", 0.0), 6),
                "peak_rss_bytes": int(r.get("peak_rss", 0)),
            }
            if r
            else None
        )
    return roles
