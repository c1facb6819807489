"""``rcp-shard``: a tree planned, its shards copied by concurrent ``rcp-shard copy``
processes (as a Slurm job array runs them), finalized and verified; its usage errors,
a failing entry and an interrupt, each on real files through the installed program."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rcp_core.tools.shards.planner import read_manifest
from support.nobody import NOBODY, give_to_nobody, world_dir
from support.treecmp import TreeCompare
from support.treespec import Dir, Entry, File, HardLink, Spec, Symlink, make_tree

RCP_SHARD = str(Path(sys.executable).with_name("rcp-shard"))
T0 = 1_600_000_000 * 10**9
SHARDS = 6
ENV = "SLURM_ARRAY_TASK_ID"
AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")


def tree_spec() -> Spec:
    """Some 330 entries: four directories of three subdirectories of 25 files (modes,
    sizes and times of their own) and a symlink each, a directory holding two names of
    one file, a heavier file and an empty directory at the top."""
    spec: dict[str, Entry] = {".": Dir(0o755, T0)}
    for a in range(4):
        spec[f"d{a}"] = Dir(0o750, T0 + a)
        for b in range(3):
            sub = f"d{a}/s{b}"
            spec[sub] = Dir(0o705 if b else 0o755, T0 + 10 * a + b)
            for i in range(25):
                data = bytes([a, b, i]) * (100 * (i + 1))
                mode = 0o600 if i % 3 else 0o644
                spec[f"{sub}/f{i:02}"] = File(data, mode, T0 + 1000 * i + a)
            spec[f"{sub}/latest"] = Symlink("f24", T0 + 7)
    spec["links"] = Dir(0o755, T0 + 3)
    spec["links/one"] = File(b"one inode, two names\n" * 50, 0o640, T0 + 4)
    spec["links/two"] = HardLink("links/one")
    spec["big.bin"] = File(os.urandom(512 * 1024), 0o644, T0 + 5)
    spec["empty"] = Dir(0o700, T0 + 6)
    return spec


def environ(**extra: str) -> dict[str, str]:
    """This environment without a job array's index, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    return {**env, **extra}


def rcp_shard(
    *args: object, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RCP_SHARD, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(env if env is not None else environ()),
        check=False,
    )


