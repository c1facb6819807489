"""Running a plan: filesystems one after another, cells within, tools interleaved.

Order of work: for each filesystem (mounted once, unmounted at the end even on
failure), for each of its cells, for each repetition, for each mode, every tool once,
in an order rotated by repetition, so slow drifts in the machine's load (noisy
neighbours) spread over all tools instead of hitting whichever ran last.

Invariants:
- Nothing planned disappears silently: a tool, filesystem, fileset or mode that cannot
  run, and a cell left out because the time budget ran out, becomes a :class:`Skip`
  with the reason.
- ``results.json`` is rewritten after every repetition, so an interrupted run leaves
  its measurements behind.
- The time budget is checked before each cell (a cell, once started, finishes), so a
  run overshoots its budget by at most one cell.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import airflow_env, machine
from benchmarks.harness.aggregate import CONFIRMED, best_fixed
from benchmarks.harness.cache import CacheControl
from benchmarks.harness.filesets import FILESETS, FilesetError, materialize
from benchmarks.harness.filesystems import (
    FILESYSTEMS,
    FsOptions,
    FsUnavailable,
    Mounted,
)
from benchmarks.harness.plan import Cell, Plan
from benchmarks.harness.results import (
    FilesetInfo,
    FilesystemInfo,
    Mode,
    Results,
    Skip,
    ToolInfo,
    save,
)
from benchmarks.harness.tools import Tool, ToolEnv, toolbox
from benchmarks.harness.trial import Bench, Round, Source, expectations

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Settings:
    """Where and how to run (everything that is not *what* to run)."""

    work: Path
    out: Path
    repo: Path
    fs_options: FsOptions
    cache: CacheControl
    timeout_s: float
    filegen: str
    rcp: str | None
    airflow_venv: Path
    baseline_rcp: str | None = None  # the previous build's rcp (Plan.baseline)
    baseline_name: str = ""  # what the report calls it
    batch_bytes: int = 6 * 1024**3  # a round keeps its copies until its end up to this
    batch_data_bytes: int = 1024**3  # ... and only up to this much file data


def say_stderr(line: str) -> None:
    """Default progress printer: a timestamped line on stderr."""
    print(time.strftime("%H:%M:%S"), line, file=sys.stderr, flush=True)


def run(
    plan: Plan,
    settings: Settings,
    say: Say = say_stderr,
    results: Results | None = None,
) -> Results:
    """Measure ``plan`` into ``results`` (a new one if ``None``) and return it.

    ``results`` is filled in as the run goes, so a caller that passes its own still
    has every measurement when the run is interrupted.
    """
    if plan.baseline and settings.baseline_rcp is None:
        raise ValueError(
            f"plan {plan.name} measures the previous build, but none was given"
        )
    started = time.monotonic()
    settings.out.mkdir(parents=True, exist_ok=True)
    settings.work.mkdir(parents=True, exist_ok=True)
    if results is None:
        results = Results()
    results.meta.update(
        {
            "profile": plan.name,
            "reps": plan.reps,
            "confirm_reps": plan.confirm_reps,
            "budget_s": plan.budget_s,
            "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": machine.describe(settings.work),
            "planned_runs": plan.runs(),
            "cells": [
                {
                    "fs": c.fs,
                    "fileset": c.fileset,
                    "modes": list(c.modes),
                    "tools": list(plan.tools_of(c)),
                    "reps": plan.reps_of(c),
                    "note": c.note,
                }
                for c in plan.cells
            ],
        }
    )
    if plan.baseline:
        results.meta["baseline_rcp"] = settings.baseline_rcp
    tools = _tools(plan, settings, say)
    results.tools = [
        ToolInfo(
            t.id, t.label, t.shape, t.version, t.note, t.family, t.workers, t.chore
        )
        for t in tools.values()
    ]
    for t in tools.values():
        if t.problem:
            results.skips.append(Skip(f"tool {t.id}", t.problem))
    bench = Bench(settings.work, settings.cache, settings.timeout_s)
    bench.prepare()
    cold_problem = settings.cache.problem() or (
        None if settings.cache.drop else "caches are not dropped (--no-drop-caches)"
    )
    done = 0
    for fs_name in dict.fromkeys(c.fs for c in plan.cells):
        cells = [c for c in plan.cells if c.fs == fs_name]
        if time.monotonic() - started > plan.budget_s:
            results.skips += [
                Skip(f"cell {c.fs}/{c.fileset}", _over_budget(plan)) for c in cells
            ]
            continue
        try:
            with FILESYSTEMS[fs_name](settings.work, settings.fs_options) as mounted:
                results.filesystems.append(
                    FilesystemInfo(
                        mounted.name, mounted.fstype, mounted.detail, mounted.cold
                    )
                )
                for cell in cells:
                    elapsed = time.monotonic() - started
                    if elapsed > plan.budget_s:
                        results.skips.append(
                            Skip(f"cell {cell.fs}/{cell.fileset}", _over_budget(plan))
                        )
                        continue
                    done = _run_cell(
                        plan,
                        cell,
                        mounted,
                        tools,
                        bench,
                        settings,
                        results,
                        cold_problem,
                        done,
                        say,
                    )
        except FsUnavailable as e:
            say(f"{fs_name}: unavailable: {e}")
            measured = {s.fileset for s in results.samples if s.fs == fs_name}
            for cell in cells:
                if cell.fileset not in measured:
                    results.skips.append(Skip(f"cell {cell.fs}/{cell.fileset}", str(e)))
    settings.cache.settle()
    results.meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    results.meta["duration_s"] = round(time.monotonic() - started, 1)
    save(results, settings.out / "results.json")
    return results


def _over_budget(plan: Plan) -> str:
    return f"time budget of {plan.budget_s / 60:.0f} min used up before it started"


def _batch(mounted: Mounted, source: Source, tools: int, settings: Settings) -> bool:
    """Whether a round's copies can all stay until its end (see :class:`Round`).

    Only when they fit, and only for small data: with gigabytes of earlier copies in
    the page cache, a large-file copy late in a round was up to 10x slower in system
    time than the same copy early in it (memory that must be found and zeroed again),
    so large filesets get a fresh page cache (delete, drop) before every run.
    """
    st = os.statvfs(mounted.direct(mounted.dst_for(source.fileset.large)))
    free = st.f_bavail * st.f_frsize
    fits = tools * source.disk_bytes <= min(settings.batch_bytes, free // 2)
    return fits and tools * source.data_bytes <= settings.batch_data_bytes


def _tools(plan: Plan, settings: Settings, say: Say) -> dict[str, Tool]:
    """The tools some cell runs (a tool no cell fits, e.g. Airflow in a run of the
    remote cells only, is neither prepared nor listed)."""
    used = dict.fromkeys(t for c in plan.cells for t in plan.tools_of(c))
    airflow_python: Path | None = None
    airflow_problem: str | None = None
    if "airflow" in used:
        say(f"airflow: {settings.airflow_venv} (made on first use: about a minute)")
        try:
            airflow_python = airflow_env.ensure(settings.airflow_venv)
        except airflow_env.AirflowEnvError as e:
            airflow_problem = str(e)
    env = ToolEnv(
        python=sys.executable,
        rcp=settings.rcp,
        airflow_python=str(airflow_python) if airflow_python else None,
        airflow_problem=airflow_problem,
        airflow_home=settings.work / "airflow-home",
        repo=settings.repo,
        baseline_rcp=settings.baseline_rcp if plan.baseline else None,
        baseline_name=settings.baseline_name,
    )
    known = toolbox(env)
    return {tid: known[tid] for tid in plan.tool_ids if tid in used}


def _run_cell(
    plan: Plan,
    cell: Cell,
    mounted: Mounted,
    tools: dict[str, Tool],
    bench: Bench,
    settings: Settings,
    results: Results,
    cold_problem: str | None,
    done: int,
    say: Say,
) -> int:
    label = f"{cell.fs}/{cell.fileset}"
    fileset = FILESETS[cell.fileset]
    runnable = [tools[t] for t in plan.tools_of(cell) if not tools[t].problem]
    modes: list[Mode] = []
    for mode in cell.modes:
        if mode == "cold" and not mounted.cold:
            results.skips.append(
                Skip(
                    f"cold {label}",
                    f"{mounted.fstype} keeps data in memory: no cold run",
                )
            )
        elif mode == "cold" and cold_problem:
            results.skips.append(Skip(f"cold {label}", cold_problem))
        else:
            modes.append(mode)
    if not runnable or not modes:
        return done
    cell_started = time.monotonic()
    say(f"{label}: preparing the fileset")
    try:
        direct = materialize(
            fileset,
            mounted.direct(mounted.src),
            filegen=settings.filegen,
            linux_cache=settings.work / "ext4" / "src",
        )
    except (FilesetError, OSError) as e:
        results.skips.append(Skip(f"cell {label}", f"fileset not made: {e}"))
        return done
    expected = expectations(fileset, direct, {t.symlinks for t in runnable})
    plain = expected.get("preserve") or next(iter(expected.values()))
    if results.fileset(fileset.id) is None:
        results.filesets.append(
            FilesetInfo(
                fileset.id,
                fileset.description,
                fileset.recipe(),
                plain.files,
                plain.bytes,
                plain.dirs,
                plain.symlinks,
            )
        )
    source = Source(fileset, mounted.src / fileset.id, direct, expected)
    batch = _batch(mounted, source, len(runnable), settings)
    reps = plan.reps_of(cell)
    total = reps + plan.confirm_rounds(cell)

    def rounds() -> Iterator[tuple[int, list[Mode], list[Tool]]]:
        for rep in range(reps):
            yield rep, modes, runnable
        for rep in range(reps, total):  # after the repetitions: they pick the best
            for mode in modes:
                confirming = _confirming(plan, cell, mode, runnable, results)
                if len(confirming) > 1:
                    yield rep, [mode], confirming

    for rep, round_modes, round_tools in rounds():
        shift = rep * len(round_tools) // total
        order = round_tools[shift:] + round_tools[:shift]
        for mode in round_modes if rep % 2 == 0 else round_modes[::-1]:
            with Round(bench, mounted, source, mode, batch=batch) as round_:
                for position, tool in enumerate(order):
                    done += 1
                    sample = round_.run(tool, rep=rep, position=position, seq=done)
                    results.samples.append(sample)
                    status = "ok" if sample.ok else f"FAILED: {sample.problem}"
                    kind = "rep" if rep < reps else "confirmation"
                    say(
                        f"[{done}/{plan.runs()}] {label} {mode} {kind} {rep + 1}/"
                        f"{total} {tool.id}: {sample.wall_s:.3f} s {status}"
                    )
        save(results, settings.out / "results.json")
    say(f"{label}: done in {time.monotonic() - cell_started:.0f} s")
    return done


def _confirming(
    plan: Plan, cell: Cell, mode: Mode, runnable: list[Tool], results: Results
) -> list[Tool]:
    """The tools of one confirmation round (:attr:`Plan.confirm_reps`): rcp
    automatic, the fixed setting with the best median so far (recorded in
    ``results.meta`` the first time, so every round and the report use the same one)
    and the cell's target references."""
    by_id = {t.id: t for t in runnable}
    ids = [t for t in plan.confirming(cell) if t in by_id]
    if plan.confirms_best(cell):
        key = (cell.fs, cell.fileset, mode)
        best = best_fixed(results, key)
        if best is not None and best in by_id:
            results.meta.setdefault(CONFIRMED, {})["/".join(key)] = best
            ids.insert(1, best)
    return [by_id[t] for t in ids]
