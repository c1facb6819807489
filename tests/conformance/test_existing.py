"""The overwrite matrix on every pair: ``-o``, ``--update`` and ``--ignore-existing``
against identical, older, newer and differently sized files; and a file replacing a
directory (and the reverse) where both backends have directories.

One copy per pair and policy onto a destination that holds every case side by side;
each case is a test of its own, so a defect fails only the cases it breaks.

What "identical" and "older" mean depends on the pair's times:

- both backends keep mtimes (``timed``): ``-o`` leaves a file of the same size and
  mtime, replaces the rest; ``--update`` keeps a destination at least as new as the
  source (a file of another size with the same mtime included), replaces an older
  one;
- a backend without settable mtimes (``sized``: ``memory://``): files are compared
  by size, under ``-o`` and ``--update`` alike (``rcp_core.engine.portcopy``); S3,
  GCS and Azure keep a file's mtime in its object's metadata, and are timed.

``--ignore-existing`` keeps every existing file; a file only the source has is
copied under every policy; one only the destination has stays.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from rcp_core.backends.routing import Storage
from support import capabilities
from support.backends import StoreBackend
from support.capabilities import Feature, Support
from support.pairs import T0, Pair, Shared, cases
from support.rcprun import Run
from support.treespec import File, Spec

S = 10**9
POLICIES = {"overwrite": "-o", "update": "-u", "ignore": "--ignore-existing"}
SOURCE = {
    "same": b"the same bytes\n",
    "older": b"source of older\n",
    "newer": b"source of newer\n",
    "resized": b"source of resized\n",
    "samesize": b"source of samesize\n",
    "new": b"only in the source\n",
}
DESTINATION = {
    "same": File(SOURCE["same"], mtime_ns=T0),
    "older": File(b"old\n", mtime_ns=T0 - 100 * S),
    "newer": File(b"newer than its source\n", mtime_ns=T0 + 100 * S),
    "resized": File(b"longer than the source's\n", mtime_ns=T0),
    "samesize": File(SOURCE["samesize"].upper(), mtime_ns=T0),
    "extra": File(b"only in the destination\n", mtime_ns=T0),
}
TIMED = {
    "overwrite": {
        "same": "kept",
        "older": "replaced",
        "newer": "replaced",
        "resized": "replaced",
        "samesize": "kept",
        "new": "copied",
        "extra": "kept",
    },
    "update": {
        "same": "kept",
        "older": "replaced",
        "newer": "kept",
        "resized": "kept",
        "samesize": "kept",
        "new": "copied",
        "extra": "kept",
    },
}
SIZED = {
    policy: {"same": "kept", "resized": "replaced", "samesize": "kept"}
    | {"new": "copied", "extra": "kept"}
    for policy in ("overwrite", "update")
}
IGNORE = dict.fromkeys([*SOURCE, "extra"], "kept") | {"new": "copied"}


def timed(source: str, destination: str) -> bool:
    """Whether both backends keep a file's mtime."""
    row = capabilities.FULL_TABLE[Feature.MTIME]
    return row[source].support is row[destination].support is Support.YES


def expected(names: tuple[str, str], policy: str) -> dict[str, str]:
    """What becomes of each case (``kept``, ``replaced``, ``copied``)."""
    table = (
        IGNORE if policy == "ignore" else (TIMED if timed(*names) else SIZED)[policy]
    )
    return {
        case: table[case]
        for case in table
        if timed(*names) or case in SIZED["overwrite"]
    }


def _params() -> list[Any]:
    params = []
    for case in cases(Feature.OVERWRITE, Support.YES):
        names = case.values[0]
        for policy in POLICIES:
            for name in expected(names, policy):
                ident = f"{policy}-{name}-{names[0]}-{names[1]}"
                params.append(pytest.param(names, policy, name, id=ident))
    return params


def _copy(shared: Shared, names: tuple[str, str], policy: str) -> tuple[Pair, str, Run]:
    """The pair's copy under ``policy`` onto a destination holding every case."""

    def make() -> tuple[Pair, str, Run]:
        pair = shared.pair(names)
        cases = expected(names, policy)
        src = pair.source(
            {n: File(SOURCE[n], mtime_ns=T0) for n in SOURCE if n in cases}
        )
        if all(isinstance(b, StoreBackend) and b.clock for b in (pair.src, pair.dst)):
            # Both sides' times are their writing's: a destination written after its
            # source, as in any real use, not within the same second by chance.
            time.sleep(1 - time.time() % 1)
        spec: Spec = {n: DESTINATION[n] for n in DESTINATION if n in cases}
        dst = pair.existing(spec)
        return pair, dst, pair.rcp(POLICIES[policy], sources=[src], destination=dst)

    return shared.get(("existing", names, policy), make)


@pytest.mark.parametrize(("names", "policy", "case"), _params())
def test_an_existing_file_is_kept_or_replaced_as_the_policy_says(
    shared: Shared, names: tuple[str, str], policy: str, case: str
) -> None:
    """The file ``case`` holds, after the copy, its old bytes (kept) or the
    source's (replaced, copied)."""
    pair, dst, run = _copy(shared, names, policy)
    assert run.code == 0, run
    outcome = expected(names, policy)[case]
    old = DESTINATION[case].data if case in DESTINATION else None
    want = old if outcome == "kept" else SOURCE[case]
    got = pair.dst.read(pair.dst.join(dst, case))
    assert got == want, f"{case} under {policy}: expected {outcome}, holds {got!r}"


