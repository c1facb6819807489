"""RcpHook: connections -> places, and the copies it starts, on real trees and a real
``rcpd serve``."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from rcp_core import CopySettings, ExistingPolicy, UsageError
from rcp_core.errors import CopyFailedError, JobFailedError
from rcp_core.remote.client import SERVICE_PORT
from rcp_provider.get_provider_info import get_provider_info
from rcp_provider.hooks.endpoint import Endpoint
from rcp_provider.hooks.rcp import RcpHook
from support.airflow import connection_env
from support.services import TOKEN, Place, Served
from support.stuck import OK_FILES, copied_the_rest, stuck_copy
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

T0 = 1_700_000_000_000_000_000
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a": Dir(0o750, T0 + 1),
    "a/one": File(b"1" * 70_000, 0o640, T0 + 2),
    "a/link": Symlink("one"),
    **{f"b/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(40)},
}


def _set_connection(
    monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any
) -> None:
    monkeypatch.setenv(*connection_env(conn_id, **fields))


def test_no_connection_is_the_workers_storage(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    seen: list[dict[str, Any]] = []
    hook = RcpHook(None)
    assert hook.endpoint is None
    summary = hook.copy(
        [str(src)], str(tmp_path / "dst"), CopySettings(), on_progress=seen.append
    )
    assert summary["copied"]["files"] == 41
    assert summary["copied"]["symlinks"] == 1
    assert tree_compare(src, tmp_path / "dst") == []
    assert seen
    assert set(seen[-1]) == {"entries", "bytes", "errors", "elapsed"}


def test_a_connection_without_host_is_the_worker_and_gives_its_max_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _set_connection(monkeypatch, "local_rcp", extra={"max_workers": 3})
    hook = RcpHook("local_rcp")
    assert hook.endpoint is None
    assert hook.max_workers == 3
    assert hook.test_connection() == (True, "copies run on the worker's own storage")


def test_a_service_connection_maps_to_its_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _set_connection(
        monkeypatch,
        "svc",
        host="storage-01",
        port=4100,
        password="tok",
        extra={"fingerprint": "ab" * 32, "timeout": 30},
    )
    endpoint = RcpHook("svc").endpoint
    assert endpoint is not None
    assert (endpoint.host, endpoint.port, endpoint.token) == ("storage-01", 4100, "tok")
    assert (endpoint.fingerprint, endpoint.encrypt, endpoint.timeout) == (
        "ab" * 32,
        True,
        30.0,
    )
    _set_connection(
        monkeypatch, "plain", host="h", port=1, extra={"no_encryption": "true"}
    )
    plain = RcpHook("plain").endpoint
    assert plain is not None
    assert not plain.encrypt


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"host": "h", "port": 1}, "fingerprint"),
        ({"host": "h", "port": 1, "extra": {"fingerprint": 7}}, "fingerprint"),
        (
            {"host": "h", "port": 1, "extra": {"no_encryption": "maybe"}},
            "true or false",
        ),
        (
            {"host": "h", "port": 1, "extra": {"fingerprint": "x", "timeout": 0}},
            "timeout",
        ),
        ({"extra": {"max_workers": "many"}}, "max_workers"),
    ],
)
def test_a_wrong_connection_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], message: str
) -> None:
    _set_connection(monkeypatch, "bad", **fields)
    hook = RcpHook("bad")
    with pytest.raises(UsageError, match=message) as info:
        _ = hook.endpoint, hook.max_workers
    assert "'bad'" in str(info.value)


@pytest.mark.parametrize("form", ["uri", "json"])
def test_a_connection_reaches_its_service_with_its_extras_typed(
    form: str,
    rcp_service: Served,
    monkeypatch: pytest.MonkeyPatch,
    tree_compare: TreeCompare,
) -> None:
    """``AIRFLOW_CONN_<ID>`` as a URI (whose query Airflow hands over as text) or
    as JSON with the extras as text (as a form may store them): each extra is read
    as the type its form field declares, and the copy reaches the service."""
    host, port = rcp_service.service.address
    fingerprint = rcp_service.identity.fingerprint
    extras = {
        "fingerprint": fingerprint,
        "timeout": "30",
        "max_workers": "8",
        "no_encryption": "false",
    }
    if form == "uri":
        monkeypatch.setenv(
            "AIRFLOW_CONN_RCP_TEXT",
            f"rcp://:{quote(TOKEN, safe='')}@{host}:{port}?{urlencode(extras)}",
        )
    else:
        _set_connection(
            monkeypatch, "rcp_text", host=host, port=port, password=TOKEN, extra=extras
        )
    hook = RcpHook("rcp_text")
    assert hook.endpoint == Endpoint(host, port, fingerprint, TOKEN, True, 30.0)
    assert hook.max_workers == 8
    src = make_tree(rcp_service.data / "tree", TREE)
    hook.copy([str(src)], str(rcp_service.backup / "tree"), CopySettings())
    assert tree_compare(src, rcp_service.backup / "tree") == []


@pytest.mark.parametrize("form", ["json", "uri"])
def test_a_connection_without_a_port_is_the_services_default_port(
    form: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if form == "json":
        _set_connection(
            monkeypatch, "noport", host="storage-01", extra={"fingerprint": "ab" * 32}
        )
    else:
        monkeypatch.setenv(
            "AIRFLOW_CONN_NOPORT", f"rcp://storage-01?fingerprint={'ab' * 32}"
        )
    endpoint = RcpHook("noport").endpoint
    assert endpoint is not None
    assert endpoint.port == SERVICE_PORT == 7450


@pytest.mark.parametrize(
    ("query", "extra"),
    [
        ("timeout=soon", "timeout"),
        ("timeout=0", "timeout"),
        ("max_workers=eight", "max_workers"),
        ("max_workers=2.5", "max_workers"),
        ("no_encryption=maybe", "no_encryption"),
    ],
)
def test_a_bad_extra_in_a_uri_is_a_usage_error_naming_it(
    query: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_BAD_URI", f"rcp://h:1?fingerprint={'ab' * 32}&{query}"
    )
    hook = RcpHook("bad_uri")
    with pytest.raises(UsageError) as info:
        _ = hook.endpoint, hook.max_workers
    assert "'bad_uri'" in str(info.value)
    assert f"'{extra}'" in str(info.value)


def test_the_connection_form_says_the_services_default_port() -> None:
    """What Airflow's own form shows (its providers manager reads our info)."""
    from airflow.providers_manager import ProvidersManager

    (conn_type,) = get_provider_info()["connection-types"]
    placeholders = conn_type["ui-field-behaviour"]["placeholders"]
    assert placeholders["port"] == str(SERVICE_PORT) == "7450"
    shown = ProvidersManager().field_behaviours["rcp"]
    assert shown is not None
    assert shown["placeholders"]["port"] == "7450"


