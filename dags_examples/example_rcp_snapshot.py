"""Copy, prove the copy by content, keep a cheap daily snapshot, prune old ones.

``copy`` brings the source over (``existing="update"``: only what is newer);
``compare`` reads both trees and fails the run if any file's contents differ
(BLAKE3, in parallel); ``snapshot`` makes ``snapshots/<ds>`` a tree of hard links to
the copy's files (no data written: the snapshot shares every unchanged file with the
copy until the copy changes it, since the copy replaces files by renaming new ones
into place); ``prune`` removes the snapshot that fell out of the retention (made
``retention_days`` ago, if it was made: ``missing_ok``). Snapshots are pruned by
name, not by file age: a file unchanged for a year is in every snapshot, with its
year-old mtime.
"""

from __future__ import annotations

import datetime

from airflow.sdk import DAG, Param

from rcp_operators.compare import RcpCompareOperator
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.link import RcpLinkOperator
from rcp_operators.remove import RcpRemoveOperator

with DAG(
    dag_id="example_rcp_snapshot",
    schedule="@daily",
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
    catchup=False,
    params={
        "src": Param("/tmp/rcp-demo/src", type="string"),
        "current": Param("/tmp/rcp-demo/current", type="string"),
        "snapshots": Param("/tmp/rcp-demo/snapshots", type="string"),
        "retention_days": Param(14, type="integer", minimum=1),
    },
    tags=["rcp", "example"],
) as dag:
    copy = RcpCopyOperator(
        task_id="copy",
        src="{{ params.src }}",
        dst="{{ params.current }}",
        existing="update",
    )
    # [START howto_operator_rcp_compare]
    compare = RcpCompareOperator(
        task_id="compare",
        src="{{ params.src }}",
        dst="{{ params.current }}",
        checksum=True,
    )
    # [END howto_operator_rcp_compare]
    # [START howto_operator_rcp_link]
    snapshot = RcpLinkOperator(
        task_id="snapshot",
        src="{{ params.current }}",
        dst="{{ params.snapshots }}/{{ ds }}",
    )
    # [END howto_operator_rcp_link]
    # [START howto_operator_rcp_remove]
    prune = RcpRemoveOperator(
        task_id="prune",
        paths="{{ params.snapshots }}/{{ macros.ds_add(ds, -params.retention_days) }}",
        missing_ok=True,
    )
    # [END howto_operator_rcp_remove]
    copy >> compare >> snapshot >> prune
