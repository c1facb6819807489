"""Routing operands to an engine, and the one refusal of what a pair cannot do."""

from __future__ import annotations

import threading
import time

import pytest

from rcp_core import CopySettings, UsageError
from rcp_core.backends.capabilities import (
    DECLARED,
    Capability,
    refusals,
    refuse,
    store_backend,
)
from rcp_core.backends.routing import Engine, Storage, operand, refuse_route, route
from rcp_core.run.throttle import TokenBucket
from rcp_core.settings import Preserve


@pytest.mark.parametrize(
    ("text", "storage", "path"),
    [
        ("/data/in", Storage.LOCAL, "/data/in"),
        ("relative/dir/", Storage.LOCAL, "relative/dir/"),
        ("./a:b", Storage.LOCAL, "./a:b"),
        ("file:///data/in", Storage.LOCAL, "/data/in"),
        ("FILE:///data/in/", Storage.LOCAL, "/data/in/"),
        ("rcp:///data/in", Storage.LOCAL, "/data/in"),
        ("host:/data", Storage.HOST, "host:/data"),
        ("alice@[::1]:2222:/data", Storage.HOST, "alice@[::1]:2222:/data"),
        ("rcp://storage-01:7450/data", Storage.SERVICE, "rcp://storage-01:7450/data"),
        ("s3://bucket/key", Storage.STORE, "s3://bucket/key"),
        ("memory://x", Storage.STORE, "memory://x"),
        ("Git+SSH://h/p", Storage.STORE, "Git+SSH://h/p"),
        ("host:/a://b", Storage.HOST, "host:/a://b"),
    ],
)
def test_an_operand_names_its_storage_by_its_spelling(
    text: str, storage: Storage, path: str
) -> None:
    named = operand(text)
    assert (named.storage, named.path) == (storage, path)


def test_a_local_url_without_a_path_is_refused() -> None:
    with pytest.raises(UsageError, match="names no path"):
        operand("file://")


@pytest.mark.parametrize(
    ("paths", "engine"),
    [
        (["/a", "/b"], Engine.LOCAL),
        (["/a", "file:///b/"], Engine.LOCAL),
        (["h:/a", "/b"], Engine.REMOTE),
        (["/a", "h:/b"], Engine.REMOTE),
        (["h:/a", "g:/b"], Engine.REMOTE),
        (["rcp://h/a", "/b"], Engine.REMOTE),
        (["rcp://h/a", "rcp://g/b"], Engine.REMOTE),
        (["/a", "s3://b/k"], Engine.STORE),
        (["rcp://h/a", "memory://b"], Engine.STORE),
        (["s3://a/k", "memory://b"], Engine.STORE),
    ],
)
def test_the_pair_picks_the_engine(paths: list[str], engine: Engine) -> None:
    assert route(paths).engine is engine


@pytest.mark.parametrize(
    "paths",
    [["h:/a", "s3://b/k"], ["memory://a", "h:/b"], ["h:/a", "rcp://g/b"]],
)
def test_a_host_beside_a_url_is_refused_naming_why(paths: list[str]) -> None:
    with pytest.raises(UsageError, match="does not copy between a host:/path"):
        route(paths)


def test_sources_on_different_kinds_of_storage_are_refused() -> None:
    with pytest.raises(UsageError, match="different kinds of storage"):
        route(["/a", "h:/b", "/dst/"])
    with pytest.raises(UsageError, match="a source and a destination"):
        route(["/a"])


@pytest.mark.parametrize(
    "paths",
    [
        ["/a", "/b", "/dst/"],
        ["rcp://h/a", "rcp://h/b", "/dst/"],
        ["memory://a", "s3://b/k"],
        ["/a", "memory://b/"],
    ],
)
def test_a_route_an_engine_takes_passes(paths: list[str]) -> None:
    refuse_route(route(paths))


@pytest.mark.parametrize(
    "paths", [["/a", "/b", "memory://dst/"], ["s3://b/x", "s3://b/y", "/dst/"]]
)
def test_several_sources_for_the_store_engine_are_refused_by_the_route(
    paths: list[str],
) -> None:
    with pytest.raises(UsageError) as refused:
        refuse_route(route(paths))
    assert str(refused.value) == (
        "a copy to or from a URL takes one source and a destination "
        "(2 sources given): copy each in a run of its own"
    )


def test_the_routes_paths_are_what_the_engine_takes() -> None:
    assert route(["file:///a", "rcp:///b/"]).paths == ["/a", "/b/"]


S3 = store_backend("s3://", directories=False)
MEMORY = store_backend("memory://", directories=True)
LOCAL = DECLARED[Storage.LOCAL]


def test_a_store_declares_directories_only_where_it_has_them() -> None:
    assert MEMORY.has(Capability.DIRECTORIES)
    assert not S3.has(Capability.DIRECTORIES)
    assert not S3.has(Capability.MTIMES)


def test_the_default_preserve_is_kept_where_it_can_be_and_a_named_one_refused() -> None:
    """``default`` keeps mode and times where both sides have them; ``-p mode``
    names it, so a store that keeps no modes refuses it."""
    assert refusals(CopySettings(), Engine.STORE, LOCAL, S3) == []
    named = CopySettings(preserve=Preserve.parse("mode,times"))
    assert named.preserve == CopySettings().preserve  # the same attributes
    assert refusals(named, Engine.STORE, LOCAL, S3) == ["--preserve mode,times"]
    assert refusals(named, Engine.LOCAL, LOCAL, LOCAL) == []
    assert (
        refusals(
            CopySettings(preserve=Preserve.parse("all")), Engine.REMOTE, LOCAL, LOCAL
        )
        == []
    )


def test_an_engine_refuses_what_it_does_not_honour_naming_the_pair() -> None:
    settings = CopySettings(dereference=True, max_processes=2)
    with pytest.raises(UsageError) as refused:
        refuse(settings, Engine.STORE, LOCAL, S3)
    assert str(refused.value) == (
        "not supported from local to s3://: --dereference, --max-processes"
    )
    refuse(settings, Engine.LOCAL, LOCAL, LOCAL)  # the local engine honours both
    with pytest.raises(UsageError, match="from local to local: --numeric-ids"):
        refuse(CopySettings(numeric_ids=True), Engine.LOCAL, LOCAL, LOCAL)


def test_a_throttle_wait_ends_when_the_run_stops() -> None:
    """Before: a stopped run's workers each waited for a token in turn, so a
    throttled copy took seconds to stop. (And a rate below one per second never
    handed out a token: its burst was below one.)"""
    stopped = threading.Event()
    bucket = TokenBucket(0.5, interrupt=stopped)
    bucket.take()  # the burst's one token
    threading.Timer(0.2, stopped.set).start()
    started = time.monotonic()
    bucket.take()  # would wait 2 s for the next
    assert time.monotonic() - started < 1.0
