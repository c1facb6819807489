"""Copy a tree on a storage host through its ``rcpd serve``, without holding a worker.

The connection ``rcp_storage`` (type ``rcp``) points at the service: host, port, the
token as password, and the certificate fingerprint ``rcpd serve`` printed in the
extra ``{"fingerprint": "..."}``. Both paths are the storage host's, inside the
service's roots. With ``deferrable=True`` the task submits the copy as a job of the
service and frees its worker slot; the triggerer asks the service how the job goes and
the task resumes with the job's summary (or fails with its error). A retried task finds
its earlier try's job if that still runs, instead of starting a second copy.
"""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="example_rcp_remote_deferrable",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "conn_id": Param("rcp_storage", type="string"),
        "src": Param("/srv/data/projects", type="string"),
        "dst": Param("/srv/backup/projects", type="string"),
    },
    tags=["rcp", "example"],
) as dag:
    # [START howto_operator_rcp_copy_deferrable]
    RcpCopyOperator(
        task_id="copy_on_storage_host",
        src_conn_id="{{ params.conn_id }}",
        dst_conn_id="{{ params.conn_id }}",
        src="{{ params.src }}",
        dst="{{ params.dst }}",
        existing="update",
        deferrable=True,
        poll_interval=5.0,
    )
    # [END howto_operator_rcp_copy_deferrable]
