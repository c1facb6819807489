"""The sharded example under a real scheduler: LocalExecutor with parallelism 4,
scheduler, DAG processor and API server as separate processes on loopback, SQLite.

Shows what dag.test cannot: the mapped shard copies run at the same time, in the
executor's own worker processes, and their result equals a single copy."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.sshd import free_port
from support.airflow import airflow
from support.treecmp import TreeCompare
from support.treespec import File, Spec, make_tree

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("airflow_db"),
    pytest.mark.timeout(600),
]
DAG_ID = "example_rcp_sharded"
RUN_TIMEOUT = 420.0
# Each shard big enough to take a few seconds even on a fast disk.
TREE: Spec = {
    f"d{d}/s{s}/f{i}": File(os.urandom(64 << 10))
    for d in range(4)
    for s in range(4)
    for i in range(24)
}


@contextlib.contextmanager
def _components(home: Path) -> Iterator[None]:
    """Scheduler, DAG processor and API server for this test, stopped at the end."""
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    }
    logs = home / "component-logs"
    logs.mkdir(exist_ok=True)
    bin_airflow = str(Path(sys.executable).with_name("airflow"))
    commands = {
        "api-server": [
            bin_airflow,
            "api-server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        "scheduler": [bin_airflow, "scheduler"],
        "dag-processor": [bin_airflow, "dag-processor"],
    }
    procs = []
    try:
        for name, command in commands.items():
            out = open(logs / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
            procs.append(
                (
                    subprocess.Popen(
                        command,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    ),
                    out,
                )
            )
        yield
    finally:
        for proc, _ in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, out in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            out.close()


def _paused(db: Path) -> bool | None:
    """Whether the DAG is paused; ``None`` until the DAG processor registered it."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT is_paused FROM dag WHERE dag_id = ?", (DAG_ID,)
        ).fetchone()
    return None if row is None else bool(row[0])


def _run_state(db: Path, run_id: str) -> str:
    """The run's state as the scheduler records it (``missing`` before it exists)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?",
            (DAG_ID, run_id),
        ).fetchone()
    return str(row[0]) if row else "missing"


def test_mapped_shard_copies_run_concurrently_and_equal_a_single_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    conf = {
        "src": str(src),
        "dst": str(tmp_path / "dst"),
        "manifest": str(tmp_path / "plan.json"),
        "shards": 4,
    }
    home = Path(os.environ["AIRFLOW_HOME"])
    run_id = f"scheduler-test-{secrets.token_hex(4)}"
    with _components(home):
        deadline = time.monotonic() + RUN_TIMEOUT
        # The DAG processor registers the examples (paused, as a deployment's are).
        while _paused(home / "airflow.db") is None:
            assert time.monotonic() < deadline, "the DAG processor never parsed the DAG"
            time.sleep(1)
        airflow("dags", "unpause", DAG_ID)
        assert _paused(home / "airflow.db") is False
        airflow(
            "dags", "trigger", DAG_ID, "--run-id", run_id, "--conf", json.dumps(conf)
        )
        state = _run_state(home / "airflow.db", run_id)
        while state not in ("success", "failed") and time.monotonic() < deadline:
            time.sleep(3)
            state = _run_state(home / "airflow.db", run_id)
    assert state == "success", (home / "component-logs").as_posix()
    assert tree_compare(src, tmp_path / "dst") == []
    with contextlib.closing(sqlite3.connect(home / "airflow.db")) as db:
        spans = db.execute(
            "SELECT start_date, end_date, pid, hostname FROM task_instance "
            "WHERE dag_id = ? AND run_id = ? AND task_id = 'copy_shard' ORDER BY map_index",
            (DAG_ID, run_id),
        ).fetchall()
    assert len(spans) == 4
    overlapping = sum(
        1
        for i, (start, end, _, _) in enumerate(spans)
        for other_start, other_end, _, _ in spans[i + 1 :]
        if start < other_end and other_start < end
    )
    assert overlapping >= 1, spans
    assert len({pid for _, _, pid, _ in spans}) >= 2, spans
