"""The copy jobs of an ``rcpd serve`` service: queued, run, watched, kept a while.

A job moves ``queued -> running -> succeeded | failed | cancelled`` and never back;
a queued job that is cancelled never runs. At most ``max_running`` jobs run at once;
the others wait their turn fairly between clients: the next to start is the queued
job of the client with the fewest jobs running, between equals of the client whose
last job started longest ago (round robin), then the earliest submitted; each
queued job's ``position`` says how many start before it (1: it is next). A client
holds at most ``max_per_client`` jobs queued or running; a submit beyond that is
refused. While a job runs, its ``progress`` is the engine's latest snapshot; when it
ends, ``summary`` is the run's summary (also for a failed copy, which counts what
was done) and ``error`` says why it failed.

Finished jobs are kept for their clients to read (the newest ``keep`` of them, none
finished more than ``max_age`` seconds ago), so a client that polls after the end
still gets the result; older ones are forgotten.

With a :class:`~rcp_core.remote.jobstore.JobStore` (``rcpd serve --state-dir``) the
table survives its process: each job is recorded as it is submitted, starts, moves
and ends; a new table over the store holds the finished jobs again under their ids
and keys, and runs again or fails the queued and running ones by their
``on_restart`` (:mod:`rcp_core.remote.jobrequests`). A shutdown with a store leaves
its jobs to the next start.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rcp_core.errors import ServiceClosingError, UsageError
from rcp_core.remote.job import Job, Outcome, Runner, State
from rcp_core.remote.jobrequests import (
    RESUME,
    CopyRequest,
    Request,
    on_restart_of,
    recorded,
)
from rcp_core.remote.jobstore import JobStore
from rcp_core.run.summary import Summary

log = logging.getLogger("rcp_core")


DAY = 86400.0


class JobTable:
    """The service's jobs.

    :param run: runs one job (in a thread of this table).
    :param max_running: jobs that run at once.
    :param keep: finished jobs remembered.
    :param max_age: seconds a finished job is remembered.
    :param store: where the jobs are recorded (:mod:`rcp_core.remote.jobstore`);
        the table starts with the jobs it holds.
    :param max_per_client: jobs a client may hold queued or running.
    """

    def __init__(
        self,
        run: Runner,
        max_running: int = 2,
        keep: int = 1000,
        max_age: float = 30 * DAY,
        store: JobStore | None = None,
        max_per_client: int = 100,
    ) -> None:
        self._run = run
        self._max_per_client = max_per_client
        self._started = 0
        self._last_start: dict[str, int] = {}
        """Each client's last start, by the number of starts before it."""
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._keys: dict[str, Job] = {}
        """Submit keys -> their jobs (forgotten with the job)."""
        self._queue: collections.deque[Job] = collections.deque()
        self._finished: collections.deque[str] = collections.deque()
        self._running = 0
        self._max_running = max_running
        self._keep = keep
        self._max_age = max_age
        self._store = store
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.on_end: list[Callable[[Job], None]] = []
        """Told each job that ends in this table (with its lock held: no I/O)."""
        last = self._restore() if store is not None else 0
        self._numbers = itertools.count(last + 1)

    def _restore(self) -> int:
        """Hold the store's jobs again: the finished ones as they ended, the
        others run again or failed by their ``on_restart``; the last job number."""
        assert self._store is not None
        stored = self._store.load()
        restarted = []
        with self._lock:
            for record in stored:
                job = Job.restored(record, self._store)
                self._jobs[job.id] = job
                self._keys[job.key] = job
                if job.state.finished:
                    self._finished.append(job.id)
                else:
                    restarted.append(job)
            self._finished = collections.deque(
                sorted(self._finished, key=lambda i: self._jobs[i].finished or 0)
            )
            told = []
            for job in restarted:
                was = f"the service stopped while the job was {job.state.value}"
                if job.on_restart == RESUME and isinstance(job.request, CopyRequest):
                    job.state, job.started = State.QUEUED, None
                    job.restarts += 1
                    self._store.requeued(job.id)
                    self._queue.append(job)
                    told.append(f"job {job.id} runs again: {was}")
                else:
                    reason = f"{was} (on_restart: {job.on_restart})"
                    self._end(job, State.FAILED, None, reason)
                    told.append(f"job {job.id} failed: {reason}")
            self._prune()
            self._start_next()
        for line in told:
            log.info("%s", line)
        return max((record.number for record in stored), default=0)

    def submit(
        self,
        request: Request,
        key: str,
        *,
        now: bool = False,
        on_restart: str | None = None,
        client: str = "",
    ) -> Job:
        """Queue ``request``; a ``key`` seen before returns that key's job instead
        (a client that lost its connection sends its submit again).

        :param now: start it at once, beside the ``max_running`` copies (a role of a
            copy between hosts: its peer is waiting for it).
        :param on_restart: :func:`on_restart_of` what is asked.
        :param client: who submits it, for the fair order and the per-client bound.
        :raises UsageError: an ``on_restart`` the job cannot have, or a client that
            holds its most jobs already.
        """
        policy = on_restart_of(request, on_restart)
        with self._lock:
            if self._closed:
                raise ServiceClosingError("the service is shutting down")
            known = self._keys.get(key)
            if known is not None:
                return known
            held = sum(
                j.client == client and not j.state.finished for j in self._jobs.values()
            )
            if held >= self._max_per_client:
                raise UsageError(
                    f"client {client!r} holds {held} jobs queued or running, its most "
                    "(rcpd serve --max-client-jobs): submit once one has ended"
                )
            job = Job(
                next(self._numbers), request, key, policy, self._store, client=client
            )
            if self._store is not None:
                kept = (job.id, job.number, key, request.kind, recorded(request))
                self._store.add(*kept, policy, job.submitted, client)
            self._jobs[job.id] = job
            self._keys[key] = job
            if now:
                self._start(job)
            else:
                self._queue.append(job)
                self._start_next()
        return job

    def known(self, key: str) -> Job | None:
        """The job submitted with ``key``, if there is one."""
        with self._lock:
            return self._keys.get(key)

    def get(self, job_id: str) -> Job:
        """:raises KeyError: no such job (never existed, or forgotten)."""
        with self._lock:
            return self._jobs[job_id]

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def views(self) -> list[dict[str, Any]]:
        """Every job's view, as of one moment (queue positions that agree)."""
        with self._lock:
            return [job.view() for job in self._jobs.values()]

    def cancel(self, job_id: str) -> Job:
        """Stop a job: a queued one ends at once, a running one as soon as the engine
        notices (it finishes no new entry after that); a finished one is unchanged."""
        with self._lock:
            job = self._jobs[job_id]
            queued = job.state is State.QUEUED
            if queued:
                self._queue.remove(job)
                self._end(job, State.CANCELLED, None, "cancelled before it started")
                self._start_next()  # the others' positions
            job.cancel.set()
        if queued:
            log.info("job %s cancelled before it started", job.id)
        return job

    def close(self, timeout: float) -> None:
        """Cancel every job and wait (at most ``timeout`` s) for the running ones;
        with a store, stop them instead, leaving them recorded as they were for the
        next start.

        No job starts once the table is closed (:meth:`_start_next`), so the
        threads waited for are all there are: a job ends, and logs its end, before
        ``close`` returns unless it overruns ``timeout``.
        """
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for job in self.jobs():
            if self._store is not None:
                job.cancel.set()
            else:
                self.cancel(job.id)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _start_next(self) -> None:
        """Start queued jobs, in the fair order, while there is room and the table
        is open, and number the rest (called with the lock held); once closed,
        :meth:`close` cancels the queued ones."""
        while self._queue and self._running < self._max_running and not self._closed:
            job = self._fair_order()[0]
            self._queue.remove(job)
            self._start(job)
        for position, job in enumerate(self._fair_order(), 1):
            job.position = position

    def _fair_order(self) -> list[Job]:
        """The queued jobs in the order they would start: each time, the job of the
        client with the fewest jobs running (counting those before it), between
        equals the client whose last job started longest ago (round robin), then
        the earliest submitted (called with the lock held)."""
        running = collections.Counter(
            j.client for j in self._jobs.values() if j.state is State.RUNNING
        )
        last, starts = dict(self._last_start), self._started
        waiting, order = list(self._queue), []

        def turn(i: int) -> tuple[int, int, int]:
            client = waiting[i].client
            return running[client], last.get(client, -1), i

        while waiting:
            job = waiting.pop(min(range(len(waiting)), key=turn))
            running[job.client] += 1
            last[job.client], starts = starts, starts + 1
            order.append(job)
        return order

    def _start(self, job: Job) -> None:
        """Run ``job`` in a thread of its own (called with the lock held)."""
        self._running += 1
        job.state, job.started, job.position = State.RUNNING, time.time(), None
        self._last_start[job.client], self._started = self._started, self._started + 1
        if self._store is not None:
            self._store.started(job.id, job.started)
        thread = threading.Thread(
            target=self._serve, args=(job,), name=f"rcpd-job-{job.id}", daemon=True
        )
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

    def _serve(self, job: Job) -> None:
        summary: Summary | None = None
        error: str | None = None
        try:
            summary = self._run(job)
        except Outcome as outcome:
            summary, error = outcome.summary, outcome.reason
        except Exception as exc:
            log.exception("job %s failed unexpectedly", job.id)
            error = f"internal error: {exc!r}"
        if error is None:
            state = State.SUCCEEDED  # done before it noticed a late cancel
        else:
            state = State.CANCELLED if job.cancel.is_set() else State.FAILED
        stopped = self._closed and self._store is not None and error is not None
        with self._lock:
            self._running -= 1
            if not stopped:  # a shutdown's job is the next start's
                self._end(job, state, summary, error)
            self._start_next()
        # Outside the lock: a log that blocks (a full pipe) must not stop the service.
        if stopped:
            log.info("job %s stopped with the service", job.id)
        else:
            log.info("job %s %s%s", job.id, state.value, f": {error}" if error else "")

    def _end(
        self, job: Job, state: State, summary: Summary | None, error: str | None
    ) -> None:
        """Record the end (called with the lock held); forget the oldest finished."""
        job.state, job.error = state, error
        if summary is not None:
            job.summary, job.counts = summary.as_dict(), dict(summary.counts)
        job.finished = time.time()
        if self._store is not None:
            self._store.ended(
                job.id, state.value, job.finished, job.summary, job.counts, error
            )
        job.done.set()
        for told in self.on_end:
            told(job)
        self._finished.append(job.id)
        self._prune()

    def _prune(self) -> None:
        """Forget the finished jobs beyond ``keep`` and older than ``max_age``
        (called with the lock held)."""
        oldest = time.time() - self._max_age
        while self._finished and (
            len(self._finished) > self._keep
            or (self._jobs[self._finished[0]].finished or 0) < oldest
        ):
            old = self._jobs.pop(self._finished.popleft())
            self._keys.pop(old.key, None)
        if self._store is not None:
            self._store.prune(self._keep, self._max_age, time.time())
