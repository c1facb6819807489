"""The one run runtime (:mod:`rcp_core.run.runtime`): classification through the hook,
retries of transient errors only, the deduplicated error log, one stop."""

from __future__ import annotations

import errno
from typing import Any

import pytest

from rcp_core.errors import EntryError, FatalError
from rcp_core.run.records import ErrorLog
from rcp_core.run.runtime import Kind, Runtime
from rcp_core.run.summary import Tally
from rcp_core.site.hookspecs import hookimpl
from rcp_core.site.plugins import plugin_manager


class _Told:
    """A site plugin that says EIO is transient and remembers what it was told."""

    def __init__(self) -> None:
        self.told: list[tuple[Any, Any]] = []

    @hookimpl
    def rcp_classify_error(
        self, error: OSError, source: Any, destination: Any
    ) -> Kind | None:
        self.told.append((source, destination))
        return Kind.TRANSIENT if error.errno == errno.EIO else None


def _runtime(plugin: object, **options: Any) -> Runtime:
    settings: dict[str, Any] = {"retries": 2, "retry_delay": 0.0, "fail_early": False}
    return Runtime(plugin_manager([plugin]).hook, **{**settings, **options})


def test_the_hook_classifies_with_the_storage_at_the_error() -> None:
    plugin = _Told()
    run = _runtime(plugin, storage=lambda where: (f"src of {where}", None))
    assert run.classify(OSError(errno.EIO, "io"), "here") is Kind.TRANSIENT
    assert run.classify(OSError(errno.ENOSPC, "full")) is Kind.FATAL  # built-in
    assert plugin.told == [("src of here", None), ("src of None", None)]


def test_only_what_the_hook_calls_transient_is_tried_again() -> None:
    run = _runtime(_Told())
    tries: list[int] = []

    def flaky(code: int) -> str:
        tries.append(code)
        if len(tries) < 3:
            raise OSError(code, "try again")
        return "done"

    assert run.attempt(lambda: flaky(errno.EIO)) == "done"
    assert tries == [errno.EIO] * 3
    tries.clear()
    with pytest.raises(PermissionError):
        run.attempt(lambda: flaky(errno.EACCES))
    assert tries == [errno.EACCES]


def test_a_fatal_error_stops_the_run_once_and_runs_the_callbacks_once() -> None:
    run = _runtime(_Told())
    reasons: list[str] = []
    run.on_stop.append(reasons.append)
    tally = Tally()
    run.record(tally, run.error("copy", "a", OSError(errno.EACCES, "denied")))
    assert not run.stopping
    run.record(tally, run.error("copy", "b", OSError(errno.ENOSPC, "full")))
    run.record(tally, run.error("copy", "c", OSError(errno.ENOSPC, "full")))
    run.stop("cancelled")
    assert run.stopping
    assert tally["errors"] == 3
    assert reasons == [run.stop_reason] == ["copy 'b': full"]


def test_fail_early_stops_at_the_first_error() -> None:
    run = _runtime(_Told(), fail_early=True)
    run.record(Tally(), run.error("copy", "a", OSError(errno.EACCES, "denied")))
    assert run.stopping


def test_the_error_log_keeps_one_example_of_each_kind() -> None:
    log = ErrorLog()
    for name in ("a", "b", "c"):
        log.add(EntryError("copy", name, OSError(errno.EACCES, "denied")))
    log.add(FatalError("create", "d", OSError(errno.ENOSPC, "full")))
    assert log.report() == [
        ("copy: denied", 3, "a"),
        ("create: full", 1, "d"),
    ]
    assert log.messages() == [
        "copy 'a': denied (and 2 more like it)",
        "create 'd': full",
    ]
