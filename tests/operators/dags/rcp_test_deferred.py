"""Test DAGs of deferred copies between the trees of an ``rcpd serve``:

- ``rcp_test_deferred``: slow enough (about 5 operations a second) to be watched
  and killed while deferred;
- ``rcp_test_restart``: about 60 operations a second, for the service (with a
  ``--state-dir``) to be killed and started again while the task is deferred;
  ``existing="overwrite"``: a rerun converges, so the service runs the job again.
"""

from __future__ import annotations

import datetime
from typing import Any

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator

TESTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "rcp_test_deferred",
        "rcp_deferred",
        {"ops_throttle": 5, "progress_interval": 3.0},
    ),
    ("rcp_test_restart", "rcp_restart", {"ops_throttle": 60, "existing": "overwrite"}),
)

for dag_id, conn_id, options in TESTS:
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        catchup=False,
        params={"src": Param("/tmp/unset", type="string"), "dst": Param("/tmp/unset2")},
    ):
        RcpCopyOperator(
            task_id="copy",
            src_conn_id=conn_id,
            dst_conn_id=conn_id,
            src="{{ params.src }}",
            dst="{{ params.dst }}",
            deferrable=True,
            poll_interval=1.0,
            **options,
        )
