"""A test DAG: each kind of rcp operator on the worker's storage, for the lineage
its tasks report (tests/operators/test_lineage.py)."""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.compare import RcpCompareOperator
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.link import RcpLinkOperator
from rcp_operators.remove import RcpRemoveOperator

with DAG(
    dag_id="rcp_test_lineage",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={"root": Param("/tmp/unset", type="string")},
) as dag:
    copy = RcpCopyOperator(
        task_id="copy",
        src="{{ params.root }}/src",
        dst="{{ params.root }}/copy",
        verify="checksum",
    )
    compare = RcpCompareOperator(
        task_id="compare", src="{{ params.root }}/src", dst="{{ params.root }}/copy"
    )
    link = RcpLinkOperator(
        task_id="link", src="{{ params.root }}/copy", dst="{{ params.root }}/snap"
    )
    remove = RcpRemoveOperator(task_id="remove", paths="{{ params.root }}/snap")
    copy >> compare >> link >> remove
