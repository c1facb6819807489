"""RcpCopyOperator.execute on real trees and a real ``rcpd serve`` (the context is the
test's own, as Airflow passes one; the Airflow runs are in test_dags)."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException, TaskDeferred

from rcp_core.schema import OPTIONS, Front, offered
from rcp_operators.copy import RcpCopyOperator, job_key
from rcp_provider.hooks.rcp import RcpHook
from rcp_provider.triggers.rcp import RcpJobTrigger
from support.airflow import connection_env
from support.services import TOKEN, Place, Served
from support.stuck import copied_the_rest, stuck_copy
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_600_000_000_123_456_789
TREE: Spec = {
    ".": Dir(0o751, T0),
    "docs": Dir(0o700, T0 + 5),
    "docs/a.txt": File(b"a" * 3000, 0o640, T0 + 1),
    "docs/b.txt": File(b"b" * 100, 0o600, T0 + 2),
    "docs/latest": Symlink("a.txt"),
    "big.bin": File(os.urandom(9 << 20), 0o644, T0 + 3),
    **{f"many/f{i:03}": File(b"%d" % i, 0o644, T0 + i) for i in range(120)},
}


def test_a_local_copy_keeps_content_mode_and_times_and_returns_its_summary(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    op = RcpCopyOperator(task_id="copy", src=str(src), dst=str(tmp_path / "dst"))
    result = op.execute(context={})
    assert result["copied"]["files"] == 123
    assert result["copied"]["symlinks"] == 1
    assert result["errors"] == 0
    assert tree_compare(src, tmp_path / "dst") == []


@pytest.mark.parametrize("verify", ["metadata", "checksum"])
def test_verify_reports_a_same_copy(tmp_path: Path, verify: str) -> None:
    src = make_tree(tmp_path / "src", TREE)
    op = RcpCopyOperator(
        task_id="copy", src=str(src), dst=str(tmp_path / "dst"), verify=verify
    )
    result = op.execute(context={})
    assert result["verify"]["same"] is True


def test_verify_compares_what_the_copy_was_asked_to_copy(tmp_path: Path) -> None:
    """An exclude leaves files out, as it was asked to: the copy verifies."""
    src = make_tree(tmp_path / "src", TREE)
    result = RcpCopyOperator(
        task_id="copy",
        src=str(src),
        dst=str(tmp_path / "dst"),
        excludes=["*.txt"],
        verify="checksum",
    ).execute(context={})
    assert not (tmp_path / "dst" / "docs" / "a.txt").exists()
    assert result["verify"]["same"] is True


def test_verify_fails_the_task_when_the_copy_differs(tmp_path: Path) -> None:
    """A destination file of the source's size and mtime with other bytes is left
    by an overwrite (size,mtime say it is the same): checksum verification says it
    differs (no retry: the same copy would differ the same way)."""
    src = make_tree(tmp_path / "src", TREE)
    dst = make_tree(tmp_path / "dst", TREE)
    (dst / "docs" / "b.txt").write_bytes(b"B" * 100)
    os.utime(dst / "docs" / "b.txt", ns=(T0 + 2, T0 + 2))
    op = RcpCopyOperator(
        task_id="copy",
        src=str(src),
        dst=str(dst),
        existing="overwrite",
        verify="checksum",
    )
    with pytest.raises(AirflowFailException, match="differs"):
        op.execute(context={})


def test_verify_of_a_service_tree_is_refused_before_the_copy(
    tmp_path: Path, rcp_service: Served, rcp_connection: str
) -> None:
    """Verification runs on the worker's storage: a copy to a service with verify is
    a usage error before anything is copied (it was refused after the copy)."""
    src = make_tree(tmp_path / "src", TREE)
    dst = rcp_service.backup / "verified"
    op = RcpCopyOperator(
        task_id="copy",
        src=str(src),
        dst=str(dst),
        dst_conn_id=rcp_connection,
        verify="metadata",
    )
    with pytest.raises(AirflowFailException, match="worker's storage"):
        op.execute(context={})
    assert not dst.exists()


def test_a_rerun_with_update_copies_nothing_again(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    kwargs: dict[str, Any] = {"src": str(src), "dst": str(tmp_path / "dst")}
    RcpCopyOperator(task_id="first", existing="update", **kwargs).execute(context={})
    again = RcpCopyOperator(task_id="again", existing="update", **kwargs).execute(
        context={}
    )
    assert again["copied"]["files"] == 0
    assert again["skipped"]["files"] == 123  # not older than the source: kept


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"src": "/nonexistent/rcp-src"}, "nonexistent"),
        ({"existing": "sometimes"}, "existing='sometimes'"),
        ({"verify": "eyeball"}, "verify='eyeball'"),
        ({"dry_run": "loud"}, "dry_run='loud'"),
    ],
)
def test_bad_input_fails_the_task_without_retry_and_touches_nothing(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    args: dict[str, Any] = {"src": str(src), "dst": str(tmp_path / "dst"), **kwargs}
    with pytest.raises(AirflowFailException, match=message):
        RcpCopyOperator(task_id="copy", **args).execute(context={})
    assert not (tmp_path / "dst").exists()


def test_an_existing_destination_is_refused_by_default(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", TREE)
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "keep").write_text("mine")
    op = RcpCopyOperator(task_id="copy", src=str(src), dst=str(tmp_path / "dst"))
    with pytest.raises(AirflowFailException, match="exists"):
        op.execute(context={})
    assert os.listdir(tmp_path / "dst") == ["keep"]


def test_a_silent_service_is_a_transient_failure_airflow_may_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer that accepts and never answers: the bounded wait ends, and the task
    fails in a way Airflow retries (AirflowException, not AirflowFailException)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        monkeypatch.setenv(
            *connection_env(
                "silent",
                host="127.0.0.1",
                port=port,
                password=TOKEN,
                extra={"fingerprint": "ab" * 32, "timeout": 1},
            )
        )
        op = RcpCopyOperator(
            task_id="copy",
            src="/srv/a",
            dst="/srv/b",
            src_conn_id="silent",
            dst_conn_id="silent",
        )
        with pytest.raises(AirflowException) as info:
            op.execute(context={})
    assert not isinstance(info.value, AirflowFailException)
    assert "transient" in str(info.value)


def test_on_kill_stops_a_running_copy_promptly(tmp_path: Path) -> None:
    """A copy throttled to take over a minute; on_kill ends it within seconds, the
    task fails, and what it left is only complete files."""
    spec: Spec = {f"d{d}/f{i}": File(b"x" * 100) for d in range(20) for i in range(20)}
    src = make_tree(tmp_path / "src", spec)
    op = RcpCopyOperator(
        task_id="copy", src=str(src), dst=str(tmp_path / "dst"), ops_throttle=5.0
    )
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(context={})
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(1.0)
    killed = time.monotonic()
    op.on_kill()
    thread.join(30)
    assert not thread.is_alive()
    assert time.monotonic() - killed < 10
    assert len(outcome) == 1
    assert isinstance(outcome[0], AirflowException)
    copied = [p for p in (tmp_path / "dst").rglob("f*") if p.is_file()]
    assert len(copied) < 400
    assert all(p.read_bytes() == b"x" * 100 for p in copied)


def test_deferrable_submits_one_job_and_a_retry_defers_on_the_same_job(
    rcp_service: Served, rcp_connection: str
) -> None:
    """Try 1 submits and defers; try 2 of the same task instance finds that job
    still running and defers on it instead of starting another copy."""
    src = make_tree(rcp_service.data / "tree", TREE)

    def attempt(try_number: int) -> RcpJobTrigger:
        ti = SimpleNamespace(
            dag_id="d", task_id="copy", run_id="r1", map_index=-1, try_number=try_number
        )
        op = RcpCopyOperator(
            task_id="copy",
            src=str(src),
            dst=str(rcp_service.backup / "tree"),
            src_conn_id=rcp_connection,
            dst_conn_id=rcp_connection,
            ops_throttle=10.0,  # ~130 operations: the job runs for seconds
            deferrable=True,
        )
        with pytest.raises(TaskDeferred) as info:
            op.execute(context={"ti": ti})
        trigger = info.value.trigger
        assert isinstance(trigger, RcpJobTrigger)
        return trigger

    first = attempt(1)
    second = attempt(2)
    hook = RcpHook(rcp_connection)
    with hook.client() as client:
        jobs = client.jobs()
    hook.cancel(first.job_id)
    assert second.job_id == first.job_id
    assert [job["job"] for job in jobs] == [first.job_id]


def test_a_copy_between_two_services_defers_on_both_jobs_and_resumes_with_the_copy(
    rcp_places: dict[str, Place], tree_compare: TreeCompare
) -> None:
    """Host to host, deferred: the worker starts the send and receive jobs and frees
    its slot; the trigger waits for both; the resumed task's summary is the copy's
    (the destination's counts), and the tree arrived whole."""
    source_id, source_parent, _ = rcp_places["service"]
    destination_id, _, destination_parent = rcp_places["other"]
    src = make_tree(source_parent / "tree", TREE)
    op = RcpCopyOperator(
        task_id="copy",
        src=str(src),
        dst=str(destination_parent / "tree"),
        src_conn_id=source_id,
        dst_conn_id=destination_id,
        deferrable=True,
    )
    with pytest.raises(TaskDeferred) as info:
        op.execute(context={})
    trigger = info.value.trigger
    assert isinstance(trigger, RcpJobTrigger)
    assert trigger.rcp_conn_id == destination_id
    assert trigger.sender is not None
    assert trigger.sender[0] == source_id
    summary = op.execute_complete(context={}, event=_first_event(trigger))
    assert summary["copied"]["files"] == 123
    assert summary["errors"] == 0
    assert summary["dst"] == str(destination_parent / "tree")
    assert tree_compare(src, destination_parent / "tree") == []


def test_the_deployments_default_defers_the_copies_that_can(
    rcp_places: dict[str, Place], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``[operators] default_deferrable = true`` a copy between services defers,
    one that involves the worker runs there (it cannot defer), and an explicit
    ``deferrable=False`` runs the service's job without deferring."""
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "True")
    _, worker_parent, _ = rcp_places["worker"]
    service_id, service_parent, service_backup = rcp_places["service"]
    local = make_tree(worker_parent / "tree", TREE)
    summary = RcpCopyOperator(
        task_id="copy", src=str(local), dst=str(worker_parent / "copy")
    ).execute(context={})
    assert summary["copied"]["files"] == 123
    there = make_tree(service_parent / "tree", TREE)
    on_service = {
        "src": str(there),
        "dst": str(service_backup / "tree"),
        "src_conn_id": service_id,
        "dst_conn_id": service_id,
    }
    with pytest.raises(TaskDeferred) as deferred:
        RcpCopyOperator(task_id="copy", **on_service).execute(context={})
    trigger = deferred.value.trigger
    assert isinstance(trigger, RcpJobTrigger)
    RcpHook(service_id).cancel(trigger.job_id)
    waited = RcpCopyOperator(
        task_id="copy",
        **{**on_service, "dst": str(service_backup / "again")},
        deferrable=False,
    ).execute(context={})
    assert waited["copied"]["files"] == 123


def test_job_keys_name_the_task_instance_and_its_try() -> None:
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="r", map_index=3, try_number=2)
    key = job_key({"ti": ti})
    assert key is not None
    stem, _, attempt = key.rpartition(":")
    assert attempt == "2"
    other = job_key({"ti": SimpleNamespace(**{**vars(ti), "map_index": 4})})
    assert other is not None
    assert other.rpartition(":")[0] != stem
    assert job_key({}) is None


