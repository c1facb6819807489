"""A test DAG: each kind of rcp operator on the worker's storage, and a task that
calls the hook, for the lineage its tasks report (tests/operators/test_lineage.py)."""

from __future__ import annotations

import datetime
from typing import Any

from airflow.sdk import DAG, Param, task

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

    @task
    def hook_copy(params: dict[str, Any] | None = None) -> None:
        """A task that calls the hook itself: its lineage is the hook's."""
        from rcp_core import CopySettings
        from rcp_provider.hooks.rcp import RcpHook

        assert params is not None
        root = params["root"]
        RcpHook(None).copy([f"{root}/src"], f"{root}/by-hook", CopySettings())

    copy >> compare >> link >> remove >> hook_copy()