def start(args: Sequence[object], env: Mapping[str, str]) -> subprocess.Popen[str]:
    """``rcp-shard ARGS`` started, SIGINT at its default in the child (a suite run in
    the background inherits it ignored, and Python then installs no handler)."""
    return subprocess.Popen(
        [RCP_SHARD, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def planned(src: Path, manifest: Path, shards: int = SHARDS) -> int:
    """``rcp-shard plan``; the number of shards, as ``--count`` prints it."""
    done = rcp_shard("plan", src, "--manifest", manifest, "--shards", shards, "--count")
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def finalized(
    manifest: Path, dst: Path, verify: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``rcp-shard finalize --verify VERIFY``: the run, and its summary
    (``--summary-json``)."""
    report = manifest.with_name("finalize.json")
    done = rcp_shard(
        "finalize", "--manifest", manifest, "--verify", verify,
        "--summary-json", report, dst,
    )  # fmt: skip
    return done, json.loads(report.read_text())


def copied(summary: dict[str, object]) -> int:
    counts = summary["copied"]
    assert isinstance(counts, dict)
    return sum(v for k, v in counts.items() if k != "bytes")


def test_shards_copied_by_concurrent_processes_make_the_tree(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """Every shard at once, half given ``--shard``, half ``$SLURM_ARRAY_TASK_ID``
    (and one both: ``--shard`` wins), then finalize with ``--verify checksum``: the
    copy is the source, modes, times and the hard link included."""
    src = make_tree(tmp_path / "src", tree_spec())
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    shown = rcp_shard("plan", src, "--manifest", manifest, "--shards", SHARDS, "--json")
    assert shown.returncode == 0, shown.stderr
    plan = json.loads(shown.stdout)
    count = planned(src, manifest)
    assert plan["count"] == count == SHARDS
    assert plan["manifest"] == str(manifest)
    assert plan["root"] == str(src)
    assert sum(s["files"] for s in plan["shards"]) > 300
    assert len(read_manifest(manifest).parents) > 1  # directories the shards share

    procs = []
    for index in range(count):
        summary = tmp_path / f"shard-{index}.json"
        args: list[object] = ["copy", "--manifest", manifest, dst]
        args += ["--summary-json", summary]
        if index % 2:
            env = environ(**{ENV: str(index)})
        else:
            env = environ(**({ENV: str(count + 5)} if index == 0 else {}))
            args += ["--shard", index]
        procs.append((summary, start(args, env)))
    for _, proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (out, err)
    summaries = [json.loads(path.read_text()) for path, _ in procs]
    assert [s["errors"] for s in summaries] == [0] * count
    assert sum(copied(s) for s in summaries) == sum(s["files"] for s in plan["shards"])

    done, result = finalized(manifest, dst, "checksum")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert result["directories"] == len(read_manifest(manifest).parents)
    assert result["verified"]["same"] is True
    assert result["verified"]["files_hashed"] > 300
    assert tree_compare(src, dst) == []


def test_finalize_fails_on_a_copy_that_differs_from_its_source(
    tmp_path: Path,
) -> None:
    """A file changed in the copy after its shard (same size and time): metadata
    finds nothing, a checksum finds it (exit 3, its difference on stdout as ``rcmp``
    prints it); ``plan`` without ``--count`` or ``--json`` lists the shards."""
    src = make_tree(tmp_path / "src", tree_spec())
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    shown = rcp_shard("plan", src, "--manifest", manifest, "--shards", 2)
    assert shown.returncode == 0, shown.stderr
    head, *lines = shown.stdout.splitlines()
    assert head.startswith(f"{manifest}: 2 shard(s) of {src}, ")
    assert [line.split(":")[0] for line in lines] == ["shard 0", "shard 1"]
    for index in (0, 1):
        done = rcp_shard("copy", "--manifest", manifest, "--shard", index, dst)
        assert done.returncode == 0, done.stderr
    changed = dst / "d2" / "s1" / "f03"
    stat = changed.stat()
    changed.write_bytes(bytes(len(changed.read_bytes())))
    os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    same = rcp_shard("finalize", "--manifest", manifest, "--verify", "metadata", dst)
    assert same.returncode == 0, same.stderr
    differs, result = finalized(manifest, dst, "checksum")
    assert differs.returncode == 3, (differs.stdout, differs.stderr)
    assert result["verified"]["same"] is False
    [line] = differs.stdout.splitlines()
    difference = json.loads(line)
    assert (difference["path"], difference["kind"]) == ("d2/s1/f03", "content")


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["copy", "--manifest", "{tmp}/missing.json", "--shard", "0"], {}),
        (["copy", "--manifest", "{manifest}", "--shard", "{count}"], {}),
        (["copy", "--manifest", "{manifest}"], {ENV: "{count}"}),
        (["copy", "--manifest", "{manifest}", "--shard", "-1"], {}),
        (["copy", "--manifest", "{manifest}"], {}),
        (["copy", "--manifest", "{manifest}"], {ENV: "three"}),
        (["copy", "--manifest", "{manifest}", "--shard", "0", "--delete"], {}),
        (["copy", "--manifest", "{tmp}/src/d0/s0/f00", "--shard", "0"], {}),
        (["finalize", "--manifest", "{manifest}"], {}),
        (["finalize", "--manifest", "{tmp}/missing.json"], {}),
        (
            ["plan", "{tmp}/src", "--manifest", "{tmp}/no/plan.json", "--shards", "2"],
            {},
        ),
        (["plan", "{tmp}/src", "--manifest", "{tmp}/other.json", "--shards", "0"], {}),
        (
            [
                "plan",
                "{tmp}/nothing",
                "--manifest",
                "{tmp}/other.json",
                "--shards",
                "2",
            ],
            {},
        ),
        ([], {}),
    ],
    ids=[
        "missing-manifest",
        "shard-out-of-range",
        "array-index-out-of-range",
        "negative-shard",
        "no-shard",
        "array-index-not-a-number",
        "a-refused-flag",
        "not-a-manifest",
        "finalize-before-any-shard",
        "finalize-missing-manifest",
        "plan-into-a-missing-directory",
        "plan-zero-shards",
        "plan-a-missing-source",
        "no-command",
    ],
)
def test_a_usage_error_exits_2_with_one_line_and_touches_nothing(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    src = make_tree(tmp_path / "src", tree_spec())
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    count = planned(src, manifest, 3)
    before = manifest.read_bytes()
    words = {"tmp": tmp_path, "manifest": manifest, "count": count}
    argv = [a.format(**words) for a in args]
    if argv and argv[0] in ("copy", "finalize"):
        argv.append(str(dst))
    done = rcp_shard(
        *argv, env=environ(**{k: v.format(**words) for k, v in env.items()})
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.startswith("rcp-shard: error: ")
    assert done.stderr.count("\n") == 1, done.stderr
    assert not dst.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "src"]
    assert manifest.read_bytes() == before


@pytest.mark.privileged
def test_a_shard_with_a_failing_entry_exits_1_and_copies_the_rest() -> None:
    """A file its copy cannot read (as ``nobody``: root reads everything) fails its
    shard's copy, exit 1, counted in the summary; the shard's other units are
    copied."""
    unreadable = "d1/s2/f05"
    with world_dir() as top:
        src = make_tree(top / "src", tree_spec())
        manifest, dst, summary = top / "plan.json", top / "dst", top / "summary.json"
        planned(src, manifest)
        give_to_nobody(src, [unreadable])
        [shard] = [
            s
            for s in read_manifest(manifest).shards
            if any(unreadable == u or unreadable.startswith(u + "/") for u in s.units)
        ]
        done = subprocess.run(
            [
                *AS_NOBODY, RCP_SHARD, "copy", "--manifest", str(manifest),
                "--shard", str(shard.index), "--max-processes", "1",
                "--summary-json", str(summary), str(dst),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**environ(), "PYTHONDONTWRITEBYTECODE": "1"},
            check=False,
        )  # fmt: skip
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert done.stderr.startswith("rcp-shard: "), done.stderr
        assert json.loads(summary.read_text())["errors"] == 1
        assert not (dst / unreadable).exists()
        kept = [unit for unit in shard.units if unit != unreadable]
        assert all(os.path.lexists(dst / unit) for unit in kept)


FILES = 40
PROMPT = 10.0
"""Seconds from the signal to the exit, at most (files in flight are finished)."""


def test_units_removed_after_the_plan_fail_as_vanished_and_the_rest_is_copied(
    tmp_path: Path,
) -> None:
    """A directory of the source removed between the plan and the copies (a
    policy engine's purge): each shard copies what is left, says which units were
    gone and exits 4 (only vanished sources failed); the others exit 0."""
    src = make_tree(tmp_path / "src", tree_spec())
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    count = planned(src, manifest)
    shutil.rmtree(src / "d1")
    runs = [
        rcp_shard("copy", "--manifest", manifest, "--shard", index, dst)
        for index in range(count)
    ]
    codes = {run.returncode for run in runs}
    assert codes <= {0, 4}, [(run.stdout, run.stderr) for run in runs]
    assert 4 in codes
    said = "".join(run.stdout for run in runs)
    assert f"{src}/d1/" in said
    assert "No such file or directory" in said
    left = {p.relative_to(src) for p in src.rglob("*") if p.is_file()}
    assert {p.relative_to(dst) for p in dst.rglob("*") if p.is_file()} >= left
    assert not (dst / "d1" / "s0" / "f00").exists()


def test_an_interrupted_shard_exits_130_leaving_only_whole_files(
    tmp_path: Path,
) -> None:
    """SIGINT while a (throttled) shard copies: exit 130 saying so, not every file
    copied, each one there whole under its own name, and no temporary left."""
    spec: Spec = {
        f"f{i:02}": File(b"%02d\n" % i * 5000, 0o644, T0) for i in range(FILES)
    }
    src = make_tree(tmp_path / "src", spec)
    manifest, dst = tmp_path / "plan.json", tmp_path / "dst"
    assert planned(src, manifest, 1) == 1
    args = ["copy", "--manifest", manifest, "--shard", 0, "--ops-throttle", 5, dst]
    proc = start(args, environ())
    try:
        started = time.monotonic()
        while not (dst.exists() and any(dst.iterdir())):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - started < 30, "no file arrived in 30 s"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=PROMPT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err, err
    names = sorted(os.listdir(dst))
    assert 0 < len(names) < FILES, names
    assert set(names) <= set(spec), f"not the source's names: {names}"
    for name in names:
        assert (dst / name).read_bytes() == (src / name).read_bytes(), name
