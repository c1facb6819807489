"""OpenLineage of rcp's operators (rcp_operators/lineage.py): datasets named as
OpenLineage's naming spec names storage, and, under ``airflow dags test`` with the
real OpenLineage provider writing its events to a file, each task's START and
COMPLETE events name the trees it read and wrote, the COMPLETE one with the run's
summary."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from rcp_operators.compare import RcpCompareOperator
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.lineage import DONE, Lineage, run_facet
from rcp_operators.link import RcpLinkOperator
from rcp_operators.remove import RcpRemoveOperator
from rcp_operators.shards import RcpFinalizeOperator, RcpPlanOperator
from rcp_provider.lineage import asset_uri, dataset_name
from support.airflow import airflow, connection_env
from support.treespec import Fifo, File, Spec, Symlink, make_tree

pytestmark = pytest.mark.usefixtures("airflow_db")
HOST = socket.gethostname()
ADLS = "abfss://ctr@acct.dfs.core.windows.net"
TREE: Spec = {
    "a": File(b"x" * 100),
    "d/b": File(b"y" * 2000),
    "d/e/c": File(b"z" * 30_000),
    "d/e/link": Symlink("../b"),
    "d/fifo": Fifo(),
}
TREE_FILES = 3
TREE_BYTES = 32_100


@pytest.mark.parametrize(
    ("operand", "namespace", "name"),
    [
        ("/data/a/", f"file://{HOST}", "/data/a"),
        ("/data/./a/../b", f"file://{HOST}", "/data/b"),
        ("alice@h2:2222:/srv/x/", "file://h2", "/srv/x"),
        ("s3://bkt/p/q/", "s3://bkt", "p/q"),
        ("s3a://bkt/p", "s3://bkt", "p"),
        ("gs://bkt/p", "gs://bkt", "p"),
        ("gcs://bkt", "gs://bkt", "/"),
        ("rcp://store.example:7000/data", "rcp://store.example:7000", "/data"),
        ("memory://x/y", "memory://x", "/y"),
        ("s3://key:secret@bkt/p", "s3://bkt", "p"),
        ("rcp://user:token@[::1]/d", "rcp://[::1]:7450", "/d"),
        ("file:///data/a/", f"file://{HOST}", "/data/a"),
        ("file://localhost/data/./a", f"file://{HOST}", "/data/a"),
        ("file://h2/srv/x/", "file://h2", "/srv/x"),
        ("az://ctr/p/q/", "az://ctr", "p/q"),
        ("abfs://ctr/p", "az://ctr", "p"),
        ("abfss://ctr@acct.dfs.core.windows.net", ADLS, "/"),
        ("abfs://ctr@acct.dfs.core.windows.net/p/", ADLS, "p"),
        ("az://ctr@acct.blob.core.windows.net/p", ADLS, "p"),
        ("abfs://ctr:secret@acct.dfs.core.windows.net/p", ADLS, "p"),
    ],
)
def test_an_operand_is_named_as_the_naming_spec_names_it(
    operand: str, namespace: str, name: str
) -> None:
    assert dataset_name(operand, None) == (namespace, name)


def test_one_tree_is_one_dataset_however_its_url_is_written(tmp_path: Path) -> None:
    """An Azure tree naming its account is the dataset OpenLineage's own client
    names for ADLS Gen2, from any of adlfs's spellings; a path on the worker and its
    ``file:`` URL are one dataset, on the worker's host."""
    from airflow.sdk import ObjectStoragePath
    from openlineage.client.naming.dataset import ABFSS

    spec = ABFSS(container="ctr", service="acct", path="in/day1")
    adls = (spec.get_namespace(), spec.get_name())
    for url in (
        "abfss://ctr@acct.dfs.core.windows.net/in/day1",
        "abfs://ctr@acct.dfs.core.windows.net/in/day1/",
        "az://ctr@acct.dfs.core.windows.net/in/day1",
        "abfs://ctr@acct.blob.core.windows.net/in/day1",
    ):
        assert dataset_name(url, None) == adls, url
    short = ObjectStoragePath("abfs://wasb_default@ctr/in/day1")
    assert dataset_name(short, None) == dataset_name("az://ctr/in/day1", None)
    assert dataset_name(short, None) == ("az://ctr", "in/day1")
    tree = tmp_path / "tree"
    assert (
        dataset_name(f"file://{tree}", None)
        == dataset_name(str(tree), None)
        == (f"file://{HOST}", str(tree))
    )


