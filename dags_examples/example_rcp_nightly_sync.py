"""Every night, make a mirror exactly like its source, then check it.

``existing="overwrite"`` replaces files that differ in size or mtime and skips the
rest; ``delete=True`` removes from the mirror what the source no longer has (only
after that directory's subtree copied cleanly, never outside the mirror);
``verify="metadata"`` compares both trees afterwards and fails the run on any
difference.
"""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="example_rcp_nightly_sync",
    schedule="@daily",
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "src": Param("/tmp/rcp-demo/src", type="string"),
        "dst": Param("/tmp/rcp-demo/mirror", type="string"),
    },
    tags=["rcp", "example"],
) as dag:
    # [START howto_operator_rcp_copy_sync]
    RcpCopyOperator(
        task_id="sync",
        src="{{ params.src }}",
        dst="{{ params.dst }}",
        existing="overwrite",
        delete=True,
        verify="metadata",
    )
    # [END howto_operator_rcp_copy_sync]
