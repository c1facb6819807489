"""Copy one big tree with many workers: plan shards, copy them as mapped tasks, finalize.

Every worker must see ``src``, ``dst`` and the manifest at the same paths (a parallel
or network filesystem). The plan splits the tree into at most ``shards`` parts balanced
by bytes and file count; Airflow's executor runs the mapped copies wherever it has
slots (``max_active_tis_per_dagrun`` bounds how many at once); finalize sets the
metadata of the directories the shards share and verifies the whole copy.
"""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator
from rcp_operators.shards import RcpFinalizeOperator, RcpPlanOperator

with DAG(
    dag_id="example_rcp_sharded",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "src": Param("/tmp/rcp-demo/src", type="string"),
        "dst": Param("/tmp/rcp-demo/sharded", type="string"),
        "manifest": Param("/tmp/rcp-demo/sharded.plan.json", type="string"),
        "shards": Param(8, type="integer", minimum=1, maximum=1024),
    },
    tags=["rcp", "example"],
) as dag:
    # [START howto_operator_rcp_plan]
    plan = RcpPlanOperator(
        task_id="plan",
        src="{{ params.src }}",
        manifest="{{ params.manifest }}",
        shards="{{ params.shards }}",
    )
    # [END howto_operator_rcp_plan]
    # [START howto_operator_rcp_copy_shards]
    copy = RcpCopyOperator.partial(
        task_id="copy_shard",
        dst="{{ params.dst }}",
        existing="update",
        max_active_tis_per_dagrun=8,
    ).expand_kwargs(plan.output)
    # [END howto_operator_rcp_copy_shards]
    # [START howto_operator_rcp_finalize]
    finalize = RcpFinalizeOperator(
        task_id="finalize",
        manifest="{{ params.manifest }}",
        dst="{{ params.dst }}",
        verify="metadata",
    )
    plan >> copy >> finalize
    # [END howto_operator_rcp_finalize]