def test_an_azure_asset_keeps_its_container() -> None:
    assert (
        asset_uri("abfs://ctr@acct.dfs.core.windows.net/p/q/", None)
        == "abfs://ctr@acct.dfs.core.windows.net/p/q"
    )
    assert asset_uri("az://ctr/p", None) == "az://ctr/p"
    assert (
        asset_uri("abfss://ctr:secret@acct.dfs.core.windows.net/p", None)
        == "abfss://ctr@acct.dfs.core.windows.net/p"
    )


def test_a_path_on_a_service_is_in_the_services_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    svc = connection_env(
        "svc", host="store.example", port=7001, extra={"no_encryption": True}
    )
    monkeypatch.setenv(*svc)
    assert dataset_name("/data/a", "svc") == ("rcp://store.example:7001", "/data/a")


def test_an_object_storage_path_is_named_without_its_connection() -> None:
    from airflow.sdk import ObjectStoragePath

    path = ObjectStoragePath("s3://aws_default@bkt/p/q")
    assert dataset_name(path, None) == ("s3://bkt", "p/q")


def test_the_run_facet_holds_the_summary() -> None:
    copied = {
        "copied": {"files": 3, "bytes": 30},
        "removed": {"files": 1, "bytes": 7},  # --delete's: not what a copy did
        "errors": 0,
        "verify": {"same": True},
    }
    facet = run_facet("copy", copied)
    assert (facet.operation, facet.files, facet.bytes) == ("copy", 3, 30)
    assert (facet.errors, facet.verified, facet.shards) == (0, "same", None)
    assert run_facet("copy", {**copied, "verify": None}).verified is None
    del copied["verify"]
    assert run_facet("copy", copied).verified is None
    compared = run_facet(
        "compare",
        {"entries": 5, "bytes_hashed": 80, "same": False, "differences_total": 2},
    )
    assert (compared.files, compared.bytes) == (5, 80)
    assert (compared.errors, compared.verified) == (2, "different")
    with pytest.raises(KeyError, match=r"copied\.bytes"):
        run_facet("link", {"copied": {"files": 1}, "errors": 0})


def test_every_operator_has_its_row() -> None:
    """Each operator's operation is a row of the one table the facet is read by."""
    operators: list[type[Lineage]] = [
        RcpCopyOperator,
        RcpCompareOperator,
        RcpLinkOperator,
        RcpRemoveOperator,
        RcpPlanOperator,
        RcpFinalizeOperator,
    ]
    assert sorted(op.lineage_operation for op in operators) == sorted(DONE)


def _facet(operator: Lineage) -> Any:
    return operator.get_openlineage_facets_on_complete(None).run_facets["rcp"]


def _bytes(spec: Spec) -> int:
    return sum(len(entry.data) for entry in spec.values() if isinstance(entry, File))


def test_a_removal_reports_what_it_removed(tmp_path: Path) -> None:
    """The facet of a removal counts what went, not the summary's (empty) copied
    block: on the worker's disk, files with their bytes (looked at for the age
    rule: without one a local removal counts no bytes, as ``rm -rf`` looks at
    none)."""
    root = make_tree(tmp_path / "tree", TREE)
    remove = RcpRemoveOperator(
        task_id="rm", paths=str(root), modified_before="2999-01-01"
    )
    summary = remove.execute(context={})
    assert not root.exists()
    facet = _facet(remove)
    assert (facet.operation, facet.files, facet.bytes) == (
        "remove",
        TREE_FILES,
        TREE_BYTES,
    )
    assert (facet.files, facet.bytes) == (
        summary["removed"]["files"],
        summary["removed"]["bytes"],
    )
    assert (facet.errors, facet.verified, facet.shards) == (0, None, None)


def test_a_plan_reports_what_it_planned(tmp_path: Path) -> None:
    """A plan's facet: the entries and bytes of its shards (as the manifest holds
    them) and how many shards; a finalize copies nothing, and says its
    verification's outcome."""
    from rcp_core.tools.shards.manifest import read_manifest

    spec: Spec = {
        f"d{i}/e{j}/f": File(b"x" * (i * 100 + j)) for i in range(4) for j in range(5)
    }
    src = make_tree(tmp_path / "src", spec)
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    plan = RcpPlanOperator(
        task_id="plan", src=str(src), manifest=str(manifest), shards=3
    )
    shards = plan.execute(context={})
    facet = _facet(plan)
    entries = sum(1 for _ in src.rglob("*"))
    parents = len(read_manifest(manifest).parents) - 1  # the root is no entry
    assert (facet.operation, facet.shards) == ("plan", len(shards))
    assert (facet.files, facet.bytes) == (entries - parents, _bytes(spec))
    assert (facet.errors, facet.verified) == (0, None)
    for shard in shards:
        RcpCopyOperator(task_id="copy", dst=str(dst), **shard).execute(context={})
    finalize = RcpFinalizeOperator(
        task_id="fin", manifest=str(manifest), dst=str(dst), verify="checksum"
    )
    finalize.execute(context={})
    done = _facet(finalize)
    assert (done.operation, done.files, done.bytes, done.errors) == (
        "finalize",
        0,
        0,
        0,
    )
    assert (done.verified, done.shards) == ("same", None)


