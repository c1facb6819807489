"""The service's job table: states, the running bound, cancel, idempotent submits."""

from __future__ import annotations

import logging
import threading

import pytest

from rcp_core import CopySettings
from rcp_core.errors import ServiceClosingError, UsageError
from rcp_core.remote.job import Job, Outcome, State
from rcp_core.remote.jobrequests import CopyRequest
from rcp_core.remote.jobtable import JobTable
from rcp_core.run.summary import Resources, Summary, merge

REQUEST = CopyRequest(("/data/a",), "/backup/a", CopySettings())
SUMMARY = Summary(merge([]), Resources(0.0, 0.0, 0.0, 0))


class Gate:
    """A runner whose jobs wait until released (or cancelled) -- no sleeping."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def __call__(self, job: Job) -> Summary:
        self.started.append(job.id)
        self.entered.release()
        while not self.release.wait(0.01):
            if job.cancel.is_set():
                raise Outcome("cancelled", SUMMARY)
        if job.request.destination == "/fail":
            raise Outcome("destination is full", SUMMARY)
        return SUMMARY


def finish(job: Job) -> dict[str, object]:
    assert job.done.wait(10)
    return job.view()


def test_jobs_run_at_most_max_running_at_once_in_order() -> None:
    gate = Gate()
    table = JobTable(gate, max_running=2)
    jobs = [table.submit(REQUEST, f"key-{i:016d}") for i in range(4)]
    assert gate.entered.acquire(timeout=10)
    assert gate.entered.acquire(timeout=10)
    assert [j.state for j in jobs] == [State.RUNNING] * 2 + [State.QUEUED] * 2
    gate.release.set()
    assert [finish(j)["state"] for j in jobs] == ["succeeded"] * 4
    assert gate.started == [j.id for j in jobs]


def test_a_failed_job_keeps_its_reason_and_partial_summary() -> None:
    gate = Gate()
    gate.release.set()
    table = JobTable(gate)
    view = finish(table.submit(CopyRequest(("/a",), "/fail", CopySettings()), "k" * 16))
    assert view["state"] == "failed"
    assert view["error"] == "destination is full"
    assert view["summary"] is not None


def test_cancel_ends_a_queued_job_at_once_and_stops_a_running_one() -> None:
    gate = Gate()
    table = JobTable(gate, max_running=1)
    running = table.submit(REQUEST, "r" * 16)
    queued = table.submit(REQUEST, "q" * 16)
    assert gate.entered.acquire(timeout=10)
    assert table.cancel(queued.id).state is State.CANCELLED
    table.cancel(running.id)
    assert finish(running)["state"] == "cancelled"
    assert gate.started == [running.id]  # the queued one never ran


def test_a_repeated_submit_key_returns_the_same_job() -> None:
    gate = Gate()
    gate.release.set()
    table = JobTable(gate)
    first = table.submit(REQUEST, "same-key-0000000")
    assert table.submit(REQUEST, "same-key-0000000") is first
    assert table.submit(REQUEST, "other-key-000000") is not first


def test_only_the_newest_finished_jobs_are_kept() -> None:
    gate = Gate()
    gate.release.set()
    table = JobTable(gate, max_running=1, keep=2)  # one at a time: they end in order
    jobs = [table.submit(REQUEST, f"key-{i:016d}") for i in range(3)]
    for job in jobs:
        finish(job)
    with pytest.raises(KeyError):
        table.get(jobs[0].id)
    assert table.get(jobs[2].id) is jobs[2]
    assert table.submit(REQUEST, f"key-{0:016d}") is not jobs[0]  # key forgotten too


def test_a_closed_table_takes_no_job_and_cancels_the_rest() -> None:
    gate = Gate()
    table = JobTable(gate, max_running=1)
    running = table.submit(REQUEST, "r" * 16)
    assert gate.entered.acquire(timeout=10)
    table.close(timeout=10)
    assert running.state is State.CANCELLED
    with pytest.raises(ServiceClosingError, match="shutting down"):
        table.submit(REQUEST, "n" * 16)


class _AfterEnding(logging.Handler):
    """Holds the thread that logs a queued job's cancel until ``job`` has ended."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().endswith("cancelled before it started"):
            self.job.done.wait(10)


def test_close_starts_no_queued_job_and_returns_when_every_job_has_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The running job ends when ``close`` cancels it, while ``close`` is still
    cancelling the queued ones (held after the first until it has ended). Before,
    the ending job's thread started the next queued job, which ``close`` had not
    counted among the threads to wait for: it ran, and logged its end, after the
    service had returned."""
    started: list[Job] = []
    late = threading.Event()

    def run(job: Job) -> Summary:
        started.append(job)
        if len(started) > 1:
            late.wait(10)  # a job started while closing: stops after close returns
        job.cancel.wait(10)
        raise Outcome("cancelled", SUMMARY)

    table = JobTable(run, max_running=1)
    jobs = [table.submit(REQUEST, f"key-{i:016d}") for i in range(3)]
    caplog.set_level(logging.INFO, logger="rcp_core")
    held = _AfterEnding(jobs[0])
    logging.getLogger("rcp_core").addHandler(held)
    try:
        table.close(timeout=10)
        assert [job.state for job in jobs] == [State.CANCELLED] * 3
        assert started == [jobs[0]]
    finally:
        late.set()
        logging.getLogger("rcp_core").removeHandler(held)


def test_the_next_job_is_the_one_of_the_client_with_fewest_running() -> None:
    """One at a time: ``a`` submits three, then ``b`` one. ``b``'s starts before
    ``a``'s second, and every queued job says where it stands."""
    gate = Gate()
    table = JobTable(gate, max_running=1)
    first = table.submit(REQUEST, "a-1-000000000000", client="a")
    assert gate.entered.acquire(timeout=10)
    a2 = table.submit(REQUEST, "a-2-000000000000", client="a")
    a3 = table.submit(REQUEST, "a-3-000000000000", client="a")
    b1 = table.submit(REQUEST, "b-1-000000000000", client="b")
    assert [j.view()["position"] for j in (first, a2, a3, b1)] == [None, 2, 3, 1]
    assert b1.view()["client"] == "b"
    table.cancel(a2.id)
    assert [j.view()["position"] for j in (a3, b1)] == [2, 1]
    gate.release.set()
    for job in (first, a3, b1):
        finish(job)
    assert gate.started == [first.id, b1.id, a3.id]


def test_a_client_holds_at_most_its_share_of_jobs() -> None:
    gate = Gate()
    table = JobTable(gate, max_running=1, max_per_client=2)
    for i in range(2):
        table.submit(REQUEST, f"a-{i}-000000000000", client="a")
    with pytest.raises(UsageError, match="client 'a' holds 2 jobs queued or running"):
        table.submit(REQUEST, "a-9-000000000000", client="a")
    table.submit(
        REQUEST, "b-0-000000000000", client="b"
    )  # another client's are its own
    gate.release.set()
    for job in table.jobs():
        finish(job)
    table.submit(REQUEST, "a-9-000000000000", client="a")  # room again
