"""RcpCopyOperator with object stores reached through Airflow's own connections: a
real S3 API (moto_server) behind an ``aws`` connection, the amazon provider's
filesystem, URLs and ``ObjectStoragePath`` operands (the context is the test's own, as
Airflow passes one; the example DAG's Airflow run is in test_dags)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk import ObjectStoragePath
from airflow.sdk.exceptions import AirflowFailException

from benchmarks import storeproxy
from benchmarks.objectstores import S3_KEY, S3_REGION, S3_SECRET, Store
from benchmarks.storeproxy import Kind
from rcp_core.site.builtin import STORE_WORKERS
from rcp_operators.compare import RcpCompareOperator
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.remove import RcpRemoveOperator
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, make_tree

T0 = 1_600_000_000_123_456_789
TREE: Spec = {
    ".": Dir(0o750, T0),
    "docs": Dir(0o700, T0 + 5),
    "docs/a.txt": File(b"a" * 3000, 0o640, T0 + 1),
    "empty": Dir(0o755, T0 + 6),
    **{f"many/f{i:02}": File(b"%d" % i, 0o600, T0 + i) for i in range(30)},
}
CONN = "aws_moto"


@pytest.fixture
def aws(s3: Store, monkeypatch: pytest.MonkeyPatch) -> Store:
    """The session's S3 as Airflow's ``aws`` connection ``aws_moto`` (an environment
    variable, as a deployment may define it): the only way this process reaches it."""
    connection = {
        "conn_type": "aws",
        "login": S3_KEY,
        "password": S3_SECRET,
        "extra": {"endpoint_url": s3.endpoint, "region_name": S3_REGION},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(connection))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return s3


def test_a_tree_goes_up_and_back_through_the_connection_with_its_metadata(
    aws: Store, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src, bucket = make_tree(tmp_path / "src", TREE), aws.bucket()
    url = f"s3://{bucket}/tree"
    up = RcpCopyOperator(
        task_id="up", src=str(src), dst=url, dst_conn_id=CONN, verify="checksum"
    ).execute(context={})
    assert (up["copied"]["files"], up["errors"]) == (31, 0)
    assert up["verify"]["same"] is True
    assert aws.fs().cat_file(f"{bucket}/tree/docs/a.txt") == b"a" * 3000

    back = tmp_path / "back"
    down = RcpCopyOperator(
        task_id="down", src=url, src_conn_id=CONN, dst=str(back), verify="metadata"
    ).execute(context={})
    assert down["verify"]["same"] is True
    assert tree_compare(src, back) == []  # modes and ns mtimes, the empty directory

    again = RcpCopyOperator(
        task_id="again", src=str(src), dst=url, dst_conn_id=CONN, existing="overwrite"
    ).execute(context={})
    assert (again["copied"]["files"], again["unchanged"]["files"]) == (0, 31)


def test_object_storage_paths_carry_their_own_connection(
    aws: Store, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src, bucket = make_tree(tmp_path / "src", TREE), aws.bucket()
    there = ObjectStoragePath(f"s3://{bucket}/tree", conn_id=CONN)
    RcpCopyOperator(task_id="up", src=str(src), dst=there).execute(context={})
    RcpCopyOperator(
        task_id="down", src=there, dst=str(tmp_path / "back"), verify="checksum"
    ).execute(context={})
    assert tree_compare(src, tmp_path / "back") == []


def test_a_store_connection_on_a_path_or_without_its_provider_is_refused(
    aws: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    with pytest.raises(AirflowFailException, match="its side must be a URL"):
        RcpCopyOperator(
            task_id="c", src=str(src), dst=str(tmp_path / "x"), dst_conn_id=CONN
        ).execute(context={})
    assert not (tmp_path / "x").exists()
    monkeypatch.setenv(
        "AIRFLOW_CONN_GCP_NONE", json.dumps({"conn_type": "google_cloud_platform"})
    )
    with pytest.raises(
        AirflowFailException, match="install apache-airflow-providers-google"
    ):
        RcpCopyOperator(
            task_id="c", src=str(src), dst="gs://b/x", dst_conn_id="gcp_none"
        ).execute(context={})


def test_a_removal_reaches_the_store_through_the_connection(
    aws: Store, tmp_path: Path
) -> None:
    src, bucket = make_tree(tmp_path / "src", TREE), aws.bucket()
    RcpCopyOperator(
        task_id="up", src=str(src), dst=f"s3://{bucket}/tree", dst_conn_id=CONN
    ).execute(context={})
    summary = RcpRemoveOperator(
        task_id="rm", paths=f"s3://{bucket}/tree/many", conn_id=CONN
    ).execute(context={})
    assert summary["removed"]["files"] == 30
    left = aws.fs().find(f"{bucket}/tree")
    assert not [key for key in left if "/many" in key], left
    RcpRemoveOperator(
        task_id="rm",
        paths=ObjectStoragePath(f"s3://{bucket}/tree", conn_id=CONN),
    ).execute(context={})
    assert aws.fs().find(f"{bucket}/tree") == []


def test_a_comparison_reads_each_side_through_its_connection(
    aws: Store, tmp_path: Path
) -> None:
    src, bucket = make_tree(tmp_path / "src", TREE), aws.bucket()
    url = f"s3://{bucket}/tree"
    RcpCopyOperator(task_id="up", src=str(src), dst=url, dst_conn_id=CONN).execute(
        context={}
    )
    same = RcpCompareOperator(
        task_id="cmp", src=str(src), dst=url, dst_conn_id=CONN
    ).execute(context={})
    assert (same["same"], same["files_hashed"]) == (True, 31)
    aws.fs().pipe_file(f"{bucket}/tree/docs/a.txt", b"b" * 3000)
    with pytest.raises(AirflowFailException, match="differs"):
        RcpCompareOperator(
            task_id="cmp", src=str(src), dst=url, dst_conn_id=CONN, attrs="size"
        ).execute(context={})


def test_a_connections_s3_client_holds_the_store_copys_workers(
    s3: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Through a proxy holding each request 100 ms: the aws connection's client
    has the 16 workers' requests in flight (s3fs's default pool would hold 10),
    and one whose connection names its own pool keeps it."""
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = s3.bucket()
    for i in range(64):
        s3.fs().pipe_file(f"{bucket}/many/f{i:02}", b"%d" % i)
    with storeproxy.proxied(s3, delay=0.1) as slow:
        for conn_id, config in (("aws_slow", {}), ("aws_four", {"pool": 4})):
            extra: dict[str, Any] = {
                "endpoint_url": slow.store.endpoint,
                "region_name": S3_REGION,
            }
            if config:
                extra["config_kwargs"] = {"max_pool_connections": config["pool"]}
            connection = {
                "conn_type": "aws",
                "login": S3_KEY,
                "password": S3_SECRET,
                "extra": extra,
            }
            monkeypatch.setenv(
                f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(connection)
            )
            slow.reset()
            RcpCopyOperator(
                task_id="down",
                src=f"s3://{bucket}/many",
                src_conn_id=conn_id,
                dst=str(tmp_path / conn_id),
            ).execute(context={})
            counts = slow.reset()
            assert counts.of(Kind.GET) == 64, counts
            if config:
                assert counts.peak <= 4, counts
            else:
                assert counts.peak >= STORE_WORKERS, counts
