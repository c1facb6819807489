"""Helper processes on demand: a run's :class:`~rcp_core.engine.helpers.team.Team`, built
when it starts.

The team's machinery (:mod:`rcp_core.engine.helpers.caller`,
:mod:`rcp_core.engine.helpers.channel`: sockets, pickle, subprocess and the message classes)
costs a command-line run about 17 ms to import. Most runs that may use helpers never start
one -- a small tree, or a few large files, is copied before the first backlog -- so
:class:`Crew` builds the team (and imports it) only in :meth:`Crew.start`.

Invariants:

- :attr:`Crew.tallies` is one list for the whole run; the helpers' counters join it
  (``list.extend``, atomic under the GIL) when the team is built, so a reader that
  copied it earlier (the monitor's progress) sees a consistent, shorter list;
- the helpers follow the caller's limit: :meth:`Crew.set_limit` before the team
  exists is remembered and given to it when it is built;
- a crew closed before it started never builds a team; :meth:`Crew.start` and
  :meth:`Crew.close` may race (the monitor thread starts the crew while the run ends),
  and the team's own start/close rule decides the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from rcp_core.run.summary import Tally

if TYPE_CHECKING:
    from rcp_core.engine.helpers.team import Team


class Crew:
    """The helper processes a run may start.

    :param build: makes the team (importing its modules) with :attr:`eager`; called
        at most once.
    :param eager: the helpers were asked for (``--max-processes``): the engine starts
        the crew before the walk instead of at the first backlog.
    """

    def __init__(
        self, build: Callable[[bool], Team], *, eager: bool, limit: int
    ) -> None:
        self.eager = eager
        self.limit = limit
        """Batches each helper runs at once: the caller's workers' limit."""
        self.tallies: list[Tally] = []
        """Every helper's counters, once the team exists (for progress and the summary)."""
        self._build = build
        self._team: Team | None = None
        self._closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Build the team (once) and start it, unless the crew was closed."""
        with self._lock:
            if self._closed:
                return
            if self._team is None:
                self._team = self._build(self.eager)
                self._team.set_limit(self.limit)
                self.tallies.extend(self._team.tallies)
            team = self._team
        team.start()

    def set_limit(self, workers: int) -> None:
        """The caller's controller moved its limit: the helpers follow."""
        with self._lock:
            self.limit = workers
            team = self._team
        if team is not None:
            team.set_limit(workers)

    def close(self) -> None:
        """After the pool ended: let the helpers finish and reap them, if any."""
        with self._lock:
            self._closed = True
            team = self._team
        if team is not None:
            team.close()

    @property
    def team(self) -> Team | None:
        """The team, once :meth:`start` built it."""
        return self._team

    @property
    def batches(self) -> int:
        """Batches the helpers took."""
        return self._team.batches if self._team is not None else 0
