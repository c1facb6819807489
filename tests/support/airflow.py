"""A real Airflow for tests: its own home, a SQLite database, our example DAGs.

:func:`configure` must run before anything imports Airflow (the conftests of the
Airflow test packages call it at import): Airflow reads its configuration once. The
home is a fresh directory per test session; :func:`migrate` creates the database once
(``airflow db migrate``, the real command). Connections are given the way a
deployment may give them, as ``AIRFLOW_CONN_<ID>`` variables holding JSON
(:func:`connection_env`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DAGS = REPO / "dags_examples"
TEST_DAGS = REPO / "tests" / "operators" / "dags"
BUNDLE = "airflow.dag_processing.bundles.local.LocalDagBundle"
MIGRATE_TIMEOUT = 300


def configure() -> Path:
    """Point Airflow at a session home, SQLite, the example DAGs and the test DAGs;
    the home."""
    home = os.environ.get("RCP_TEST_AIRFLOW_HOME")
    if home is None:
        home = tempfile.mkdtemp(prefix="rcp-airflow-")
        os.environ["RCP_TEST_AIRFLOW_HOME"] = home
    os.environ["AIRFLOW_HOME"] = home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(DAGS)
    # Two bundles: the examples users get, and the DAGs only tests run.
    os.environ["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(
        [
            {"name": name, "classpath": BUNDLE, "kwargs": {"path": str(path)}}
            for name, path in (("dags-folder", DAGS), ("rcp-tests", TEST_DAGS))
        ]
    )
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
    os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "INFO"
    return Path(home)


def airflow(
    *args: str, timeout: float = MIGRATE_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run the ``airflow`` command of this venv with the session's configuration."""
    command = [str(Path(sys.executable).with_name("airflow")), *args]
    proc = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def migrate() -> None:
    """Create (or upgrade) the session's database."""
    airflow("db", "migrate")


def connection_env(conn_id: str, **fields: Any) -> tuple[str, str]:
    """The environment variable that defines connection ``conn_id``."""
    return f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "rcp", **fields})
