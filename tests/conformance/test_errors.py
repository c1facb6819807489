"""Errors on every pair: names from outside that are not safe, and entry errors.

- A store's listing may hold keys no path may be made of (``set/../escape``,
  ``set//z``, ``set/./w``): each is an entry error, nothing is written outside the
  destination, every other key is copied.
- An entry error leaves the rest copied: exit 1, the summary counts it, one line on
  stderr says how many. Each pair gets the error its backends can give: a
  destination file that cannot be replaced (``chattr +i``) where the destination is
  a directory tree, else a key that is not safe where the source is a store, else a
  FIFO the destination cannot hold.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from support import capabilities
from support.backends import PosixBackend, StoreBackend
from support.capabilities import Feature, Support
from support.pairs import TREE, Pair, cases
from support.treespec import Fifo

VALID = {"ok": b"fine\n", "d/f": b"deeper\n"}
UNSAFE = {
    "../escape": b"beside the destination\n",
    "/z": b"an empty segment: set//z\n",
    "./w": b"a dot segment\n",
}
"""Keys below ``set/``, by what follows ``set/``."""


def fill(store: StoreBackend, top: str, keys: dict[str, bytes]) -> str:
    """Write ``keys`` below ``top/set/`` under exactly those names; ``top/set``."""
    for rel, data in keys.items():
        store.put_key(f"{top}/set/{rel}", data)
    return f"{top}/set"


def stored(pair: Pair) -> StoreBackend:
    assert isinstance(pair.src, StoreBackend), "the source must be a store"
    return pair.src


def said_errors(run_err: str) -> int | None:
    found = re.search(r"(\d+) error", run_err)
    return int(found[1]) if found else None


def checks_names(source: str, destination: str) -> bool:
    """The source's names come from a listing, and are checked."""
    row = capabilities.FULL_TABLE[Feature.UNSAFE_NAMES]
    return row[source].support is Support.YES


@pytest.mark.parametrize("pair", cases(where=checks_names), indirect=True)
def test_unsafe_keys_are_entry_errors_and_nothing_lands_outside(pair: Pair) -> None:
    """Each unsafe key (and each pseudo-directory a store makes of it) is an entry
    error naming why; the safe keys are copied; nothing appears beside the
    destination."""
    store = stored(pair)
    unsafe = {rel: data for rel, data in UNSAFE.items() if store.can_hold(rel)}
    src = fill(store, pair.src_area, {**VALID, **unsafe})
    dst = pair.target()
    run = pair.rcp(sources=[src], destination=dst)
    assert run.code == 1, run
    assert run.summary is not None
    reported = run.summary["error_list"]
    assert all("unsafe name" in error["error"] for error in reported), run
    assert sum(error["count"] for error in reported) == run.errors >= len(unsafe)
    assert said_errors(run.err) == run.errors, run
    for rel, data in VALID.items():
        assert pair.dst.read(pair.dst.join(dst, rel)) == data
    pair.only_in(dst)
    with pair.dst.view(dst) as local:
        found = {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()}
    assert found == set(VALID)


def _one_error(pair: Pair, request: pytest.FixtureRequest) -> tuple[str, str, str]:
    """A source, an existing destination (or a new one) and a file that must be
    copied, such that copying meets exactly one entry error."""
    if isinstance(pair.dst, PosixBackend):
        src = pair.source({**TREE, "sub/b.txt": b"changed\n", "z.txt": b"new\n"})
        dst = pair.existing(TREE)
        stuck = pair.dst.join(dst, "sub", "b.txt")  # cannot be replaced
        subprocess.run(["chattr", "+i", stuck], check=True)
        request.addfinalizer(
            lambda: subprocess.run(["chattr", "-i", stuck], check=True)
        )
        return src, dst, "z.txt"
    if isinstance(pair.src, StoreBackend):
        return (
            fill(pair.src, pair.src_area, {**VALID, "/z": b"x\n"}),
            pair.target(),
            "ok",
        )
    return pair.source({"ok": b"fine\n", "fifo": Fifo()}), pair.target(), "ok"


@pytest.mark.parametrize(
    "pair",
    [
        pytest.param(*case.values, id=case.id, marks=pytest.mark.privileged)
        if case.values[0][1] in capabilities.POSIX_TREES  # chattr +i: root
        else case
        for case in cases(Feature.ENTRY_ERRORS, Support.YES)
    ],
    indirect=True,
)
def test_an_entry_error_leaves_the_rest_copied_and_is_counted(
    pair: Pair, request: pytest.FixtureRequest
) -> None:
    """Exit 1, one error in the summary and in the one line on stderr, the rest
    of the tree copied."""
    src, dst, copied = _one_error(pair, request)
    run = pair.rcp("-o", sources=[src], destination=dst)
    assert run.code == 1, run
    assert run.errors == 1, run
    lines = run.err.splitlines()
    assert len(lines) == 1, run
    assert said_errors(lines[0]) == 1, run
    expected = pair.src.read(pair.src.join(src, copied))
    assert pair.dst.read(pair.dst.join(dst, copied)) == expected
