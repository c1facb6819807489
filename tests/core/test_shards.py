"""Sharded copies: planning, manifests, copying shards (also concurrently), finalize.

Every test plans a real tree, and checks the plan against the tree as the filesystem
sees it (each entry in exactly one unit or a parent, counts, balance), or copies it
shard by shard and compares the result with the source and with a plain copy.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rcp_core import (
    CopySettings,
    DryRun,
    ExistingPolicy,
    Preserve,
    Summary,
    UsageError,
    copy,
)
from rcp_core.run.summary import KEYS
from rcp_core.tools.shards.planner import (
    FILE_COST,
    MAX_SHARDS,
    Shard,
    ShardPlan,
    copy_shard,
    finalize,
    plan_shards,
    read_manifest,
    write_manifest,
)
from support.nobody import NOBODY, give_to_nobody, world_dir
from support.treecmp import TreeCompare
from support.treespec import (
    Dir,
    Entry,
    Fifo,
    File,
    HardLink,
    Sparse,
    Spec,
    Symlink,
    make_tree,
)

T = 1_600_000_000_123_456_789
MIB = 1024 * 1024
BAD = os.fsdecode(b"caf\xe9")
"""A name that is not valid UTF-8 (latin-1 "café"), as a surrogateescape string."""

AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")

MIXED: Spec = {
    ".": Dir(mode=0o750, mtime_ns=T),
    "top.txt": File(b"t" * 100, mode=0o640, mtime_ns=T + 1),
    **{
        f"big/f{i:02}": File(b"b" * (i * 3000), mode=0o644, mtime_ns=T + 10 + i)
        for i in range(20)
    },
    "big": Dir(mode=0o755, mtime_ns=T + 2),
    "big/sub": Dir(mode=0o700, mtime_ns=T + 3),
    "big/sub/deep": Dir(mode=0o750, mtime_ns=T + 4),
    "big/sub/deep/x": File(b"deep", mode=0o600, mtime_ns=T + 5),
    "big/empty": Dir(mode=0o711, mtime_ns=T + 6),
    "small/a": File(b"a", mode=0o644, mtime_ns=T + 40),
    "small": Dir(mode=0o755, mtime_ns=T + 41),
    "empty": Dir(mode=0o755, mtime_ns=T + 42),
    BAD: Dir(mode=0o755, mtime_ns=T + 43),
    f"{BAD}/{BAD}.bin": File(b"\xff" * 5000, mode=0o644, mtime_ns=T + 44),
    "links": Dir(mode=0o755, mtime_ns=T + 50),
    "links/rel": Symlink("../top.txt", mtime_ns=T + 51),
    "links/dangling": Symlink("nowhere", mtime_ns=T + 52),
    "links/bad": Symlink(b"\xfe\xfd", mtime_ns=T + 53),
    "fifo": Fifo(mode=0o640, mtime_ns=T + 60),
}


def entries(root: Path) -> dict[str, os.stat_result]:
    """Every entry below ``root`` (not the root), by relative path; no symlink followed."""
    out: dict[str, os.stat_result] = {}
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as it:
            for entry in it:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                st = entry.stat(follow_symlinks=False)
                out[rel] = st
                if stat.S_ISDIR(st.st_mode):
                    stack.append(rel)
    return out


def weight(st: os.stat_result) -> int:
    return FILE_COST + (st.st_size if stat.S_ISREG(st.st_mode) else 0)


def inside(rel: str, unit: str) -> bool:
    return rel == unit or rel.startswith(unit + "/")


def unit_weights(root: Path, plan: ShardPlan) -> dict[str, int]:
    """The weight of every unit, measured on the tree."""
    tree = entries(root)
    return {
        unit: sum(weight(st) for rel, st in tree.items() if inside(rel, unit))
        for shard in plan.shards
        for unit in shard.units
    }


def check_plan(root: Path, plan: ShardPlan, count: int) -> None:
    """The plan's invariants, checked against the tree itself."""
    tree = entries(root)
    units = {u for s in plan.shards for u in s.units}
    assert sum(len(s.units) for s in plan.shards) == len(units), "a unit twice"
    assert plan.root == str(root)
    assert "" in plan.parents
    assert not units & set(plan.parents)
    for rel, st in tree.items():
        prefixes = [rel[:i] for i, c in enumerate(rel) if c == "/"] + [rel]
        covering = [p for p in prefixes if p in units]
        owners = len(covering) + (rel in plan.parents)
        assert owners == 1, f"{rel!r} is covered {owners} times"
        if rel in plan.parents:
            assert stat.S_ISDIR(st.st_mode)
    assert units | set(plan.parents) <= {*tree, ""}, "planned paths not in the tree"
    assert 1 <= len(plan.shards) <= count
    assert len(plan.shards) <= max(1, len(units))
    for shard in plan.shards:
        members = [
            st for rel, st in tree.items() if any(inside(rel, u) for u in shard.units)
        ]
        assert shard.files == len(members)
        assert shard.bytes == sum(
            st.st_size for st in members if stat.S_ISREG(st.st_mode)
        )
        assert shard.units == tuple(sorted(shard.units))


