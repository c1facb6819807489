"""Command line: ``python -m benchmarks.harness [--quick|--full] [--out DIR] ...``.

Exit status: 0 when the run completed (failed tools are results, not errors), 2 on
bad arguments or a missing prerequisite, 130/143 when interrupted (the partial
results, report and plots are still written, and every mount is undone).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from benchmarks.harness import plots, report
from benchmarks.harness.airflow_env import VENV_NAME
from benchmarks.harness.cache import CacheControl
from benchmarks.harness.filesets import FILESETS
from benchmarks.harness.filesystems import FILESYSTEMS
from benchmarks.harness.plan import ALL_TOOLS, PROFILES, Plan, fs_options, restrict
from benchmarks.harness.results import MODES, Mode, Results, load, save
from benchmarks.harness.runner import Settings, run, say_stderr
from benchmarks.harness.tools import BASELINES

REPO = Path(__file__).resolve().parents[2]
DEFAULT_WORK = Path("/var/tmp/rcp-bench")
DEFAULT_OUT = REPO / "benchmarks" / "results"


def _ids(known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        ids = tuple(x.strip() for x in text.split(",") if x.strip())
        unknown = [x for x in ids if x not in known]
        if unknown or not ids:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or '(empty)'}; "
                f"expected some of {', '.join(known)}"
            )
        return ids

    return parse


def parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the README's option list)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.harness",
        description="Benchmark rcp against cp, rsync, rclone, shutil, fsspec and Airflow "
        "on ext4, XFS (reflink), tmpfs and a latency FUSE fs, and against rsync over "
        "ssh and rsync's daemon between two hosts (network namespaces); write "
        "report.md, results.json and PNG plots.",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--quick",
        dest="profile",
        action="store_const",
        const="quick",
        help="about 12 minutes (default)",
    )
    size.add_argument(
        "--full",
        dest="profile",
        action="store_const",
        const="full",
        help="at most about 95 minutes",
    )
    size.add_argument(
        "--compare",
        dest="profile",
        action="store_const",
        const="compare",
        help="issue 24's committed cells, rcp only, the previous build "
        "(--baseline-rcp) beside this one; about 40 minutes",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"report directory (default {DEFAULT_OUT})",
    )
    p.add_argument(
        "--work",
        type=Path,
        default=DEFAULT_WORK,
        help=f"scratch area on the ext4 disk (default {DEFAULT_WORK})",
    )
    p.add_argument(
        "--filesets",
        type=_ids(list(FILESETS)),
        help="replace the profile's cells by these filesets x filesystems",
    )
    p.add_argument(
        "--filesystems", type=_ids(list(FILESYSTEMS)), help="only these filesystems"
    )
    p.add_argument("--tools", type=_ids(ALL_TOOLS), help="only these tools")
    p.add_argument("--modes", type=_ids(MODES), help="only these modes (cold, warm)")
    p.add_argument("--reps", type=int, help="repetitions per cell (default 3)")
    p.add_argument(
        "--confirm-reps",
        type=int,
        help="confirmation rounds per cell: rcp automatic, the best fixed setting "
        "and the targets' references again (default: quick 1, full 4)",
    )
    p.add_argument(
        "--budget-min", type=float, help="start no new cell after this many minutes"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="seconds before one run is killed (default 600)",
    )
    p.add_argument(
        "--fuse-delay-ms",
        type=float,
        default=0.5,
        help="latencyfs delay per operation (default 0.5)",
    )
    p.add_argument(
        "--no-drop-caches",
        action="store_true",
        help="never drop caches (no cold runs; for tests)",
    )
    p.add_argument(
        "--rcp",
        type=Path,
        help="the rcp command to measure (default: the one beside this python; "
        "make bench passes a wheel install, as users run it)",
    )
    p.add_argument(
        "--baseline-rcp",
        type=Path,
        metavar="PATH",
        help="the rcp of another installation (the previous build) to measure beside "
        "this one wherever rcp runs with automatic settings, with the rcpd beside it "
        "(required by --compare; make bench-compare BASE=<rev> builds one)",
    )
    p.add_argument(
        "--baseline-name",
        default="",
        metavar="TEXT",
        help="what the report calls the previous build, e.g. its git commit",
    )
    p.add_argument("--list", action="store_true", help="print the plan and exit")
    p.add_argument(
        "--report-only",
        type=Path,
        metavar="RESULTS_JSON",
        help="only rewrite the report and plots from a results.json",
    )
    p.set_defaults(profile="quick")
    return p


def _plan(args: argparse.Namespace) -> Plan:
    modes: tuple[Mode, ...] | None = args.modes
    return restrict(
        PROFILES[args.profile],
        filesets=args.filesets,
        filesystems=args.filesystems,
        tools=args.tools,
        modes=modes,
        reps=args.reps,
        confirm_reps=args.confirm_reps,
        budget_s=None if args.budget_min is None else args.budget_min * 60,
        baseline=True if args.baseline_rcp is not None else None,
    )


def _print_plan(plan: Plan) -> None:
    print(
        f"profile {plan.name}: {plan.runs()} timed runs, "
        f"budget {plan.budget_s / 60:.0f} min"
    )
    if plan.baseline:
        twins = [f"{t} + {BASELINES[t]}" for t in plan.tools if t in BASELINES]
        print(f"  the previous build beside this one: {', '.join(twins)}")
    for c in plan.cells:
        tools = plan.tools_of(c)
        print(
            f"  {c.fs:7} {c.fileset:11} {','.join(c.modes):10} x{plan.reps_of(c)}  "
            f"{len(tools)} tools {c.note}"
        )
        if plan.confirm_rounds(c):
            best = " + the best fixed setting" if plan.confirms_best(c) else ""
            print(
                f"  {'':7} {'':11} {'':10} +{plan.confirm_rounds(c)} confirmations: "
                f"{', '.join(plan.confirming(c))}{best}"
            )


def _entry_point(name: str) -> str | None:
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else shutil.which(name)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds every `with`, so mounts are undone


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or list it, or re-render a report); return the exit status."""
    args = parser().parse_args(argv)
    if args.report_only is not None:
        results = load(args.report_only)
        out = args.report_only.parent
        report.write(results, out, plots.write_all(results, out))
        print(out / "report.md")
        return 0
    try:
        plan = _plan(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        _print_plan(plan)
        return 0
    if plan.baseline and args.baseline_rcp is None:
        print(
            f"error: profile {plan.name} measures the previous build beside this "
            "one: give its rcp with --baseline-rcp PATH",
            file=sys.stderr,
        )
        return 2
    baseline = args.baseline_rcp.resolve() if args.baseline_rcp else None
    if baseline is not None and not os.access(baseline, os.X_OK):
        print(f"error: --baseline-rcp {baseline} is not a program", file=sys.stderr)
        return 2
    filegen = _entry_point("rcp-filegen")
    if filegen is None:
        print("error: rcp-filegen is not installed (run `make bench`)", file=sys.stderr)
        return 2
    cache = CacheControl(drop=not args.no_drop_caches)
    settings = Settings(
        work=args.work.resolve(),
        out=args.out.resolve(),
        repo=REPO,
        fs_options=fs_options(plan, args.fuse_delay_ms),
        cache=cache,
        timeout_s=args.timeout,
        filegen=filegen,
        rcp=str(args.rcp.resolve()) if args.rcp else _entry_point("rcp"),
        airflow_venv=REPO / VENV_NAME,
        baseline_rcp=None if baseline is None else str(baseline),
        baseline_name=args.baseline_name,
    )
    signal.signal(signal.SIGTERM, _terminate)
    results = Results()
    results.meta["command"] = shlex.join(
        [
            "python",
            "-m",
            "benchmarks.harness",
            *(argv if argv is not None else sys.argv[1:]),
        ]
    )
    status = 0
    try:
        run(plan, settings, say_stderr, results)
    except (KeyboardInterrupt, SystemExit) as e:
        status = 130 if isinstance(e, KeyboardInterrupt) else int(e.code or 1)
        results.meta["interrupted"] = type(e).__name__
    finally:
        settings.out.mkdir(parents=True, exist_ok=True)
        save(results, settings.out / "results.json")
        path = report.write(
            results, settings.out, plots.write_all(results, settings.out)
        )
        say_stderr(f"report: {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
