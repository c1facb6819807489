"""The previous build beside this one (issue 24): the report's side-by-side section.

With ``--baseline-rcp`` (:attr:`benchmarks.harness.plan.Plan.baseline`) each of our
tools with automatic settings runs beside its twin from the previous build
(:data:`benchmarks.harness.tools.BASELINES`): in the same rounds, the order rotated
per repetition, with the same checks. This section sets the two side by side per
cell and mode: both medians, the ratio *this build / previous build* of the median
wall times (``< 1``: this build is faster), and

- on one host, the verdict against issue 24's limit: no cell more than 3% slower
  (ratio at most :data:`LIMIT`);
- between two hosts (:func:`benchmarks.harness.remote.is_remote`), what this build
  gained: the previous build's median over this one's, less 1 (a loss is negative).

Invariants: as everywhere, numbers come only from verified outcomes: where a run of
either build failed (a wrong copy, an error, a timeout) the row says FAILED with the
reason and has no ratio, and a local cell where this build failed is not within the
limit; the section is absent when no twin was part of the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from benchmarks.harness.aggregate import Outcome, outcomes, scenarios
from benchmarks.harness.markdown import md_table, num, span
from benchmarks.harness.remote import is_remote
from benchmarks.harness.results import Mode, Results
from benchmarks.harness.tools import BASELINES

TITLE: Final = "Previous build vs this build"
LIMIT: Final = 1.03
"""Issue 24: no local cell may get more than 3% slower (median)."""


@dataclass(frozen=True, slots=True)
class Pair:
    """One tool of ours in one scenario, this build (``new``) beside the previous
    (``old``); either may be missing (not run) or failed."""

    fs: str
    fileset: str
    mode: Mode
    tool: str  # this build's tool id (a key of BASELINES)
    new: Outcome | None
    old: Outcome | None

    @property
    def remote(self) -> bool:
        """Whether the cell copies between two hosts (a gain, not a limit)."""
        return is_remote(self.fs)

    @property
    def ratio(self) -> float | None:
        """This build's median wall time over the previous build's, when both
        verified."""
        new, old = self.new, self.old
        if new is None or old is None or new.wall is None or old.wall is None:
            return None
        return new.wall.median / old.wall.median if old.wall.median > 0 else None

    @property
    def within(self) -> bool | None:
        """On one host: whether this build is within the limit (``None``: between
        two hosts, or the previous build has no time to hold it against)."""
        if self.remote:
            return None
        if self.new is not None and not self.new.ok:
            return False  # a wrong copy is never within any limit
        r = self.ratio
        return None if r is None else r <= LIMIT


def pairs(results: Results) -> list[Pair]:
    """Every scenario and tool where this build or its twin ran, in the order
    measured."""
    table = outcomes(results)
    rows = []
    for fs, fileset, mode in scenarios(results):
        for tool, twin in BASELINES.items():
            new = table.get((fs, fileset, mode, tool))
            old = table.get((fs, fileset, mode, twin))
            if new is not None or old is not None:
                rows.append(Pair(fs, fileset, mode, tool, new, old))
    return rows


def verdict(p: Pair) -> str:
    """The last column: within the limit or over it (one host), the gain (two)."""
    for who, o in (("this build", p.new), ("the previous build", p.old)):
        if o is None:
            return f"not measured: {who} did not run"
        if not o.ok:
            return f"**FAILED** ({who}): {o.problem}"
    r = p.ratio
    if r is None:
        return "not measured: no time to compare"
    if p.remote:
        gain = 1 / r - 1
        what = "gained" if gain >= 0 else "lost"
        return f"{what} {abs(gain):.1%} ({1 / r:.2f}x the speed)"
    change = f"{abs(r - 1):.2%} {'slower' if r > 1 else 'faster'}"
    if r <= LIMIT:
        return f"within {LIMIT - 1:.0%}: {change}"
    return f"**over the {LIMIT - 1:.0%} limit: {change}**"


def section(results: Results) -> list[str]:
    """The report's section (nothing when the previous build was not measured)."""
    twins = [t for t in results.tools if t.id in BASELINES.values()]
    if not twins:
        return []
    labels = {t.id: t.label for t in results.tools}
    this = {t.id: t.version for t in results.tools if t.id in BASELINES}
    where = results.meta.get("baseline_rcp")
    lines = [
        f"## {TITLE}",
        "",
        "Issue 24's speed check. The previous build "
        f"({_versions(t.version for t in twins)}"
        f"{f', `{where}`' if where else ''}) and this build "
        f"({_versions(this.values())}) ran side by side: in the same rounds, the "
        "order rotated per repetition, with the same checks (a wrong copy is a "
        "failure, never a time); each build's remote copies start that build's "
        "`rcpd`. *this / previous* is this build's median wall time over the "
        "previous build's (`< 1`: this build is faster). On one host no cell may be "
        f"more than {LIMIT - 1:.0%} slower (median); between two hosts the gain is "
        "the previous build's median over this build's, less 1.",
        "",
    ]
    rows = pairs(results)
    if not rows:
        return [*lines, "Neither build was measured in any cell.", ""]
    lines += _summary(rows)
    lines += md_table(
        (
            "fs",
            "fileset",
            "mode",
            "tool",
            "previous s",
            "this s",
            "this / previous",
            "CPU s (previous / this)",
            "verdict",
        ),
        (
            (
                p.fs,
                p.fileset,
                p.mode,
                labels.get(p.tool, p.tool),
                _wall(p.old),
                _wall(p.new),
                "-" if p.ratio is None else f"{p.ratio:.3f}",
                f"{_cpu(p.old)} / {_cpu(p.new)}",
                verdict(p),
            )
            for p in rows
        ),
        4,
    )
    return [*lines, ""]


def _summary(rows: list[Pair]) -> list[str]:
    local = [p for p in rows if not p.remote]
    lines = []
    if local:
        failed = [p for p in local if p.new is not None and not p.new.ok]
        over = [p for p in local if p.within is False and p not in failed]
        unknown = [p for p in local if p.within is None]
        within = len(local) - len(failed) - len(over) - len(unknown)
        text = f"One host: {within} of {len(local)} within the {LIMIT - 1:.0%} limit"
        if over:
            text += "; **over it: " + ", ".join(_where(p) for p in over) + "**"
        if failed:
            text += "; **failed: " + ", ".join(_where(p) for p in failed) + "**"
        if unknown:
            text += "; not compared: " + ", ".join(_where(p) for p in unknown)
        lines.append(f"- {text}.")
    gains = [(p, r) for p in rows if p.remote and (r := p.ratio) is not None]
    if gains:
        lines.append(
            "- Between two hosts, this build gained: "
            + ", ".join(f"{_where(p)} {1 / r - 1:+.1%}" for p, r in gains)
            + "."
        )
    return [*lines, ""]


def _where(p: Pair) -> str:
    return f"{p.fs} {p.fileset} {p.mode}"


def _versions(versions: Iterable[str]) -> str:
    found = sorted({v for v in versions if v})
    return ", ".join(f"`{v}`" for v in found) or "version unknown"


def _wall(o: Outcome | None) -> str:
    if o is None:
        return "-"
    if not o.ok or o.wall is None:
        return f"FAILED {o.failures}/{o.runs}"
    return f"{span(o.wall)} (n={o.wall.count})"


def _cpu(o: Outcome | None) -> str:
    return "-" if o is None or o.cpu is None else num(o.cpu.median)
