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
import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks import netns
from benchmarks.sshd import free_port
from support.airflow import airflow
from support.treespec import File, Spec

SHARDED_TREE: Spec = {
    f"d{d}/s{s}/f{i}": File(os.urandom(64 << 10), 0o640, 1_600_000_000_000_000_000 + i)
    for d in range(4)
    for s in range(4)
    for i in range(24)
}
"""What the sharded example copies in the scheduler's tests: 384 files of 64 KiB in
16 directories, each shard big enough to take a few seconds even on a fast disk."""

REDIS_PORT = 6379
"""The Celery broker's port on its host (a namespace of its own: never taken)."""

AS_HOST = (
    "import os, socket, sys; socket.sethostname(sys.argv[1]); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)
"""``python -c AS_HOST NAME PROGRAM ARGS...``: run PROGRAM under the hostname NAME
(in a UTS namespace of its own, ``unshare --uts``)."""

PROBE = (
    "import http.client, sys\n"
    "conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=5)\n"
    "try:\n"
    "    conn.request('GET', '/api/v2/version')\n"
    "    sys.exit(conn.getresponse().status != 200)\n"
    "except OSError:\n"
    "    sys.exit(1)\n"
)
"""``python -c PROBE ADDRESS PORT``: exits 0 when the API server answers."""

API_START_TIMEOUT = 90.0
"""Seconds the API server may take to answer (a few on an idle machine)."""


@contextlib.contextmanager
def components(
    home: Path,
    *,
    triggerer: bool = False,
    api_only: bool = False,
    host: netns.Host | None = None,
    celery_workers: Sequence[tuple[str, netns.Host]] = (),
    **env_extra: str,
) -> Iterator[str]:
    """Scheduler, DAG processor and API server for this test (with ``triggerer``,
    a triggerer too, for deferred tasks; with ``api_only``, the API server alone, for
    a test of the UI), stopped at the end; the API server's URL.

    With ``host``, they run on that host of a :func:`benchmarks.netns.lan` (its
    network namespace). With ``celery_workers`` (``(name, host)`` pairs), the
    executor is Celery's: a ``redis-server`` broker (password-protected) on ``host``
    and an ``airflow celery worker`` on each worker's host, under a hostname of its
    own (a UTS namespace: the hostname a task instance records).
    """
    port = free_port()
    address = host.address if host is not None else "127.0.0.1"
    env = {
        **os.environ,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{address}:{port}/execution/",
        "AIRFLOW__API__BASE_URL": f"http://{address}:{port}",
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
            address,
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
    if celery_workers:
        assert host is not None, "a Celery deployment runs on a host of a LAN"
        password = secrets.token_hex(16)
        commands = {
            "redis-server": [
                "redis-server",
                "--bind",
                address,
                "--port",
                str(REDIS_PORT),
                "--requirepass",
                password,
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            **commands,
        }
        broker = f"redis://:{password}@{address}:{REDIS_PORT}"
        env |= {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CELERY__BROKER_URL": f"{broker}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": f"{broker}/1",
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "2",
        }
    placed = {
        name: host.enter(command) if host else command
        for name, command in commands.items()
    }
    for name, worker in celery_workers:
        placed[f"worker-{name}"] = worker.enter(
            [
                "unshare",
                "--uts",
                sys.executable,
                "-c",
                AS_HOST,
                name,
                bin_airflow,
                "celery",
                "worker",
                "--celery-hostname",
                f"{name}@{name}",
            ]
        )
    procs = []
    try:
        for name, command in placed.items():
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
        api_server = procs[list(placed).index("api-server")][0]
        _wait_for_api(address, port, api_server, logs / "api-server.log", host)
        yield f"http://{address}:{port}"
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


def _wait_for_api(
    address: str,
    port: int,
    proc: subprocess.Popen[bytes],
    log: Path,
    host: netns.Host | None,
) -> None:
    """Until the API server ``proc`` at ``address:port`` answers (its version needs
    no login; asked from ``host`` when it runs on one), within
    :data:`API_START_TIMEOUT`."""
    deadline = time.monotonic() + API_START_TIMEOUT
    probe = [sys.executable, "-c", PROBE, address, str(port)]
    while True:
        assert proc.poll() is None, f"the API server exited {proc.returncode}: {log}"
        answered = subprocess.run(
            host.enter(probe) if host is not None else probe,
            capture_output=True,
            timeout=30,
            check=False,
        )
        if answered.returncode == 0:
            return
        assert time.monotonic() < deadline, f"the API server did not answer: {log}"
        time.sleep(0.5)


def trigger(
    db: Path,
    dag_id: str,
    run_id: str,
    deadline: float,
    conf: dict[str, Any] | None = None,
    *,
    also: Sequence[str] = (),
) -> None:
    """Once the DAG processor registered ``dag_id`` and the DAGs ``also`` names
    (paused, as a deployment's are), unpause them all (``also`` first) and trigger
    the run ``run_id`` of ``dag_id`` with ``conf``; fails past ``deadline``
    (``time.monotonic()``)."""
    dags = [*also, dag_id]
    while any(paused(db, dag) is None for dag in dags):
        assert time.monotonic() < deadline, f"the DAG processor never parsed {dags}"
        time.sleep(1)
    for dag in dags:
        airflow("dags", "unpause", dag)
        assert paused(db, dag) is False
    airflow(
        "dags", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf or {})
    )


def ended(db: Path, dag_id: str, run_id: str, deadline: float) -> str:
    """The run's state once it ended (``success`` or ``failed``), or as it is at
    ``deadline``."""
    state = run_state(db, dag_id, run_id)
    while state not in ("success", "failed") and time.monotonic() < deadline:
        time.sleep(3)
        state = run_state(db, dag_id, run_id)
    return state


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
