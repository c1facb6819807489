"""Hostile connections against a real ``rcpd serve``, while a client's job runs.

Each round opens, all at once, connections that would hold a slot of the service
for ever if any wait were unbounded, and some that must be refused outright:

- half-open: connects, sends nothing;
- trickled TLS: sends a real TLS ClientHello one byte per :data:`TICK`;
- trickled hello: completes TLS, then sends its hello frame one byte per tick
  (every read is short; only the handshake's deadline ends it);
- wrong token: completes TLS, sends a whole hello with a wrong token;
- no TLS: sends a plain hello frame to the TLS port.

Every one must be hung up by the service within :data:`BOUND` (its ``--timeout``
plus slack), while a real client's copy job in the same round succeeds exactly; a
client pinning another fingerprint is refused by its own side. Afterwards the
service still answers and stops cleanly.

Figure: hostile connections made / hung up in time (plus the round's job).
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rcp_core.errors import AuthenticationError
from rcp_core.remote.client import ServiceClient
from rcp_core.remote.hello import PROTOCOL
from rcp_core.remote.wire import FrameKind, encode
from support.reliability import Figure, Scale, published
from support.services import TOKEN, RcpdServe
from support.treecmp import TreeCompare
from support.treespec import File, make_tree

pytestmark = pytest.mark.slow

TIMEOUT = 2.0
"""The service's ``--timeout``: for a handshake, TLS and hellos together."""
BOUND = TIMEOUT + 2.0
"""Longest a hostile connection may stay open."""
TICK = 0.2
"""Between two trickled bytes: far below the timeout, so no single read times out."""
EACH = 5
"""Connections of each kind per round (five kinds: 25, well below ``max_clients``)."""

Opening = Callable[[tuple[str, int]], socket.socket]


def hello(token: str) -> bytes:
    header = {
        "protocol": list(PROTOCOL),
        "role": "client",
        "software": "hostile",
        "token": token,
    }
    return encode(FrameKind.HELLO, header)


def unverified() -> ssl.SSLContext:
    """A client TLS context that trusts anyone: a stranger's, not a client's."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def client_hello() -> bytes:
    """The first flight of a real TLS handshake."""
    tls = unverified().wrap_bio(ssl.MemoryBIO(), outgoing := ssl.MemoryBIO())
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def plain(address: tuple[str, int]) -> socket.socket:
    return socket.create_connection(address, timeout=TIMEOUT)


def encrypted(address: tuple[str, int]) -> socket.socket:
    return unverified().wrap_socket(plain(address))


KINDS: dict[str, tuple[Opening, bytes, bytes]] = {
    "half-open": (plain, b"", b""),
    "trickled TLS": (plain, b"", client_hello()),
    "trickled hello": (encrypted, b"", hello(TOKEN)),
    "wrong token": (encrypted, hello("wrong"), b""),
    "no TLS": (plain, hello(TOKEN), b""),
}
"""Each kind: how it connects, what it sends at once, what it trickles."""


def held(sock: socket.socket, first: bytes, trickle: bytes) -> float | None:
    """Send ``first``, then ``trickle`` one byte per :data:`TICK`, reading all the
    while; seconds until the service hung up, or ``None`` if it had not after twice
    :data:`BOUND`."""
    started = time.monotonic()
    sock.settimeout(TICK)
    with contextlib.suppress(OSError):
        sock.sendall(first)
    sent = 0
    while time.monotonic() - started < 2 * BOUND:
        try:
            if sent < len(trickle):
                sock.sendall(trickle[sent : sent + 1])
                sent += 1
            if not sock.recv(4096):
                break
        except TimeoutError:
            continue
        except OSError:  # reset, or TLS torn down: hung up all the same
            break
    else:
        return None
    return time.monotonic() - started


def attack(address: tuple[str, int], kind: str) -> str:
    """One hostile connection of ``kind``; what went wrong, if anything."""
    opening, first, trickle = KINDS[kind]
    try:
        sock = opening(address)
    except OSError:  # the TLS handshake itself refused: hung up at once
        return ""
    with sock:
        took = held(sock, first, trickle)
    if took is None or took > BOUND:
        return f"{kind}: open {took if took is None else round(took, 1)} s"
    return ""


def one_round(
    service: RcpdServe, data: Path, backup: Path, tag: str, tree_compare: TreeCompare
) -> tuple[list[str], list[str]]:
    """Every hostile kind :data:`EACH` times and one real job, all at once; what
    went wrong with the connections, and with the job."""
    make_tree(data / tag, {f"f{i}": File(os.urandom(50_000)) for i in range(40)})

    def job() -> str:
        with service.client() as client:
            done = client.wait(
                client.submit([str(data / tag)], f"{backup}/")["job"], 60
            )
        if done["state"] != "succeeded":
            return f"the job {done['state']}: {done.get('error')}"
        differences = tree_compare(data / tag, backup / tag)
        return f"the job's copy differs: {differences[:3]}" if differences else ""

    attacks = [kind for kind in KINDS for _ in range(EACH)]
    with ThreadPoolExecutor(len(attacks) + 1) as pool:
        copying = pool.submit(job)
        found = [
            p for p in pool.map(lambda k: attack(service.address, k), attacks) if p
        ]
        return found, [p for p in [copying.result()] if p]


def stranger(service: RcpdServe) -> list[str]:
    """A client that pins a fingerprint not the service's: what went wrong (it must
    refuse the service before it sends its token)."""
    try:
        with ServiceClient(
            *service.address, fingerprint="0" * 64, token=TOKEN, timeout=TIMEOUT
        ) as client:
            client.jobs()
    except AuthenticationError:
        return []
    return ["a client pinning another fingerprint was served"]


def test_hostile_connections_are_hung_up_in_time_while_a_job_runs(
    tmp_path: Path, scale: Scale, figures: list[Figure], tree_compare: TreeCompare
) -> None:
    figure = published(
        figures,
        "hostile input",
        "connections: half-open, trickled TLS and hello, wrong token, no TLS",
    )
    data, backup = tmp_path / "data", tmp_path / "backup"
    data.mkdir()
    backup.mkdir()
    (tmp_path / "token").write_text(TOKEN)
    service = RcpdServe(
        [
            *("--root", str(data), "--root", str(backup)),
            *("--token-file", str(tmp_path / "token")),
            *("--identity", str(tmp_path / "id"), "--timeout", str(TIMEOUT)),
        ]
    )
    try:
        for n in range(scale.trials(fast=1, full=12)):
            connections, job = one_round(service, data, backup, f"r{n}", tree_compare)
            figure.tried += EACH * len(KINDS) + 1
            for problem in connections:
                figure.failed(f"round {n}: {problem}", hang=True)
            for problem in job:
                figure.failed(f"round {n}: {problem}", lost=True)
            figure.survived += EACH * len(KINDS) + 1 - len(connections) - len(job)
        figure.trial("a client pinning another fingerprint", stranger(service))
        with service.client() as client:
            assert len(client.jobs()) == scale.trials(fast=1, full=12)
    finally:
        assert service.stop() == 0, service.stderr
    assert figure.clean, figure.notes
