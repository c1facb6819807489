"""The example DAGs under a real Airflow (SQLite): they import, and ``dag.test`` runs
each one end to end, the remote one against a real ``rcpd serve``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks.objectstores import S3_KEY, S3_REGION, S3_SECRET, Store
from support.airflow import DAGS, TEST_DAGS, connection_env
from support.services import Served
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_650_000_000_000_000_000
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a": Dir(0o750, T0 + 1),
    "a/one": File(b"1" * 200_000, 0o640, T0 + 2),
    "a/link": Symlink("one"),
    **{f"b/c{i % 4}/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(60)},
}
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("airflow_db")]


def _dag(dag_id: str, folder: Path = DAGS) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(folder))
    return bag.get_dag(dag_id)


def _run(dag_id: str, conf: dict[str, Any], folder: Path = DAGS) -> Any:
    from airflow.utils.state import DagRunState

    run = _dag(dag_id, folder).test(run_conf=conf)
    assert run.state == DagRunState.SUCCESS, run
    return run


def _xcom(run: Any, task_id: str, map_index: int = -1) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        value = session.scalar(
            XComModel.get_many(
                run_id=run.run_id,
                dag_ids=run.dag_id,
                task_ids=task_id,
                map_indexes=map_index,
                key="return_value",
            ).with_only_columns(XComModel.value)
        )
    return json.loads(value) if isinstance(value, str) else value


def test_every_example_dag_imports_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {
        "example_rcp_local_copy",
        "example_rcp_remote_deferrable",
        "example_rcp_sharded",
        "example_rcp_nightly_sync",
        "example_rcp_snapshot",
        "example_rcp_object_store",
        "example_rcp_asset_producer",
        "example_rcp_asset_consumer",
    }


def test_the_local_copy_example_copies_verifies_and_reports(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    run = _run(
        "example_rcp_local_copy", {"src": str(src), "dst": str(tmp_path / "dst")}
    )
    assert tree_compare(src, tmp_path / "dst") == []
    summary = _xcom(run, "copy")
    assert summary["copied"]["files"] == 61
    assert summary["verify"]["same"] is True


def test_the_deferrable_example_runs_the_copy_as_a_job_of_the_service(
    rcp_service: Served, rcp_connection: str, tree_compare: TreeCompare
) -> None:
    src = make_tree(rcp_service.data / "projects", TREE)
    dst = rcp_service.backup / "projects"
    _run(
        "example_rcp_remote_deferrable",
        {"conn_id": rcp_connection, "src": str(src), "dst": str(dst)},
    )
    assert tree_compare(src, dst) == []
    with rcp_service.client() as client:
        (job,) = client.jobs()
    assert job["state"] == "succeeded"


def test_the_sharded_example_equals_a_single_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    run = _run(
        "example_rcp_sharded",
        {
            "src": str(src),
            "dst": str(tmp_path / "dst"),
            "manifest": str(tmp_path / "plan.json"),
            "shards": 4,
        },
    )
    assert tree_compare(src, tmp_path / "dst") == []
    shards = _xcom(run, "plan")
    assert 1 < len(shards) <= 4
    assert _xcom(run, "finalize")["verify"]["same"] is True
    assert _labels(run, "copy_shard") == [f"shard {i}" for i in range(len(shards))]


def _labels(run: Any, task_id: str) -> list[str]:
    """The grid's labels of a mapped task's instances (``rendered_map_index``)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(TaskInstance.rendered_map_index)
            .where(
                TaskInstance.dag_id == run.dag_id,
                TaskInstance.run_id == run.run_id,
                TaskInstance.task_id == task_id,
            )
            .order_by(TaskInstance.map_index)
        ).all()
    return [str(label) for (label,) in rows]