def check_balance(root: Path, plan: ShardPlan) -> float:
    """Assert the LPT bound (see rcp_core.tools.shards.planner); return max shard / mean
    shard."""
    weights = unit_weights(root, plan)
    loads = [s.weight for s in plan.shards]
    assert loads == [sum(weights[u] for u in s.units) for s in plan.shards]
    mean = sum(loads) / len(loads)
    for shard in plan.shards:
        if len(shard.units) > 1:
            lightest = min(weights[u] for u in shard.units)
            assert shard.weight <= mean + lightest, shard.index
    return max(loads) / mean


def target(plan: ShardPlan, count: int) -> float:
    """The planner's target: the whole tree's weight (units and parents) / count."""
    total = sum(s.weight for s in plan.shards) + len(plan.parents) * FILE_COST
    return total / count


def copy_all(plan: ShardPlan, dst: Path, settings: CopySettings | None = None) -> int:
    """Copy every shard one after another; return the total copied.files."""
    return sum(
        copy_shard(plan, i, dst, settings)["copied.files"]
        for i in range(len(plan.shards))
    )


# -- planning -------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, -1, MAX_SHARDS + 1, True])
def test_count_out_of_range_is_refused(tmp_path: Path, count: int) -> None:
    with pytest.raises(UsageError, match="shard count"):
        plan_shards(str(tmp_path), count)


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(UsageError, match="file"):
        plan_shards(str(tmp_path / "file"), 2)
    with pytest.raises(UsageError, match="missing"):
        plan_shards(str(tmp_path / "missing"), 2)
    with pytest.raises(UsageError, match="'/'"):
        plan_shards("/", 2)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 64])
def test_every_entry_is_in_exactly_one_unit_or_a_parent(
    tmp_path: Path, count: int
) -> None:
    src = make_tree(tmp_path / "src", MIXED)
    plan = plan_shards(str(src), count)
    check_plan(src, plan, count)
    check_balance(src, plan)
    units = {u for s in plan.shards for u in s.units}
    if count == 1:
        # One shard: nothing to balance, so only the root is split.
        assert plan.parents == ("",)
        assert units == {p.name for p in src.iterdir()}
    if count == 4:
        assert "big" in plan.parents  # heavy: split into its entries
        assert {"big/empty", "big/sub", "empty", "links", BAD} <= units


def test_empty_tree_is_one_empty_shard(tmp_path: Path) -> None:
    plan = plan_shards(str(tmp_path), 8)
    assert plan == ShardPlan(str(tmp_path), (Shard(0, (), 0, 0),), ("",))


