"""Copy a tree on the worker's storage in parallel, keeping metadata, and verify it.

``make demo`` runs this DAG with ``airflow dags test``; run it yourself with other
paths::

    airflow dags test example_rcp_local_copy -c '{"src": "/data/in", "dst": "/data/out"}'

A rerun copies only what changed (``existing="update"``); ``verify="checksum"``
compares every file's content with its source afterwards and fails the task on any
difference.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from airflow.sdk import DAG, Param, task

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="example_rcp_local_copy",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "src": Param("/tmp/rcp-demo/src", type="string", description="tree to copy"),
        "dst": Param("/tmp/rcp-demo/copy", type="string", description="its copy"),
    },
    tags=["rcp", "example"],
) as dag:
    # [START howto_operator_rcp_copy]
    copy = RcpCopyOperator(
        task_id="copy",
        src="{{ params.src }}",
        dst="{{ params.dst }}",
        existing="update",
        verify="checksum",
    )

    @task
    def report(summary: dict[str, Any]) -> None:
        """Print the copy's summary (what the copy task pushed to XCom)."""
        print("rcp summary:", json.dumps(summary, sort_keys=True))

    report(copy.output)
    # [END howto_operator_rcp_copy]
