"""Tree chores (issue 7) beside their peers: their targets and their report section.

The chore tools (``Tool.chore``, :mod:`.tools`) do not copy: a round makes their tree
untimed (:mod:`.trial`), and they remove it, or compare the source with it. Targets:

- removal, ``rrm TREE`` against ``rm -rf TREE`` on 1 KiB files: on ext4 (50,000
  files) at most 1.0x rm -rf's time; through the latency FUSE (200 files) at least 8x
  faster;
- content comparison, ``rcmp --checksum SRC COPY`` against hashing both trees
  serially (``sha256sum``; ``b3sum --num-threads 1``) and comparing the lists: at
  least 2x faster than the faster of the two, on every cell where it ran (ext4
  ``mixed`` and ``100m_3`` in the profiles, and ``1g_4`` in the full one).

Invariants: as in :mod:`.targets`, values come only from verified outcomes and a
target is never met from a failed or missing one; fewer files than a target's scale
make its rows "(scaled down)". Chore tools have tables of their own here (ratios to
their peers, never to ``cp``); the copy tables, the copy targets and the plots leave
them out.
"""

from __future__ import annotations

from typing import Final

from benchmarks.harness.aggregate import Key, Outcome, cells, outcomes
from benchmarks.harness.markdown import figures, md_table, ratio
from benchmarks.harness.results import MODES, Chore, Mode, Results, ToolInfo
from benchmarks.harness.targets import (
    TargetResult,
    absent_row,
    ratio_row,
    scaled_row,
    speedup_row,
)

TITLE: Final = "Tree chores (issue 7)"
RRM: Final = "rrm"
RM_RF: Final = "rm_rf"
RCMP: Final = "rcmp"
HASHERS: Final = {"sha256sum": "sha256sum", "b3sum": "b3sum --num-threads 1"}
"""The serial hashers rcmp is held against, with their labels in the targets."""
RRM_VS_RM_EXT4: Final = 1.0
RRM_SPEEDUP_FUSE: Final = 8.0
REMOVE_SCALE: Final = {"ext4": 50_000, "fuse": 200}
"""Files in the target's tree, per filesystem."""
RCMP_SPEEDUP: Final = 2.0
_TITLES: Final[dict[Chore, str]] = {
    "remove": "Removal",
    "compare": "Content comparison",
}

Table = dict[Key, Outcome]


def targets(results: Results) -> list[TargetResult]:
    """The chore targets, in the order of the module docstring."""
    table = outcomes(results)
    return [*_removal(results, table), *_comparison(table)]


def _keys(
    table: Table, tool: str, fs: str | None = None
) -> list[tuple[str, str, Mode]]:
    """The scenarios where ``tool`` ran (on ``fs``), in a stable order."""
    return sorted(
        {(f, s, m) for f, s, m, t in table if t == tool and (fs is None or f == fs)}
    )


def _files(results: Results, fileset: str) -> int:
    info = results.fileset(fileset)
    return info.files if info else 0


def _removal(results: Results, table: Table) -> list[TargetResult]:
    rows = []
    ext4 = "rrm: <= 1.0x rm -rf on 1 KiB files (>= 50k), ext4"
    fuse = "rrm: >= 8x faster than rm -rf on 1 KiB files (200), latency FUSE"
    for fs, target in (("ext4", ext4), ("fuse", fuse)):
        found = []
        for key in _keys(table, RRM, fs):
            fileset = key[1]
            if not fileset.startswith("1k_"):
                continue
            if fs == "ext4":
                row = ratio_row(
                    target,
                    " ".join(key),
                    table,
                    key,
                    RRM,
                    RM_RF,
                    RRM_VS_RM_EXT4,
                    ref_label="rm -rf",
                    label="rrm",
                )
            else:
                row = speedup_row(
                    target,
                    table,
                    key,
                    RRM,
                    RM_RF,
                    RRM_SPEEDUP_FUSE,
                    ("rrm", "rm -rf"),
                    "each removes its own cp -a of the source",
                )
            files, scale = _files(results, fileset), REMOVE_SCALE[fs]
            note = "" if files >= scale else f"only {files:,} files (target: {scale:,})"
            found.append(scaled_row(row, note))
        rows += found or [absent_row(target, f"{fs} 1k", "no 1k cell with rrm")]
    return rows


