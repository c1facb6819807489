"""The helper processes of one run (:class:`Team`): started (once, never after it was
closed), given the caller's limit, finished and reaped.

How the caller works with each helper is :mod:`rcp_core.engine.helpers.caller`'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from rcp_core.engine.helpers.caller import POLL, READY_TIMEOUT, Helper
from rcp_core.engine.helpers.channel import Setup, Stop
from rcp_core.engine.walk import Walker
from rcp_core.paths import Job
from rcp_core.run.summary import Tally


class Team:
    """The helpers of one run, feeding on its pool.

    :param size: helper processes to start.
    :param eager: the helpers were asked for (``--max-processes``): the engine starts
        them before the walk, and :meth:`start` waits (bounded) until every one can
        take work. Otherwise the engine starts them when work queues up in a run
        expected to last long enough to repay them (:mod:`rcp_core.run.monitor`), and
        the caller goes on while they get ready.

    :meth:`start` and :meth:`close` may race (the monitor thread starts the team
    while the run ends): whichever comes first wins, and a team closed before it
    started never starts.
    """

    def __init__(self, walker: Walker, setup: Setup, size: int, *, eager: bool) -> None:
        self.walker = walker
        self.setup = setup
        self.eager = eager
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self.jobs: Mapping[Job, int] = {job: i for i, job in enumerate(setup.jobs)}
        self.helpers = [Helper(self, number) for number in range(size)]
        self.tallies: list[Tally] = [
            tally
            for helper in self.helpers
            for tally in (helper.remote, helper.local, helper.walked)
        ]
        """Every helper's counters (for progress and the summary)."""

    def start(self) -> None:
        """Spawn the helpers (once; never after :meth:`close`)."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
            for helper in self.helpers:
                helper.start()
        self.walker.ctx.on_stop.append(self._stop)
        if self.eager:
            deadline = time.monotonic() + READY_TIMEOUT
            for helper in self.helpers:
                while not helper.dead and not helper.ready.wait(POLL):
                    if time.monotonic() > deadline:
                        break

    def set_limit(self, workers: int) -> None:
        """Have every helper run ``workers`` batches at once, as the caller now does
        (before :meth:`start`: from their start)."""
        for helper in self.helpers:
            helper.set_limit(workers)

    def _stop(self, reason: str) -> None:
        for helper in self.helpers:
            helper.send_quietly(Stop(reason))

    def close(self) -> None:
        """After the pool ended: let every helper finish, collect its counts, reap it."""
        with self._lock:
            self._closed = True
            if not self._started:
                return
        for helper in self.helpers:
            helper.finish()
        for helper in self.helpers:
            helper.reap()

    @property
    def batches(self) -> int:
        """Batches the helpers took."""
        return sum(helper.sent for helper in self.helpers)