def _events(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _names(datasets: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in datasets]


def test_each_task_reports_what_it_read_and_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    (root / "src" / "d").mkdir(parents=True)
    for i in range(5):
        (root / "src" / "d" / f"f{i}").write_bytes(b"x" * (i + 1))
    log = tmp_path / "lineage.jsonl"
    transport = {"type": "file", "log_file_path": str(log), "append": True}
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(transport))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "rcp-tests")
    airflow("dags", "test", "rcp_test_lineage", "-c", json.dumps({"root": str(root)}))
    events = _events(log)
    by_task: dict[str, dict[str, dict[str, Any]]] = {}
    for event in events:
        task = event["job"]["name"].rsplit(".", 1)[-1]
        by_task.setdefault(task, {})[event["eventType"]] = event
    here = f"file://{HOST}"

    def path(name: str) -> tuple[str, str]:
        return here, str(root / name)

    copy = by_task["copy"]
    for kind in ("START", "COMPLETE"):
        assert _names(copy[kind]["inputs"]) == [path("src")], copy[kind]
        assert _names(copy[kind]["outputs"]) == [path("copy")], copy[kind]
    facet = copy["COMPLETE"]["run"]["facets"]["rcp"]
    assert (facet["operation"], facet["files"], facet["bytes"]) == ("copy", 5, 15)
    assert (facet["errors"], facet["verified"]) == (0, "same")
    assert "shards" not in facet  # a null is left out of the event
    compare = by_task["compare"]["COMPLETE"]
    assert _names(compare["inputs"]) == [path("src"), path("copy")]
    assert compare["outputs"] == []
    compared = compare["run"]["facets"]["rcp"]
    assert (compared["files"], compared["bytes"]) == (7, 30)  # root, d, 5; 2 sides
    assert (compared["errors"], compared["verified"]) == (0, "same")
    link = by_task["link"]["COMPLETE"]
    assert _names(link["inputs"]) == [path("copy")]
    assert _names(link["outputs"]) == [path("snap")]
    linked = link["run"]["facets"]["rcp"]
    assert (linked["files"], linked["bytes"]) == (5, 0)  # links: no bytes copied
    remove = by_task["remove"]["COMPLETE"]
    assert remove["inputs"] == []
    assert _names(remove["outputs"]) == [path("snap")]
    removed = remove["run"]["facets"]["rcp"]
    # A local removal without an age rule looks at no file: no bytes counted.
    assert (removed["operation"], removed["files"], removed["bytes"]) == (
        "remove",
        5,
        0,
    )
    assert "verified" not in removed
    assert not os.path.exists(root / "snap")
    # The hook's own lineage (Airflow's hook lineage collector, an Airflow file
    # asset named as OpenLineage names it: namespace "file"). Under ``dags test``
    # every task runs in one process, whose collector also kept the earlier tasks'
    # hook calls: the tree only this task wrote shows it is this task's.
    by_hook = by_task["hook_copy"]["COMPLETE"]
    assert ("file", str(root / "src")) in _names(by_hook["inputs"]), by_hook
    assert ("file", str(root / "by-hook")) in _names(by_hook["outputs"]), by_hook


def test_a_plan_and_a_finalize_name_what_they_read_and_write() -> None:
    """A plan reads its tree and writes its manifest; a finalize reads the plan and
    writes the destination, its summary in the run facet."""
    from rcp_operators.shards import RcpFinalizeOperator, RcpPlanOperator

    here = f"file://{HOST}"
    plan = RcpPlanOperator(task_id="plan", src="/data/src", manifest="/m/plan.json")
    started = plan.get_openlineage_facets_on_start()
    assert _names_of(started.inputs) == [(here, "/data/src")]
    assert _names_of(started.outputs) == [(here, "/m/plan.json")]
    finalize = RcpFinalizeOperator(task_id="fin", manifest="/m/plan.json", dst="/d")
    finalize.lineage_summary = {"directories": 3, "src": "/data/src"}
    done = finalize.get_openlineage_facets_on_complete(None)
    assert _names_of(done.outputs) == [(here, "/d")]
    assert done.run_facets["rcp"].operation == "finalize"


def _names_of(datasets: list[Any]) -> list[tuple[str, str]]:
    return [(d.namespace, d.name) for d in datasets]
