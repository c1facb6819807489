"""A test DAG: a deferred copy between the trees of an ``rcpd serve``, slow enough
(about 5 operations a second) to be watched and killed while deferred."""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="rcp_test_deferred",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={"src": Param("/tmp/unset", type="string"), "dst": Param("/tmp/unset2")},
) as dag:
    RcpCopyOperator(
        task_id="copy",
        src_conn_id="rcp_deferred",
        dst_conn_id="rcp_deferred",
        src="{{ params.src }}",
        dst="{{ params.dst }}",
        ops_throttle=5,
        deferrable=True,
        poll_interval=1.0,
        progress_interval=3.0,
    )
