"""The asset example under a real scheduler (dags_examples/example_rcp_assets.py): the
producer's copy emits an event for its destination asset, and the scheduler starts
the consumer DAG, which reads the tree the copy wrote."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import time
from pathlib import Path

import pytest

from support.scheduler import components, run_state, trigger
from support.treecmp import TreeCompare
from support.treespec import File, Spec, make_tree

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("airflow_db"),
    pytest.mark.timeout(600),
]
PRODUCER, CONSUMER = "example_rcp_asset_producer", "example_rcp_asset_consumer"
RUN_TIMEOUT = 420.0
TREE: Spec = {f"d{i % 3}/f{i}": File(b"%d" % i) for i in range(12)}


def _consumer_runs(db: Path) -> list[tuple[str, str, str]]:
    """The consumer's runs: (run id, run type, state)."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT run_id, run_type, state FROM dag_run WHERE dag_id = ?",
            (CONSUMER,),
        ).fetchall()
    return [(str(a), str(b), str(c)) for a, b, c in rows]


def test_a_copy_schedules_the_dag_that_consumes_its_destination(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    root = tmp_path / "root"
    make_tree(root / "landing", TREE)
    home = Path(os.environ["AIRFLOW_HOME"])
    db = home / "airflow.db"
    run_id = f"asset-test-{secrets.token_hex(4)}"
    with components(home, RCP_EXAMPLE_ROOT=str(root)):
        deadline = time.monotonic() + RUN_TIMEOUT
        trigger(db, PRODUCER, run_id, deadline, also=[CONSUMER])
        consumed: list[tuple[str, str, str]] = []
        while time.monotonic() < deadline:
            consumed = _consumer_runs(db)
            if any(state in ("success", "failed") for _, _, state in consumed):
                break
            time.sleep(3)
        produced = run_state(db, PRODUCER, run_id)
    logs = (home / "component-logs").as_posix()
    assert produced == "success", logs
    assert [(kind, state) for _, kind, state in consumed] == [
        ("asset_triggered", "success")
    ], logs
    assert tree_compare(root / "landing", root / "staging") == []
    assert (root / "consumed").read_text() == str(len(TREE))
