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

from rcp_operators.lineage import run_facet
from rcp_provider.lineage import dataset_name
from support.airflow import airflow, connection_env

pytestmark = pytest.mark.usefixtures("airflow_db")
HOST = socket.gethostname()


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
    ],
)
def test_an_operand_is_named_as_the_naming_spec_names_it(
    operand: str, namespace: str, name: str
) -> None:
    assert dataset_name(operand, None) == (namespace, name)


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
        "errors": 0,
        "verify": {"same": True},
    }
    facet = run_facet("copy", copied)
    assert (facet.operation, facet.files, facet.bytes) == ("copy", 3, 30)
    assert (facet.errors, facet.verified) == (0, "same")
    compared = run_facet(
        "compare", {"entries": 5, "same": False, "differences_total": 2}
    )
    assert (compared.files, compared.errors, compared.verified) == (5, 2, "different")


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
    compare = by_task["compare"]["COMPLETE"]
    assert _names(compare["inputs"]) == [path("src"), path("copy")]
    assert compare["outputs"] == []
    assert compare["run"]["facets"]["rcp"]["verified"] == "same"
    link = by_task["link"]["COMPLETE"]
    assert _names(link["inputs"]) == [path("copy")]
    assert _names(link["outputs"]) == [path("snap")]
    assert link["run"]["facets"]["rcp"]["files"] == 5
    remove = by_task["remove"]["COMPLETE"]
    assert remove["inputs"] == []
    assert _names(remove["outputs"]) == [path("snap")]
    assert remove["run"]["facets"]["rcp"]["operation"] == "remove"
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
