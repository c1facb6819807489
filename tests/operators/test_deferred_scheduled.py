"""A deferred copy under a real scheduler and triggerer: killed by a user; waiting
through a crash and restart of its service.

Scheduler, DAG processor, API server and triggerer as separate processes
(:func:`support.scheduler.components`), a real ``rcpd serve`` process: the copy task
defers on the service's job; while it is deferred, the triggerer writes the job's
progress to the task's log, throttled; a user marks the task failed through the REST
API (as the grid's "Mark failed" does), and the triggerer's kill path cancels the
job on the service, which stops short of the whole tree. In the second test the
service (``--state-dir``) is killed with SIGKILL while the task is deferred and
started again: the triggerer waits through it, the service runs the job again, and
the task succeeds with the whole tree copied.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import secrets
import signal
import sqlite3
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from benchmarks.sshd import free_port
from support.airflow import connection_env
from support.scheduler import components, ended, trigger
from support.services import TOKEN, RcpdServe
from support.treecmp import TreeCompare
from support.treespec import File, make_tree

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("airflow_db"),
    pytest.mark.timeout(600),
]
DAG_ID = "rcp_test_deferred"
RESTART_DAG = "rcp_test_restart"
FILES = 600  # ~2 minutes at 5 operations a second: it is killed long before
WAIT = 300.0
PROGRESS = re.compile(r"rcp: [\d,]+ entries, .* written")


def test_killing_a_deferred_copy_cancels_its_job_and_the_log_shows_progress(
    tmp_path: Path,
) -> None:
    data, backup = tmp_path / "data", tmp_path / "backup"
    backup.mkdir()
    src = make_tree(data / "tree", {f"f{i:03}": File(b"x" * 64) for i in range(FILES)})
    (tmp_path / "token").write_text(TOKEN)
    rcpd = RcpdServe(
        [
            "--root",
            str(data),
            "--root",
            str(backup),
            "--token-file",
            str(tmp_path / "token"),
        ]
    )
    home = Path(os.environ["AIRFLOW_HOME"])
    db = home / "airflow.db"
    run_id = f"deferred-test-{secrets.token_hex(4)}"
    host, port = rcpd.address
    _, conn = connection_env(
        "rcp_deferred",
        host=host,
        port=port,
        password=TOKEN,
        extra={"fingerprint": rcpd.announce["fingerprint"]},
    )
    try:
        with components(
            home,
            triggerer=True,
            AIRFLOW_CONN_RCP_DEFERRED=conn,
            AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True",
        ) as api:
            deadline = time.monotonic() + WAIT
            trigger(
                db,
                DAG_ID,
                run_id,
                deadline,
                {"src": str(src), "dst": str(backup / "tree")},
            )
            while _task_state(db, run_id) != "deferred":
                assert time.monotonic() < deadline, _task_state(db, run_id)
                time.sleep(1)
            lines = _progress_lines(home, run_id)
            while len(lines) < 2:
                assert time.monotonic() < deadline, "no progress in the task log"
                time.sleep(1)
                lines = _progress_lines(home, run_id)
            [job] = _jobs(rcpd)
            assert job["state"] == "running"
            _mark_failed(api, run_id)
            job = _jobs(rcpd)[0]
            while job["state"] == "running":
                assert time.monotonic() < deadline, job
                time.sleep(1)
                job = _jobs(rcpd)[0]
            assert _task_state(db, run_id) == "failed"
    finally:
        assert rcpd.stop() == 0, rcpd.stderr
    assert job["state"] == "cancelled", job
    assert job["summary"]["copied"]["files"] < FILES
    assert len(list((backup / "tree").iterdir())) < FILES
    # Throttled: a line every 3 s (the DAG's progress_interval), not one per answer
    # of the service (every second: its poll_interval).
    elapsed = [_elapsed(line) for line in lines]
    assert all(later - earlier >= 2 for earlier, later in itertools.pairwise(elapsed))


def test_a_deferred_copy_waits_through_a_crash_of_its_service_and_succeeds(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    data, backup = tmp_path / "data", tmp_path / "backup"
    backup.mkdir()
    src = make_tree(
        data / "tree", {f"d{i % 10}/f{i:03}": File(b"y" * 256) for i in range(400)}
    )
    (tmp_path / "token").write_text(TOKEN)
    port = free_port()
    args = [
        "--listen", f"127.0.0.1:{port}",
        "--root", str(data), "--root", str(backup),
        "--token-file", str(tmp_path / "token"),
        "--identity", str(tmp_path / "identity"),
        "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    rcpd = RcpdServe(args)
    home = Path(os.environ["AIRFLOW_HOME"])
    db = home / "airflow.db"
    run_id = f"restart-test-{secrets.token_hex(4)}"
    _, conn = connection_env(
        "rcp_restart",
        host="127.0.0.1",
        port=port,
        password=TOKEN,
        extra={"fingerprint": rcpd.announce["fingerprint"]},
    )
    try:
        with components(home, triggerer=True, AIRFLOW_CONN_RCP_RESTART=conn):
            deadline = time.monotonic() + WAIT
            conf = {"src": str(src), "dst": str(backup / "tree")}
            trigger(db, RESTART_DAG, run_id, deadline, conf)
            while _task_state(db, run_id, RESTART_DAG) != "deferred":
                assert time.monotonic() < deadline, _task_state(db, run_id, RESTART_DAG)
                time.sleep(0.5)
            [job] = _jobs(rcpd)
            while (job.get("progress") or {}).get("bytes", 0) < 256 * 40:
                assert time.monotonic() < deadline, job
                time.sleep(0.2)
                [job] = _jobs(rcpd)
            rcpd.stop(signal.SIGKILL)
            assert len(list((backup / "tree").rglob("f*"))) < 400, "killed mid-copy"
            time.sleep(5)  # the trigger meets a service that is away
            rcpd = RcpdServe(args)
            state = ended(db, RESTART_DAG, run_id, deadline)
            assert state == "success", _task_state(db, run_id, RESTART_DAG)
            [job] = _jobs(rcpd)
    finally:
        rcpd.stop()
    assert job["state"] == "succeeded", job
    assert job["restarts"] == 1
    assert tree_compare(src, backup / "tree") == []


def _task_state(db: Path, run_id: str, dag_id: str = DAG_ID) -> str | None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT state FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        ).fetchone()
    return None if row is None else row[0]


def _progress_lines(home: Path, run_id: str) -> list[str]:
    """The progress lines in the task's logs (the worker's and the triggerer's)."""
    lines: list[str] = []
    for log in sorted((home / "logs").glob(f"dag_id={DAG_ID}/run_id={run_id}/**/*")):
        if log.is_file():
            lines += [
                line
                for line in log.read_text(errors="replace").splitlines()
                if PROGRESS.search(line)
            ]
    return lines


def _elapsed(line: str) -> float:
    """The seconds a progress line reports (its last number before `` s``)."""
    found = re.findall(r"(\d+) s\b", line)
    return float(found[-1]) if found else 0.0


def _jobs(rcpd: RcpdServe) -> list[dict[str, Any]]:
    with rcpd.client() as client:
        return client.jobs()


def _mark_failed(api: str, run_id: str) -> None:
    """What the grid's "Mark failed" does: PATCH the task instance's state."""
    with urllib.request.urlopen(f"{api}/auth/token", timeout=30) as answer:
        token = json.load(answer)["access_token"]
    request = urllib.request.Request(
        f"{api}/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/copy",
        data=json.dumps({"new_state": "failed"}).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
        },
        method="PATCH",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200
