"""RcpJobTrigger against real ``rcpd serve`` services: it only asks, fires once,
logs progress while it waits, and cancels the jobs when the task is killed."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from rcp_core import CopySettings
from rcp_core.errors import CopyFailedError, JobFailedError
from rcp_core.remote.outcome import job_summary, roles_summary
from rcp_core.run.runtime import retry_may_help
from rcp_provider.hooks.rcp import ACTIVE, RcpHook
from rcp_provider.triggers.rcp import RcpJobTrigger
from support.services import Place, Served
from support.treespec import File, make_tree


async def _first_event_async(trigger: RcpJobTrigger) -> dict[str, Any]:
    async for event in trigger.run():
        payload: dict[str, Any] = event.payload
        return payload
    raise AssertionError("the trigger ended without an event")


def _first_event(trigger: RcpJobTrigger) -> dict[str, Any]:
    return asyncio.run(asyncio.wait_for(_first_event_async(trigger), timeout=60))


def test_it_survives_serialization() -> None:
    trigger = RcpJobTrigger("rcp_storage", "7-abcd", poll_interval=3.0)
    path, kwargs = trigger.serialize()
    module, _, name = path.rpartition(".")
    again = getattr(importlib.import_module(module), name)(**kwargs)
    assert again.serialize() == (path, kwargs)


def test_a_job_that_succeeds_fires_success_with_its_summary(
    rcp_service: Served, rcp_connection: str
) -> None:
    src = make_tree(
        rcp_service.data / "t", {f"f{i}": File(b"x" * i) for i in range(30)}
    )
    job = RcpHook(rcp_connection).submit(
        [str(src)],
        str(rcp_service.backup / "t"),
        CopySettings(),
        key="airflow:trigger-success:1",
    )
    event = _first_event(RcpJobTrigger(rcp_connection, job["job"], poll_interval=1.0))
    assert event["status"] == "ended"
    assert event["job"] == job["job"]
    assert event["view"]["state"] == "succeeded"
    assert job_summary(event["view"])["copied"]["files"] == 30


def test_a_cancelled_job_fires_its_end_for_the_task_to_judge(
    rcp_service: Served, rcp_connection: str
) -> None:
    src = make_tree(rcp_service.data / "t", {f"f{i}": File(b"x") for i in range(40)})
    hook = RcpHook(rcp_connection)
    job = hook.submit(
        [str(src)],
        str(rcp_service.backup / "t"),
        CopySettings(ops_throttle=5),
        key="airflow:trigger-cancel:1",
    )
    hook.cancel(job["job"])
    event = _first_event(RcpJobTrigger(rcp_connection, job["job"], poll_interval=1.0))
    assert event["status"] == "ended"
    assert event["view"]["state"] == "cancelled"
    # Stopped as it ran (its partial summary), or before it began (none).
    with pytest.raises((CopyFailedError, JobFailedError)) as info:
        job_summary(event["view"])
    assert not retry_may_help(info.value)


def test_an_unknown_job_is_an_error_event_not_a_hang(
    rcp_service: Served, rcp_connection: str
) -> None:
    event = _first_event(RcpJobTrigger(rcp_connection, "999-none", poll_interval=1.0))
    assert event["status"] == "error"
    assert event["retry"] is False


def _slow_job(hook: RcpHook, src: Path, dst: Path, key: str) -> dict[str, Any]:
    """A job that runs for seconds (about 5 operations a second)."""
    return hook.submit([str(src)], str(dst), CopySettings(ops_throttle=5), key=key)


def test_killing_the_task_cancels_the_job_and_progress_is_logged_meanwhile(
    rcp_service: Served, rcp_connection: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """While the job runs the trigger logs its progress (throttled: about one line
    a second here, not one per answer; the trigger's log is Airflow's structlog,
    printed here); the triggerer's kill path (the run cancelled, then
    ``on_kill``) cancels the job on the service."""
    src = make_tree(rcp_service.data / "t", {f"f{i}": File(b"x") for i in range(200)})
    hook = RcpHook(rcp_connection)
    job = _slow_job(hook, src, rcp_service.backup / "t", "airflow:trigger-kill:1")
    trigger = RcpJobTrigger(
        rcp_connection, job["job"], poll_interval=0.2, progress_interval=1.0
    )

    async def kill_after(seconds: float) -> None:
        task = asyncio.ensure_future(_first_event_async(trigger))
        await asyncio.sleep(seconds)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await trigger.on_kill()

    asyncio.run(asyncio.wait_for(kill_after(4.0), timeout=60))
    view = hook.job(job["job"])
    deadline = time.monotonic() + 30
    while view["state"] in ACTIVE and time.monotonic() < deadline:
        view = hook.job(job["job"])
    assert view["state"] == "cancelled"
    assert (view.get("counts") or {}).get("files", 0) < 200
    printed = capfd.readouterr().out.splitlines()
    lines = [line for line in printed if re.search(r"rcp: \d+ entries", line)]
    assert 2 <= len(lines) <= 6, printed
    assert any(f"cancelled job {job['job']}" in line for line in printed), printed


def test_killing_a_copy_between_services_cancels_both_jobs(
    rcp_places: dict[str, Place],
) -> None:
    source_id, source_parent, _ = rcp_places["service"]
    destination_id, _, destination_parent = rcp_places["other"]
    """Cancelled at once, a 400 MiB copy (seconds of work here) stops short: the
    send job and the receive job end cancelled (or failed, when the other side's
    stop reached it first), and the destination has less than the source."""
    block = os.urandom(1 << 20)
    src = make_tree(source_parent / "t", {f"f{i}": File(block) for i in range(400)})
    source, destination = RcpHook(source_id), RcpHook(destination_id)
    sent, received = source.start_between(
        [str(src)], str(destination_parent / "t"), CopySettings(), to=destination
    )
    trigger = RcpJobTrigger(
        destination_id, received["job"], sender=(source_id, sent["job"])
    )
    asyncio.run(asyncio.wait_for(trigger.on_kill(), timeout=60))
    for hook, job in ((source, sent), (destination, received)):
        view = hook.job(job["job"])
        deadline = time.monotonic() + 30
        while view["state"] in ACTIVE and time.monotonic() < deadline:
            view = hook.job(job["job"])
        assert view["state"] in {"cancelled", "failed"}, view
    assert len(list((destination_parent / "t").rglob("f*"))) < 400


def test_a_copy_between_services_fires_with_both_jobs_views(
    rcp_places: dict[str, Place],
) -> None:
    source_id, source_parent, _ = rcp_places["service"]
    destination_id, _, destination_parent = rcp_places["other"]
    src = make_tree(source_parent / "t", {f"f{i}": File(b"x" * i) for i in range(30)})
    sent, received = RcpHook(source_id).start_between(
        [str(src)],
        str(destination_parent / "t"),
        CopySettings(),
        to=RcpHook(destination_id),
    )
    event = _first_event(
        RcpJobTrigger(
            destination_id,
            received["job"],
            poll_interval=1.0,
            sender=(source_id, sent["job"]),
        )
    )
    assert event["status"] == "ended"
    assert event["view"]["job"] == received["job"]
    assert event["sender_view"]["job"] == sent["job"]
    summary = roles_summary(event["sender_view"], event["view"]).as_dict()
    assert summary["copied"]["files"] == 30
