"""The sharded example on Airflow's CeleryExecutor, across two hosts.

Three hosts on a private bridge (:func:`benchmarks.netns.lan`): the first runs the
deployment (API server, scheduler, DAG processor) and a real ``redis-server`` broker;
the other two each run an ``airflow celery worker`` under a hostname of its own. The
hosts share the machine's file systems, as workers share the storage the shards
name (a parallel filesystem, an NFS export). Shows what one machine's executor
cannot: the mapped shard copies run on both workers, some at the same time, and the
tree they make together equals a single copy, content and metadata.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import time
from pathlib import Path

import pytest

from benchmarks import netns
from rcp_core import CopySettings, copy
from support.scheduler import SHARDED_TREE, components, ended, trigger
from support.treecmp import TreeCompare
from support.treespec import make_tree

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("airflow_db"),
    pytest.mark.timeout(720),
]
DAG_ID = "example_rcp_sharded"
RUN_TIMEOUT = 540.0
WORKERS = ("rcpw1", "rcpw2")


# Each shard big enough to take a few seconds on this machine's disk.
def test_shards_run_on_two_celery_workers_at_once_and_equal_a_single_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    why = netns.missing()
    if why is not None:
        pytest.fail(f"the Celery test needs network namespaces: {why}", pytrace=False)
    src = make_tree(tmp_path / "src", SHARDED_TREE)
    copy([str(src)], str(tmp_path / "single"), CopySettings())
    conf = {
        "src": str(src),
        "dst": str(tmp_path / "dst"),
        "manifest": str(tmp_path / "plan.json"),
        "shards": 4,
    }
    home = Path(os.environ["AIRFLOW_HOME"])
    db = home / "airflow.db"
    run_id = f"celery-test-{secrets.token_hex(4)}"
    with (
        netns.lan(3) as (controller, first, second),
        components(
            home,
            host=controller,
            celery_workers=[(WORKERS[0], first), (WORKERS[1], second)],
        ),
    ):
        deadline = time.monotonic() + RUN_TIMEOUT
        trigger(db, DAG_ID, run_id, deadline, conf)
        state = ended(db, DAG_ID, run_id, deadline)
    assert state == "success", (home / "component-logs").as_posix()
    assert tree_compare(src, tmp_path / "dst") == []
    assert tree_compare(tmp_path / "single", tmp_path / "dst") == []
    with contextlib.closing(sqlite3.connect(db)) as conn:
        spans = conn.execute(
            "SELECT start_date, end_date, hostname FROM task_instance "
            "WHERE dag_id = ? AND run_id = ? AND task_id = 'copy_shard'",
            (DAG_ID, run_id),
        ).fetchall()
    assert len(spans) == 4
    assert {hostname for _, _, hostname in spans} == set(WORKERS), spans
    across = [
        (a, b)
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]
    ]
    assert across, f"no two shards ran on different workers at the same time: {spans}"
