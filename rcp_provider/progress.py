"""Progress of a copy in an Airflow task log: a line every ``interval`` seconds, or
each time another 5% of a known total is done; never a ``\\r`` bar.

Called from the engine's monitor thread, the loop waiting for a service's job, or the
trigger of a deferred task (with a service job's ``progress``) with
``entries``, ``bytes``, ``errors``, ``elapsed`` and, when the work is known beforehand
(a shard of a plan), ``total_bytes``; the lines go to the task's logger, which is
thread-safe.
"""

from __future__ import annotations

import logging
from typing import Any

from rcp_core.run.summary import human_bytes
from rcp_provider.options import seconds

INTERVAL = 30.0
STEP = 0.05


class ProgressLog:
    """Throttled progress lines; with ``total_bytes``, a line also marks every 5%.

    :raises UsageError: ``interval`` is not a number of seconds above zero.
    """

    def __init__(
        self, log: logging.Logger | Any, *, interval: float = INTERVAL
    ) -> None:
        self.log = log
        self.interval = seconds("progress_interval", interval)
        self._shown_at = 0.0
        self._next_share = STEP

    def __call__(self, progress: dict[str, Any]) -> None:
        elapsed = float(progress.get("elapsed", 0.0))
        entries = int(progress.get("entries", 0))
        written = int(progress.get("bytes", 0))
        total = int(progress.get("total_bytes") or 0)
        share = written / total if total else None
        due = elapsed - self._shown_at >= self.interval
        if share is not None and share >= self._next_share:
            due = True
            self._next_share = (int(share / STEP) + 1) * STEP
        if not due:
            return
        self._shown_at = elapsed
        done = f" ({share:.0%} of {human_bytes(total)})" if share is not None else ""
        self.log.info(
            "rcp: %s entries, %s written%s, %d error(s), %.0f s",
            f"{entries:,}",
            human_bytes(written),
            done,
            int(progress.get("errors", 0)),
            elapsed,
        )
