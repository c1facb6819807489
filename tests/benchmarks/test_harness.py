"""The benchmark harness's own pieces, fast and deterministic.

Covers: median/min-max math, verification catching wrong copies (missing file, wrong
size, same size but wrong bytes) and honouring each tool's symlink semantics, the
JSON round trip, report and plots from a small synthetic results.json (a failed tool
shows FAILED, never a time; targets met or missed by the right margin), the child
measurement, plan narrowing, a trial of a deliberately wrong tool, and a tiny
end-to-end run of ``python -m benchmarks.harness``. Caches are never dropped here (the
machine is shared); the real runs do that.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.harness import plots, report
from benchmarks.harness.aggregate import CONFIRMED, auto_vs_best, outcomes
from benchmarks.harness.bypass import bypassed
from benchmarks.harness.cache import CacheControl
from benchmarks.harness.filesets import FILESETS, materialize
from benchmarks.harness.filesystems import FsOptions, ext4_dir
from benchmarks.harness.measure import measure
from benchmarks.harness.plan import ALL_TOOLS, QUICK, restrict
from benchmarks.harness.results import (
    FilesetInfo,
    FilesystemInfo,
    Mode,
    Results,
    Sample,
    ToolInfo,
    from_json,
    load,
    save,
    to_json,
)
from benchmarks.harness.stats import Spread, ratio, spread
from benchmarks.harness.targets import check
from benchmarks.harness.tools import Tool, ToolEnv, toolbox
from benchmarks.harness.trial import Bench, Round, Source, expectations
from benchmarks.harness.verify import census, compare
from benchmarks.mounts import fstype_of
from rcp_core.errors import Kind
from rcp_core.storage import detect
from support.treecmp import TreeCompare

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# --- stats -------------------------------------------------------------------------


def test_spread_is_median_with_min_and_max() -> None:
    s = spread([3.0, 1.0, 2.0])
    assert (s.median, s.low, s.high, s.count) == (2.0, 1.0, 3.0, 3)
    even = spread([10.0, 1.0, 3.0, 2.0])
    assert even.median == 2.5
    assert (even.low, even.high) == (1.0, 10.0)
    assert spread([4.0]).relative_range == 0.0
    assert s.relative_range == pytest.approx(1.0)


def test_spread_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="no values"):
        spread([])


def test_ratio_is_none_unless_both_sides_are_meaningful() -> None:
    two, four = Spread(2.0, 1.0, 3.0, 3), Spread(4.0, 4.0, 4.0, 1)
    assert ratio(two, four) == 0.5
    assert ratio(None, four) is None
    assert ratio(two, None) is None
    assert ratio(two, Spread(0.0, 0.0, 0.0, 1)) is None


# --- verification ------------------------------------------------------------------


def _tree(root: Path) -> Path:
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.txt").write_bytes(b"x" * 100)
    (root / "a" / "one").write_bytes(b"1" * 10)
    (root / "a" / "b" / "two").write_bytes(b"2" * 20)
    (root / "a" / "link").symlink_to("one")
    (root / "dirlink").symlink_to("a")
    (root / "dangling").symlink_to("no/such")
    return root


def _copy(src: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    return dst


def test_census_counts_regular_files_and_bytes(tmp_path: Path) -> None:
    c = census(_tree(tmp_path / "src"), hashes=True)
    assert (c.files, c.bytes, c.dirs, c.symlinks) == (3, 130, 2, 3)
    assert c.digests is not None
    assert sorted(c.digests) == ["a/b/two", "a/one", "top.txt"]


def test_census_follows_symlinks_as_asked(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    files = census(
        src, follow="files"
    )  # fsspec: a/link is a file, dirlink is not entered
    assert (files.files, files.bytes) == (4, 140)
    everything = census(src, follow="all")  # dirlink -> a: one, two and link again
    assert (everything.files, everything.bytes) == (7, 180)


def test_a_right_copy_verifies(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    dst = _copy(src, tmp_path / "dst")
    assert compare(census(src, hashes=True), census(dst, hashes=True)) == ""


def test_verification_catches_a_missing_file(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    dst = _copy(src, tmp_path / "dst")
    (dst / "a" / "b" / "two").unlink()
    problem = compare(census(src), census(dst))
    assert "2 files, expected 3" in problem
    assert "110 bytes, expected 130" in problem
    hashed = compare(census(src, hashes=True), census(dst, hashes=True))
    assert "missing: 1 (a/b/two)" in hashed


def test_verification_catches_wrong_bytes(tmp_path: Path) -> None:
    src = _tree(tmp_path / "src")
    dst = _copy(src, tmp_path / "dst")
    (dst / "top.txt").write_bytes(b"x" * 99)
    assert "129 bytes, expected 130" in compare(census(src), census(dst))


def test_verification_with_hashes_catches_same_size_wrong_content(
    tmp_path: Path,
) -> None:
    src = _tree(tmp_path / "src")
    dst = _copy(src, tmp_path / "dst")
    (dst / "a" / "one").write_bytes(b"0" * 10)
    assert compare(census(src), census(dst)) == ""  # counts alone cannot see it
    problem = compare(census(src, hashes=True), census(dst, hashes=True))
    assert problem == "content differs: 1 (a/one)"


# --- results, report, plots ----------------------------------------------------------


def _sample(
    tool: str,
    wall: float,
    *,
    mode: Mode = "warm",
    rep: int = 0,
    fileset: str = "1k_50k",
    **kw: object,
) -> Sample:
    fields: dict[str, object] = {
        "fs": "ext4",
        "fileset": fileset,
        "tool": tool,
        "mode": mode,
        "rep": rep,
        "position": 0,
        "wall_s": wall,
        "user_s": wall / 2,
        "sys_s": wall / 4,
        "maxrss_kib": 20480,
        "load1": 1.0,
        "exit_code": 0,
        "ok": True,
        "files": 50_000,
        "bytes": 51_200_000,
    }
    fields.update(kw)
    return Sample(**fields)  # type: ignore[arg-type]


def synthetic() -> Results:
    """A small run: rcp auto beats cp -r by 10%, fsspec copied wrongly once."""
    walls = {
        "cp_r": [2.0, 2.2, 2.1],
        "rsync_a": [4.0, 4.1, 3.9],
        "shutil": [5.0, 5.0, 5.0],
        "rcp_auto": [1.8, 1.9, 2.0],
        "rcp_w1": [3.0, 3.0, 3.0],
        "rcp_w4": [1.6, 1.7, 1.8],
    }
    samples = [
        _sample(t, w, rep=i) for t, ws in walls.items() for i, w in enumerate(ws)
    ]
    samples += [
        _sample("fsspec", 3.0, rep=0),
        _sample("fsspec", 0.5, rep=1, ok=False, problem="49000 files, expected 50000"),
        _sample("fsspec", 3.1, rep=2),
    ]
    labels = {"cp_r": "cp -r", "rsync_a": "rsync -a", "shutil": "shutil.copytree"}
    tools = [
        ToolInfo(t, labels.get(t, t), f"{t} SRC DST", "1.0", "", "peer")
        for t in ("cp_r", "rsync_a", "shutil", "fsspec")
    ]
    tools += [
        ToolInfo("rcp_auto", "rcp (auto)", "rcp SRC DST", "0.1", "", "rcp"),
        ToolInfo("rcp_w1", "rcp --max-workers 1", "rcp -w1", "0.1", "", "rcp", 1),
        ToolInfo("rcp_w4", "rcp --max-workers 4", "rcp -w4", "0.1", "", "rcp", 4),
    ]
    return Results(
        meta={
            "profile": "test",
            "reps": 3,
            "machine": {"cores": 2},
            "planned_runs": 21,
        },
        filesets=[
            FilesetInfo(
                "1k_50k",
                "50,000 x 1 KiB",
                "rcp-filegen ...",
                50_000,
                51_200_000,
                100,
                0,
            )
        ],
        filesystems=[FilesystemInfo("ext4", "ext4", "a directory", True)],
        tools=tools,
        samples=samples,
    )


def test_results_json_round_trips(tmp_path: Path) -> None:
    results = synthetic()
    assert from_json(to_json(results)) == results
    save(results, tmp_path / "results.json")
    assert load(tmp_path / "results.json") == results
    assert not (tmp_path / "results.json.tmp").exists()


def test_a_failed_run_makes_the_tool_failed_never_a_time() -> None:
    table = outcomes(synthetic())
    fsspec = table[("ext4", "1k_50k", "warm", "fsspec")]
    assert not fsspec.ok
    assert fsspec.wall is None
    assert (fsspec.failures, fsspec.runs) == (1, 3)
    assert fsspec.problem == "49000 files, expected 50000"
    rcp = table[("ext4", "1k_50k", "warm", "rcp_auto")].wall
    assert rcp == Spread(1.9, 1.8, 2.0, 3)


def test_auto_vs_best_picks_the_fastest_fixed_setting() -> None:
    (row,) = auto_vs_best(synthetic())
    assert (row.best_tool, row.best_workers) == ("rcp_w4", 4)
    assert row.ratio == pytest.approx(1.9 / 1.7)


def test_auto_vs_best_keeps_the_setting_the_run_confirmed() -> None:
    results = synthetic()
    results.tools.append(
        ToolInfo("rcp_w2", "rcp --max-workers 2", "rcp -w2", "0.1", "", "rcp", 2)
    )
    results.samples += [_sample("rcp_w2", 2.0, rep=i) for i in range(3)]
    # rcp_w4 was the best after three runs each; its confirmation runs were slower.
    results.samples += [_sample("rcp_w4", 2.2, rep=3 + i) for i in range(4)]
    results.meta[CONFIRMED] = {"ext4/1k_50k/warm": "rcp_w4"}
    (row,) = auto_vs_best(results)
    assert (row.best_tool, row.best.median, row.best.count) == ("rcp_w4", 2.2, 7)
    # Picking the minimum again would reward rcp_w2 for having run only three times.
    del results.meta[CONFIRMED]
    (row,) = auto_vs_best(results)
    assert row.best_tool == "rcp_w2"


def test_targets_say_met_or_missed_with_the_margin() -> None:
    rows = {(r.target.strip(), r.scenario): r for r in check(synthetic())}
    small = rows[
        ("1 KiB files (>= 50k), ext4, warm: <= 1.0x cp -r", "ext4 1k_50k warm")
    ]
    assert small.status == "met"
    assert small.measured.startswith("0.90x cp -r")
    assert "within 10% of 1x" in small.margin
    python = rows[("(same cell: < 0.5x shutil)", "ext4 1k_50k warm")]
    assert python.status == "met"  # 1.9 / 5.0 = 0.38
    rsync = rows[("(same cell: about 0.6x rsync -a)", "ext4 1k_50k warm")]
    assert rsync.status == "met"  # 1.9 / 4.0 = 0.475
    broken = rows[("(same cell: < 0.5x fsspec)", "ext4 1k_50k warm")]
    assert broken.status == "not measured"
    assert "fsspec failed" in broken.margin
    auto = rows[
        (
            "Automatic within 10% of the best fixed setting, every scenario",
            "all measured",
        )
    ]
    assert auto.status == "missed"  # 1.9 / 1.7 = 1.12
    assert "ext4 1k_50k warm (1.12x)" in auto.margin
    assert auto.evidence.startswith("ext4 1k_50k warm: CPU ")
    assert auto.evidence.endswith("s --max-workers 4")
    linux = rows[("Linux source tree, ext4, warm: <= 1.0x cp -a", "ext4 linux warm")]
    assert linux.status == "not measured"


def test_fsspec_target_asks_2x_on_ext4_and_8x_on_the_latency_fuse() -> None:
    base = synthetic()
    base.samples = [s for s in base.samples if s.tool != "fsspec"]
    for fs, ours, theirs in (("ext4", 1.5, 3.3), ("fuse", 0.5, 3.5)):
        base.samples += [
            _sample(tool, wall, rep=i, fs=fs)
            for i in range(3)
            for tool, wall in (("fsspec_rcp", ours), ("fsspec", theirs))
        ]
    rows = {r.scenario: r for r in check(base) if r.target.startswith("fsspec:")}
    assert rows["ext4 1k_50k warm"].status == "met"  # 2.2x, 2x asked
    assert rows["ext4 1k_50k warm"].measured.startswith("2.2x faster")
    assert rows["fuse 1k_50k warm"].status == "missed"  # 7x, 8x asked
    assert "8x" in rows["fuse 1k_50k warm"].target


@pytest.mark.parametrize(
    ("hooks", "bypassed", "status"),
    [([1.02, 1.0, 1.01], [1.0, 1.0, 1.0], "met"), ([1.1, 1.1], [1.0, 1.0], "missed")],
)
def test_hooks_target_compares_the_engine_with_and_without_its_plugin_layer(
    hooks: list[float], bypassed: list[float], status: str
) -> None:
    base = synthetic()
    extra = [_sample("rcp_hooks", w, rep=i) for i, w in enumerate(hooks)]
    extra += [_sample("rcp_nohooks", w, rep=i) for i, w in enumerate(bypassed)]
    results = replace(base, samples=[*base.samples, *extra])
    (row,) = [r for r in check(results) if r.target.startswith("Built-in hooks")]
    assert row.status == status
    assert row.scenario == "ext4 1k_50k warm"
    assert "x hooks bypassed" in row.measured
    (absent,) = [r for r in check(base) if r.target.startswith("Built-in hooks")]
    assert absent.status == "not measured"


@pytest.mark.parametrize("flag", [[], ["--bypass"]])
def test_the_bypass_script_copies_with_or_without_the_plugin_layer(
    tmp_path: Path, tree_compare: TreeCompare, flag: list[str]
) -> None:
    src = tmp_path / "src"
    for d in range(3):
        (src / f"d{d}").mkdir(parents=True)
        for f in range(20):
            (src / f"d{d}" / f"f{f}").write_bytes(b"%d" % f)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.harness.bypass",
            *flag,
            str(src),
            str(tmp_path / "dst"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert tree_compare(src, tmp_path / "dst") == []


def test_the_bypassed_manager_has_no_plugins_and_calls_the_builtin_directly(
    tmp_path: Path,
) -> None:
    pm = bypassed()
    assert pm.list_name_plugin() == []
    fd = os.open(tmp_path, os.O_PATH)
    try:
        assert pm.hook.rcp_detect_storage(path=str(tmp_path), fd=fd) == detect(fd)
    finally:
        os.close(fd)
    assert (
        pm.hook.rcp_classify_error(
            error=OSError(errno.EAGAIN, "again"), source=None, destination=None
        )
        is Kind.TRANSIENT
    )
    assert pm.hook.rcp_progress.get_hookimpls() == []


def test_report_from_a_synthetic_results_json(tmp_path: Path) -> None:
    save(synthetic(), tmp_path / "results.json")
    results = load(tmp_path / "results.json")
    names = plots.write_all(results, tmp_path)
    assert set(names) == {"time_warm.png", "sweep.png", "auto_vs_best.png"}
    for name in names:
        assert (tmp_path / name).read_bytes().startswith(PNG_MAGIC)
    text = report.write(results, tmp_path, names).read_text()
    assert (
        "## Targets (issue 3; the Airflow operator (issue 5) and fsspec (issue 6) rows)"
        in text
    )
    assert "### ext4 / 1k_50k (50,000 x 1 KiB)" in text
    # median [min-max], and the ratio vs cp -r (1.9 / 2.1).
    assert "| rcp (auto) | - | 1.90 [1.80-2.00] |" in text
    assert "0.90" in text
    # The wrong copy is a failure with its reason, and none of its times is shown.
    complete = text.split("## Complete results", 1)[1]
    (fsspec_row,) = [
        line for line in complete.splitlines() if line.startswith("| fsspec |")
    ]
    assert "FAILED 1/3: 49000 files, expected 50000" in fsspec_row
    assert "3.00" not in fsspec_row
    assert "0.500" not in fsspec_row
    auto = "| ext4 | 1k_50k | warm | 1.90 [1.80-2.00] | 1.70 [1.60-1.80] (N=4) | 1.12 |"
    assert auto + " **no** |" in text
    assert "![auto vs best fixed](auto_vs_best.png)" in text


# --- measurement, plan, trial -----------------------------------------------------


def test_measure_reports_exit_status_cpu_and_the_tools_own_peak_rss(
    tmp_path: Path,
) -> None:
    failed = measure(
        ["sh", "-c", "echo oops >&2; exit 3"], log_dir=tmp_path / "a", timeout_s=30
    )
    assert failed.exit_code == 3
    assert failed.stderr_tail == "oops"
    grow = "b = bytearray(64 * 1024 * 1024); sum(range(3_000_000))"
    m = measure([sys.executable, "-c", grow], log_dir=tmp_path / "b", timeout_s=60)
    assert m.exit_code == 0
    assert m.wall_s > 0
    assert m.user_s + m.sys_s > 0
    assert m.maxrss_kib >= 64 * 1024
    small = measure(["true"], log_dir=tmp_path / "c", timeout_s=30)
    if small.rss_source == "time":  # GNU time: the tool's own RSS, not the harness's
        assert small.maxrss_kib < 16 * 1024


def test_measure_kills_a_tool_past_its_timeout(tmp_path: Path) -> None:
    m = measure(["sleep", "30"], log_dir=tmp_path, timeout_s=0.5)
    assert m.timed_out
    assert m.wall_s < 10


def test_restrict_narrows_or_replaces_cells() -> None:
    plan = restrict(
        QUICK,
        filesets=("tiny",),
        filesystems=("ext4",),
        tools=("cp_r", "rcp_auto"),
        reps=1,
    )
    assert [(c.fs, c.fileset, c.modes) for c in plan.cells] == [
        ("ext4", "tiny", ("cold", "warm"))
    ]
    assert plan.tools_of(plan.cells[0]) == ("cp_r", "rcp_auto")
    assert plan.runs() == 4
    confirmed = restrict(
        QUICK,
        filesets=("tiny",),
        filesystems=("ext4",),
        tools=("cp_r", "rcp_auto", "rcp_w1", "rcp_w4"),
        reps=1,
        confirm_reps=2,
    )
    # per mode: 4 tools once, then 2 rounds of rcp_auto and the best fixed setting
    assert confirmed.confirm_rounds(confirmed.cells[0]) == 2
    assert confirmed.runs() == 2 * (4 + 2 * 2)
    warm = restrict(QUICK, filesystems=("tmpfs",), modes=("warm",))
    assert warm.cells
    assert all(c.fs == "tmpfs" and c.modes == ("warm",) for c in warm.cells)
    with pytest.raises(ValueError, match="unknown tool 'dd'"):
        restrict(QUICK, tools=("dd",))


@pytest.mark.privileged  # the ext4 filesystem's fresh volume is a loop mount
@pytest.mark.parametrize("batch", [True, False])
def test_a_wrong_copy_is_a_failed_sample(tmp_path: Path, batch: bool) -> None:
    work = tmp_path / "work"
    bench = Bench(work, CacheControl(drop=False), timeout_s=60)
    bench.prepare()
    fileset = FILESETS["tiny"]
    # Copies everything, then loses one file: fast, and wrong.
    script = 'cp -r "$1" "$2" && rm "$2/dir0/dir0/file0"'
    lossy = Tool(
        "lossy",
        "lossy cp",
        "peer",
        "preserve",
        "cp -r SRC DST; rm one file",
        lambda s, d: ["sh", "-c", script, "sh", str(s), str(d)],
    )
    with ext4_dir(work, FsOptions()) as mounted:
        direct = materialize(fileset, mounted.src, filegen=_filegen())
        source = Source(
            fileset, direct, direct, expectations(fileset, direct, {"preserve"})
        )
        with Round(bench, mounted, source, "warm", batch=batch) as round_:
            # Many small files: the copy goes to the fresh ext4, not the work disk.
            assert mounted.fresh is not None
            assert round_.dst_root == mounted.fresh.mnt
            assert fstype_of(round_.dst_root) == "ext4"
            sample = round_.run(lossy, rep=0, position=0, seq=1)
            # Batched rounds keep their copies until the end, others renew at once.
            assert _copies(round_.dst_root) == (
                ["tiny-warm-r0-lossy-1"] if batch else []
            )
        assert not sample.ok
        assert sample.exit_code == 0
        assert "19 files, expected 20" in sample.problem
        assert "missing: 1 (dir0/dir0/file0)" in sample.problem
        assert _copies(mounted.fresh.mnt) == []
        assert list(mounted.dst.iterdir()) == []
        assert list((work / "warmup").iterdir()) == [work / "warmup" / "src"]


def _copies(root: Path) -> list[str]:
    """The entries of a destination root, besides a new ext4's lost+found."""
    return sorted(p.name for p in root.iterdir() if p.name != "lost+found")


