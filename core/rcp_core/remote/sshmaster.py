"""The master of a remote copy: starts the roles, hands out jobs, collects their results.

A remote side is an ``rcpd`` started over SSH (:mod:`rcp_core.remote.ssh`: the system
OpenSSH client with the user's configuration); a local side runs in this process, so
no sshd is needed on this host. The master never
touches file data: the destination connects to the source directly.

Addresses: the destination reaches a remote source at the address the source's SSH
server saw (``SSH_CONNECTION``) or its host name; it reaches a local source at the
address from which this host's SSH connection arrived on its side.
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
from rcp_core.errors import ProtocolError, RemoteError, UsageError
from rcp_core.paths import check_destination, plan_names
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection
from rcp_core.remote.handshake import dial
from rcp_core.remote.hello import DRY_RUN, FILTERS, STOP, Role
from rcp_core.remote.outcome import RoleResult, counts_from_wire
from rcp_core.remote.roles import (
    SOFTWARE,
    Progress,
    run_destination,
    run_source,
)
from rcp_core.remote.settingswire import settings_to_wire
from rcp_core.remote.ssh import Launch, SshDaemon
from rcp_core.remote.wire import Frame, FrameKind
from rcp_core.settings import CopySettings

log = logging.getLogger("rcp_core")


class _Remote:
    """An ``rcpd`` role started over SSH, and the master's control connection to it."""

    def __init__(
        self,
        where: RemotePath,
        role: Role,
        launch: Launch,
        timeout: float,
        setup: dict[str, Any] | None = None,
    ) -> None:
        """Start ``ssh`` (it logs in while the master goes on; :meth:`connect` then
        talks to the daemon).

        :param setup: more of the setup line (a destination's ``destination``).
        """
        self.where, self.role, self.timeout = where, role, timeout
        self.setup = setup or {}
        self.name = f"rcpd ({role.value}) on {where.host}"
        args = ["--role", role.value, "--timeout", f"{timeout:g}"]
        self.daemon = SshDaemon(launch, where, args, self.name, timeout)

    def connect(self, me: tls.Identity, encrypt: bool) -> None:
        """Send the setup line, read the daemon's announcement, open the control
        connection; on failure the daemon is stopped.

        :raises UsageError: the daemon refused its destination (nothing was written).
        """
        where, timeout = self.where, self.timeout
        try:
            announce = self.daemon.exchange(
                {"master_cert": me.cert_pem, "encrypt": encrypt, **self.setup}
            )
            refused = announce.get("refused")
            if refused is not None:
                raise UsageError(f"{where.host}: {refused}")
            if not isinstance(announce.get("port"), int):
                raise ProtocolError(f"{where.host}: rcpd's announcement is malformed")
            self.cert: str = announce["cert"]
            self.port: int = announce["port"]
            self.address: str = announce.get("address") or where.host
            self.master_address: str | None = announce.get("master_address")
            self.control: Connection = dial(
                (self.address, self.port),
                role=Role.MASTER,
                software=SOFTWARE,
                timeout=timeout,
                pin=tls.pem_fingerprint(self.cert) if encrypt else None,
                identity=me,
            )
        except BaseException:
            self.stop()
            raise

    def send_job(self, **job: Any) -> None:
        self.control.send_control("job", **job)

    def watch(self, on_progress: Progress | None) -> None:
        """Read the daemon's reports in a thread of their own: ``progress`` goes to
        ``on_progress`` as it comes, ``result`` is kept for :meth:`result`."""
        self._outcome: RoleResult | BaseException = RemoteError(
            f"{self.name} ended without a result"
        )
        self._watcher = threading.Thread(
            target=self._watch, args=(on_progress,), daemon=True
        )
        self._watcher.start()

    def _watch(self, on_progress: Progress | None) -> None:
        try:
            while True:
                frame = self.control.expect(FrameKind.CONTROL)
                kind = frame.header.get("type")
                if kind == "result":
                    self._outcome = self._result(frame)
                    return
                if kind == "dry":
                    log.info("%s", frame.header.get("line"))
                    continue
                if kind != "progress":
                    raise ProtocolError(f"{self.name} sent {kind!r} before its result")
                if on_progress is not None:
                    on_progress(counts_from_wire(frame.header.get("counts")))
        except (RemoteError, OSError) as exc:
            self._outcome = exc

    def result(self) -> RoleResult:
        """The daemon's result (after :meth:`watch`); raises what ended it instead."""
        self._watcher.join()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def _result(self, frame: Frame) -> RoleResult:
        h = frame.header
        return RoleResult(
            self.role,
            h.get("ok") is True,
            counts_from_wire(h.get("counts")),
            [str(e) for e in h.get("errors") or []]
            or ([str(h["reason"])] if h.get("reason") else []),
            {k: float(h[k]) for k in ("cpu_user", "cpu_system", "peak_rss") if k in h},
        )

    def stop(self) -> None:
        """Close the control connection, then stop the daemon."""
        control: Connection | None = getattr(self, "control", None)
        if control is not None:
            control.close()
        self.daemon.stop()


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
) -> tuple[RoleResult, RoleResult]:
    """Copy ``source`` (one or several, all on one host or all local) to
    ``destination``, where a source or the destination is ``host:/path``.

    As with a local copy, a ``destination`` ending in ``/`` is a directory that
    receives the sources under their own names (needed for several sources);
    otherwise it is the exact name of the copy.

    :param on_progress: called about every second with the destination's counts so
        far (from a thread of this call).

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
    remotes: list[_Remote] = []
    try:
        # Both SSH logins run at once, and while this process makes its identity.
        src_remote = _Remote(src, Role.SOURCE, launch, timeout) if src else None
        if src_remote:
            remotes.append(src_remote)
        dst_remote = (
            _Remote(
                dst,
                Role.DESTINATION,
                launch,
                timeout,
                {"destination": _destination(dst.path, into, names, settings)},
            )
            if dst
            else None
        )
        if dst_remote:
            remotes.append(dst_remote)
        me = tls.Identity.ephemeral("rcp-master")
        for remote in remotes:
            remote.connect(me, encrypt)
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
            bind = "::" if ":" in (dst_remote.master_address or "") else "0.0.0.0"
            listener = socket.create_server((bind, 0), family=_family(bind))
            src_host = dst_remote.master_address or socket.gethostname()
            src_port, src_pin = listener.getsockname()[1], src_id.fingerprint
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
            )
        results = _run_local(local)
        results += [remote.result() for remote in remotes]
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


def _family(bind: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in bind else socket.AF_INET
