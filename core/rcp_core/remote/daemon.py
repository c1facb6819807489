"""``rcpd --role source|destination``: a data role started over SSH by a master.

The conversation, in order (``docs/remote_protocol.md``):

1. stdin, one JSON line from the master: its certificate, and whether to encrypt;
   for a destination, where the copy will land (``destination``), which it checks by
   the operand rules (:func:`rcp_core.paths.check_destination`) before anything else;
2. stdout, one JSON line back: the protocol version, the port this daemon listens
   on, its certificate, and the address the SSH client reached it at; or, when the
   destination is refused, only the version and ``refused`` (the reason), and it
   exits 2;
3. the master connects (mutual TLS: only the master's certificate is accepted) and
   sends the ``job``; the daemon runs its role on the same listener (a destination
   reports ``progress`` on that connection every second);
4. it answers ``result`` (counts, errors, CPU time, peak RSS) and exits: 0 when
   everything was copied, 1 when something was not.

It exits at once when stdin closes (the SSH session, so the master, is gone), and
every wait before the job is bounded by ``--timeout``.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from rcp_core.errors import (
    PeerTimeoutError,
    ProtocolError,
    RcpError,
    RemoteError,
    UsageError,
)
from rcp_core.paths import check_destination
from rcp_core.remote import tls
from rcp_core.remote.handshake import accept_next
from rcp_core.remote.hello import PROTOCOL, Role
from rcp_core.remote.listening import PortRanges, listen
from rcp_core.remote.receivedtree import check_name
from rcp_core.remote.receiving import Progress
from rcp_core.remote.roles import (
    SOFTWARE,
    job_bwlimit,
    run_destination,
    run_source,
)
from rcp_core.remote.settingswire import settings_from_wire
from rcp_core.remote.wire import FrameKind
from rcp_core.settings import ExistingPolicy

log = logging.getLogger("rcp_core")

GONE = 3
"""Exit status when the master went away."""


def read_line(stream: Any, timeout: float, peer: str) -> str:
    """One line from a pipe within ``timeout`` seconds (``peer`` writes it)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise PeerTimeoutError(f"no setup line from {peer} within {timeout:g} s")
    line: str = stream.readline()
    if not line:
        raise RemoteError(f"{peer} closed the setup channel")
    return line


def _watch_stdin() -> None:
    """The SSH session (and so the master) is gone when stdin closes: stop now."""
    while os.read(0, 4096):
        pass
    os._exit(GONE)


def ssh_addresses() -> tuple[str | None, str | None]:
    """(the SSH client's address, ours as it reached us), from ``SSH_CONNECTION``."""
    parts = os.environ.get("SSH_CONNECTION", "").split()
    if len(parts) == 4:
        return parts[0], parts[2]
    return None, None


