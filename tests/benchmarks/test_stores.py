"""The object-store benchmark (benchmarks/stores.py, storereport.py): each run is
verified byte for byte against its source, its requests are counted through the
proxy, and the report's targets come from verified runs only.

The runs here use rcp and s3fs of this venv and Airflow's ObjectStoragePath, on tiny
trees, without the proxy's delay; rclone (``make bench-system``) is the full
benchmark's."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import storereport, stores
from benchmarks.storeproxy import Kind
from benchmarks.stores import CELLS, Cell, Report, Run, Scale, Tool

TINY = Scale(
    dirs=2, per_dir=3, small=1024, large_count=1, large=2 << 20, across_per_dir=2
)


def _cell(cell_id: str, *tools: Tool) -> Cell:
    return replace(next(c for c in CELLS if c.id == cell_id), tools=tools)


S3FS_PUT = next(t for t in CELLS[0].tools if t.id == "s3fs")
COPIES_NOTHING = Tool("nothing", "true", lambda stage, src, dst: ["true"])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    cells = (
        _cell("up_small", stores.RCP, S3FS_PUT, COPIES_NOTHING),
        _cell("down_large", stores.RCP),
        _cell("rerun", stores.RCP_RERUN),
        _cell("touched", stores.RCP_RERUN),
        _cell("across", stores.RCP, stores.OSP),
        _cell("within", stores.RCP),
        _cell("listing", stores.LISTS_TENTH, stores.LISTS_ALL),
    )
    return stores.bench(
        python=sys.executable,
        scale=TINY,
        reps=1,
        delay_s=0.0,
        work=tmp_path_factory.mktemp("work"),
        cells=cells,
        say=lambda line: None,
    )


def _run(report: Report, cell: str, tool: str) -> Run:
    return next(r for r in report.runs if r.cell == cell and r.tool == tool)


def test_each_copy_is_verified_and_one_that_copied_nothing_fails(
    report: Report,
) -> None:
    failed = {(r.cell, r.tool): r.problem for r in report.runs if not r.ok}
    assert list(failed) == [("up_small", "nothing")], failed
    assert failed["up_small", "nothing"].startswith("0 files, expected 6"), failed
    assert report.trees["up_small"] == {
        "files": 6,
        "directories": 3,
        "bytes": 6 * 1024,
        "touched": 1,
    }


def test_the_requests_of_each_run_are_counted_through_the_proxy(
    report: Report,
) -> None:
    up = _run(report, "up_small", "rcp")
    assert up.requests[Kind.PUT.value] == 6 + 3, up  # files and directory markers
    assert up.sent >= 6 * 1024
    assert up.emulator_cpu_s > 0
    assert up.proxy_cpu_s > 0
    rerun = _run(report, "rerun", "rcp")
    assert not any(rerun.requests.get(k.value) for k in storereport.DATA), rerun
    within = _run(report, "within", "rcp")
    assert within.requests[Kind.COPY.value] == 6, within
    assert Kind.GET.value not in within.requests, within
    across = _run(report, "across", "osp")
    assert across.requests[Kind.GET.value] == 4, across  # every object read
    down = _run(report, "down_large", "rcp")
    assert down.received >= 2 << 20, down


def test_a_dry_run_lists_the_filled_prefix_and_says_each_object(
    report: Report,
) -> None:
    """The listing cell's prefixes are made in the benchmark's moto (600 and 60
    objects here); a dry run reads no object, writes nothing, and is ok only when
    it said it would copy each one."""
    assert report.trees["listing"] == {
        "files": 600,
        "directories": 1,
        "bytes": 600,
        "touched": 0,
        "files_rcp_all": 600,
        "files_rcp_tenth": 60,
    }
    for tool in ("rcp_all", "rcp_tenth"):
        run = _run(report, "listing", tool)
        assert run.ok, run
        assert run.requests[Kind.LIST.value] >= 1, run
        assert not any(run.requests.get(k.value) for k in storereport.DATA), run
    problem = stores._dry_problem(Path("/dev/null"), "/nonexistent", 3)
    assert problem == "0 files would be copied, expected 3"


def test_the_targets_come_from_verified_runs_only(report: Report) -> None:
    found = {f"{t.scenario}: {t.target}": t for t in storereport.targets(report)}
    rerun = found["Unchanged rerun: no data request, HEAD <= directories + 2"]
    assert rerun.status == "met", rerun
    assert found["Rerun after touching 1%: exactly those uploaded"].status == "met"
    within = found["Within one bucket: no object data through the client"]
    assert within.status == "met", within
    listing = found["Listing 1M objects: peak RSS within 1.5x of 100k's"]
    assert listing.status in ("met", "missed"), listing
    assert "600 vs 60 objects" in listing.measured, listing
    # No s3fs run in the download cell, no rclone anywhere: not measured, not met.
    assert found["Download, large files: wall, rcp <= s3fs"].status == "not measured"
    assert found["Upload, small files: wall, rcp < rclone"].status == "not measured"
    text = storereport.render(report)
    assert "| true | FAILED 1/1: 0 files, expected 6" in text, text


def _figures(requests: dict[str, float], cpu: float) -> storereport.Figures:
    return storereport.Figures(
        runs=1,
        failures=0,
        problem="",
        wall=None,
        requests=requests,
        sent=0.0,
        received=0.0,
        emulator_cpu=1.0,
        proxy_cpu=0.5,
        cpu=cpu,
        rss_mib=50.0,
    )


def test_a_missed_target_says_what_was_measured_to_miss_it() -> None:
    """The requests rcp made beyond a peer's, by kind (and those it saved); how busy
    the shared cores were; a met target or one not measured says no such thing."""
    ours = _figures({"get": 10, "head": 3, "list": 2}, cpu=3.0)
    theirs = _figures({"get": 10, "list": 1, "put": 4}, cpu=1.0)
    assert storereport._extra_requests(ours, theirs) == (
        "rcp made +3 HEAD, +1 LIST; -4 PUT"
    )
    assert storereport._cpu_bound(ours, theirs, 5.0, 2) == (
        "2 cores 45% busy in rcp's run (tool 3.00 + emulator 1.00 + proxy 0.500 "
        "CPU-s); tool CPU 3.00 s vs 1.00 s"
    )
    missed = storereport._result("s", "t", "m", False, "because")
    assert (missed.status, missed.margin) == ("missed", "because")
    assert storereport._result("s", "t", "m", True, "because").margin == ""
    unmeasured = storereport._result("s", "t", missed_because="because")
    assert unmeasured.margin == "no verified run on a side"


def test_a_report_reads_back_as_written_and_renders_again(
    report: Report, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores.save(report, tmp_path / "stores.json")
    assert stores.load(tmp_path / "stores.json") == report
    out = tmp_path / "stores.md"
    assert (
        stores.main(["--report-only", str(tmp_path / "stores.json"), "--out", str(out)])
        == 0
    )
    assert out.read_text() == storereport.render(report) == capsys.readouterr().out


def test_a_partial_rerun_keeps_the_other_cells_runs(report: Report) -> None:
    """``--keep``: the cells run again replace theirs, the others stay, and the
    header says which were run again, when and how often."""
    now = Report(
        {**report.meta, "started": "2026-12-05 01:00:00 UTC", "reps": 3},
        {"within": {"files": 1}},
        [replace(_run(report, "within", "rcp"), wall_s=1.5)],
    )
    kept = stores.merged(report, now)
    assert [r for r in kept.runs if r.cell == "within"] == now.runs
    assert [r for r in kept.runs if r.cell != "within"] == [
        r for r in report.runs if r.cell != "within"
    ]
    assert kept.trees == {**report.trees, "within": {"files": 1}}
    assert kept.meta["started"] == (
        f"{report.meta['started']} (cells within: 2026-12-05 01:00:00 UTC, 3 runs a tool)"
    )
    assert kept.meta["reps"] == report.meta["reps"]


def test_a_run_of_another_scale_or_unreadable_is_not_kept(
    report: Report, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores.save(report, tmp_path / "earlier.json")
    with pytest.raises(SystemExit) as refused:
        stores.main(
            ["--python", sys.executable, "--keep", str(tmp_path / "earlier.json")]
        )
    assert refused.value.code == 2
    assert "another scale or delay: not kept" in capsys.readouterr().err
    (tmp_path / "torn.json").write_text('{"meta": {}')
    with pytest.raises(SystemExit) as refused:
        stores.main(["--python", sys.executable, "--keep", str(tmp_path / "torn.json")])
    assert refused.value.code == 2
    assert "torn.json is no store benchmark's runs" in capsys.readouterr().err
