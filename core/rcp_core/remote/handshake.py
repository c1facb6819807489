"""Making a connection: :func:`dial` connects (TCP, then TLS with the server pinned,
unless encryption is off) and :func:`accept` does the server's half; both then exchange
hellos (:meth:`~rcp_core.remote.connection.Connection.greet`).

Invariants: connecting, the TLS handshake and the hello are bounded by ``timeout``
together (a hello trickled byte by byte too), and then every read inside a frame by
``timeout``; a socket whose handshake failed is closed; a stray connection that fails
its handshake never ends the transfer it was not part of (:func:`accept_next`).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable

from rcp_core.errors import (
    AuthenticationError,
    ConnectionLostError,
    PeerTimeoutError,
    RemoteError,
)
from rcp_core.remote import tls
from rcp_core.remote.connection import Connection, tune
from rcp_core.remote.hello import PROTOCOL, Hello, Role

log = logging.getLogger("rcp_core")


def dial(
    address: tuple[str, int],
    *,
    role: Role,
    software: str,
    timeout: float,
    pin: str | None,
    identity: tls.Identity | None = None,
    token: str | None = None,
    local_address: str | None = None,
) -> Connection:
    """Connect, handshake (TLS pinned to ``pin``; plain TCP when ``pin`` is None),
    and exchange hellos, all within ``timeout`` seconds.

    :param local_address: this host's address to connect from (``--bind-ip``;
        default: the kernel's choice).
    """
    deadline = time.monotonic() + timeout
    peer = f"{address[0]}:{address[1]}"
    source = None if local_address is None else (local_address, 0)
    try:
        sock = socket.create_connection(address, timeout, source)
    except TimeoutError as exc:
        raise PeerTimeoutError(f"connecting to {peer}: timed out") from exc
    except OSError as exc:
        raise ConnectionLostError(f"connecting to {peer}: {exc}") from exc
    ctx = tls.client_context(identity) if pin is not None else None
    return _handshake(
        sock,
        peer,
        None
        if ctx is None or pin is None
        else lambda s: tls.connect(s, ctx, pin, peer),
        lambda conn: conn.greet(Hello(PROTOCOL, role, software, token), first=True),
        deadline,
        timeout,
    )


def accept(
    sock: socket.socket,
    peer: str,
    *,
    role: Role,
    software: str,
    timeout: float,
    ctx: ssl.SSLContext | None,
    token: str | None = None,
) -> Connection:
    """The server's half of :func:`dial` on an accepted ``sock``, within ``timeout``."""
    return _handshake(
        sock,
        peer,
        None if ctx is None else lambda s: ctx.wrap_socket(s, server_side=True),
        lambda conn: conn.greet(
            Hello(PROTOCOL, role, software), token=token, first=False
        ),
        time.monotonic() + timeout,
        timeout,
    )


def accept_next(
    listener: socket.socket,
    deadline: float,
    who: str,
    *,
    role: Role,
    software: str,
    timeout: float,
    ctx: ssl.SSLContext | None,
) -> Connection:
    """The next connection on ``listener`` that completes the handshake, before
    ``deadline`` (``time.monotonic()``). One that fails it (a port scan, a wrong
    certificate) is dropped and logged, and the wait goes on: a stray connection
    never ends the transfer it was not part of.

    :param who: the peer expected, for messages ("the destination").
    :raises PeerTimeoutError: nobody completed a handshake in time.
    """
    while True:
        listener.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            sock, address = listener.accept()
        except TimeoutError as exc:
            raise PeerTimeoutError(
                f"{who} did not connect within {timeout:g} s"
            ) from exc
        peer = f"{who} {address[0]}:{address[1]}"
        try:
            return accept(
                sock, peer, role=role, software=software, timeout=timeout, ctx=ctx
            )
        except (RemoteError, OSError) as exc:
            log.warning("refused %s: %s", peer, exc)


def _handshake(
    sock: socket.socket,
    peer: str,
    secure: Callable[[socket.socket], socket.socket] | None,
    greet: Callable[[Connection], object],
    deadline: float,
    timeout: float,
) -> Connection:
    """TLS (``secure``, if any) and hellos on a connected ``sock`` by ``deadline``;
    then every read inside a frame is bounded by ``timeout``. ``sock`` is closed if
    anything fails."""
    try:
        tune(sock, timeout)
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        if secure is not None:
            try:
                sock = secure(sock)
            except RemoteError:
                raise
            except ssl.SSLError as exc:
                raise AuthenticationError(f"{peer}: TLS handshake: {exc}") from exc
            except TimeoutError as exc:
                raise PeerTimeoutError(f"{peer}: TLS handshake timed out") from exc
            except OSError as exc:  # reset or closed by the peer mid-handshake
                raise ConnectionLostError(f"{peer}: TLS handshake: {exc}") from exc
        conn = Connection(sock, peer)
        conn.settimeout(max(0.001, deadline - time.monotonic()))
        conn.reader.deadline = deadline  # a hello trickled byte by byte ends too
        greet(conn)
        conn.reader.deadline = None
        conn.settimeout(timeout)
        conn.wait_while_alive()
        return conn
    except BaseException:
        sock.close()
        raise