def test_never_more_shards_than_units(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": b"1", "b/c": b"2", "d": Symlink("a")})
    plan = plan_shards(str(src), 10)
    assert sorted(len(s.units) for s in plan.shards) == [1, 1, 1]
    check_plan(src, plan, 10)


def test_file_heavy_tree_balances(tmp_path: Path) -> None:
    spec: dict[str, Entry] = {
        f"d{i:02}/f{j:03}": b"" for i in range(40) for j in range((i * 7) % 23 + 1)
    }
    spec |= {f"d05/deep/g{j:03}": b"" for j in range(150)}
    src = make_tree(tmp_path / "src", spec)
    count = 6
    plan = plan_shards(str(src), count)
    check_plan(src, plan, count)
    assert len(plan.shards) == count
    check_balance(src, plan)
    assert max(s.weight for s in plan.shards) <= 1.5 * target(plan, count)


def test_byte_heavy_tree_balances(tmp_path: Path) -> None:
    spec: dict[str, Entry] = {
        f"d{k % 3}/f{k:02}": Sparse(k * MIB) for k in range(1, 25)
    }
    src = make_tree(tmp_path / "src", spec)
    count = 5
    plan = plan_shards(str(src), count)
    check_plan(src, plan, count)
    check_balance(src, plan)
    assert max(s.weight for s in plan.shards) <= 1.5 * target(plan, count)
    assert sum(s.bytes for s in plan.shards) == 300 * MIB


def test_entry_count_weighs_against_bytes(tmp_path: Path) -> None:
    """1000 empty files weigh about as much as one file of 1000 x FILE_COST bytes,
    so each ends up on its own shard instead of all on one."""
    spec: dict[str, Entry] = {f"many/f{j:04}": b"" for j in range(1000)}
    spec["one/big"] = Sparse(1000 * FILE_COST)
    src = make_tree(tmp_path / "src", spec)
    plan = plan_shards(str(src), 2)
    check_plan(src, plan, 2)
    check_balance(src, plan)
    assert max(s.weight for s in plan.shards) <= 1.5 * target(plan, 2)
    big = next(s for s in plan.shards if "one/big" in s.units)
    other = next(s for s in plan.shards if s is not big)
    assert big.files < 10 < 900 < other.files


def test_a_file_heavier_than_a_shard_is_alone(tmp_path: Path) -> None:
    spec: dict[str, Entry] = {f"small/f{j}": File(b"s" * 1000) for j in range(30)}
    spec["huge"] = Sparse(64 * MIB)
    src = make_tree(tmp_path / "src", spec)
    plan = plan_shards(str(src), 3)
    check_plan(src, plan, 3)
    check_balance(src, plan)
    assert any(s.units == ("huge",) for s in plan.shards)


def test_unreadable_directory_is_a_unit_of_its_own() -> None:
    """As ``nobody`` (root reads everything): the planner cannot open ``locked``,
    plans it as one unit and says so; a copy of that unit then reports the error."""
    with world_dir() as world:
        src = make_tree(
            world / "src",
            {
                "locked/a/b": b"x" * 100,
                "open/c": b"y",
                **{f"f{i}": b"" for i in range(9)},
            },
        )
        give_to_nobody(src, ["locked"])
        code = (
            "import json, sys\n"
            "from rcp_core.tools.shards.planner import plan_shards\n"
            "print(json.dumps(plan_shards(sys.argv[1], 3).as_dict()))\n"
        )
        done = subprocess.run(
            [*AS_NOBODY, sys.executable, "-c", code, str(src)],
            capture_output=True,
            text=True,
            check=True,
            cwd="/",
        )
        plan = ShardPlan.from_dict(json.loads(done.stdout))
        assert "locked" in {u for s in plan.shards for u in s.units}
        assert "'locked'" in done.stderr
        assert "one unit" in done.stderr


# -- manifests ------------------------------------------------------------------


def test_manifest_round_trip_keeps_non_utf8_names(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", MIXED)
    plan = plan_shards(str(src), 4)
    path = tmp_path / "plan.json"
    path.write_text("old")  # replaced atomically
    write_manifest(plan, path)
    assert read_manifest(path) == plan
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["plan.json", "src"], "a temporary file was left behind"
    text = path.read_bytes().decode("utf-8")  # plain Unicode JSON
    data = json.loads(text)
    assert data["version"] == 1
    encoded = [u for s in data["shards"] for u in s["units"] if isinstance(u, dict)]
    assert encoded == [{"base64": "Y2Fm6Q=="}]  # b"caf\xe9"
    assert ShardPlan.from_dict(plan.as_dict()) == plan


def test_manifest_of_an_empty_tree(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    plan = plan_shards(str(tmp_path / "src"), 3)
    write_manifest(plan, tmp_path / "m.json")
    assert read_manifest(tmp_path / "m.json") == plan


GOOD: dict[str, Any] = {
    "version": 1,
    "root": "/data",
    "parents": ["", "a"],
    "shards": [
        {"index": 0, "units": ["a/x", "b"], "files": 2, "bytes": 10},
        {"index": 1, "units": ["a/y"], "files": 1, "bytes": 0},
    ],
}


def broken(**changes: object) -> dict[str, object]:
    return {**GOOD, **changes}


def shard(**changes: object) -> list[object]:
    return [{**GOOD["shards"][0], **changes}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "Expecting"),
        (b'{"version": "\x80"}', "decode"),
        (b"[]", "not a JSON object"),
        (json.dumps(broken(version=2)).encode(), "version 2"),
        (
            json.dumps({k: v for k, v in GOOD.items() if k != "version"}).encode(),
            "version",
        ),
        (json.dumps(broken(shards=None)).encode(), "'shards'"),
        (json.dumps(broken(shards=[])).encode(), "no shards"),
        (json.dumps(broken(shards=["x"])).encode(), "not an object"),
        (
            json.dumps(broken(root="data")).encode(),
            "neither an absolute path nor a URL",
        ),
        (json.dumps(broken(root=5)).encode(), "not a path"),
        (json.dumps(broken(parents=["a"])).encode(), "root"),
        (json.dumps(broken(parents=["", "a", "a"])).encode(), "repeats"),
        (json.dumps(broken(parents=["", "a/b"])).encode(), "parent 'a/b'"),
        (json.dumps(broken(shards=shard(units=["../etc"]))).encode(), "'../etc'"),
        (json.dumps(broken(shards=shard(units=["/etc"]))).encode(), "'/etc'"),
        (json.dumps(broken(shards=shard(units=["a//x"]))).encode(), "'a//x'"),
        (json.dumps(broken(shards=shard(units=["c/d"]))).encode(), "'c/d'"),
        (json.dumps(broken(shards=shard(units=["a"]))).encode(), "twice"),
        (json.dumps(broken(shards=shard(units=["b", "b"]))).encode(), "twice"),
        (json.dumps(broken(shards=shard(index=1))).encode(), "index 1"),
        (json.dumps(broken(shards=shard(files=-1))).encode(), "'files'"),
        (json.dumps(broken(shards=shard(files=True))).encode(), "'files'"),
        (json.dumps(broken(shards=shard(files=1))).encode(), "impossible"),
        (json.dumps(broken(shards=shard(units=[{"base64": "!"}]))).encode(), "base64"),
        (json.dumps(broken(extra=1)).encode(), "unknown key.*'extra'"),
        (json.dumps(broken(shards=shard(links=[]))).encode(), "a shard has .*'links'"),
    ],
)
def test_malformed_manifest_is_refused_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=message) as caught:
        read_manifest(path)
    assert str(path) in str(caught.value)