@pytest.mark.parametrize(
    ("names", "policy"),
    [
        pytest.param(case.values[0], policy, id=f"{policy}-{case.id}")
        for case in cases(Feature.OVERWRITE, Support.YES)
        for policy in POLICIES
    ],
)
def test_only_the_files_the_policy_replaces_are_written(
    shared: Shared, names: tuple[str, str], policy: str
) -> None:
    """The summary counts as copied exactly the files replaced or new: a file left
    as it was is not written again (which its bytes alone cannot show)."""
    run = _copy(shared, names, policy)[2]
    assert run.code == 0, run
    written = [c for c, o in expected(names, policy).items() if o != "kept"]
    assert run.counts("copied")["files"] == len(written), run.summary


KINDS_SOURCE: Spec = {"f": b"a file where a directory was\n", "d/x": b"inside\n"}
KINDS_DESTINATION: Spec = {"f/y": b"under the old directory\n", "d": b"old file\n"}


@pytest.mark.parametrize(
    "pair", cases(Feature.REPLACE_KIND, Support.YES), indirect=True
)
def test_a_file_replaces_a_directory_and_the_reverse_under_overwrite(
    pair: Pair,
) -> None:
    """``-o``: the source's file ``f`` replaces the destination's directory ``f``
    (and what was in it), its directory ``d`` the destination's file ``d``."""
    src = pair.source(KINDS_SOURCE)
    dst = pair.existing(KINDS_DESTINATION)
    run = pair.rcp("-o", sources=[src], destination=dst)
    assert run.code == 0, run
    assert pair.differences(src, dst) == []


@pytest.mark.parametrize(
    "pair", cases(Feature.REPLACE_KIND, Support.YES), indirect=True
)
def test_ignore_existing_keeps_an_entry_of_the_other_kind(pair: Pair) -> None:
    """``--ignore-existing``: the destination's directory ``f`` stays where the
    source has a file, its file ``d`` where the source has a directory (whose
    subtree is then not copied); neither is an error."""
    src = pair.source(KINDS_SOURCE)
    dst = pair.existing(KINDS_DESTINATION)
    run = pair.rcp("--ignore-existing", sources=[src], destination=dst)
    assert run.code == 0, run
    assert pair.dst.read(pair.dst.join(dst, "f/y")) == KINDS_DESTINATION["f/y"]
    assert pair.dst.read(pair.dst.join(dst, "d")) == KINDS_DESTINATION["d"]


def by_the_store_engine(source: str, destination: str) -> bool:
    """Whether a URL store is on a side: the store engine copies the pair, which
    compares contents (a service beside a store is a store port there)."""
    storages = {capabilities.STORAGE_OF[name][0] for name in (source, destination)}
    return Storage.STORE in storages


def by_the_remote_roles(source: str, destination: str) -> bool:
    return not by_the_store_engine(source, destination)


@pytest.mark.parametrize(
    "pair",
    cases(Feature.CHECKSUM_COMPARE, Support.YES)
    + cases(Feature.CHECKSUM_COMPARE, Support.REFUSED, where=by_the_store_engine),
    indirect=True,
)
def test_checksum_replaces_a_same_size_same_time_edit_and_keeps_the_same_bytes(
    pair: Pair,
) -> None:
    """``-o --overwrite-compare size,mtime,checksum``: what size and time alone
    cannot tell (an edit of the same size whose time was kept) is replaced; the same
    bytes are left as they are, not written again."""
    src = pair.source({n: File(SOURCE[n], mtime_ns=T0) for n in ("same", "samesize")})
    dst = pair.existing({n: DESTINATION[n] for n in ("same", "samesize")})
    run = pair.rcp(
        "-o",
        "--overwrite-compare",
        "size,mtime,checksum",
        sources=[src],
        destination=dst,
    )
    assert run.code == 0, run
    assert pair.dst.read(pair.dst.join(dst, "samesize")) == SOURCE["samesize"]
    assert pair.dst.read(pair.dst.join(dst, "same")) == SOURCE["same"]
    assert run.counts("copied")["files"] == 1, run.summary


@pytest.mark.parametrize(
    "pair",
    cases(Feature.CHECKSUM_COMPARE, Support.REFUSED, where=by_the_remote_roles),
    indirect=True,
)
def test_checksum_is_refused_where_the_engine_cannot_compare_contents(
    pair: Pair,
) -> None:
    """The remote roles decide by metadata alone: ``checksum`` is refused before
    anything is written, never accepted and ignored."""
    src = pair.source({"samesize": File(SOURCE["samesize"], mtime_ns=T0)})
    dst = pair.existing({"samesize": DESTINATION["samesize"]})
    run = pair.rcp(
        "-o", "--overwrite-compare", "size,checksum", sources=[src], destination=dst
    )
    assert run.code == 2, run
    assert "--overwrite-compare checksum" in run.err, run.err
    assert pair.dst.read(pair.dst.join(dst, "samesize")) == DESTINATION["samesize"].data
