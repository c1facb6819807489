"""systemd's notification protocol (``sd_notify(3)``), for ``rcpd serve`` run as a
``Type=notify`` unit (``contrib/systemd/rcpd.service``): ``READY=1`` once it
listens, ``STOPPING=1`` when it stops, and ``WATCHDOG=1`` every half
``WatchdogSec`` while the service answers (:class:`Watchdog`).

Nothing is sent without ``$NOTIFY_SOCKET`` (a process systemd did not start). A
message is one datagram to that socket; a name starting with ``@`` is an abstract
socket. A message that cannot be sent is logged, never fatal: the service serves on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable

log = logging.getLogger("rcp_core")


def notify(message: str) -> bool:
    """Send ``message`` (``KEY=VALUE`` lines) to systemd; whether there was a
    socket to send it to."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    address = "\0" + path[1:] if path.startswith("@") else path
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError as exc:
        log.warning("cannot notify systemd at %s: %s", path, exc)
    return True


def watchdog_interval() -> float | None:
    """Seconds between two ``WATCHDOG=1`` (half ``$WATCHDOG_USEC``), when systemd
    watches this process; ``None`` otherwise."""
    usec, pid = os.environ.get("WATCHDOG_USEC"), os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    with contextlib.suppress(ValueError):
        if int(usec) > 0:
            return int(usec) / 2e6
    return None


class Watchdog:
    """Pings systemd every ``interval`` seconds while ``alive()`` answers true; a
    service whose ``alive()`` blocks (a deadlock) or says false stops the pings, and
    systemd restarts it."""

    def __init__(self, interval: float, alive: Callable[[], bool]) -> None:
        self.interval, self.alive = interval, alive
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="rcpd-watchdog", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self.alive():
                notify("WATCHDOG=1")
