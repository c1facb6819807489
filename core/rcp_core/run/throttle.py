"""A token bucket that caps metadata operations per second across all workers."""

from __future__ import annotations

import threading
import time


class TokenBucket:
    """Hands out ``rate`` tokens per second, with a burst of at most one second's worth
    (one token at least: a rate below one per second still hands one out).

    :meth:`take` blocks the calling worker until a token is free; the wait for one token
    is at most ``1 / rate`` seconds once the bucket is drained. Once ``interrupt`` is
    set, :meth:`take` returns at once, token or not (the run is stopping: its caller
    looks at that before it does anything).
    """

    def __init__(self, rate: float, interrupt: threading.Event | None = None) -> None:
        self.rate = rate
        self._interrupt = interrupt or threading.Event()
        self._burst = max(rate, 1.0)
        self._tokens = self._burst
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        while not self._interrupt.is_set():
            with self._lock:
                now = time.monotonic()
                self._tokens = min(
                    self._burst, self._tokens + (now - self._last) * self.rate
                )
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.rate
            self._interrupt.wait(wait)
