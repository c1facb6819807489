"""The benchmark harness's own pieces, fast and deterministic.

Covers: median/min-max math, verification catching wrong copies (missing file, wrong
size, same size but wrong bytes) and honouring each tool's symlink semantics, the
JSON round trip, report and plots from a small synthetic results.json (a failed tool
shows FAILED, never a time; targets met or missed by the right margin), the child
measurement, plan narrowing, a trial of a deliberately wrong tool, the busy-loop
neighbours and the shared cpu cgroup of the contended cells, and a tiny
end-to-end run of ``python -m benchmarks.harness``. Caches are never dropped here (the
machine is shared); the real runs do that.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.harness import __main__ as harness_main
from benchmarks.harness import baseline, chores, cpugroup, plots, report
from benchmarks.harness.aggregate import CONFIRMED, auto_vs_best, outcomes
from benchmarks.harness.bypass import bypassed
from benchmarks.harness.cache import CacheControl
from benchmarks.harness.filesets import FILESETS, materialize
from benchmarks.harness.filesystems import (
    BUSY_LOOP,
    FsOptions,
    Mounted,
    busy_ext4,
    busy_loop,
    ext4_dir,
    shared_ext4,
)
from benchmarks.harness.measure import measure
from benchmarks.harness.plan import (
    ALL_TOOLS,
    FULL,
    PROFILES,
    QUICK,
    Cell,
    restrict,
    validate,
)
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
from benchmarks.harness.tools import (
    BASELINES,
    COMPARE_TOOLS,
    RCP_VAR,
    RCPD_VAR,
    REMOVE_TOOLS,
    Tool,
    ToolEnv,
    chore_of,
    toolbox,
)
from benchmarks.harness.trial import Bench, Round, Source, expectations
from benchmarks.harness.verify import census, compare
from benchmarks.mounts import fstype_of
from rcp_core.run.runtime import Kind
from rcp_core.site.storage import detect
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


def test_a_large_file_miss_shows_the_copy_less_each_tools_fixed_cost() -> None:
    results = synthetic()
    walls = {
        ("tiny", "cp_r"): 0.003,
        ("tiny", "rcp_auto"): 0.055,
        ("100m_3", "cp_r"): 0.073,
        ("100m_3", "rcp_auto"): 0.097,
    }
    results.samples = [
        _sample(tool, wall, rep=i, fileset=fileset)
        for (fileset, tool), wall in walls.items()
        for i in range(3)
    ]
    rows = {(r.target, r.scenario): r for r in check(results)}
    large = rows[("Large files, ext4: <= 1.05x cp", "ext4 100m_3 warm")]
    assert large.status == "missed"  # 0.097 / 0.073 = 1.33
    assert "fixed cost (tiny tree): rcp 0.055 s, cp -r 0.003 s" in large.evidence
    # Less their start-up, rcp copies in 0.042 s what cp -r copies in 0.070 s.
    assert large.evidence.endswith("less it: rcp 0.042 s, cp -r 0.07 s (0.60x)")


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
        "## Targets (issue 3; the Airflow operator (issue 5), fsspec (issue 6) and "
        "tree chores (issue 7) rows)" in text
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


def _cpu_ticks(pid: int) -> int:
    """User plus system clock ticks ``pid`` has used (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_the_busy_loop_spins_until_its_with_ends() -> None:
    with busy_loop() as spinner:
        before = _cpu_ticks(spinner.pid)
        time.sleep(0.5)
        assert spinner.poll() is None
        # It burns CPU: a tenth of a core at the least (alone, it takes a whole one).
        assert _cpu_ticks(spinner.pid) - before >= 0.1 * os.sysconf("SC_CLK_TCK")
    assert spinner.returncode is not None
    assert not Path(f"/proc/{spinner.pid}").exists()


@pytest.mark.privileged  # the ext4 filesystem's fresh volume is a loop mount
def test_the_busy_ext4_is_the_ext4_directory_beside_a_busy_loop(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    with busy_ext4(work, FsOptions(ext4_bytes=1 << 30)) as mounted:
        assert mounted.name == "ext4busy"
        assert mounted.root == work / "ext4"
        assert mounted.fresh is not None
        assert "busy loop" in mounted.detail
        spinners = _busy_loops()
        assert len(spinners) == 1
    assert _busy_loops() == []


@pytest.mark.privileged  # a loop mount and a cgroup
def test_the_shared_ext4_puts_the_busy_loop_in_the_copys_cpu_group(
    tmp_path: Path,
) -> None:
    group = cpugroup.cpu_hierarchy() / cpugroup.NAME
    with shared_ext4(tmp_path / "work", FsOptions(ext4_bytes=1 << 30)) as mounted:
        assert mounted.name == "ext4shared"
        [spinner] = _busy_loops()
        members = set((group / "cgroup.procs").read_text().split())
        assert {str(os.getpid()), str(spinner)} <= members
    assert _busy_loops() == []
    assert not group.exists()


@pytest.mark.privileged  # cgroups are root's
def test_the_shared_cpu_group_holds_this_process_and_its_children_then_goes() -> None:
    before = Path("/proc/self/cgroup").read_text()
    with cpugroup.shared_cpu_group() as group:
        assert str(os.getpid()) in (group / "cgroup.procs").read_text().split()
        child = subprocess.run(
            ["cat", "/proc/self/cgroup"], capture_output=True, text=True, check=True
        )
        assert f"/{cpugroup.NAME}" in child.stdout
    assert Path("/proc/self/cgroup").read_text() == before
    assert not group.exists()


@pytest.mark.privileged  # cgroups are root's
def test_a_leftover_cpu_group_is_named_while_it_has_members_then_replaced() -> None:
    leftover = cpugroup.cpu_hierarchy() / cpugroup.NAME
    leftover.mkdir()
    try:
        with busy_loop() as spinner:
            (leftover / "cgroup.procs").write_text(str(spinner.pid))
            with (
                pytest.raises(cpugroup.CgroupUnavailable, match=str(leftover)),
                cpugroup.shared_cpu_group(),
            ):
                pass
        with cpugroup.shared_cpu_group() as group:  # empty now: made anew
            assert group == leftover
        assert not leftover.exists()
    finally:
        if leftover.exists():
            leftover.rmdir()


def _busy_loops() -> list[int]:
    """Pids of the children of this process running the busy loop."""
    mine = str(os.getpid())
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if (
            text.rsplit(")", 1)[1].split()[1] == mine
            and BUSY_LOOP[2].encode() in cmdline
        ):
            found.append(int(stat.parent.name))
    return found


def _copies(root: Path) -> list[str]:
    """The entries of a destination root, besides a new ext4's lost+found."""
    return sorted(p.name for p in root.iterdir() if p.name != "lost+found")


def test_a_tool_that_cannot_run_is_marked_with_the_reason(
    tmp_path: Path, optional_peers: Mapping[str, str]
) -> None:
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
    assert tools["rclone"].problem is None  # the version is the tool's first line
    assert tools["rclone"].version == optional_peers["rclone"]
    assert list(tools) == list(ALL_TOOLS)


def test_a_peer_that_is_not_installed_is_marked_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer missing from ``PATH`` (rclone and b3sum on a machine without ``make
    bench``, here every program) is marked, never probed nor run."""
    nothing = tmp_path / "empty-bin"
    nothing.mkdir()
    monkeypatch.setenv("PATH", str(nothing))
    tools = toolbox(_chore_env(tmp_path, None))
    for tid, program in (("rclone", "rclone"), ("b3sum", "b3sum"), ("cp_r", "cp")):
        assert tools[tid].problem == f"{program} is not installed"
        assert tools[tid].version == ""
    assert tools["shutil"].problem is None  # what needs no program still runs


def _filegen() -> str:
    exe = Path(sys.executable).with_name("rcp-filegen")
    if not exe.exists():
        pytest.skip("rcp-filegen is not installed in this venv")
    return str(exe)


# --- end to end -------------------------------------------------------------------


def _harness(argv: list[str], out: Path) -> Results:
    """Run the harness (``argv``), which must succeed with every run ok; its results."""
    proc = subprocess.run(
        argv,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    results = load(out / "results.json")
    assert all(s.ok for s in results.samples)
    return results


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
    results = _harness(argv, out)
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


# --- tree chores (issue 7) -----------------------------------------------------------


def _chore_env(tmp_path: Path, rcp: str | None) -> ToolEnv:
    return ToolEnv(
        python=sys.executable,
        rcp=rcp,
        airflow_python=None,
        airflow_problem="not needed",
        airflow_home=tmp_path,
        repo=REPO,
    )


def _venv_entry(name: str) -> str:
    exe = Path(sys.executable).with_name(name)
    if not exe.exists():
        pytest.skip(f"{name} is not installed in this venv")
    return str(exe)


def test_chore_tools_are_command_lines_beside_the_measured_rcp(
    tmp_path: Path, optional_peers: Mapping[str, str]
) -> None:
    tools = toolbox(_chore_env(tmp_path, _venv_entry("rcp")))
    src, dst = Path("/s r c"), Path("/d 's't")
    bindir = Path(sys.executable).parent
    assert tools["rm_rf"].argv(src, dst) == ["rm", "-rf", "--", str(dst)]
    assert tools["rrm"].argv(src, dst) == [str(bindir / "rrm"), str(dst)]
    assert tools["rcmp"].argv(src, dst) == [
        str(bindir / "rcmp"),
        "--checksum",
        str(src),
        str(dst),
    ]
    for tid in ("sha256sum", "b3sum"):  # paths reach the script as parameters only
        script = tools[tid].argv(src, dst)
        assert script[:2] == ["sh", "-c"]
        assert script[3:] == [tid, str(src), str(dst)]
        assert str(src) not in script[2]
    chores = {t.id: t.chore for t in tools.values() if t.chore != "copy"}
    assert chores == {
        "rm_rf": "remove",
        "rrm": "remove",
        "sha256sum": "compare",
        "b3sum": "compare",
        "rcmp": "compare",
    }
    assert all(t.chore == chore_of(t.id) for t in tools.values())
    assert tools["rrm"].problem is None
    assert tools["rcmp"].problem is None
    assert tools["rm_rf"].version.startswith("rm (GNU coreutils)")
    assert tools["sha256sum"].version.startswith("sha256sum (GNU coreutils)")
    assert tools["b3sum"].problem is None
    assert tools["b3sum"].version == optional_peers["b3sum"]
    # An rcp installed without its companions: the chores are marked, never run.
    lone = tmp_path / "bin" / "rcp"
    lone.parent.mkdir()
    lone.symlink_to(sys.executable)
    alone = toolbox(_chore_env(tmp_path, str(lone)))
    assert (
        alone["rrm"].problem == f"no rrm beside {lone} (looked for {lone.parent}/rrm)"
    )
    assert alone["rcmp"].problem is not None
    assert alone["rm_rf"].problem is None


def test_serial_hashing_tells_a_copy_from_a_changed_one(tmp_path: Path) -> None:
    tools = toolbox(_chore_env(tmp_path, None))
    hashers = [tools["sha256sum"], tools["b3sum"]]  # b3sum: the stand-in (conftest)
    assert [t.problem for t in hashers] == [None, None]
    src = _tree(tmp_path / "s r'c")  # symlinks (one dangling) are not hashed
    copy = _copy(src, tmp_path / "co $(py)")

    def exit_codes() -> list[int]:
        return [
            subprocess.run(t.argv(src, copy), check=False, timeout=60).returncode
            for t in hashers
        ]

    assert exit_codes() == [0] * len(hashers)
    (copy / "a" / "one").write_bytes(b"0" * 10)  # same size, other bytes
    assert exit_codes() == [1] * len(hashers)
    (copy / "a" / "one").write_bytes(b"1" * 10)
    (copy / "a" / "b" / "two").rename(copy / "a" / "b" / "tw0")  # same bytes, renamed
    assert exit_codes() == [1] * len(hashers)


def _plain(root: Path) -> Mounted:
    """A plain directory as a filesystem: no mount, so no root needed."""
    (root / "dst").mkdir(parents=True)
    return Mounted("plain", root, root, "any", "a directory", False, False)


def _chore_round(
    tmp_path: Path, tools: list[Tool], *, batch: bool
) -> tuple[list[Sample], list[list[str]], Path]:
    """Run ``tools`` in one warm round on a small tree; the samples, the entries of
    the destination root after each run, and the work area."""
    work = tmp_path / "work"
    bench = Bench(work, CacheControl(drop=False), timeout_s=60)
    bench.prepare()
    mounted = _plain(tmp_path / "fs")
    fileset = FILESETS["tiny"]
    direct = _tree(mounted.src / fileset.id)
    source = Source(
        fileset, direct, direct, expectations(fileset, direct, {"preserve"})
    )
    samples, left = [], []
    with Round(bench, mounted, source, "warm", batch=batch) as round_:
        for i, tool in enumerate(tools):
            samples.append(round_.run(tool, rep=0, position=i, seq=i + 1))
            left.append(_copies(mounted.dst))
    assert _copies(mounted.dst) == []  # everything made was deleted
    assert list((work / "warmup").iterdir()) == [work / "warmup" / "src"]
    return samples, left, work


def test_a_removal_round_removes_an_untimed_copy_per_tool(tmp_path: Path) -> None:
    tools = toolbox(_chore_env(tmp_path, _venv_entry("rcp")))
    keeper = replace(tools["rm_rf"], id="keeper", argv=lambda s, d: ["true"])
    samples, left, _ = _chore_round(
        tmp_path, [tools["rm_rf"], tools["rrm"], keeper], batch=True
    )
    rm_rf, rrm, kept = samples
    for sample in (rm_rf, rrm):
        assert sample.ok, sample.problem
        assert (sample.files, sample.bytes) == (3, 130)  # what was removed
        assert sample.wall_s > 0
    assert not kept.ok
    assert kept.problem == "the tree is still there after its removal"
    assert left == [[], [], ["tiny-warm-r0-keeper-3"]]


def test_a_chore_whose_tree_cannot_be_made_fails_untimed(tmp_path: Path) -> None:
    tools = toolbox(_chore_env(tmp_path, None))
    bench = Bench(tmp_path / "work", CacheControl(drop=False), timeout_s=60)
    bench.prepare()
    mounted = _plain(tmp_path / "fs")
    fileset = FILESETS["tiny"]
    expected = expectations(fileset, _tree(tmp_path / "was"), {"preserve"})
    gone = Source(fileset, mounted.src / "gone", mounted.src / "gone", expected)
    with Round(bench, mounted, gone, "warm", batch=True) as round_:
        sample = round_.run(tools["rm_rf"], rep=0, position=0, seq=1)
    assert not sample.ok
    assert sample.problem.startswith(
        "untimed copy of the source for rm_rf failed: exit 1: cp: cannot stat"
    )
    assert sample.wall_s == 0.0
    assert _copies(mounted.dst) == []


@pytest.mark.parametrize("batch", [True, False])
def test_a_comparison_round_shares_one_untimed_copy(
    tmp_path: Path, batch: bool
) -> None:
    tools = toolbox(_chore_env(tmp_path, _venv_entry("rcp")))
    liar = replace(tools["rcmp"], id="liar", argv=lambda s, d: ["sh", "-c", "exit 1"])
    samples, left, work = _chore_round(
        tmp_path, [tools["sha256sum"], tools["rcmp"], liar], batch=batch
    )
    sha, rcmp, lied = samples
    for sample in (sha, rcmp):
        assert sample.ok, sample.problem
        assert (sample.files, sample.bytes) == (3, 130)  # what was compared
    assert not lied.ok
    assert lied.problem == "exit 1: a difference reported between identical trees"
    # One copy for the round; a round that deletes after every run makes it again.
    assert left == ([["tiny-warm-r0-copy-1"]] * 3 if batch else [[], [], []])
    out = (work / "logs" / "rcmp" / "stdout").read_text().splitlines()
    assert '"same": true' in out[-1]


def test_chore_cells_hold_one_chore_and_validate() -> None:
    for plan in PROFILES.values():
        validate(plan)
        kinds = [{chore_of(t) for t in c.tools or ()} for c in plan.cells]
        assert all(len(k) == 1 for k in kinds)
        chored = {
            (c.fs, c.fileset, chore_of(c.tools[0]))
            for c in plan.cells
            if c.tools and chore_of(c.tools[0]) != "copy"
        }
        expected = {("ext4", "remove"), ("fuse", "remove"), ("ext4", "compare")}
        if plan.name == "compare":  # the previous build beside this one: copies only
            expected = set()
        assert {(fs, kind) for fs, _, kind in chored} == expected
    full = {(c.fs, c.fileset, c.modes) for c in FULL.cells if c.tools == REMOVE_TOOLS}
    assert full == {
        ("ext4", "1k_50k", ("warm",)),
        ("ext4", "1k_10k", ("cold",)),
        ("fuse", "1k_200", ("warm",)),
    }
    compared = {(c.fs, c.fileset) for c in FULL.cells if c.tools == COMPARE_TOOLS}
    assert compared == {("ext4", "mixed"), ("ext4", "100m_3"), ("ext4", "1g_4")}
    bad = replace(QUICK, cells=(Cell("ext4", "1k_10k", tools=("cp_r", "rrm")),))
    with pytest.raises(ValueError, match="mixes copy and remove tools"):
        validate(bad)
    small = restrict(
        QUICK,
        filesets=("1k_10k",),
        filesystems=("ext4",),
        tools=("rm_rf", "rrm"),
        modes=("warm",),
        reps=2,
        confirm_reps=0,
    )
    assert small.runs() == 4


def _chore_results() -> Results:
    """rrm against rm -rf, rcmp against the hashers, beside the synthetic copies."""
    base = synthetic()
    base.tools += [
        ToolInfo("rm_rf", "rm -rf", "rm -rf TREE", "9.4", "", "peer", chore="remove"),
        ToolInfo("rrm", "rrm", "rrm TREE", "0.1", "", "rcp", chore="remove"),
        ToolInfo("sha256sum", "sha256sum", "...", "9.4", "", "peer", chore="compare"),
        ToolInfo("b3sum", "b3sum", "...", "1.2", "", "peer", chore="compare"),
        ToolInfo("rcmp", "rcmp --checksum", "...", "0.1", "", "rcp", chore="compare"),
    ]
    base.filesets += [
        FilesetInfo("1k_10k", "10,000 x 1 KiB", "...", 10_000, 10_240_000, 100, 0),
        FilesetInfo("1k_200", "200 x 1 KiB", "...", 200, 204_800, 100, 0),
        FilesetInfo("mixed", "mixed", "...", 3_006, 178_000_000, 87, 4),
        FilesetInfo("100m_3", "3 x 100 MiB", "...", 3, 314_572_800, 0, 0),
    ]
    walls: dict[tuple[str, str, Mode, str], list[float]] = {
        ("ext4", "1k_50k", "warm", "rm_rf"): [2.0, 2.1, 2.2],
        ("ext4", "1k_50k", "warm", "rrm"): [1.8, 1.9, 2.0],  # 0.90x: met
        ("ext4", "1k_50k", "cold", "rm_rf"): [4.0, 4.0, 4.0],
        ("ext4", "1k_50k", "cold", "rrm"): [4.6, 4.6, 4.6],  # 1.15x: missed
        ("ext4", "1k_10k", "warm", "rm_rf"): [0.5, 0.5, 0.5],
        ("ext4", "1k_10k", "warm", "rrm"): [0.4, 0.4, 0.4],  # met, scaled down
        ("fuse", "1k_200", "warm", "rm_rf"): [1.6, 1.6, 1.6],
        ("fuse", "1k_200", "warm", "rrm"): [0.25, 0.25, 0.25],  # 6.4x: missed
        ("ext4", "mixed", "warm", "sha256sum"): [1.0, 1.0, 1.0],
        ("ext4", "mixed", "warm", "b3sum"): [0.8, 0.8, 0.8],
        ("ext4", "mixed", "warm", "rcmp"): [0.3, 0.3, 0.3],  # 2.7x b3sum: met
        ("ext4", "100m_3", "warm", "sha256sum"): [0.9, 0.9, 0.9],
        ("ext4", "100m_3", "warm", "rcmp"): [0.6, 0.6, 0.6],  # 1.5x, no b3sum
    }
    base.samples += [
        _sample(tool, w, rep=i, fs=fs, fileset=fileset, mode=mode)
        for (fs, fileset, mode, tool), ws in walls.items()
        for i, w in enumerate(ws)
    ]
    return base


def test_chore_targets_say_met_or_missed_against_their_peers() -> None:
    rows = {
        (r.target, r.scenario): r
        for r in chores.targets(_chore_results())
        if r.status != "not measured"
    }
    ext4 = "rrm: <= 1.0x rm -rf on 1 KiB files (>= 50k), ext4"
    fuse = "rrm: >= 8x faster than rm -rf on 1 KiB files (200), latency FUSE"
    cmp = (
        "rcmp --checksum: >= 2x faster than serial hashing of both trees "
        "(the faster of sha256sum and b3sum)"
    )
    warm = rows[(ext4, "ext4 1k_50k warm")]
    assert warm.status == "met"
    assert warm.measured == "0.90x rm -rf (1.9 s vs 2.1 s)"
    assert warm.evidence == "rrm 0.75 CPU-s/s; rm -rf 0.75 CPU-s/s"
    cold = rows[(ext4, "ext4 1k_50k cold")]
    assert (cold.status, cold.margin) == ("missed", "missed by 15% of 1x")
    scaled = rows[(ext4, "ext4 1k_10k warm")]
    assert scaled.status == "met (scaled down)"
    assert scaled.margin.endswith("only 10,000 files (target: 50,000)")
    lat = rows[(fuse, "fuse 1k_200 warm")]
    assert lat.status == "missed"
    assert lat.measured.startswith("6.4x faster")
    mixed = rows[(cmp, "ext4 mixed warm")]
    assert mixed.status == "met"
    assert mixed.measured.startswith("2.7x faster (0.3 s vs 0.8 s)")
    assert "the faster hasher: b3sum --num-threads 1" in mixed.evidence
    large = rows[(cmp, "ext4 100m_3 warm")]
    assert large.status == "missed"
    assert "b3sum did not run" in large.evidence
    # Without chores every chore target is "not measured", with the reason.
    absent = chores.targets(synthetic())
    assert [r.status for r in absent] == ["not measured"] * 3
    assert absent[0].margin == "no 1k cell with rrm"


def test_report_shows_chores_in_tables_of_their_own(tmp_path: Path) -> None:
    results = _chore_results()
    text = report.write(results, tmp_path, plots.write_all(results, tmp_path))
    body = text.read_text()
    assert "tree chores (issue 7) rows)" in body
    complete, chore = body.split("## Complete results", 1)[1].split(
        "## Tree chores (issue 7)", 1
    )
    assert "| rrm |" not in complete  # not a copy: no ratio to cp
    assert "### ext4 / mixed" not in complete  # only chores ran there
    assert "### Removal: ext4 / 1k_50k (50,000 x 1 KiB)" in chore
    assert "| vs rm -rf (cold / warm) |" in chore
    removal = chore.split("### Removal: ext4 / 1k_50k", 1)[1]
    rrm_row = next(x for x in removal.splitlines() if x.startswith("| rrm |"))
    assert rrm_row.startswith("| rrm | 4.60 [4.60-4.60] | 1.90 [1.80-2.00] |")
    assert rrm_row.endswith("| 1.15 / 0.90 |")
    assert "### Content comparison: ext4 / 100m_3 (3 x 100 MiB)" in chore
    assert "| vs sha256sum (cold / warm) | vs b3sum (cold / warm) |" in chore


# --- the previous build beside this one (issue 24) ---------------------------------


def test_the_previous_build_is_planned_beside_rcp_wherever_it_runs() -> None:
    for profile in (QUICK, FULL):
        plan = restrict(profile, baseline=True)
        assert plan.runs() > profile.runs()
        for cell in plan.cells:
            alone, twinned = profile.tools_of(cell), plan.tools_of(cell)
            # Each tool of ours with automatic settings, and right after it its
            # twin from the previous build: in the same rounds, rotated alike.
            expected = [x for t in alone for x in (t, BASELINES.get(t)) if x]
            assert list(twinned) == expected, cell
            for tool, twin in BASELINES.items():
                assert (tool in profile.confirming(cell)) == (
                    twin in plan.confirming(cell)
                ), cell
    quick = restrict(
        QUICK,
        filesets=("tiny",),
        filesystems=("ext4", "netns"),
        tools=("cp_r", "rcp_auto", "rcp_w4", "rsync_ssh", "rcp_remote"),
        reps=2,
        confirm_reps=1,
        modes=("warm",),
        baseline=True,
    )
    assert [quick.tools_of(c) for c in quick.cells] == [
        ("cp_r", "rcp_auto", "rcp_base", "rcp_w4"),
        ("rsync_ssh", "rcp_remote", "rcp_remote_base"),
    ]
    assert quick.confirming(quick.cells[0]) == ("rcp_auto", "rcp_base")
    # ext4: 4 tools x 2 reps, then rcp, its twin and the best fixed setting once;
    # netns: 3 tools x 2 reps, no confirmation (nothing to compare rcp with there)
    assert quick.runs() == 4 * 2 + 3 + 3 * 2


def test_the_compare_profile_runs_both_builds_on_the_committed_cells(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = PROFILES["compare"]
    validate(plan)
    assert plan.baseline
    assert [(c.fs, c.fileset, c.modes) for c in plan.cells] == [
        (fs, fileset, ("warm",))
        for fs, fileset in (
            ("ext4", "1k_50k"),
            ("ext4", "linux"),
            ("ext4", "mixed"),
            ("fuse", "1k_200"),
            ("fuse", "1m_100"),
            ("tmpfs", "1k_10k"),
            ("xfs", "1g_4"),
            ("netns", "1k_50k"),
            ("netns", "linux"),
            ("netns", "1m_500"),
            ("netns", "1g_4"),
            ("netns1g", "1g_2"),
        )
    ]
    for cell in plan.cells:
        remote = cell.fs in ("netns", "netns1g")
        expected = (
            ("rcp_remote", "rcp_remote_base") if remote else ("rcp_auto", "rcp_base")
        )
        assert plan.tools_of(cell) == expected
    assert plan.reps % 2 == 0  # the rotation puts each build first equally often
    assert plan.runs() == len(plan.cells) * 2 * plan.reps
    # It has nothing to compare without the previous build: refused before any run.
    assert harness_main.main(["--compare", "--out", str(tmp_path)]) == 2
    assert "give its rcp with --baseline-rcp PATH" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_without_the_option_nothing_changes(tmp_path: Path) -> None:
    twins = set(BASELINES.values())
    for name in ("quick", "full"):
        plan = harness_main._plan(harness_main.parser().parse_args([f"--{name}"]))
        assert plan == PROFILES[name]
        assert not plan.baseline
        assert plan.tool_ids == plan.tools
        assert not any(twins & set(plan.tools_of(c)) for c in plan.cells)
        assert not any(twins & set(plan.confirming(c)) for c in plan.cells)
    assert not twins & set(ALL_TOOLS)
    assert not twins & set(toolbox(_chore_env(tmp_path, None)))
    assert "Previous build" not in report.render(synthetic())
    # With the option, the plan twins them.
    args = harness_main.parser().parse_args(["--quick", "--baseline-rcp", "/b/rcp"])
    assert harness_main._plan(args).baseline


def _installation(root: Path, version: str) -> Path:
    """A stand-in installation: rcp and rcpd, and a python that says ``version``."""
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    for name, script in (
        ("rcp", "exit 0"),
        ("rcpd", "exit 0"),
        ("python", f"echo airflow-provider-rcp {version}"),
    ):
        (bindir / name).write_text(f"#!/bin/sh\n{script}\n")
        (bindir / name).chmod(0o755)
    return bindir / "rcp"


def test_the_previous_build_runs_its_own_rcp_and_rcpd(tmp_path: Path) -> None:
    this = _installation(tmp_path / "this", "0.2.0")
    base = _installation(tmp_path / "base", "0.1.0")
    env = replace(
        _chore_env(tmp_path, str(this)), baseline_rcp=str(base), baseline_name="git abc"
    )
    tools = toolbox(env)
    src, dst = Path("/s"), Path("/d")
    assert tools["rcp_auto"].argv(src, dst) == [str(this), "/s", "/d"]
    assert tools["rcp_base"].argv(src, dst) == [str(base), "/s", "/d"]
    new, old = tools["rcp_remote"], tools["rcp_remote_base"]
    assert new.argv(src, dst) == old.argv(src, dst)  # the same script ...
    assert old.env == {RCP_VAR: str(base), RCPD_VAR: str(base.with_name("rcpd"))}
    assert new.env == {RCP_VAR: str(this), RCPD_VAR: str(this.with_name("rcpd"))}
    assert old.summary_json
    for twin in (tools["rcp_base"], old):
        assert twin.problem is None
        assert twin.version == "airflow-provider-rcp 0.1.0 (git abc)"
        assert twin.label.endswith(", previous build")
        assert (twin.family, twin.workers, twin.chore) == ("rcp", None, "copy")
    # Its rcpd missing: the remote twin is skipped with the reason, never run.
    base.with_name("rcpd").unlink()
    tools = toolbox(env)
    assert tools["rcp_remote_base"].problem == (
        f"no rcpd beside {base} (looked for {base.with_name('rcpd')})"
    )
    assert tools["rcp_base"].problem is None
    gone = toolbox(replace(env, baseline_rcp=str(tmp_path / "nothing" / "rcp")))
    assert gone["rcp_base"].problem == f"no rcp at {tmp_path / 'nothing' / 'rcp'}"


def _baseline_results() -> Results:
    """This build beside the previous one: just over 3% slower on ext4, 2% on tmpfs,
    5% on xfs, a wrong copy on mixed, a remote cell 10% faster."""
    walls: dict[tuple[str, str, str], list[float]] = {
        ("ext4", "1k_50k", "rcp_auto"): [1.00, 1.04, 1.02],
        ("ext4", "1k_50k", "rcp_base"): [0.99, 0.98, 1.10],  # median 0.99: 1.030
        ("tmpfs", "1k_10k", "rcp_auto"): [0.52, 0.51, 0.50],
        ("tmpfs", "1k_10k", "rcp_base"): [0.50, 0.51, 0.49],  # 1.02: within
        ("xfs", "1k_10k", "rcp_auto"): [0.40, 0.42, 0.41],
        ("xfs", "1k_10k", "rcp_base"): [0.39, 0.40, 0.39],  # 0.41 / 0.39: 1.051
        ("netns", "1k_50k", "rcp_remote"): [1.8, 1.8, 1.9],
        ("netns", "1k_50k", "rcp_remote_base"): [2.0, 1.9, 2.1],  # 0.9: +11.1%
    }
    results = synthetic()
    results.samples = [
        _sample(tool, w, rep=i, fs=fs, fileset=fileset)
        for (fs, fileset, tool), ws in walls.items()
        for i, w in enumerate(ws)
    ]
    results.samples += [
        _sample("rcp_auto", 0.2, fs="ext4", fileset="mixed", rep=0),
        _sample(
            "rcp_auto", 0.1, fs="ext4", fileset="mixed", rep=1, ok=False,
            problem="3005 files, expected 3006",
        ),
        _sample("rcp_base", 0.2, fs="ext4", fileset="mixed", rep=0),
        _sample("rcp_base", 0.2, fs="ext4", fileset="mixed", rep=1),
    ]  # fmt: skip
    old = "0.0.9 (git a)"
    results.tools += [
        ToolInfo("rcp_base", "rcp (auto), previous build", "rcp", old, "", "rcp"),
        ToolInfo("rcp_remote", "rcp over ssh (TLS)", "...", "0.1", "", "rcp"),
        ToolInfo(
            "rcp_remote_base",
            "rcp over ssh (TLS), previous build",
            "...",
            old,
            "",
            "rcp",
        ),
    ]
    results.meta["baseline_rcp"] = "/v/base/bin/rcp"
    return results


def test_the_comparison_gives_the_ratio_and_the_verdict() -> None:
    rows = {(p.fs, p.fileset): p for p in baseline.pairs(_baseline_results())}
    assert list(rows) == [
        ("ext4", "1k_50k"),
        ("tmpfs", "1k_10k"),
        ("xfs", "1k_10k"),
        ("netns", "1k_50k"),
        ("ext4", "mixed"),
    ]
    ext4 = rows[("ext4", "1k_50k")]
    assert ext4.ratio == pytest.approx(1.02 / 0.99)  # 1.0303: just over 3%
    assert ext4.within is False
    assert baseline.verdict(ext4) == "**over the 3% limit: 3.03% slower**"
    tmpfs = rows[("tmpfs", "1k_10k")]
    assert tmpfs.ratio == pytest.approx(0.51 / 0.50)
    assert tmpfs.within is True
    assert baseline.verdict(tmpfs) == "within 3%: 2.00% slower"
    remote = rows[("netns", "1k_50k")]
    assert remote.ratio == pytest.approx(0.9)
    assert remote.within is None  # no limit between hosts: the gain is reported
    assert baseline.verdict(remote) == "gained 11.1% (1.11x the speed)"
    wrong = rows[("ext4", "mixed")]
    assert wrong.ratio is None  # a wrong copy is a failure, never a time
    assert wrong.within is False
    assert (
        baseline.verdict(wrong) == "**FAILED** (this build): 3005 files, expected 3006"
    )
    faster = replace(tmpfs, new=tmpfs.old, old=tmpfs.new)
    assert baseline.verdict(faster) == "within 3%: 1.96% faster"
    lost = replace(remote, new=remote.old, old=remote.new)
    assert baseline.verdict(lost) == "lost 10.0% (0.90x the speed)"


def test_report_has_the_comparison_section_when_the_previous_build_ran(
    tmp_path: Path,
) -> None:
    results = _baseline_results()
    text = report.write(results, tmp_path).read_text()
    section = text.split("## Previous build vs this build", 1)[1].split("\n## ", 1)[0]
    assert "(`0.0.9 (git a)`, `/v/base/bin/rcp`) and this build (`0.1`)" in section
    assert (
        "| ext4 | 1k_50k | warm | rcp (auto) | 0.990 [0.980-1.10] (n=3) "
        "| 1.02 [1.00-1.04] (n=3) | 1.030 | 0.742 / 0.765 "
        "| **over the 3% limit: 3.03% slower** |"
    ) in section
    assert "| tmpfs | 1k_10k | warm | rcp (auto) |" in section
    assert "| 1.020 | 0.375 / 0.383 | within 3%: 2.00% slower |" in section
    assert (
        "| netns | 1k_50k | warm | rcp over ssh (TLS) | 2.00 [1.90-2.10] (n=3) "
        "| 1.80 [1.80-1.90] (n=3) | 0.900 |"
    ) in section
    assert (
        "| ext4 | mixed | warm | rcp (auto) | 0.200 [0.200-0.200] (n=2) | FAILED 1/2 | - |"
        in section
    )
    assert (
        "- One host: 1 of 4 within the 3% limit; **over it: ext4 1k_50k warm, "
        "xfs 1k_10k warm**; **failed: ext4 mixed warm**."
    ) in section
    assert (
        "- Between two hosts, this build gained: netns 1k_50k warm +11.1%." in section
    )
    # The twins are tools like any other in the complete results.
    assert "| rcp (auto), previous build | - | 0.990 [0.980-1.10] |" in text


def test_a_tiny_run_with_the_previous_build_interleaves_both(tmp_path: Path) -> None:
    _filegen()
    rcp = _venv_entry("rcp")  # the previous build is this one here: the plumbing
    out = tmp_path / "out"
    argv = [
        sys.executable, "-m", "benchmarks.harness", "--quick",
        "--filesets", "tiny", "--filesystems", "ext4", "--tools", "cp_r,rcp_auto",
        "--modes", "warm", "--reps", "2", "--confirm-reps", "0", "--no-drop-caches",
        "--baseline-rcp", rcp, "--baseline-name", "the same",
        "--work", str(tmp_path / "work"), "--out", str(out),
    ]  # fmt: skip
    results = _harness(argv, out)
    order = [(s.rep, s.position, s.tool) for s in results.samples]
    assert order == [
        (0, 0, "cp_r"),
        (0, 1, "rcp_auto"),
        (0, 2, "rcp_base"),
        (1, 0, "rcp_auto"),  # rotated by one
        (1, 1, "rcp_base"),
        (1, 2, "cp_r"),
    ]
    assert results.meta["baseline_rcp"] == rcp
    twin = results.tool("rcp_base")
    assert twin is not None
    assert twin.version.endswith("(the same)")
    text = (out / "report.md").read_text()
    assert "## Previous build vs this build" in text
    assert "| ext4 | tiny | warm | rcp (auto) |" in text
