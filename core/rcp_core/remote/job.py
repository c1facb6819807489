"""One job of an ``rcpd serve`` service and what is known about it: its request, its
state (``queued -> running -> succeeded | failed | cancelled``, never back), its
progress while it runs, its summary and error once it ended, and its view, the JSON
a client reads (``docs/remote_protocol.md``, "The service"). The service's table of
jobs (:mod:`rcp_core.remote.jobtable`) moves it from state to state.
"""

from __future__ import annotations

import enum
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from rcp_core.remote.jobrequests import FAIL, Request, operands_of, restored
from rcp_core.remote.jobstore import JobStore, StoredJob
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Summary


class State(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self not in (State.QUEUED, State.RUNNING)


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
    """One copy job and what is known about it; read through :meth:`view`.

    :param store: where its progress is recorded, if anywhere.
    """

    def __init__(
        self,
        number: int,
        request: Request,
        key: str,
        on_restart: str = FAIL,
        store: JobStore | None = None,
        job_id: str | None = None,
        client: str = "",
    ) -> None:
        self.id = job_id or f"{number}-{secrets.token_hex(4)}"
        self.number = number
        self.key = key
        self.request = request
        self.on_restart = on_restart
        self.client = client
        """Who submitted it (what the service knows them by)."""
        self.position: int | None = None
        """While queued: how many jobs start before it, plus one."""
        self.restarts = 0
        self.state = State.QUEUED
        self.submitted = time.time()
        self.started: float | None = None
        self.finished: float | None = None
        self.progress: Progress | None = None
        self.summary: dict[str, Any] | None = None
        """The run's summary as its view shows it (:meth:`Summary.as_dict`)."""
        self.counts: dict[str, int] | None = None
        self.error: str | None = None
        self.cancel = threading.Event()
        self.done = threading.Event()
        self._store = store

    @classmethod
    def restored(cls, stored: StoredJob, store: JobStore) -> Job:
        """A job as ``store`` kept it (its progress is not: it runs again, or
        ended)."""
        request = restored(stored.kind, stored.request)
        job = cls(
            stored.number,
            request,
            stored.key,
            stored.on_restart,
            store,
            stored.id,
            stored.client,
        )
        job.state, job.restarts = State(stored.state), stored.restarts
        job.submitted, job.started = stored.submitted, stored.started
        job.finished = stored.finished
        job.summary, job.counts, job.error = stored.summary, stored.counts, stored.error
        if job.state.finished:
            job.done.set()
        return job

    def report(self, progress: Progress) -> None:
        self.progress = progress
        if self._store is not None:
            self._store.progressed(self.id, progress.brief())

    def view(self) -> dict[str, Any]:
        """The job as JSON for a client."""
        request = self.request
        sources, destination = operands_of(request)
        view: dict[str, Any] = {
            "job": self.id,
            "key": self.key,
            "kind": request.kind,
            "state": self.state.value,
            "sources": sources,
            "destination": destination,
            "submitted": self.submitted,
            "started": self.started,
            "finished": self.finished,
            "error": self.error,
            "summary": self.summary,
            "counts": self.counts,
            "progress": None,
            "on_restart": self.on_restart,
            "restarts": self.restarts,
            "client": self.client,
            "position": self.position if self.state is State.QUEUED else None,
        }
        progress = self.progress
        if progress is not None and not self.state.finished:
            view["progress"] = progress.brief()
        return view
