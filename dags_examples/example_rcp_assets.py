"""Two DAGs joined by an asset: a copy's destination schedules the DAG that reads it.

``example_rcp_asset_producer`` copies a landing tree into a staging tree;
``RcpCopyOperator`` declares its destination as the task's outlet asset
(``file:///…/staging``) by default, so each successful copy emits an asset event.
``example_rcp_asset_consumer`` is scheduled on that asset: the scheduler starts it
after every copy, and it reads the tree the copy wrote.

An outlet is declared when the DAG is parsed, so the destination is not templated here:
it comes from ``RCP_EXAMPLE_ROOT`` in the environment of the DAG processor and workers
(``/tmp/rcp-assets`` unset). A tree on an ``rcpd serve`` service is an asset too:
``rcp_provider.assets.rcp.create_asset(host=..., path=...)`` (``rcp://host:port/path``).
"""

from __future__ import annotations

import datetime
import os

from airflow.sdk import DAG, Asset, task

from rcp_operators.copy import RcpCopyOperator

ROOT = os.environ.get("RCP_EXAMPLE_ROOT", "/tmp/rcp-assets")
STAGING = f"{ROOT}/staging"

with DAG(
    dag_id="example_rcp_asset_producer",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    tags=["rcp", "example"],
):
    # [START howto_asset_rcp_producer]
    RcpCopyOperator(
        task_id="stage", src=f"{ROOT}/landing", dst=STAGING, existing="update"
    )
    # [END howto_asset_rcp_producer]

# [START howto_asset_rcp_consumer]
with DAG(
    dag_id="example_rcp_asset_consumer",
    schedule=[Asset(f"file://{STAGING}")],
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    tags=["rcp", "example"],
):

    @task
    def count_staged() -> int:
        """Count the files the copy staged, and record it beside the tree."""
        files = sum(len(names) for _, _, names in os.walk(STAGING))
        with open(f"{ROOT}/consumed", "w") as out:
            out.write(str(files))
        return files

    count_staged()
# [END howto_asset_rcp_consumer]
