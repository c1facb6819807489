"""The copy jobs of an ``rcpd serve`` service: queued, run, watched, kept a while.

A job moves ``queued -> running -> succeeded | failed | cancelled`` and never back;
a queued job that is cancelled never runs. At most ``max_running`` jobs run at once,
the others wait in submission order. While a job runs, its ``progress`` is the
engine's latest snapshot; when it ends, ``summary`` is the run's summary (also for a
failed copy, which counts what was done) and ``error`` says why it failed.

Finished jobs are kept for their clients to read (the newest ``keep`` of them), so a
client that polls after the end still gets the result; older ones are forgotten.
"""

from __future__ import annotations

import collections
import enum
import itertools
import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rcp_core.errors import ServiceClosingError
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Summary
from rcp_core.settings import CopySettings

log = logging.getLogger("rcp_core")


class State(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self not in (State.QUEUED, State.RUNNING)


@dataclass(frozen=True, slots=True)
class CopyRequest:
    """What a client asked for: ``rcp SOURCES... DESTINATION`` on the service's host,
    paths as the client wrote them (the service confines them)."""

    sources: tuple[str, ...]
    destination: str
    settings: CopySettings
    kind: ClassVar[str] = "copy"


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Be the source of a copy between hosts: send ``sources`` (``(path, name)``
    pairs) to the destination that connects to ``listener`` with the certificate
    ``peer_cert`` (``None``: no encryption), at most ``bwlimit`` bytes per second
    (0: unlimited)."""

    sources: tuple[tuple[str, str], ...]
    settings: CopySettings
    listener: socket.socket
    peer_cert: str | None
    connections: int
    bwlimit: int = 0
    kind: ClassVar[str] = "send"


@dataclass(frozen=True, slots=True)
class ReceiveRequest:
    """Be the destination of a copy between hosts: connect to the source at
    ``address`` (its certificate pinned to ``pin``) and write ``destination``
    (``into``: into that directory)."""

    destination: str
    into: bool
    settings: CopySettings
    address: tuple[str, int]
    pin: str | None
    connections: int
    kind: ClassVar[str] = "receive"


Request = CopyRequest | SendRequest | ReceiveRequest


class Outcome(Exception):
    """How a job's run ended, when not with a summary: a failure with its reason,
    and the partial summary when there is one."""

    def __init__(self, reason: str, summary: Summary | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.summary = summary


Runner = Callable[["Job"], Summary]
"""Runs a job's copy (``job.cancel`` set means stop; ``job.report`` takes progress);
returns the summary, or raises :class:`Outcome`."""


class Job:
    """One copy job and what is known about it; read through :meth:`view`."""

    def __init__(self, number: int, request: Request, key: str) -> None:
        self.id = f"{number}-{secrets.token_hex(4)}"
        self.key = key
        self.request = request
        self.state = State.QUEUED
        self.submitted = time.time()
        self.started: float | None = None
        self.finished: float | None = None
        self.progress: Progress | None = None
        self.summary: Summary | None = None
        self.error: str | None = None
        self.cancel = threading.Event()
        self.done = threading.Event()

    def report(self, progress: Progress) -> None:
        self.progress = progress

    def view(self) -> dict[str, Any]:
        """The job as JSON for a client."""
        request = self.request
        view: dict[str, Any] = {
            "job": self.id,
            "key": self.key,
            "kind": request.kind,
            "state": self.state.value,
            "sources": None
            if isinstance(request, ReceiveRequest)
            else [s if isinstance(s, str) else s[0] for s in request.sources],
            "destination": None
            if isinstance(request, SendRequest)
            else request.destination,
            "submitted": self.submitted,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "summary": self.summary.as_dict() if self.summary else None,
            "counts": dict(self.summary.counts) if self.summary else None,
            "progress": None,
        }
        progress = self.progress
        if progress is not None and not self.state.finished:
            view["progress"] = progress.brief()
        return view


class JobTable:
    """The service's jobs.

    :param run: runs one job (in a thread of this table).
    :param max_running: jobs that run at once.
    :param keep: finished jobs remembered.
    """

    def __init__(self, run: Runner, max_running: int = 2, keep: int = 1000) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._keys: dict[str, Job] = {}
        """Submit keys -> their jobs (forgotten with the job)."""
        self._queue: collections.deque[Job] = collections.deque()
        self._finished: collections.deque[str] = collections.deque()
        self._running = 0
        self._max_running = max_running
        self._keep = keep
        self._numbers = itertools.count(1)
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, request: Request, key: str, *, now: bool = False) -> Job:
        """Queue ``request``; a ``key`` seen before returns that key's job instead
        (a client that lost its connection sends its submit again).

        :param now: start it at once, beside the ``max_running`` copies (a role of a
            copy between hosts: its peer is waiting for it).
        """
        with self._lock:
            if self._closed:
                raise ServiceClosingError("the service is shutting down")
            known = self._keys.get(key)
            if known is not None:
                return known
            job = Job(next(self._numbers), request, key)
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

    def cancel(self, job_id: str) -> Job:
        """Stop a job: a queued one ends at once, a running one as soon as the engine
        notices (it finishes no new entry after that); a finished one is unchanged."""
        with self._lock:
            job = self._jobs[job_id]
            queued = job.state is State.QUEUED
            if queued:
                self._queue.remove(job)
                self._end(job, State.CANCELLED, None, "cancelled before it started")
            job.cancel.set()
        if queued:
            log.info("job %s cancelled before it started", job.id)
        return job

    def close(self, timeout: float) -> None:
        """Cancel every job and wait (at most ``timeout`` s) for the running ones.

        No job starts once the table is closed (:meth:`_start_next`), so the
        threads waited for are all there are: a job ends, and logs its end, before
        ``close`` returns unless it overruns ``timeout``.
        """
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for job in self.jobs():
            self.cancel(job.id)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _start_next(self) -> None:
        """Start queued jobs while there is room and the table is open (called with
        the lock held); once closed, :meth:`close` cancels the queued ones."""
        while self._queue and self._running < self._max_running and not self._closed:
            self._start(self._queue.popleft())

    def _start(self, job: Job) -> None:
        """Run ``job`` in a thread of its own (called with the lock held)."""
        self._running += 1
        job.state, job.started = State.RUNNING, time.time()
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
        with self._lock:
            self._running -= 1
            self._end(job, state, summary, error)
            self._start_next()
        # Outside the lock: a log that blocks (a full pipe) must not stop the service.
        log.info("job %s %s%s", job.id, state.value, f": {error}" if error else "")

    def _end(
        self, job: Job, state: State, summary: Summary | None, error: str | None
    ) -> None:
        """Record the end (called with the lock held); forget the oldest finished."""
        job.state, job.summary, job.error = state, summary, error
        job.finished = time.time()
        job.done.set()
        self._finished.append(job.id)
        while len(self._finished) > self._keep:
            old = self._jobs.pop(self._finished.popleft())
            self._keys.pop(old.key, None)
