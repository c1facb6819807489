"""A token bucket that caps a rate across all the threads that take from it: metadata
operations per second (``--ops-throttle``), bytes per second (``--bwlimit``)."""

from __future__ import annotations

import threading
import time


class TokenBucket:
    """Hands out ``rate`` tokens per second, with a burst of at most one second's worth
    (one token at least: a rate below one per second still hands one out).

    :meth:`take` takes its ``amount`` at once, into debt if need be, and then blocks
    its caller until the bucket is out of debt: whatever the amounts and however many
    threads take, what was taken by time ``t`` is at most one burst plus ``rate * t``,
    and an amount larger than the burst (a 4 MiB frame under a 1 MB/s cap) passes
    after its own time at that rate. Once ``interrupt`` is set, :meth:`take` returns
    at once (the run is stopping: its caller looks at that before it does anything).
    """

    def __init__(self, rate: float, interrupt: threading.Event | None = None) -> None:
        self.rate = rate
        self._interrupt = interrupt or threading.Event()
        self._burst = max(rate, 1.0)
        self._tokens = self._burst
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def take(self, amount: float = 1.0) -> None:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(
                self._burst, self._tokens + (now - self._last) * self.rate
            )
            self._last = now
            self._tokens -= amount
            debt = -self._tokens
        if debt > 0:
            self._interrupt.wait(debt / self.rate)