def test_the_nightly_sync_example_mirrors_deletions(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    conf = {"src": str(src), "dst": str(tmp_path / "mirror")}
    _run("example_rcp_nightly_sync", conf)
    os.remove(src / "a" / "one")
    (src / "new").write_bytes(b"new")
    _run("example_rcp_nightly_sync", conf)
    assert tree_compare(src, tmp_path / "mirror") == []
    assert not (tmp_path / "mirror" / "a" / "one").exists()


def test_the_policy_fields_are_templated_and_the_xcom_names_the_operands(
    tmp_path: Path,
) -> None:
    """``existing``, ``delete``, ``verify``, ``preserve`` and ``dry_run`` rendered
    from the run's params (text, parsed as rcp parses it): a dry run changes
    nothing; then an overwrite with delete mirrors the source and verifies it. The
    XCom value names ``src`` and ``dst``."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    (dst / "stale").mkdir(parents=True)
    (dst / "stale" / "old").write_bytes(b"old")
    conf: dict[str, Any] = {
        "src": str(src),
        "dst": str(dst),
        "existing": "overwrite",
        "delete": True,
        "preserve": "all",
        "verify": "checksum",
        "dry_run": True,
    }
    dry = _xcom(_run("rcp_test_policy", conf, TEST_DAGS), "copy")
    assert (dst / "stale" / "old").exists()
    assert not (dst / "a").exists()
    assert (dry["src"], dry["dst"]) == ([str(src)], str(dst))
    assert "verify" not in dry
    done = _xcom(_run("rcp_test_policy", {**conf, "dry_run": False}, TEST_DAGS), "copy")
    assert not (dst / "stale").exists()
    assert done["verify"]["same"] is True
    assert (done["src"], done["dst"]) == ([str(src)], str(dst))


def test_an_upstream_xcom_feeds_src_through_the_template(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """``src`` is rendered from the XCom of the task that made the tree; the XComArg
    also makes that task upstream of the copy."""
    dag = _dag("rcp_test_upstream_src", TEST_DAGS)
    assert dag.get_task("copy").upstream_task_ids == {"make"}
    root, dst = tmp_path / "made", tmp_path / "dst"
    _run("rcp_test_upstream_src", {"root": str(root), "dst": str(dst)}, TEST_DAGS)
    assert tree_compare(root, dst) == []


def test_the_snapshot_example_copies_proves_links_and_prunes(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    snapshots = tmp_path / "snapshots"
    stale = snapshots / "2000-01-01"
    make_tree(stale, TREE)
    conf = {
        "src": str(src),
        "current": str(tmp_path / "current"),
        "snapshots": str(snapshots),
        "retention_days": 1,
    }
    run = _run("example_rcp_snapshot", conf)
    assert _xcom(run, "compare")["same"] is True
    (snapshot,) = [p for p in snapshots.iterdir() if p != stale]
    big = [(d / "a" / "one").stat().st_ino for d in (snapshot, tmp_path / "current")]
    assert big[0] == big[1]  # shared, not copied
    assert _xcom(run, "snapshot")["methods"]["link"] == 61
    assert _xcom(run, "prune")["removed"]["files"] == 0  # yesterday's: never made


def test_the_object_store_example_goes_up_to_s3_and_back_through_a_connection(
    s3: Store,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tree_compare: TreeCompare,
) -> None:
    """Airflow's own ``aws`` connection to a real S3 API (moto_server); a rerun
    moves nothing."""
    name, value = connection_env(
        "aws_moto",
        conn_type="aws",
        login=S3_KEY,
        password=S3_SECRET,
        extra={"endpoint_url": s3.endpoint, "region_name": S3_REGION},
    )
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    files = {k: v for k, v in TREE.items() if not isinstance(v, Symlink)}
    src = make_tree(tmp_path / "src", files)  # a store keeps no symlinks (yet)
    conf = {
        "src": str(src),
        "url": f"s3://{s3.bucket()}/projects",
        "back": str(tmp_path / "back"),
        "conn_id": "aws_moto",
    }
    run = _run("example_rcp_object_store", conf)
    assert tree_compare(src, tmp_path / "back") == []
    assert _xcom(run, "upload")["verify"]["same"] is True
    rerun = _run("example_rcp_object_store", conf)
    for task_id in ("upload", "download"):
        assert _xcom(rerun, task_id)["copied"]["files"] == 0, task_id
