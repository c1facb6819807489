"""RcpJobTrigger against a real ``rcpd serve``: it only asks, and fires once."""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import pytest

from rcp_core import CopySettings
from rcp_core.errors import CopyFailedError, JobFailedError
from rcp_core.remote.outcome import job_summary
from rcp_core.run.runtime import retry_may_help
from rcp_provider.hooks.rcp import RcpHook
from rcp_provider.triggers.rcp import RcpJobTrigger
from support.services import Served
from support.treespec import File, make_tree


def _first_event(trigger: RcpJobTrigger) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in trigger.run():
            payload: dict[str, Any] = event.payload
            return payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), timeout=60))


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