def test_a_tool_that_cannot_run_is_marked_with_the_reason(tmp_path: Path) -> None:
    env = ToolEnv(
        python=sys.executable,
        rcp=None,
        airflow_python=None,
        airflow_problem="pip install -r airflow-requirements.txt exited 1: no network",
        airflow_home=tmp_path,
        repo=REPO,
    )
    tools = toolbox(env)
    assert tools["airflow"].problem == env.airflow_problem
    assert tools["rcp_auto"].problem is not None
    assert "rcp entry point is not installed" in tools["rcp_auto"].problem
    assert tools["cp_r"].problem is None
    assert tools["cp_r"].version.startswith("cp (GNU coreutils)")
    assert list(tools) == list(ALL_TOOLS)


def _filegen() -> str:
    exe = Path(sys.executable).with_name("rcp-filegen")
    if not exe.exists():
        pytest.skip("rcp-filegen is not installed in this venv")
    return str(exe)


# --- end to end -------------------------------------------------------------------


def test_a_tiny_run_end_to_end_writes_report_results_and_plots(tmp_path: Path) -> None:
    _filegen()
    out = tmp_path / "out"
    argv = [
        sys.executable, "-m", "benchmarks.harness", "--quick",
        "--filesets", "tiny", "--filesystems", "ext4",
        "--tools", "cp_r,rcp_auto,rcp_w1,rcp_w4", "--modes", "warm", "--reps", "1",
        "--confirm-reps", "1", "--no-drop-caches",
        "--work", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = load(out / "results.json")
    assert all(s.ok for s in results.samples)
    runs = Counter(s.tool for s in results.samples)
    # one repetition of every tool, then one confirmation round: rcp auto beside
    # the better of the two fixed settings (recorded, so the report uses it too)
    best = results.meta[CONFIRMED]["ext4/tiny/warm"]
    assert best in ("rcp_w1", "rcp_w4")
    assert runs == {
        "cp_r": 1,
        "rcp_auto": 2,
        best: 2,
        ({"rcp_w1", "rcp_w4"} - {best}).pop(): 1,
    }
    assert all(s.files == 20 and s.bytes == 20 * 1024 for s in results.samples)
    text = (out / "report.md").read_text()
    assert "### ext4 / tiny" in text
    assert "| cp -r |" in text
    assert "| rcp (auto) |" in text
    assert (out / "time_warm.png").read_bytes().startswith(PNG_MAGIC)
    assert list((tmp_path / "work" / "ext4" / "dst").iterdir()) == []
