"""A test DAG: the copy's policy fields come from the run's params, templated."""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="rcp_test_policy",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "src": Param("/tmp/unset", type="string"),
        "dst": Param("/tmp/unset2", type="string"),
        "existing": Param("error", type="string"),
        "delete": Param(False, type="boolean"),
        "preserve": Param("default", type="string"),
        "verify": Param("none", type="string"),
        "dry_run": Param(False, type=["boolean", "string"]),
    },
) as dag:
    RcpCopyOperator(
        task_id="copy",
        src="{{ params.src }}",
        dst="{{ params.dst }}",
        existing="{{ params.existing }}",
        delete="{{ params.delete }}",
        preserve="{{ params.preserve }}",
        verify="{{ params.verify }}",
        dry_run="{{ params.dry_run }}",
    )