def test_verify_compares_only_what_the_copy_preserved(tmp_path: Path) -> None:
    """With preserve="none" the copy's times and modes are its own: verify compares
    sizes (and contents), not what was never meant to be kept."""
    src = make_tree(tmp_path / "src", TREE)
    op = RcpCopyOperator(
        task_id="copy",
        src=str(src),
        dst=str(tmp_path / "dst"),
        preserve="none",
        verify="checksum",
    )
    assert op.execute(context={})["verify"]["same"] is True


def _execute(op: RcpCopyOperator) -> dict[str, Any]:
    return op.execute(context={})


def _resume(op: RcpCopyOperator) -> dict[str, Any]:
    """Defer as Airflow would, run the trigger to its event, resume the task."""
    with pytest.raises(TaskDeferred) as info:
        op.execute(context={})
    trigger = info.value.trigger
    assert isinstance(trigger, RcpJobTrigger)
    return op.execute_complete(context={}, event=_first_event(trigger))


def _first_event(trigger: RcpJobTrigger) -> dict[str, Any]:
    """Run the trigger as the triggerer would, to its one event."""

    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            payload: dict[str, Any] = event.payload
            return payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), timeout=60))


@pytest.mark.privileged
@pytest.mark.parametrize(
    ("here", "there", "deferrable"),
    [
        ("worker", "worker", False),
        ("service", "service", False),
        ("service", "service", True),
        ("service", "worker", False),
        ("worker", "service", False),
        ("service", "other", False),
        ("service", "other", True),
    ],
)
def test_failed_entries_fail_the_task_the_same_way_on_every_path(
    here: str,
    there: str,
    deferrable: bool,
    rcp_places: dict[str, Place],
) -> None:
    """Entries that could not be written fail the task without a retry (the same
    copy would fail the same way), the message counting the errors and naming them,
    whether the copy ran on the worker, as a service's job (waited for or deferred)
    or between two places; the rest was copied."""
    source_id, source_parent, _ = rcp_places[here]
    destination_id, _, destination_parent = rcp_places[there]
    with stuck_copy(source_parent, destination_parent) as (src, dst):
        op = RcpCopyOperator(
            task_id="copy",
            src=str(src),
            dst=str(dst),
            src_conn_id=source_id,
            dst_conn_id=destination_id,
            existing="overwrite",
            deferrable=deferrable,
        )
        run = _resume if deferrable else _execute
        with pytest.raises(AirflowFailException) as info:
            run(op)
        assert copied_the_rest(dst)
    message = str(info.value)
    what = re.escape(f"copy {src} to {dst}")
    assert re.match(rf"{what}: copy finished with \d+ error\(s\)", message), message
    assert "stuck" in message.partition("\n")[2], message


def test_the_operator_takes_the_tables_options_under_their_names() -> None:
    """Its copy settings are the table's operator options (rcp_core.schema): each a
    keyword argument of that name whose default is the table's, and none other."""
    params = inspect.signature(RcpCopyOperator.__init__).parameters
    offered_here = {option.name for option in offered(Front.OPERATOR)}
    assert offered_here <= params.keys()
    for option in offered(Front.OPERATOR):
        default = params[option.name].default
        assert option.read(default, Front.OPERATOR) == option.default(Front.OPERATOR)
    others = {option.name for option in OPTIONS} - offered_here
    # retries and retry_delay: Airflow's, the task's own; one_file_system and the
    # --files-from list: the command line's alone (a service job's settings on the
    # wire do not carry them); the records of changes are a terminal's (a task has
    # its log and the summary).
    assert others == {
        "retries",
        "retry_delay",
        "one_file_system",
        "files_from",
        "from0",
        "itemize_changes",
        "log_file",
    }
    assert RcpCopyOperator(task_id="t", dst="/x", gitignore=True).settings_options()[
        "gitignore"
    ]
