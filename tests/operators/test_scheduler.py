"""The sharded example under a real scheduler: LocalExecutor with parallelism 4,
scheduler, DAG processor and API server as separate processes on loopback, SQLite.

Shows what dag.test cannot: the mapped shard copies run at the same time, in the
executor's own worker processes, and their result equals a single copy."""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import time
from pathlib import Path

import pytest

from support.scheduler import SHARDED_TREE, components, ended, trigger
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("airflow_db"),
    pytest.mark.timeout(600),
]
DAG_ID = "example_rcp_sharded"
RUN_TIMEOUT = 420.0


def test_mapped_shard_copies_run_concurrently_and_equal_a_single_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", SHARDED_TREE)
    conf = {
        "src": str(src),
        "dst": str(tmp_path / "dst"),
        "manifest": str(tmp_path / "plan.json"),
        "shards": 4,
    }
    home = Path(os.environ["AIRFLOW_HOME"])
    run_id = f"scheduler-test-{secrets.token_hex(4)}"
    with components(home):
        deadline = time.monotonic() + RUN_TIMEOUT
        trigger(home / "airflow.db", DAG_ID, run_id, deadline, conf)
        state = ended(home / "airflow.db", DAG_ID, run_id, deadline)
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
