"""Sharded copies with a backend port on either side: a URL store's tree planned
through its listings (``memory://``, S3 on moto), shards copied by the generic engine
onto a local path or a store, parents finalized through the ports; what the plan
refuses, refused before anything is written."""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest

from benchmarks.objectstores import Store
from rcp_core import CopySettings, UsageError
from rcp_core.engine.posixport import PosixPort
from rcp_core.errors import CopyFailedError
from rcp_core.tools.shards.planner import (
    ShardPlan,
    copy_shard,
    finalize,
    plan_shards,
    read_manifest,
    write_manifest,
)
from rcp_provider.fsspec.storetree import Place
from support.treespec import Dir, File, Spec, make_tree

SIZES = {
    f"d{d}/e{e}/f{f}": (d * 7 + e * 3 + f) * 1000
    for d in range(4)
    for e in range(3)
    for f in range(5)
}
"""A tree of 60 files in 16 directories, of unequal weights."""


def contents(rel: str) -> bytes:
    return rel.encode() * (SIZES[rel] // len(rel) + 1)


def covered(plan: ShardPlan) -> set[str]:
    """Every path a plan covers: its parents and each unit (with what lies below a
    directory unit)."""
    return set(plan.parents) | {u for s in plan.shards for u in s.units}


def below(rel: str, roots: set[str]) -> bool:
    return any(rel == r or rel.startswith(r + "/") for r in roots if r)


@pytest.fixture
def memory_tree() -> Iterator[tuple[Any, str]]:
    fs = fsspec.filesystem("memory")
    name = f"/s{uuid.uuid4().hex[:8]}"
    for rel in SIZES:
        fs.pipe(f"{name}/{rel}", contents(rel))
    yield fs, name
    fs.rm(name, recursive=True)


def local_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()
    }


def test_a_memory_tree_is_planned_and_copied_shard_by_shard(
    memory_tree: tuple[Any, str], tmp_path: Path
) -> None:
    """Its plan names it by URL and covers every entry once; each shard copies its
    units to a local destination; finalize reaches every parent."""
    fs, name = memory_tree
    source = Place(fs, name)
    plan = plan_shards(source, 3)
    assert plan.root == f"memory://{name}"
    assert len(plan.shards) == 3
    units = {u for s in plan.shards for u in s.units}
    assert sum(s.files for s in plan.shards) >= len(SIZES)
    assert sum(s.bytes for s in plan.shards) == sum(len(contents(r)) for r in SIZES)
    for rel in SIZES:  # in exactly one unit, never a parent
        assert sum(below(rel, {u}) for u in units) == 1
    write_manifest(plan, tmp_path / "plan.json")
    assert read_manifest(tmp_path / "plan.json") == plan
    dst = tmp_path / "dst"
    for shard in plan.shards:
        summary = copy_shard(plan, shard.index, dst, source=source)
        assert summary["errors"] == 0
    assert finalize(plan, dst, source=source) == len(plan.parents)
    assert local_files(dst) == {rel: contents(rel) for rel in SIZES}


def test_a_local_tree_goes_to_s3_by_shards(s3: Store, tmp_path: Path) -> None:
    """The plan is the local fast path's; the destination a bucket, so each shard
    runs the generic engine and finalize has no directories to miss there."""
    spec: Spec = {".": Dir(0o755, 0)}
    for rel in SIZES:
        spec[rel] = File(contents(rel), 0o644, 0)
    src = make_tree(tmp_path / "src", spec)
    plan = plan_shards(src, 4)
    fs, bucket = s3.fs(), s3.bucket()
    dst = Place(fs, f"{bucket}/copy")
    for shard in plan.shards:
        copy_shard(plan, shard.index, dst)
    assert finalize(plan, dst) == len(plan.parents)
    keys = [k.removeprefix(f"{bucket}/copy") for k in fs.find(bucket)]
    got = {k[1:]: fs.cat(f"{bucket}/copy{k}") for k in keys if not k.endswith("/")}
    assert got == {rel: contents(rel) for rel in SIZES}
    directories = {"/"} | {
        f"/{'/'.join(rel.split('/')[:depth])}/"
        for rel in SIZES
        for depth in range(1, rel.count("/") + 1)
    }
    assert {k for k in keys if k.endswith("/")} == directories  # each one's marker


def test_an_s3_source_with_an_unsafe_key_plans_it_as_one_unit(
    s3: Store, tmp_path: Path
) -> None:
    """A prefix holding a key named ``..`` is one unit: its shard's copy reports the
    name (exit 1 of that shard), every other entry is copied; an unsafe name at the
    root refuses the plan."""
    fs, bucket = s3.fs(), s3.bucket()
    for rel in SIZES:
        fs.pipe(f"{bucket}/src/{rel}", contents(rel))
    fs.pipe(f"{bucket}/src/d1/e1/..", b"dots")
    source = Place(fs, f"{bucket}/src")
    plan = plan_shards(source, 8)
    units = {u for s in plan.shards for u in s.units}
    assert "d1/e1" in units
    dst = tmp_path / "dst"
    for shard in plan.shards:
        if "d1/e1" not in shard.units:
            assert copy_shard(plan, shard.index, dst, source=source)["errors"] == 0
            continue
        with pytest.raises(CopyFailedError) as failed:
            copy_shard(plan, shard.index, dst, source=source)
        assert failed.value.summary["errors"] == 1
    assert local_files(dst) == {rel: contents(rel) for rel in SIZES}
    fs.pipe(f"{bucket}/src/..", b"at the root")
    with pytest.raises(UsageError, match="unsafe name"):
        plan_shards(source, 2)


def test_a_port_destination_gets_the_parents_metadata(tmp_path: Path) -> None:
    """Local to local through a port (the generic engine): finalize sets each
    parent's mode and mtime through :meth:`Port.set_meta`."""
    t = 1_600_000_000 * 10**9
    spec: Spec = {".": Dir(0o750, t)}
    for d in range(3):
        spec[f"d{d}"] = Dir(0o751, t + d)
        for f in range(4):
            spec[f"d{d}/f{f}"] = File(b"x" * 100_000, 0o640, t)
    src = make_tree(tmp_path / "src", spec)
    plan = plan_shards(src, 3)
    dst = PosixPort(str(tmp_path / "dst"))
    for shard in plan.shards:
        copy_shard(plan, shard.index, dst)
    assert finalize(plan, dst) == len(plan.parents)
    for rel in plan.parents:
        there = os.stat(os.path.join(dst.root, rel))
        want = os.stat(os.path.join(src, rel))
        assert stat.S_IMODE(there.st_mode) == stat.S_IMODE(want.st_mode)
        assert there.st_mtime_ns == want.st_mtime_ns


def test_what_a_port_plan_cannot_do_is_refused_before_writing(
    memory_tree: tuple[Any, str], tmp_path: Path
) -> None:
    fs, name = memory_tree
    source = Place(fs, name)
    plan = plan_shards(source, 2)
    dst = tmp_path / "dst"
    with pytest.raises(UsageError, match="needs its backend port"):
        copy_shard(plan, 0, dst)
    with pytest.raises(UsageError, match="is not the plan's"):
        copy_shard(plan, 0, dst, source=Place(fs, f"{name}/d0"))
    with pytest.raises(UsageError, match="inside it"):
        copy_shard(plan, 0, Place(fs, f"{name}/d0/copy"), source=source)
    with pytest.raises(UsageError, match="not supported"):
        copy_shard(plan, 0, dst, CopySettings(max_processes=2), source=source)
    assert not dst.exists()
    assert not fs.exists(f"{name}/d0/copy")
