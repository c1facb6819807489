"""RcpRemoveOperator, RcpCompareOperator and RcpLinkOperator on real trees (the
context is the test's own, as Airflow passes one; the Airflow runs are in test_dags)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import fsspec
import pytest
from airflow.sdk.exceptions import AirflowFailException

from rcp_operators.compare import RcpCompareOperator
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.link import RcpLinkOperator
from rcp_operators.remove import RcpRemoveOperator
from rcp_operators.shards import RcpFinalizeOperator, RcpPlanOperator
from support.airflow import connection_env
from support.treespec import Dir, File, Spec, make_tree

T0 = 1_600_000_000 * 10**9
TREE: Spec = {
    ".": Dir(0o755, T0),
    "keep.cfg": File(b"settings", 0o644, T0),
    "logs": Dir(0o755, T0),
    "data": Dir(0o755, T0),
    **{f"logs/{i:02}.log": File(b"x" * 100, 0o644, T0 + i * 10**9) for i in range(30)},
    "data/big.bin": File(os.urandom(3 << 20), 0o600, T0),
}


def test_remove_by_age_and_glob_returns_its_summary(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "tree", TREE)
    op = RcpRemoveOperator(
        task_id="rm",
        paths=str(root),
        includes=["/logs/**"],
        modified_before=str((T0 + 10 * 10**9) / 1e9),  # logs 00-09
    )
    with pytest.raises(AirflowFailException):  # an epoch number is not a time
        op.execute(context={})
    op.modified_before = time.strftime(
        "%Y-%m-%dT%H:%M:%S+00:00", time.gmtime((T0 + 10 * 10**9) / 1e9)
    )
    summary = op.execute(context={})
    assert summary["removed"]["files"] == 10
    assert sorted(p.name for p in (root / "logs").iterdir()) == [
        f"{i:02}.log" for i in range(10, 30)
    ]
    assert (root / "keep.cfg").exists()
    assert (root / "data" / "big.bin").exists()


def test_remove_refuses_a_service(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        *connection_env("svc", host="h", port=1, extra={"fingerprint": "ab" * 32})
    )
    op = RcpRemoveOperator(task_id="rm", paths=str(tmp_path), conn_id="svc")
    with pytest.raises(AirflowFailException, match="worker's own storage"):
        op.execute(context={})
    assert tmp_path.exists()


def test_copy_compare_and_snapshot(tmp_path: Path) -> None:
    """The example DAG's chain: copy, compare by checksum, then a hard-linked
    snapshot of the copy that shares every file."""
    src = make_tree(tmp_path / "src", TREE)
    dst, snap = tmp_path / "dst", tmp_path / "snap"
    RcpCopyOperator(task_id="copy", src=str(src), dst=str(dst)).execute(context={})
    same = RcpCompareOperator(task_id="cmp", src=str(src), dst=str(dst)).execute(
        context={}
    )
    assert same["same"] is True
    assert same["files_hashed"] == 32
    linked = RcpLinkOperator(task_id="link", src=str(dst), dst=str(snap)).execute(
        context={}
    )
    assert linked["methods"]["link"] == 32
    assert (snap / "data" / "big.bin").stat().st_ino == (
        dst / "data" / "big.bin"
    ).stat().st_ino


def test_compare_fails_the_task_on_a_difference_unless_asked_not_to(
    tmp_path: Path,
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    dst = make_tree(tmp_path / "dst", TREE)
    (dst / "keep.cfg").write_bytes(b"SETTINGS")  # same size, new mtime
    with pytest.raises(AirflowFailException, match="differs"):
        RcpCompareOperator(task_id="cmp", src=str(src), dst=str(dst)).execute(
            context={}
        )
    result = RcpCompareOperator(
        task_id="cmp", src=str(src), dst=str(dst), fail_on_difference=False
    ).execute(context={})
    assert result["by_kind"]["mtime"] == 1
    assert result["by_kind"]["content"] == 1


def test_link_updates_from_a_new_tree(tmp_path: Path) -> None:
    day1 = make_tree(tmp_path / "day1", TREE)
    day2 = make_tree(
        tmp_path / "day2", {**TREE, "keep.cfg": File(b"changed, longer", 0o644, T0)}
    )
    summary = RcpLinkOperator(
        task_id="link", src=str(day1), dst=str(tmp_path / "snap"), update=str(day2)
    ).execute(context={})
    assert summary["methods"]["link"] == 31
    assert (tmp_path / "snap" / "keep.cfg").read_bytes() == b"changed, longer"


def test_remove_reaches_a_url_store_as_rrm_does() -> None:
    """A URL is removed through its port; what its storage cannot honour fails the
    task without touching it."""
    fs = fsspec.filesystem("memory")
    name = f"/rm{uuid.uuid4().hex[:8]}"
    for key in ("a/x", "a/y.keep", "b"):
        fs.pipe(f"{name}/{key}", b"12345")
    aged = RcpRemoveOperator(
        task_id="rm", paths=f"memory://{name}", modified_before="1d"
    )
    with pytest.raises(AirflowFailException, match="--modified-before"):
        aged.execute(context={})
    op = RcpRemoveOperator(task_id="rm", paths=f"memory://{name}", excludes=["*.keep"])
    summary = op.execute(context={})
    assert summary["removed"]["files"] == 2
    assert fs.find(name) == [f"{name}/a/y.keep"]
    fs.rm(name, recursive=True)


def test_a_url_store_is_planned_copied_by_shards_and_finalized(
    tmp_path: Path,
) -> None:
    """RcpPlanOperator plans a store's tree (its URL in the manifest), the mapped
    copies run the generic engine, finalize reaches every parent."""
    fs = fsspec.filesystem("memory")
    name = f"/sh{uuid.uuid4().hex[:8]}"
    files = {f"d{d}/f{f}": b"%d" % (d * f) * 5000 for d in range(4) for f in range(3)}
    for rel, data in files.items():
        fs.pipe(f"{name}/{rel}", data)
    manifest = str(tmp_path / "plan.json")
    plan = RcpPlanOperator(
        task_id="plan", src=f"memory://{name}", manifest=manifest, shards=3
    )
    shards = plan.execute(context={})
    assert len(shards) == 3
    dst = tmp_path / "dst"
    for kwargs in shards:
        RcpCopyOperator(task_id="copy", dst=str(dst), **kwargs).execute(context={})
    done = RcpFinalizeOperator(task_id="fin", manifest=manifest, dst=str(dst))
    assert done.execute(context={})["src"] == f"memory://{name}"
    got = {
        str(p.relative_to(dst)): p.read_bytes() for p in dst.rglob("*") if p.is_file()
    }
    assert got == files
    fs.rm(name, recursive=True)


def test_a_killed_plan_stops_reading_and_writes_no_manifest(tmp_path: Path) -> None:
    """``on_kill`` stops the plan's walk before its next directory: the task fails
    at once (no retry) and no manifest is written."""
    src = make_tree(
        tmp_path / "src",
        {f"d{i}/e{j}/f": File(b"x") for i in range(5) for j in range(5)},
    )
    manifest = tmp_path / "plan.json"
    plan = RcpPlanOperator(
        task_id="plan", src=str(src), manifest=str(manifest), shards=4
    )
    plan.on_kill()
    with pytest.raises(AirflowFailException, match="stopped"):
        plan.execute(context={})
    assert not manifest.exists()


def test_a_killed_finalize_does_not_call_its_copy_verified(tmp_path: Path) -> None:
    """``on_kill`` stops the finalize's verification: a cancelled comparison is
    never "the same"."""
    src = make_tree(tmp_path / "src", {f"d{i}/f": File(b"x") for i in range(6)})
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    shards = RcpPlanOperator(
        task_id="plan", src=str(src), manifest=str(manifest), shards=2
    ).execute(context={})
    for shard in shards:
        RcpCopyOperator(task_id="copy", dst=str(dst), **shard).execute(context={})
    finalize = RcpFinalizeOperator(
        task_id="fin", manifest=str(manifest), dst=str(dst), verify="checksum"
    )
    finalize.on_kill()
    with pytest.raises(AirflowFailException, match="cancelled"):
        finalize.execute(context={})


def test_a_links_delete_and_filters_are_templated_and_read_as_the_copys(
    tmp_path: Path,
) -> None:
    """``delete``, ``includes`` and ``excludes`` render as a copy's do, and their
    text is read as the copy reads it: a rendered ``"False"`` refuses an existing
    snapshot, ``"True"`` mirrors it, anything else fails before a file is written."""
    day1 = make_tree(tmp_path / "day1", TREE)
    snap = tmp_path / "snap"
    params = {"delete": "False", "include": "/logs/**", "exclude": "*9.log"}

    def link(**params: str) -> RcpLinkOperator:
        op = RcpLinkOperator(
            task_id="link",
            src=str(day1),
            dst=str(snap),
            delete="{{ params.delete }}",  # type: ignore[arg-type]
            includes=["{{ params.include }}"],
            excludes="{{ params.exclude }}",  # type: ignore[arg-type]
        )
        op.render_template_fields({"params": params})
        return op

    summary = link(**params).execute(context={})
    logs = [f"{i:02}.log" for i in range(30) if i % 10 != 9]
    assert sorted(p.name for p in (snap / "logs").iterdir()) == logs
    assert not (snap / "keep.cfg").exists()
    assert summary["methods"]["link"] == len(logs)
    with pytest.raises(AirflowFailException, match="exists"):
        link(**params).execute(context={})  # "False": no delete
    (snap / "logs" / "extra").write_bytes(b"not in the new tree")
    link(**{**params, "delete": "True"}).execute(context={})
    assert sorted(p.name for p in (snap / "logs").iterdir()) == logs
    before = sorted(p.name for p in snap.rglob("*"))
    with pytest.raises(AirflowFailException, match="delete='maybe'"):
        link(**{**params, "delete": "maybe"}).execute(context={})
    assert sorted(p.name for p in snap.rglob("*")) == before


def test_a_finalizes_preserve_and_verify_are_templated_and_read_as_the_copys(
    tmp_path: Path,
) -> None:
    """Rendered ``preserve`` and ``verify`` text is read as a copy's: a verification
    by checksum of the directories given mode and times; a preserve that is no list
    of attributes fails the task before any directory's metadata is set."""
    src = make_tree(tmp_path / "src", {f"d{i}/f": File(b"x" * i) for i in range(6)})
    src.chmod(0o701)  # the root: a parent of the shards' units, finalize's to set
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    shards = RcpPlanOperator(
        task_id="plan", src=str(src), manifest=str(manifest), shards=2
    ).execute(context={})
    for shard in shards:
        RcpCopyOperator(task_id="copy", dst=str(dst), **shard).execute(context={})

    def finalize(**params: str) -> RcpFinalizeOperator:
        op = RcpFinalizeOperator(
            task_id="fin",
            manifest=str(manifest),
            dst=str(dst),
            preserve="{{ params.preserve }}",
            verify="{{ params.verify }}",
        )
        op.render_template_fields({"params": params})
        return op

    with pytest.raises(AirflowFailException, match="preserve='mode,colour'"):
        finalize(preserve="mode,colour", verify="none").execute(context={})
    assert dst.stat().st_mode & 0o777 != 0o701  # nothing set
    done = finalize(preserve="mode,times", verify="checksum").execute(context={})
    assert done["verify"]["same"] is True
    assert dst.stat().st_mode & 0o777 == 0o701
