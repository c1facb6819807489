"""A source's late data connections (protocol 1.15): those a destination adds while
the copy runs, for its writer processes (:mod:`rcp_core.remote.writers`).

The destination's control ``attach`` says how many may come (``more``, at most
``MAX_MORE_DATA``). A :class:`LateData` thread takes them on the copy's listener,
each authenticated exactly as the first ones (TLS pinned to the destination's
certificate, the hello, an ``attach`` of channel ``data``, whose ``group``, protocol
1.16, names the writer process it serves), and gives each to the sender, which starts
a sender thread for it (paced by the same ``bwlimit`` bucket).
It ends when the sender has no more use for connections, when ``more`` came, or at
:meth:`LateData.stop`, which wakes its wait in ``accept`` by shutting the listener
down (its owner closes it after the transfer). A connection that fails its handshake
is refused and logged, and the wait goes on.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from rcp_core.errors import PeerTimeoutError, ProtocolError, RemoteError
from rcp_core.remote.connection import Connection
from rcp_core.remote.hello import MAX_MORE_DATA
from rcp_core.remote.wire import FrameKind

if TYPE_CHECKING:
    from rcp_core.remote.send import Sender
    from rcp_core.run.throttle import TokenBucket

log = logging.getLogger("rcp_core")


def more_data(attach: Mapping[str, Any]) -> int:
    """The data connections a destination may add while the copy runs (its control
    ``attach``'s ``more``, protocol 1.15)."""
    return _bounded(attach, "more", 0) if "more" in attach else 0


def late_group(attach: Mapping[str, Any]) -> int | None:
    """The writer process a late data connection serves (its ``attach``'s
    ``group``, protocol 1.16: 1 to ``MAX_MORE_DATA``); ``None`` from an older
    destination."""
    return _bounded(attach, "group", 1) if attach.get("group") is not None else None


def _bounded(attach: Mapping[str, Any], key: str, low: int) -> int:
    """``attach[key]``, a whole number from ``low`` to ``MAX_MORE_DATA``."""
    value = attach[key]
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not low <= value <= MAX_MORE_DATA
    ):
        raise ProtocolError(f"attach: bad {key} {value!r}")
    return value


class LateData:
    """Takes the data connections a destination adds while the copy runs (at most
    ``more``), each authenticated as the first ones were, and gives them to the
    sender. Ends at :meth:`stop`, which wakes its wait in ``accept`` by shutting the
    listener down (its owner closes it after the transfer)."""

    def __init__(
        self,
        listener: socket.socket,
        accepting: Callable[[float], Connection],
        sender: Sender,
        more: int,
        timeout: float,
        pace: TokenBucket | None,
    ) -> None:
        self.listener = listener
        self.accepting = accepting
        self.sender = sender
        self.left = more
        self.timeout = timeout
        self.pace = pace
        self.stopped = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name="rcp-late-data", daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        while self.left and not self.stopped.is_set():
            try:
                conn = self.accepting(time.monotonic() + self.timeout)
            except PeerTimeoutError:
                continue  # nobody came: the destination may add them later
            except OSError:
                return  # the listener was shut down: the transfer ended
            try:
                header = conn.expect(FrameKind.CONTROL, "attach").header
                if header.get("channel") != "data":
                    raise ProtocolError(f"unexpected attach {header.get('channel')!r}")
                group = late_group(header)
            except (RemoteError, OSError) as exc:
                log.warning("refused a late data connection: %s", exc)
                conn.close()
                continue
            conn.pace = self.pace
            self.left -= 1
            if not self.sender.add_data(conn, group):
                conn.close()
                return

    def stop(self) -> None:
        self.stopped.set()
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.thread.join(self.timeout)