def test_good_manifest_sample_is_accepted(tmp_path: Path) -> None:
    """The sample the malformed cases derive from is itself valid."""
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(GOOD))
    plan = read_manifest(path)
    assert plan.parents == ("", "a")
    assert [s.units for s in plan.shards] == [("a/x", "b"), ("a/y",)]


# -- copying --------------------------------------------------------------------


def test_sharded_copy_equals_a_plain_copy(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", MIXED)
    plain = copy(str(src), str(tmp_path / "plain"))
    plan = plan_shards(str(src), 4)
    assert len(plan.shards) == 4
    assert len(plan.parents) > 1
    dst = tmp_path / "dst"
    summaries = [copy_shard(plan, i, dst) for i in range(4)]
    assert finalize(plan, dst) == len(plan.parents)
    assert tree_compare(src, dst) == []
    assert tree_compare(tmp_path / "plain", dst) == []
    # Counts add up to the plain copy's; parents are counted by finalize.
    for key in ("copied.files", "copied.symlinks", "copied.specials", "copied.bytes"):
        assert sum(s[key] for s in summaries) == plain[key], key
    dirs = sum(s["copied.dirs"] for s in summaries) + len(plan.parents)
    assert dirs == plain["copied.dirs"]


def test_shards_copied_concurrently_from_threads(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    spec: dict[str, Entry] = {
        f"d{a}/e{b}/f{c}": File(b"z" * 1000 * (a + b + c), mtime_ns=T + c)
        for a in range(3)
        for b in range(3)
        for c in range(4)
    }
    spec |= {f"d{a}": Dir(mode=0o751, mtime_ns=T + a) for a in range(3)}
    spec |= {f"d{a}/e{b}": Dir(mtime_ns=T + b) for a in range(3) for b in range(3)}
    src = make_tree(tmp_path / "src", spec)
    plan = plan_shards(str(src), 8)
    assert len(plan.shards) == 8
    assert len(plan.parents) > 3  # shared parents to race on
    dst = tmp_path / "dst"
    settings = CopySettings(max_processes=1)
    start = threading.Barrier(len(plan.shards))

    def run(index: int) -> Summary:
        start.wait()
        return copy_shard(plan, index, dst, settings)

    with ThreadPoolExecutor(len(plan.shards)) as pool:
        summaries = list(pool.map(run, range(len(plan.shards))))
    assert sum(s["copied.files"] for s in summaries) == 36
    assert all(s["errors"] == 0 for s in summaries)
    finalize(plan, dst, settings)
    assert tree_compare(src, dst) == []


def test_empty_shard_returns_zero_summary_and_finalize_sets_the_root(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", {".": Dir(mode=0o705, mtime_ns=T)})
    plan = plan_shards(str(src), 4)
    summary = copy_shard(plan, 0, tmp_path / "dst")
    assert set(summary.counts) == set(KEYS)
    assert all(value == 0 for value in summary.counts.values())
    assert summary.errors == ()
    assert finalize(plan, tmp_path / "dst") == 1
    assert tree_compare(src, tmp_path / "dst") == []


@pytest.mark.parametrize(
    "settings", [CopySettings(), CopySettings(max_processes=2)], ids=["one", "helpers"]
)
def test_hard_links_are_kept_within_a_shard_only(
    tmp_path: Path, tree_compare: TreeCompare, settings: CopySettings
) -> None:
    """Names of one inode in two units of one shard stay one file (a shard is one
    engine run); in two shards they are two files with equal content (a known limit)."""
    spec: dict[str, Entry] = {
        "pair/x": b"linked",
        "pair/y": HardLink("pair/x"),
        "far": HardLink("pair/x"),
        **{f"heavy/f{i:02}": b"h" * 100_000 for i in range(12)},
    }
    src = make_tree(tmp_path / "src", spec)

    plan = plan_shards(str(src), 1)
    assert plan.shards[0].units == ("far", "heavy", "pair")
    one = tmp_path / "one"
    summary = copy_shard(plan, 0, one, settings)
    assert (summary["copied.files"], summary["copied.hardlinks"]) == (13, 2)
    finalize(plan, one, settings)
    x, y, far = (os.lstat(one / p) for p in ("pair/x", "pair/y", "far"))
    assert x.st_ino == y.st_ino == far.st_ino
    assert x.st_nlink == 3
    assert tree_compare(src, one) == []  # hard links compared too

    plan = plan_shards(str(src), 3)
    holding = [s for s in plan.shards if {"pair", "far"} & set(s.units)]
    assert len(holding) == 2
    two = tmp_path / "two"
    assert copy_all(plan, two, settings) == 14  # pair/y is a hard link
    finalize(plan, two, settings)
    x, y, far = (os.lstat(two / p) for p in ("pair/x", "pair/y", "far"))
    assert x.st_ino == y.st_ino  # one shard: still one file
    assert far.st_ino != x.st_ino  # another shard: a separate copy
    assert (x.st_nlink, far.st_nlink) == (2, 1)
    assert (two / "far").read_bytes() == (two / "pair/x").read_bytes() == b"linked"
    assert tree_compare(src, two, hardlinks=False) == []


def test_split_directories_of_linked_files_stay_linked_within_shards(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Like two backup snapshots: every file of ``a`` has a name in ``b``, and both
    are split into single-file units. A pair whose units share a shard is one file at
    the destination; a pair split over two shards is two equal files."""
    spec: dict[str, Entry] = {
        f"a/f{i:02}": File(b"%d" % i * 5000, mtime_ns=T) for i in range(15)
    }
    spec |= {f"b/f{i:02}": HardLink(f"a/f{i:02}") for i in range(15)}
    src = make_tree(tmp_path / "src", spec)
    plan = plan_shards(str(src), 2)
    assert {"a", "b"} <= set(plan.parents)
    shard_of = {u: s.index for s in plan.shards for u in s.units}
    together = {
        f"f{i:02}"
        for i in range(15)
        if shard_of[f"a/f{i:02}"] == shard_of[f"b/f{i:02}"]
    }
    assert 0 < len(together) < 15, "both cases must occur"
    dst = tmp_path / "dst"
    summaries = [copy_shard(plan, i, dst) for i in range(len(plan.shards))]
    finalize(plan, dst)
    assert sum(s["copied.hardlinks"] for s in summaries) == len(together)
    assert sum(s["copied.files"] for s in summaries) == 30 - len(together)
    for i in range(15):
        name = f"f{i:02}"
        a, b = os.lstat(dst / "a" / name), os.lstat(dst / "b" / name)
        assert (a.st_ino == b.st_ino) == (name in together), name
        assert (dst / "a" / name).read_bytes() == (dst / "b" / name).read_bytes()
    assert tree_compare(src, dst, hardlinks=False) == []


def test_existing_unit_is_refused_by_default_before_anything_is_copied(
    tmp_path: Path,
) -> None:
    src = make_tree(tmp_path / "src", {"a": b"new", "b": b"bbb", "c/d": b"d"})
    plan = plan_shards(str(src), 1)
    dst = make_tree(tmp_path / "dst", {"b": b"old"})
    with pytest.raises(UsageError, match="exists") as caught:
        copy_shard(plan, 0, dst)
    assert str(dst / "b") in str(caught.value)
    assert sorted(p.name for p in dst.iterdir()) == ["b"]
    assert (dst / "b").read_bytes() == b"old"
    summary = copy_shard(plan, 0, dst, CopySettings(existing=ExistingPolicy.OVERWRITE))
    assert summary["copied.files"] == 3
    assert (dst / "b").read_bytes() == b"bbb"


def test_parents_are_shared_whatever_the_policy(tmp_path: Path) -> None:
    """Two shards create the same parents: the second merges into them."""
    src = make_tree(tmp_path / "src", {f"d/f{i}": b"x" * 1000 for i in range(8)})
    plan = plan_shards(str(src), 2)
    assert "d" in plan.parents
    assert copy_all(plan, tmp_path / "dst") == 8


@pytest.mark.parametrize(
    "settings",
    [
        CopySettings(excludes=["*.tmp"]),
        CopySettings(includes=["*.txt"]),
        CopySettings(gitignore=True),
        CopySettings(delete=True),
        CopySettings(dereference=True),
        CopySettings(dry_run=DryRun.BRIEF),
    ],
)
def test_whole_tree_settings_are_refused(
    tmp_path: Path, settings: CopySettings
) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x"})
    plan = plan_shards(str(src), 1)
    with pytest.raises(UsageError, match="not supported"):
        copy_shard(plan, 0, tmp_path / "dst", settings)
    assert not (tmp_path / "dst").exists()


def test_bad_index_and_destinations_are_refused(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x", "b": b"y"})
    plan = plan_shards(str(src), 2)
    with pytest.raises(UsageError, match="shard 2 does not exist"):
        copy_shard(plan, 2, tmp_path / "dst")
    with pytest.raises(UsageError, match="inside"):
        copy_shard(plan, 0, src / "sub")
    with pytest.raises(UsageError, match="the source"):
        copy_shard(plan, 0, src)
    with pytest.raises(UsageError, match="parent"):
        copy_shard(plan, 0, tmp_path / "no" / "dst")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(UsageError, match="not a directory"):
        copy_shard(
            plan, 0, tmp_path / "file", CopySettings(existing=ExistingPolicy.OVERWRITE)
        )
    os.symlink(tmp_path, tmp_path / "link")
    with pytest.raises(UsageError, match="not a directory"):
        copy_shard(plan, 0, tmp_path / "link")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "link", "src"]


def test_finalize_refuses_missing_parents(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {f"d/f{i}": b"x" * 1000 for i in range(8)})
    plan = plan_shards(str(src), 2)
    (tmp_path / "dst").mkdir(mode=0o700)
    with pytest.raises(UsageError, match="did every shard run"):
        finalize(plan, tmp_path / "dst")
    assert stat.S_IMODE(os.lstat(tmp_path / "dst").st_mode) == 0o700  # untouched


def test_finalize_preserves_what_settings_keep(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {".": Dir(mode=0o751, mtime_ns=T), "a": b"x"})
    plan = plan_shards(str(src), 1)
    dst = tmp_path / "dst"
    copy_shard(plan, 0, dst)
    assert stat.S_IMODE(os.lstat(dst).st_mode) == 0o700  # created private
    none = CopySettings(preserve=Preserve.parse("none"))
    assert finalize(plan, dst, none) == 1
    umask = os.umask(0)
    os.umask(umask)
    st = os.lstat(dst)
    assert stat.S_IMODE(st.st_mode) == 0o777 & ~umask
    assert st.st_mtime_ns != T
    assert finalize(plan, dst) == 1
    st = os.lstat(dst)
    assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (0o751, T)


def test_a_machine_without_the_source_is_refused(tmp_path: Path) -> None:
    src = make_tree(tmp_path / "src", {"a": b"x"})
    plan = plan_shards(str(src), 1)
    src.rename(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="not a directory here"):
        copy_shard(plan, 0, tmp_path / "dst")
    assert not (tmp_path / "dst").exists()