def resources() -> dict[str, float]:
    """This daemon's use so far, with its reaped children's (a destination's
    writer processes)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_user": usage.ru_utime + children.ru_utime,
        "cpu_system": usage.ru_stime + children.ru_stime,
        "peak_rss": max(usage.ru_maxrss, children.ru_maxrss) * 1024,
    }


def serve(
    role: Role, bind: str, timeout: float, ports: PortRanges | None = None
) -> int:
    """Run one role for one master over stdin/stdout; the exit status.

    :param bind: the address it listens on; ``ports``: the ports it may (any free
        one when ``None``).
    """
    # Made before the setup line arrives: the master makes its own meanwhile.
    identity = tls.Identity.ephemeral(f"rcpd-{role.value}")
    setup = json.loads(read_line(sys.stdin, timeout, "the master"))
    if not isinstance(setup, dict) or not isinstance(setup.get("master_cert"), str):
        raise ProtocolError("setup line without the master's certificate")
    try:
        _check(role, setup.get("destination"))
    except UsageError as exc:
        print(json.dumps({"rcpd": list(PROTOCOL), "refused": str(exc)}), flush=True)
        return 2
    encrypt = setup.get("encrypt", True) is not False
    client_ip, our_ip = ssh_addresses()
    listener = listen(bind, ports)
    announce = {
        "rcpd": list(PROTOCOL),
        "port": listener.getsockname()[1],
        "cert": identity.cert_pem,
        "address": our_ip,
        "master_address": client_ip,
    }
    print(json.dumps(announce), flush=True)
    threading.Thread(target=_watch_stdin, daemon=True).start()
    ctx = tls.server_context(identity, setup["master_cert"]) if encrypt else None
    master = accept_next(
        listener,
        time.monotonic() + timeout,
        "the master",
        role=role,
        software=SOFTWARE,
        timeout=timeout,
        ctx=ctx,
    )
    job = master.expect(FrameKind.CONTROL, "job").header

    def report(counts: dict[str, int]) -> None:
        master.send_control("progress", counts=counts)

    def say(line: str) -> None:
        master.send_control("dry", line=line)

    try:
        counts, errors = _run(
            role, job, identity, listener, encrypt, timeout, report, say
        )
    except (RcpError, OSError) as exc:
        master.send_control("result", ok=False, reason=str(exc), **resources())
        master.close()
        return 1
    master.send_control(
        "result", ok=not errors, counts=counts, errors=errors[:100], **resources()
    )
    master.close()
    return 0 if not errors else 1


def _check(role: Role, destination: Any) -> None:
    """A destination's operand rules, checked before it announces itself: the
    setup's ``destination`` says where the copy lands (``dst``, ``into``) under which
    ``names``, and the ``existing`` policy (a master older than 1.11 says nothing,
    and an existing entry is then an entry error of the copy).

    :raises UsageError: the destination is refused; nothing was written.
    :raises ProtocolError: ``destination`` is malformed.
    """
    if role is not Role.DESTINATION or destination is None:
        return
    if not isinstance(destination, dict):
        raise ProtocolError("setup: destination is not an object")
    dst, into = destination.get("dst"), destination.get("into")
    names, existing = destination.get("names"), destination.get("existing")
    if (
        not isinstance(dst, str)
        or not isinstance(into, bool)
        or not isinstance(names, list)
    ):
        raise ProtocolError("setup: destination needs dst, into and names")
    try:
        policy = ExistingPolicy(existing)
    except ValueError as exc:
        raise ProtocolError(f"setup: unknown existing policy {existing!r}") from exc
    check_destination(dst, into, [check_name(name) for name in names], policy)


def _run(
    role: Role,
    job: dict[str, Any],
    identity: tls.Identity,
    listener: socket.socket,
    encrypt: bool,
    timeout: float,
    report: Progress,
    say: Callable[[str], None],
) -> tuple[dict[str, int], list[str]]:
    connections = job.get("connections")
    if not isinstance(connections, int) or not 1 <= connections <= 256:
        raise ProtocolError(f"job: bad connection count {connections!r}")
    if role is Role.SOURCE:
        peer = job.get("peer_cert")
        if encrypt and not isinstance(peer, str):
            raise ProtocolError("job: the destination's certificate is missing")
        ctx = tls.server_context(identity, peer) if encrypt else None
        return run_source(
            listener,
            ctx,
            _sources(job),
            settings_from_wire(job.get("settings", {})),
            connections=connections,
            timeout=timeout,
            bwlimit=job_bwlimit(job),
        )
    dst, host, port = job.get("dst"), job.get("host"), job.get("port")
    pin = job.get("pin")
    if (
        not isinstance(dst, str)
        or not isinstance(host, str)
        or not isinstance(port, int)
    ):
        raise ProtocolError("job: dst, host and port are required")
    if encrypt and not isinstance(pin, str):
        raise ProtocolError("job: the source's fingerprint is missing")
    into = job.get("into", False)
    if not isinstance(into, bool):
        raise ProtocolError("job: into must be true or false")
    return run_destination(
        (host, port),
        pin if encrypt else None,
        identity if encrypt else None,
        dst,
        settings_from_wire(job.get("settings")),
        connections=connections,
        timeout=timeout,
        on_progress=report,
        into=into,
        say=say,
    )


def _sources(job: dict[str, Any]) -> list[tuple[str, str]]:
    """A source job's ``(path, destination name)`` pairs (``src`` and ``dst_name``
    from a master that sends one source)."""
    sources = job.get("sources")
    if sources is None:
        sources = [[job.get("src"), job.get("dst_name")]]
    if not isinstance(sources, list) or not sources:
        raise ProtocolError("job: sources must be a non-empty list")
    pairs: list[tuple[str, str]] = []
    for pair in sources:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(part, str) for part in pair)
        ):
            raise ProtocolError("job: each source is a [path, name] pair of strings")
        pairs.append((pair[0], check_name(pair[1])))
    return pairs
