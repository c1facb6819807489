"""A token bucket that caps metadata operations per second across all workers."""

from __future__ import annotations

import threading
import time


class TokenBucket:
    """Hands out ``rate`` tokens per second, with a burst of at most one second's worth.

    :meth:`take` blocks the calling worker until a token is free; the wait for one token
    is at most ``1 / rate`` seconds once the bucket is drained.
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._tokens = rate
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                self._tokens = min(
                    self.rate, self._tokens + (now - self._last) * self.rate
                )
                self._last = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                wait = (1 - self._tokens) / self.rate
            time.sleep(wait)