def test_the_test_button_reaches_the_service_or_says_why_not(
    rcp_service: Served, rcp_connection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok, message = RcpHook(rcp_connection).test_connection()
    assert ok, message
    assert "answered" in message
    host, port = rcp_service.service.address
    _set_connection(
        monkeypatch,
        "wrong_pin",
        host=host,
        port=port,
        password=TOKEN,
        extra={"fingerprint": "00" * 32},
    )
    ok, message = RcpHook("wrong_pin").test_connection()
    assert not ok
    assert message.startswith("AuthenticationError"), message


def test_both_sides_on_one_service_is_one_job_of_it(
    rcp_service: Served, rcp_connection: str, tree_compare: TreeCompare
) -> None:
    src = make_tree(rcp_service.data / "tree", TREE)
    hook = RcpHook(rcp_connection)
    summary = hook.copy(
        [str(src)],
        str(rcp_service.backup / "tree"),
        CopySettings(),
        key="airflow:test-one-job:1",
    )
    assert summary["copied"]["files"] == 41
    assert tree_compare(src, rcp_service.backup / "tree") == []
    with hook.client() as client:
        (job,) = client.jobs()
    assert job["key"] == "airflow:test-one-job:1"
    assert job["state"] == "succeeded"


@pytest.mark.privileged
def test_a_failed_job_raises_with_the_services_reason(
    rcp_service: Served, rcp_connection: str
) -> None:
    """An immutable destination directory (even root cannot write into it): the job
    fails, and the hook says so as the engine does (CopyFailedError), its cause
    naming the job and the service's reason."""
    src = make_tree(rcp_service.data / "tree", TREE)
    locked = rcp_service.backup / "locked"
    locked.mkdir()
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    try:
        with pytest.raises(CopyFailedError, match="finished with") as info:
            RcpHook(rcp_connection).copy([str(src)], f"{locked}/", CopySettings())
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    job = info.value.__cause__
    assert isinstance(job, JobFailedError)
    assert job.job["state"] == "failed"
    assert str(job.job["job"]) in str(job)
    assert info.value.summary["errors"] >= 1


def test_a_later_try_finds_the_job_an_earlier_try_started(
    rcp_service: Served, rcp_connection: str
) -> None:
    """Keys differ only after their last ``:`` (the try); a job still queued or
    running is found, so a retried task waits for it instead of copying twice."""
    src = make_tree(rcp_service.data / "tree", TREE)
    slow = CopySettings(ops_throttle=5)  # ~45 entries: about 9 s
    hook = RcpHook(rcp_connection)
    first = hook.submit(
        [str(src)],
        str(rcp_service.backup / "t"),
        slow,
        key="airflow:test-retried-task:1",
    )
    again = hook.submit(
        [str(src)],
        str(rcp_service.backup / "t"),
        slow,
        key="airflow:test-retried-task:2",
    )
    other = hook.find("airflow:test-another-task:2")
    cancelled = hook.cancel(first["job"])
    assert again["job"] == first["job"]
    assert other is None
    assert cancelled["job"] == first["job"]


def test_cancel_stops_a_service_job_and_the_wait_returns(
    rcp_service: Served, rcp_connection: str
) -> None:
    src = make_tree(rcp_service.data / "tree", TREE)
    cancel = threading.Event()
    hook = RcpHook(rcp_connection)
    progress: list[dict[str, Any]] = []

    def stop_when_running(report: dict[str, Any]) -> None:
        progress.append(report)
        cancel.set()

    with pytest.raises(CopyFailedError, match="stopped") as info:
        hook.copy(
            [str(src)],
            str(rcp_service.backup / "t"),
            CopySettings(ops_throttle=2),  # ~45 entries: 20 s unless cancelled
            on_progress=stop_when_running,
            cancel=cancel,
        )
    assert info.value.stopped
    assert isinstance(info.value.__cause__, JobFailedError)
    assert "cancelled" in str(info.value.__cause__)
    assert progress


def test_from_a_service_to_the_worker_the_data_flows_between_them(
    rcp_service: Served, rcp_connection: str, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(rcp_service.data / "tree", TREE)
    summary = RcpHook(rcp_connection).copy(
        [str(src)], str(tmp_path / "pulled"), CopySettings(), to=RcpHook(None)
    )
    assert summary["copied"]["files"] == 41
    assert tree_compare(src, tmp_path / "pulled") == []


@pytest.mark.privileged
@pytest.mark.parametrize(
    ("here", "there"),
    [
        ("worker", "worker"),
        ("service", "service"),
        ("service", "worker"),
        ("worker", "service"),
        ("service", "other"),
    ],
)
def test_a_copy_with_failed_entries_raises_on_every_path(
    here: str,
    there: str,
    rcp_places: dict[str, Place],
) -> None:
    """Locally, as one job of a service, and between two places: entries that could
    not be written are a CopyFailedError with the partial summary and the errors
    (the engine's rule), never a summary returned as if the copy had succeeded."""
    source_id, source_parent, _ = rcp_places[here]
    destination_id, _, destination_parent = rcp_places[there]
    with stuck_copy(source_parent, destination_parent) as (src, dst):
        with pytest.raises(CopyFailedError) as info:
            RcpHook(source_id).copy(
                [str(src)],
                str(dst),
                CopySettings(existing=ExistingPolicy.OVERWRITE),
                to=RcpHook(destination_id),
            )
        assert copied_the_rest(dst)
    failed = info.value
    assert not failed.stopped
    assert failed.errors
    assert any("stuck" in f"{key} {example}" for key, _, example in failed.errors)
    assert failed.summary["copied.files"] == OK_FILES