def _comparison(table: Table) -> list[TargetResult]:
    target = (
        "rcmp --checksum: >= 2x faster than serial hashing of both trees "
        "(the faster of sha256sum and b3sum)"
    )
    rows = []
    for key in _keys(table, RCMP):
        verified, absent = [], []
        for hasher in HASHERS:
            o = table.get((*key, hasher))
            if o is None:
                absent.append(f"{hasher} did not run")
            elif o.wall is None:
                absent.append(f"{hasher} failed: {o.problem}")
            else:
                verified.append((o.wall.median, hasher))
        if not verified:
            rows.append(absent_row(target, " ".join(key), "; ".join(absent)))
            continue
        fastest = min(verified)[1]
        note = "; ".join(
            [
                f"the faster hasher: {HASHERS[fastest]}",
                *absent,
                "rcmp also compares size, mtime and mode; the hashers contents only",
            ]
        )
        rows.append(
            speedup_row(
                target,
                table,
                key,
                RCMP,
                fastest,
                RCMP_SPEEDUP,
                ("rcmp", HASHERS[fastest]),
                note,
            )
        )
    return rows or [absent_row(target, "-", "no cell with rcmp in this run")]


_METHOD: Final = (
    "Each removal run removes a tree of its own: an exact copy of the source "
    "(`cp -a` through the backing directory, then `sync`; cold runs then drop the "
    "caches), made and counted untimed; the run is ok when the tree is gone. Each "
    "comparison run "
    "compares the source with one untimed `cp -a` copy of it, shared by the round's "
    "comparers, and is ok when it exits 0 (the trees are the same). The serial "
    "hashers hash the source and then the copy, one file after another in path "
    "order, and compare the two lists. Ratios are the tool's median wall time over "
    "the peer's (`< 1` = faster)."
)


def section(results: Results) -> list[str]:
    """The report's chores section (nothing when no chore tool ran)."""
    table = outcomes(results)
    kinds = {t.id: t.chore for t in results.tools}
    present = {(fs, fileset, kinds.get(tool)) for fs, fileset, _, tool in table}
    ran = [
        (fs, fileset, kind)
        for fs, fileset in cells(results)
        for kind in _TITLES
        if (fs, fileset, kind) in present
    ]
    if not ran:
        return []
    lines = [f"## {TITLE}", "", _METHOD, ""]
    for fs, fileset, kind in ran:
        info = results.fileset(fileset)
        what = f" ({info.description})" if info else ""
        lines += [f"### {_TITLES[kind]}: {fs} / {fileset}{what}", ""]
        tools = [t for t in results.tools if t.chore == kind]
        peers = [t for t in tools if t.family == "peer"]
        lines += md_table(
            (
                "tool",
                "cold wall s",
                "warm wall s",
                "CPU s, median (cold / warm)",
                "peak RSS MiB",
                *(f"vs {p.label} (cold / warm)" for p in peers),
            ),
            (
                _row(table, fs, fileset, t, peers)
                for t in tools
                if any((fs, fileset, m, t.id) in table for m in MODES)
            ),
        )
        lines.append("")
    return lines


def _row(
    table: Table, fs: str, fileset: str, tool: ToolInfo, peers: list[ToolInfo]
) -> list[str]:
    """One tool's figures in one chore table (a failure shows FAILED and why)."""
    per_mode = {m: table.get((fs, fileset, m, tool.id)) for m in MODES}
    row = [tool.label, *figures(per_mode)]
    row += [
        " / ".join(ratio(per_mode[m], table.get((fs, fileset, m, p.id))) for m in MODES)
        for p in peers
    ]
    return row
