"""The job table over its database (``rcpd serve --state-dir``): what a new table
over the same database holds, runs again or fails; the on_restart policy; pruning;
the layout check. A restart here is a second table over a second connection to the
same file while the first table's jobs are stuck where they were (as a killed
process leaves them); ``test_service_restart.py`` kills the real service."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from rcp_core import CopySettings, UsageError
from rcp_core.remote.job import Job, Outcome, State
from rcp_core.remote.jobrequests import CopyRequest, ReceiveRequest
from rcp_core.remote.jobstore import FILE, JobStore
from rcp_core.remote.jobtable import JobTable
from rcp_core.run.summary import Resources, Summary, merge
from rcp_core.settings import ExistingPolicy

OVERWRITE = CopySettings(existing=ExistingPolicy.OVERWRITE)
RESUMABLE = CopyRequest(("/data/a",), "/backup/a", OVERWRITE)
ONCE = CopyRequest(("/data/a",), "/backup/a", CopySettings())
SUMMARY = Summary(
    merge([{"copied.files": 3, "copied.bytes": 30}]), Resources(1.0, 0.5, 0.1, 10)
)


def done(job: Job) -> Summary:
    return SUMMARY


class Stuck:
    """A runner whose jobs never end by themselves (until the test is over): the
    table's process "dies" with them running."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.over = threading.Event()

    def __call__(self, job: Job) -> Summary:
        self.entered.release()
        self.over.wait(30)
        raise Outcome("the test is over")


def finish(job: Job) -> dict[str, object]:
    assert job.done.wait(10)
    return job.view()


def test_finished_jobs_survive_under_their_ids_and_keys(tmp_path: Path) -> None:
    first = JobTable(done, store=JobStore(tmp_path))
    jobs = [first.submit(RESUMABLE, f"key-{i:016d}", client=f"c{i}") for i in range(3)]
    views = [finish(job) for job in jobs]
    assert views[1]["client"] == "c1"
    assert views[0]["counts"]["copied.files"] == 3  # type: ignore[index]

    again = JobTable(done, store=JobStore(tmp_path))
    assert [again.get(job.id).view() for job in jobs] == views
    assert again.known(f"key-{1:016d}") is again.get(jobs[1].id)
    assert again.submit(RESUMABLE, f"key-{2:016d}").id == jobs[2].id
    newer = again.submit(RESUMABLE, "a-new-key-000000")
    assert int(newer.id.split("-")[0]) == 4  # numbers go on


def test_a_running_job_runs_again_or_fails_as_its_on_restart_says(
    tmp_path: Path,
) -> None:
    stuck = Stuck()
    try:
        first = JobTable(stuck, max_running=3, store=JobStore(tmp_path))
        resumed = first.submit(RESUMABLE, "resumed-00000000")
        once = first.submit(ONCE, "once-00000000000")
        told = first.submit(RESUMABLE, "told-00000000000", on_restart="fail")
        for _ in range(3):
            assert stuck.entered.acquire(timeout=10)

        again = JobTable(done, store=JobStore(tmp_path))
        view = finish(again.get(resumed.id))
        assert view["state"] == "succeeded"
        assert view["restarts"] == 1
        assert view["on_restart"] == "resume"
        for job, policy in ((once, "fail"), (told, "fail")):
            view = again.get(job.id).view()
            assert view["state"] == "failed"
            assert view["error"] == (
                f"the service stopped while the job was running (on_restart: {policy})"
            )
    finally:
        stuck.over.set()


def test_a_queued_job_runs_after_the_restart(tmp_path: Path) -> None:
    stuck = Stuck()
    try:
        first = JobTable(stuck, max_running=1, store=JobStore(tmp_path))
        first.submit(RESUMABLE, "running-00000000")
        assert stuck.entered.acquire(timeout=10)
        queued = first.submit(RESUMABLE, "queued-000000000")
        assert queued.state is State.QUEUED
        again = JobTable(done, store=JobStore(tmp_path))
        assert finish(again.get(queued.id))["state"] == "succeeded"
    finally:
        stuck.over.set()


def test_a_shutdown_leaves_its_jobs_to_the_next_start(tmp_path: Path) -> None:
    """Not cancelled, as a table without a store cancels them: a restart of the
    service (``systemctl restart``) runs them again."""
    stuck = Stuck()
    store = JobStore(tmp_path)
    first = JobTable(stuck, max_running=1, store=store)
    running = first.submit(RESUMABLE, "running-00000000")
    assert stuck.entered.acquire(timeout=10)
    queued = first.submit(RESUMABLE, "queued-000000000")
    stuck.over.set()
    first.close(timeout=10)
    store.close()
    again = JobTable(done, store=JobStore(tmp_path))
    assert finish(again.get(running.id))["state"] == "succeeded"
    assert finish(again.get(queued.id))["state"] == "succeeded"


@pytest.mark.parametrize(
    ("request_", "asked", "message"),
    [
        (ONCE, "resume", "needs a copy whose rerun converges"),
        (RESUMABLE, "later", "resume or fail"),
    ],
)
def test_an_on_restart_the_job_cannot_have_is_refused(
    request_: CopyRequest, asked: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        JobTable(done).submit(request_, "k" * 16, on_restart=asked)


def test_a_role_of_a_copy_between_hosts_never_runs_again(tmp_path: Path) -> None:
    stuck = Stuck()
    role = ReceiveRequest("/backup/x", False, OVERWRITE, ("127.0.0.1", 9), None, 1)
    try:
        first = JobTable(stuck, store=JobStore(tmp_path))
        job = first.submit(role, "role-00000000000", now=True)
        assert stuck.entered.acquire(timeout=10)
        view = JobTable(done, store=JobStore(tmp_path)).get(job.id).view()
        assert view["state"] == "failed"
        assert view["kind"] == "receive"
        assert view["destination"] == "/backup/x"
    finally:
        stuck.over.set()


def test_history_is_pruned_by_count_and_by_age(tmp_path: Path) -> None:
    table = JobTable(done, max_running=1, keep=3, store=JobStore(tmp_path))
    jobs = [table.submit(RESUMABLE, f"key-{i:016d}") for i in range(5)]
    for job in jobs:
        finish(job)
    again = JobTable(done, keep=3, store=JobStore(tmp_path))
    assert {j.id for j in again.jobs()} == {j.id for j in jobs[2:]}

    with sqlite3.connect(tmp_path / FILE) as db:
        db.execute(
            "UPDATE jobs SET finished = ? WHERE id = ?", (time.time() - 3e6, jobs[3].id)
        )
    aged = JobTable(done, keep=3, max_age=86400.0, store=JobStore(tmp_path))
    assert {j.id for j in aged.jobs()} == {jobs[2].id, jobs[4].id}
    assert {row.id for row in JobStore(tmp_path).load()} == {jobs[2].id, jobs[4].id}


def test_a_database_of_another_layout_is_refused(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    with sqlite3.connect(tmp_path / FILE) as db:
        db.execute("UPDATE meta SET value = '99' WHERE name = 'schema'")
    with pytest.raises(UsageError, match="layout 99"):
        JobStore(tmp_path)


def test_a_state_dir_that_cannot_be_made_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(UsageError, match="--state-dir"):
        JobStore(tmp_path / "file" / "state")
