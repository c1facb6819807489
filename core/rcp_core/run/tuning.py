"""Concurrency bounds and the adaptive controller that moves within them.

The controller is Vegas-like. Each tick it receives how many workers were busy on
average and how much work they finished (entries, plus one unit per MiB of data). From
those it derives the *time per unit of work per worker*::

    latency = busy_workers * tick_seconds / units

While more workers only hide waiting (network round trips, parallel filesystems), the
rate grows with them and the latency stays at its baseline; once the storage or the CPU
saturates, extra workers only queue, and the latency grows with them. So:

- latency below ``alpha`` x baseline while the limit is what holds workers back: grow
  (by a quarter, at least one) -- latency is hiding work;
- latency above ``beta`` x baseline: shrink (by a fifth, at least one) -- the storage
  slowed down or is saturated;
- in between: hold.

The first tick only sets the baseline (it includes start-up) -- unless the process's
own CPU time says its workers wait: every worker busy while the whole process used
less than ``wait_share`` of one core means each item partly waits for the storage (a
cold cache: ext4, 10k x 1 KiB cold used 0.67-0.79 of a core over the first tick with
one worker, the kernel's work of reading inodes and the helpers' feeder threads
included; warm exactly 1.0 in every run), so a second one in flight hides that wait;
that is evidence to grow at once, without a baseline. CPU-bound work (a warm local
copy, however many threads hold the GIL) uses a core or more and stays where the
plugin started it. A growth that is followed by a shrink failed: the next growth waits
a cooldown that doubles with each failure (and resets when a growth holds), so where
the best setting is the lowest one (a CPU- or create-bound local disk) the limit stays
there instead of oscillating between it and the next step up.

Waiting workers are also how a *contended* CPU looks: another busy process on the
machine, and the copy's threads get less than a core between them (0.67-0.74 in every
tick, where alone it gets 0.96-1.0). More threads then win a larger share of the CPUs
(the scheduler shares per thread, and a copy is mostly system time, outside the GIL):
ext4, Linux tree beside one busy loop, 4 workers per process were 1.27-1.36x faster
than 1, although each worker's latency grew 1.8x with the second worker -- past
``beta``, so the rule above undid every such growth. So a growth made in a tick whose
workers waited is judged by what it was for: when the next tick's latency ratio is
past ``alpha``, the growth is kept if the process got ``share_gain`` more of a core or
did ``rate_gain`` more work, and its rate of work did not collapse (``collapse``);
then the latency there becomes the baseline and the limit doubles, judged the same
way (a short copy lasts a few ticks: the climb must arrive within them). Otherwise it
is undone, with the cooldown below. A first tick's growth is only undone by a
collapse: that tick's share and rate, taken during start-up, are no reference; nor
is the tick in which helper processes start (:meth:`Controller.restart`). A copy
that is CPU-bound on an idle machine never waits, so never grows this way. Measured
side by side (Linux tree, medians of 3-4): beside one busy loop auto went from 1.19x
to 1.07x the best fixed setting, beside two from 1.27x to 1.04x; alone, on a cold
cache and on the latency FUSE unchanged.

The baseline is the lowest latency seen since the last *probe*: now and then (after 2,
4, 8, ... ticks, then every ``probe_every``) the controller halves the limit for one
tick and takes that tick's latency as the new baseline, as BBR re-measures its minimum
RTT. At the minimum limit every tick is such a measurement, so there the baseline
follows each tick's latency (the first tick's, which includes start-up, would
otherwise stay as the baseline for ever). A probe finds the true baseline when the
run started above the storage's knee, and follows storage that got permanently slower
or faster; between probes the baseline cannot creep upwards. A probe costs about half
a tick of throughput every ``probe_every`` ticks. The controller is a pure function
of its inputs: tests drive it with simulated storage.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rcp_core.errors import PluginError


@dataclass(frozen=True, slots=True)
class Concurrency:
    """How many workers copy at once, and within which bounds the controller moves.

    :param initial: workers in flight at the start.
    :param minimum: the controller never goes below this.
    :param maximum: ... nor above this (also the most threads a process starts).
    :param adaptive: let the controller move; ``False`` keeps ``initial`` fixed.
    :param chunk_size: files larger than this are copied as chunks in parallel;
        0 copies every file whole.
    :param processes: processes that copy files, this one included; more than one
        where a single Python process saturates a core
        (:mod:`rcp_core.engine.helpers.caller`).
    :param aside: large files (:data:`rcp_core.engine.entries.ASIDE_BYTES`) whose in-kernel
        copy may run beside the workers, outside ``maximum``
        (:meth:`rcp_core.run.pool.WorkPool.aside`); 0 keeps every copy within it.
    """

    initial: int
    minimum: int = 1
    maximum: int = 64
    adaptive: bool = True
    chunk_size: int = 0
    processes: int = 1
    aside: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.initial <= self.maximum:
            raise PluginError(
                f"need 1 <= minimum <= initial <= maximum, got {self.minimum}, "
                f"{self.initial}, {self.maximum}"
            )
        if self.chunk_size < 0:
            raise PluginError("chunk_size must not be negative")
        if self.processes < 1:
            raise PluginError("processes must be at least 1")
        if self.aside < 0:
            raise PluginError("aside must not be negative")

    @classmethod
    def fixed(
        cls, workers: int, chunk_size: int = 0, processes: int = 1
    ) -> Concurrency:
        """Exactly ``workers``, never adapted, none aside."""
        return cls(
            workers,
            workers,
            workers,
            adaptive=False,
            chunk_size=chunk_size,
            processes=processes,
        )


@dataclass(frozen=True, slots=True)
class Tick:
    """What happened during one controller tick.

    :param seconds: the tick's length.
    :param busy: workers running an item, averaged over the tick.
    :param units: work finished: entries plus MiB of data.
    :param cpu: CPU seconds the process used during the tick (all its threads);
        ``None`` when not measured.
    """

    seconds: float
    busy: float
    units: float
    cpu: float | None = None

    @property
    def share(self) -> float:
        """Cores the process used on average (0 when not measured)."""
        return (self.cpu or 0.0) / self.seconds

    @property
    def rate(self) -> float:
        """Units of work finished per second."""
        return self.units / self.seconds


@dataclass(frozen=True, slots=True)
class _Growth:
    """A growth made for waiting workers, judged on the next tick.

    :param before: the tick that made it.
    :param limit: the limit before it (where an undo goes back to).
    :param tentative: made on the first tick, whose CPU share and rate (start-up,
        helper processes not yet running) are no reference: only a collapse undoes
        it.
    """

    before: Tick
    limit: int
    tentative: bool


class Controller:
    """Sets the number of workers in flight from measured per-unit latency.

    :param bounds: the range to move in, and where to start.
    :param alpha: grow below this latency ratio.
    :param beta: shrink above this latency ratio.
    :param probe_every: the most ticks between two baseline probes.
    :param wait_share: below this much of one core, fully busy workers are waiting.
    :param share_gain: a growth made while workers waited is kept when the process's
        share of a core rose by at least this fraction,
    :param rate_gain: ... or its rate of work by this fraction,
    :param collapse: ... and its rate of work stayed above this fraction of before.
    """

    def __init__(
        self,
        bounds: Concurrency,
        *,
        alpha: float = 1.25,
        beta: float = 1.6,
        probe_every: int = 20,
        wait_share: float = 0.9,
        share_gain: float = 0.05,
        rate_gain: float = 0.1,
        collapse: float = 0.6,
    ) -> None:
        self.bounds = bounds
        self.alpha = alpha
        self.beta = beta
        self.probe_every = probe_every
        self.wait_share = wait_share
        self.share_gain = share_gain
        self.rate_gain = rate_gain
        self.collapse = collapse
        self.limit = bounds.initial
        self._baseline = math.inf
        self._restore: int | None = None
        self._probe_gap = 2
        self._until_probe = self._probe_gap
        self._grew = False
        self._waited: _Growth | None = None
        """The last growth, when it was made for waiting workers."""
        self._cooldown = 1
        self._wait = 0

    @property
    def probing(self) -> bool:
        """The current limit is a probe, restored after one tick."""
        return self._restore is not None

    def restart(self) -> None:
        """Helper processes started during the tick now running: the caller's rate
        and CPU share change with them (they take work from it), so this tick is no
        reference for the ticks before it. It is taken as a first tick (a probe's
        tick still only measures the baseline); a growth waiting for its judgement
        is kept unjudged."""
        self._baseline = math.inf
        self._grew = False
        self._waited = None

    def update(self, tick: Tick) -> int:
        """Feed one tick (run at the current limit); return the limit for the next."""
        if not self.bounds.adaptive or tick.units <= 0 or tick.busy <= 0:
            return self.limit  # nothing measured: no evidence either way
        latency = tick.busy * tick.seconds / tick.units
        if self._restore is not None:
            # Measured at reduced concurrency: the freshest, least queued baseline.
            self._baseline = latency
            self.limit, self._restore = self._restore, None
            return self.limit
        first = self._baseline == math.inf
        if self.limit == self.bounds.minimum:
            self._baseline = latency  # the least queued measurement there is
        else:
            self._baseline = min(self._baseline, latency)
        if first:
            # Its latency is a measurement, not evidence: it includes start-up, and a
            # copy that ends within a second should run as the plugin chose -- unless
            # the workers were waiting, which more in flight hides.
            if self._waiting(tick):
                self._grow(tick, tentative=True)
            return self.limit
        ratio = latency / self._baseline
        grew, self._grew = self._grew, False
        waited, self._waited = self._waited, None
        self._wait = max(0, self._wait - 1)
        if waited is not None and ratio >= self.alpha:
            if self._paid_off(waited, tick):
                self._baseline = latency  # the new normal, from which to judge the next
                self._cooldown = 1
                if self._held_back(tick):
                    self._grow(tick, chained=True)
            else:  # it bought nothing: back to where it was
                self.limit = waited.limit
                self._back_off()
        elif ratio > self.beta:
            if grew:  # that growth only made things worse
                self._back_off()
            shrunk = min(self.limit - 1, int(self.limit * 0.8))
            self.limit = max(self.bounds.minimum, shrunk)
        elif ratio < self.alpha and self._held_back(tick):
            if grew:
                self._cooldown = 1  # the last growth paid off
            if not self._wait:
                self._grow(tick)
        elif grew:
            self._cooldown = 1
        self._until_probe -= 1
        if (
            self._until_probe <= 0
            and self.limit > self.bounds.minimum
            and self._waited is None  # a growth being judged is measured first
        ):
            self._probe_gap = min(self.probe_every, self._probe_gap * 2)
            self._until_probe = self._probe_gap
            self._restore = self.limit
            self.limit = max(self.bounds.minimum, self.limit // 2)
        return self.limit

    def _grow(
        self, tick: Tick, *, chained: bool = False, tentative: bool = False
    ) -> None:
        """By a quarter, at least one, within the bounds (remembered: a shrink next
        tick means it failed). A growth for waiting workers -- ``tick``'s, or the
        next step of one that paid off (``chained``, which doubles) -- is judged by
        :meth:`_paid_off` instead (``tentative``: made on the first tick)."""
        step = self.limit if chained else max(1, self.limit // 4)
        grown = min(self.bounds.maximum, self.limit + step)
        self._grew = grown > self.limit
        waited = self._grew and (chained or self._waiting(tick))
        self._waited = _Growth(tick, self.limit, tentative) if waited else None
        self.limit = grown

    def _back_off(self) -> None:
        """A growth failed: the next waits a cooldown twice the last."""
        self._cooldown = min(4 * self.probe_every, self._cooldown * 2)
        self._wait = self._cooldown

    def _paid_off(self, growth: _Growth, after: Tick) -> bool:
        """A growth made while the workers waited got the process more of a core
        (CPU it was denied, or more I/O overlapped) or more work done, without its
        rate collapsing."""
        before = growth.before
        return (
            after.cpu is not None
            and after.rate >= before.rate * self.collapse
            and (
                growth.tentative
                or after.share >= before.share * (1 + self.share_gain)
                or after.rate >= before.rate * (1 + self.rate_gain)
            )
        )

    def _waiting(self, tick: Tick) -> bool:
        """Every worker was busy while the process used less than ``wait_share`` of
        a core: the items waited, for the storage or for a contended CPU."""
        return (
            tick.cpu is not None
            and self._held_back(tick)
            and tick.share < self.wait_share
        )

    def _held_back(self, tick: Tick) -> bool:
        """The limit is what held workers back (nearly all busy), not a tree with
        too little parallel work to fill it."""
        return tick.busy >= 0.75 * self.limit
