"""A real Airflow deployment for tests: scheduler, DAG processor, API server (and a
triggerer, when asked) as separate processes on loopback (LocalExecutor, parallelism
4, SQLite), and what the tests read of its database.

Invariant: every process :func:`components` starts is stopped when its block ends
(SIGTERM to its process group, then SIGKILL, each bounded), its log kept under the
home's ``component-logs``; the block starts once the API server answers (within
:data:`API_START_TIMEOUT`).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.sshd import free_port

API_START_TIMEOUT = 90.0
"""Seconds the API server may take to answer (a few on an idle machine)."""


@contextlib.contextmanager
def components(
    home: Path, *, triggerer: bool = False, api_only: bool = False, **env_extra: str
) -> Iterator[str]:
    """Scheduler, DAG processor and API server for this test (with ``triggerer``,
    a triggerer too, for deferred tasks; with ``api_only``, the API server alone, for
    a test of the UI), stopped at the end; the API server's URL."""
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
    if api_only:
        del commands["scheduler"], commands["dag-processor"]
    if triggerer:
        commands["triggerer"] = [bin_airflow, "triggerer"]
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
        api_server = procs[0][0]  # started first
        _wait_for_api(port, api_server, logs / "api-server.log")
        yield f"http://127.0.0.1:{port}"
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


def _wait_for_api(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Until the API server ``proc`` on ``port`` answers (its version needs no
    login), within :data:`API_START_TIMEOUT`."""
    deadline = time.monotonic() + API_START_TIMEOUT
    while True:
        assert proc.poll() is None, f"the API server exited {proc.returncode}: {log}"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/api/v2/version")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass  # not listening yet
        finally:
            conn.close()
        assert time.monotonic() < deadline, f"the API server did not answer: {log}"
        time.sleep(0.5)


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
