"""Copy a tree of the worker to an object store and back, with Airflow's own store
connection, keeping each file's mode and mtime in its object's metadata.

The store side is a URL (or an ``ObjectStoragePath``) and its connection is Airflow's
connection of that store (``aws`` here; ``google_cloud_platform`` for ``gs://``,
``wasb`` for ``az://``, with their providers installed), given as ``dst_conn_id``
on the way up and ``src_conn_id`` on the way back, as common-io's
``FileTransferOperator`` takes them::

    airflow dags test example_rcp_object_store \\
        -c '{"src": "/data/in", "url": "s3://bucket/in", "back": "/data/back",
             "conn_id": "aws_default"}'

A rerun uploads and downloads only what changed (``existing="overwrite"``: an
unchanged object is told by its size and the MD5 its store recorded, with no request
of its own); each step verifies its copy (``verify="checksum"``).
"""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.copy import RcpCopyOperator

with DAG(
    dag_id="example_rcp_object_store",
    schedule=None,
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "src": Param("/tmp/rcp-demo/src", type="string", description="tree to upload"),
        "url": Param("s3://rcp-demo/src", type="string", description="its copy"),
        "back": Param("/tmp/rcp-demo/back", type="string", description="downloaded"),
        "conn_id": Param("aws_default", type="string", description="the store's"),
    },
    tags=["rcp", "example"],
) as dag:
    # [START howto_operator_rcp_copy_object_store]
    upload = RcpCopyOperator(
        task_id="upload",
        src="{{ params.src }}",
        dst="{{ params.url }}",
        dst_conn_id="{{ params.conn_id }}",
        existing="overwrite",
        verify="checksum",
    )
    download = RcpCopyOperator(
        task_id="download",
        src="{{ params.url }}",
        src_conn_id="{{ params.conn_id }}",
        dst="{{ params.back }}",
        existing="overwrite",
        verify="checksum",
    )
    upload >> download
    # [END howto_operator_rcp_copy_object_store]
