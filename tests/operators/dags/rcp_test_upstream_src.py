"""A test DAG: the copy's ``src`` is the XCom of the task that made the tree."""

from __future__ import annotations

import datetime
import os
from typing import Any

from airflow.sdk import DAG, Param, task

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="rcp_test_upstream_src",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={"root": Param("/tmp/unset", type="string"), "dst": Param("/tmp/unset2")},
) as dag:

    @task
    def make(params: dict[str, Any] | None = None) -> str:
        assert params is not None
        root = params["root"]
        os.makedirs(os.path.join(root, "sub"))
        for i in range(20):
            with open(os.path.join(root, "sub", f"f{i}"), "w") as f:
                f.write(str(i) * i)
        return str(root)

    RcpCopyOperator(task_id="copy", src=make(), dst="{{ params.dst }}")
