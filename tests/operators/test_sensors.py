"""Sensors (rcp_operators/sensors.py) against real places: a path appears on the
worker's storage, in an fsspec store, and on a real ``rcpd serve``; a real job of
that service is waited for to its end, a failed one fails the task."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import fsspec
import pytest
from airflow.sdk.exceptions import AirflowFailException

from rcp_operators.sensors import RcpJobSensor, RcpPathSensor
from support.services import Served
from support.treespec import File, make_tree

WAIT = 30.0


def _poke(sensor: RcpPathSensor) -> bool:
    return bool(sensor.poke(context={}))


def test_a_path_on_the_worker_is_waited_for(tmp_path: Path) -> None:
    sensor = RcpPathSensor(task_id="wait", path=str(tmp_path / "landed"))
    assert not _poke(sensor)
    (tmp_path / "landed").symlink_to("nowhere")  # a link counts, not followed
    assert _poke(sensor)


def test_a_url_in_a_store_is_waited_for() -> None:
    root = f"memory://sensor-{uuid.uuid4().hex}"
    sensor = RcpPathSensor(task_id="wait", path=f"{root}/d/f")
    assert not _poke(sensor)
    fsspec.filesystem("memory").pipe(f"{root}/d/f", b"x")
    assert _poke(sensor)


def test_a_path_on_a_service_is_waited_for_and_its_roots_are_enforced(
    rcp_service: Served, rcp_connection: str
) -> None:
    target = rcp_service.data / "incoming"
    sensor = RcpPathSensor(task_id="wait", path=str(target), conn_id=rcp_connection)
    assert not _poke(sensor)
    target.mkdir()
    assert _poke(sensor)
    outside = RcpPathSensor(
        task_id="out", path=str(rcp_service.outside), conn_id=rcp_connection
    )
    with pytest.raises(AirflowFailException, match="roots"):
        _poke(outside)


def test_a_job_is_waited_for_to_its_end_and_a_failed_one_fails_the_task(
    rcp_service: Served, rcp_connection: str
) -> None:
    src = make_tree(rcp_service.data / "src", {"a": File(b"1"), "d/b": File(b"22")})
    with rcp_service.client() as client:
        job = client.submit([str(src)], str(rcp_service.backup / "copy"))
        failing = client.submit(
            [str(rcp_service.data / "missing")], str(rcp_service.backup / "none")
        )
    sensor = RcpJobSensor(task_id="job", job_id=job["job"], conn_id=rcp_connection)
    deadline = time.monotonic() + WAIT
    while not (answer := sensor.poke(context={})).is_done:
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
    view = answer.xcom_value  # the job as the service shows it, summary and all
    assert (view["job"], view["state"]) == (job["job"], "succeeded")
    assert view["destination"] == str(rcp_service.backup / "copy")
    copied = view["summary"]["copied"]
    assert (copied["files"], copied["bytes"]) == (2, 3)
    assert (rcp_service.backup / "copy" / "d" / "b").read_bytes() == b"22"
    failed = RcpJobSensor(task_id="bad", job_id=failing["job"], conn_id=rcp_connection)
    with rcp_service.client() as client:
        while client.status(failing["job"])["state"] in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
    with pytest.raises(AirflowFailException, match="failed"):
        failed.poke(context={})
