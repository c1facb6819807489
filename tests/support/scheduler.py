"""A real Airflow deployment for tests: scheduler, DAG processor and API server as
separate processes on loopback (LocalExecutor, parallelism 4, SQLite), and what the
tests read of its database.

Invariant: every process :func:`components` starts is stopped when its block ends
(SIGTERM to its process group, then SIGKILL, each bounded), its log kept under the
home's ``component-logs``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks.sshd import free_port


@contextlib.contextmanager
def components(home: Path, **env_extra: str) -> Iterator[None]:
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
        **env_extra,
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


def paused(db: Path, dag_id: str) -> bool | None:
    """Whether the DAG is paused; ``None`` until the DAG processor registered it."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT is_paused FROM dag WHERE dag_id = ?", (dag_id,)
        ).fetchone()
    return None if row is None else bool(row[0])


def run_state(db: Path, dag_id: str, run_id: str) -> str:
    """The run's state as the scheduler records it (``missing`` before it exists)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        ).fetchone()
    return str(row[0]) if row else "missing"
