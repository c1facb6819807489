"""Copies between two hosts: their targets and their section of ``report.md``.

The remote cells (filesystems ``netns`` and ``netns1g``, :mod:`.hosts`) compare rcp
pulling over ssh (TLS, and ``--no-encryption``) with ``rsync -a`` over ssh and with
rsync's daemon protocol. Targets, each against ``rsync -a`` over ssh unless said:

- large files over a 1 Gbit/s link (``tbf``): rcp moves at least 95% of the link rate
  (file bytes / wall seconds against 125,000,000 B/s; TCP's payload at MTU 1500 is at
  most 95.6% of it, :data:`PAYLOAD_SHARE`, which the row says);
- large files, uncapped veth: rcp at least 1.5x as fast;
- the Linux source tree: rcp at least 1.5x as fast, faster than rsync's daemon, and
  within 1.3x of a local rcp of the same tree on the same disk (``ext4 linux``);
- 1 KiB files (50,000): rcp at least 3x as fast.

"rcp" is ``rcp_remote``: automatic settings, encrypted, as a user runs it. Its
``--no-encryption`` twin is evidence, never the measured value.

Invariants: as in :mod:`.targets`, values come only from verified outcomes and a
target is never met from a failed or missing one; the section's tables show a failed
tool as FAILED with its reason, and ``-`` where a figure was not measured (rsync's
side on the source host is never measured: no tool reports it).
"""

from __future__ import annotations

from typing import Final

from benchmarks.harness.aggregate import Key as OutcomeKey
from benchmarks.harness.aggregate import Outcome, cells, outcomes
from benchmarks.harness.filesets import FILESETS, GiB
from benchmarks.harness.filesystems import REMOTE
from benchmarks.harness.markdown import md_table, num, ratio, span
from benchmarks.harness.results import MODES, Mode, Results
from benchmarks.harness.targets import (
    Status,
    TargetResult,
    absent_row,
    cpu_note,
    margin_text,
    scaled_row,
    verified_pair,
)

RCP: Final = "rcp_remote"
RCP_PLAIN: Final = "rcp_remote_plain"
RSYNC_SSH: Final = "rsync_ssh"
RSYNC_DAEMON: Final = "rsync_daemon"
LABELS: Final = {
    RCP: "rcp",
    RCP_PLAIN: "rcp --no-encryption",
    RSYNC_SSH: "rsync -a over ssh",
    RSYNC_DAEMON: "rsync daemon",
}
VETH: Final = "netns"
CAPPED: Final = "netns1g"
LINK_BYTES_PER_S: Final = 125_000_000  # 1 Gbit/s
LINK_SHARE: Final = 0.95
PAYLOAD_SHARE: Final = 1448 / 1514
"""TCP payload per full frame at MTU 1500 (timestamps on) over what ``tbf`` counts:
the most of the link's rate any copy can carry."""
LARGE_VS_RSYNC: Final = 1.5
LINUX_VS_RSYNC: Final = 1.5
LINUX_VS_DAEMON: Final = 1.0  # strictly faster
LINUX_VS_LOCAL: Final = 1.3
SMALL_VS_RSYNC: Final = 3.0
SMALL_MIN_FILES: Final = 50_000

Table = dict[OutcomeKey, Outcome]
Key = tuple[str, str, Mode]  # fs, fileset, mode


def targets(results: Results) -> list[TargetResult]:
    """The remote targets, in the order of the module docstring."""
    table = outcomes(results)
    return [
        *_link_rate(results, table),
        *_large(results, table),
        *_linux(table),
        *_small(results, table),
    ]


def _measured(results: Results, fs: str, *, large: bool = False) -> list[str]:
    """Filesets with samples on ``fs`` (only large-file ones when ``large``)."""
    found = dict.fromkeys(s.fileset for s in results.samples if s.fs == fs)
    return [f for f in found if not large or (f in FILESETS and FILESETS[f].large)]


def _keys(table: Table, fs: str, fileset: str) -> list[Key]:
    return [(fs, fileset, m) for m in MODES if (fs, fileset, m, RCP) in table]


def _rate(results: Results, o: Outcome | None, fileset: str) -> float | None:
    info = results.fileset(fileset)
    if o is None or o.wall is None or info is None or o.wall.median <= 0:
        return None
    return info.bytes / o.wall.median


def _link_rate(results: Results, table: Table) -> list[TargetResult]:
    target = (
        f"Remote, large files over a 1 Gbit/s link (tbf): rcp >= {LINK_SHARE:.0%} "
        "of the rate"
    )
    rows = []
    for fileset in _measured(results, CAPPED, large=True):
        info = results.fileset(fileset)
        for key in _keys(table, CAPPED, fileset):
            scenario = f"{CAPPED} {fileset} {key[2]}"
            o = table[(*key, RCP)]
            if o.wall is None or info is None or o.wall.median <= 0:
                rows.append(absent_row(target, scenario, f"rcp failed: {o.problem}"))
                continue
            rate = info.bytes / o.wall.median
            share = rate / LINK_BYTES_PER_S
            ok = share >= LINK_SHARE
            measured = (
                f"{rate / 1e6:.0f} MB/s, {share:.0%} of 125 MB/s "
                f"({info.bytes / GiB:.3g} GiB in {o.wall.median:.3g} s)"
            )
            verdict = "within" if ok else "missed by"
            margin = (
                f"{verdict} {abs(share / LINK_SHARE - 1) * 100:.0f}% of the "
                f"{LINK_SHARE:.0%} asked"
            )
            others = [
                f"{LABELS[t]} {r / 1e6:.0f} MB/s"
                for t in (RCP_PLAIN, RSYNC_SSH, RSYNC_DAEMON)
                if (r := _rate(results, table.get((*key, t)), fileset)) is not None
            ]
            ceiling = (
                f"{share / PAYLOAD_SHARE:.0%} of TCP's payload ceiling "
                f"({PAYLOAD_SHARE:.1%} of the link at MTU 1500)"
            )
            evidence = "; ".join(x for x in (_cpu(o), ", ".join(others), ceiling) if x)
            status: Status = "met" if ok else "missed"
            rows.append(
                TargetResult(target, scenario, measured, status, margin, evidence)
            )
    return rows or [
        absent_row(target, CAPPED, "no large-file cell with rcp on netns1g")
    ]


def _large(results: Results, table: Table) -> list[TargetResult]:
    target = (
        "Remote, large files, uncapped veth: rcp >= 1.5x as fast as rsync -a over ssh"
    )
    cores = int(results.meta.get("machine", {}).get("cores") or 0)
    rows = [
        _speedup_row(
            target,
            f"{VETH} {f} {key[2]}",
            table,
            key,
            RSYNC_SSH,
            LARGE_VS_RSYNC,
            floor=_cpu_floor(table.get((*key, RCP)), cores),
        )
        for f in _measured(results, VETH, large=True)
        for key in _keys(table, VETH, f)
    ]
    return rows or [absent_row(target, VETH, "no large-file cell with rcp on netns")]


def _linux(table: Table) -> list[TargetResult]:
    target = "Remote, Linux source tree: rcp >= 1.5x as fast as rsync -a over ssh"
    key: Key = (VETH, "linux", "warm")
    scenario = f"{VETH} linux warm"
    if (*key, RCP) not in table:
        return [absent_row(target, scenario, "cell not in this run")]
    local = _local_floor(table, LOCAL_LINUX, "a local cp -a of the same tree")
    return [
        _speedup_row(
            target, scenario, table, key, RSYNC_SSH, LINUX_VS_RSYNC, floor=local
        ),
        _local_row(table, key, scenario),
        _speedup_row(
            "  (same cell: faster than rsync's daemon protocol)",
            scenario,
            table,
            key,
            RSYNC_DAEMON,
            LINUX_VS_DAEMON,
            strict=True,
            floor=local,
        ),
    ]


def _small(results: Results, table: Table) -> list[TargetResult]:
    target = "Remote, 1 KiB files (50k): rcp >= 3x as fast as rsync -a over ssh"
    candidates = [
        f
        for f in _measured(results, VETH)
        if f.startswith("1k_") and results.fileset(f)
    ]
    key_of: dict[str, Key] = {
        f: (VETH, f, "warm") for f in candidates if (VETH, f, "warm", RCP) in table
    }
    if not key_of:
        return [absent_row(target, f"{VETH} 1k warm", "no 1k cell with rcp on netns")]
    fileset = max(key_of, key=lambda f: _files(results, f))
    files = _files(results, fileset)
    note = "" if files >= SMALL_MIN_FILES else f"only {files:,} files (target: 50,000)"
    row = _speedup_row(
        target,
        f"{VETH} {fileset} warm",
        table,
        key_of[fileset],
        RSYNC_SSH,
        SMALL_VS_RSYNC,
        floor=_local_floor(
            table, ("ext4", fileset, "warm", "cp_r"), "a local cp -r of the same files"
        ),
    )
    return [scaled_row(row, note)]


def _files(results: Results, fileset: str) -> int:
    info = results.fileset(fileset)
    return info.files if info else 0


def _speedup_row(
    target: str,
    scenario: str,
    table: Table,
    key: Key,
    reference: str,
    limit: float,
    *,
    strict: bool = False,
    floor: tuple[float, str] | None = None,
) -> TargetResult:
    """rcp's speed-up over ``reference`` (its wall / rcp's) against ``limit``;
    ``floor``: seconds no copy of this cell can beat on this machine, and why (the
    row says the target is out of reach here when the floor is above what it asks)."""
    both = verified_pair(table, key, RCP, reference)
    if isinstance(both, str):
        return TargetResult(target, scenario, "-", "not measured", both)
    mine, ref, mine_o, ref_o = both
    speedup = ref.median / mine.median
    ok = speedup > limit if strict else speedup >= limit
    label = LABELS[reference]
    measured = (
        f"{speedup:.2f}x the speed of {label} "
        f"({mine.median:.3g} s vs {ref.median:.3g} s)"
    )
    notes = [_cpu(mine_o), cpu_note(f"{label} (h1 only)", ref_o)]
    plain = table.get((*key, RCP_PLAIN))
    if plain is not None and plain.wall is not None and plain.wall.median > 0:
        notes.append(f"rcp --no-encryption {ref.median / plain.wall.median:.2f}x")
    asked = ref.median / limit
    if floor is not None and not ok:
        seconds, why = floor
        reach = "out of reach here" if seconds > asked else "within reach"
        notes.append(
            f"{reach}: the target asks {asked:.3g} s; {why} takes {seconds:.3g} s"
        )
    status: Status = "met" if ok else "missed"
    return TargetResult(
        target,
        scenario,
        measured,
        status,
        margin_text(speedup, limit, ok),
        "; ".join(x for x in notes if x),
    )


LOCAL_LINUX: Final[tuple[str, str, Mode, str]] = ("ext4", "linux", "warm", "cp_a")
LOCAL_RCP_LINUX: Final[tuple[str, str, Mode, str]] = (
    "ext4",
    "linux",
    "warm",
    "rcp_auto",
)


def _local_row(table: Table, key: Key, scenario: str) -> TargetResult:
    """The remote copy's time against a local rcp of the same tree on the same disk
    (``ext4 linux warm``): what the network path costs over the engine's own."""
    target = f"  (same cell: within {LINUX_VS_LOCAL:g}x of a local rcp's time)"
    remote, local = table.get((*key, RCP)), table.get(LOCAL_RCP_LINUX)
    medians = []
    for o, name in ((remote, "rcp between hosts"), (local, "a local rcp")):
        if o is None:
            return TargetResult(
                target, scenario, "-", "not measured", f"{name} did not run"
            )
        if o.wall is None:
            return TargetResult(
                target, scenario, "-", "not measured", f"{name} failed: {o.problem}"
            )
        medians.append(o.wall.median)
    mine, theirs = medians
    times = mine / theirs
    ok = times <= LINUX_VS_LOCAL
    verdict = "within" if ok else "missed by"
    return TargetResult(
        target,
        scenario,
        f"{times:.2f}x a local rcp's time ({mine:.3g} s vs {theirs:.3g} s)",
        "met" if ok else "missed",
        f"{verdict} {abs(times / LINUX_VS_LOCAL - 1) * 100:.0f}% of "
        f"{LINUX_VS_LOCAL:g}x",
        _cpu(remote) if remote is not None else "",
    )


def _local_floor(
    table: Table, key: tuple[str, str, Mode, str], what: str
) -> tuple[float, str] | None:
    """The same files copied on one host (the ext4 cells), no network in between:
    a floor for a copy between two hosts that are this same machine."""
    o = table.get(key)
    if o is None or o.wall is None:
        return None
    return o.wall.median, f"{what} (no network, same disk)"


def _cpu_floor(o: Outcome | None, cores: int) -> tuple[float, str] | None:
    """rcp's CPU time on both hosts spread over every core of this one machine."""
    if o is None or o.cpu is None or o.source_cpu is None or cores < 1:
        return None
    total = o.cpu.median + o.source_cpu.median
    return total / cores, (
        f"rcp's {total:.3g} CPU-s (both hosts, TLS both ways) on this machine's "
        f"{cores} cores"
    )


def _cpu(o: Outcome) -> str:
    """rcp's CPU per wall second on h1, and its source daemon's on h2."""
    if o.wall is None or o.cpu is None or o.wall.median <= 0:
        return ""
    text = f"rcp {o.cpu.median / o.wall.median:.2f} CPU-s/s on h1"
    if o.source_cpu is not None:
        text += f" + {o.source_cpu.median / o.wall.median:.2f} on h2 (rcpd)"
    return text


# --- the report section -----------------------------------------------------------

TITLE: Final = "Remote copies (two hosts: network namespaces over veth)"
_SETUP: Final = (
    "- Two network namespaces, h1 and h2, each with a veth link to a bridge in a "
    "namespace of its own; nothing else is attached. h2, the source host, runs a real "
    "sshd (throwaway keys, root by key) and an rsync daemon (a read-only module over "
    "the work area, `use chroot = no`, `uid = root`). Every tool runs in h1 and pulls "
    "from h2: rcp starts `rcpd` on h2 over ssh (data over TLS, or plain TCP with "
    "`--no-encryption`); rsync over ssh runs `rsync --server` on h2 through sshd; "
    "the daemon protocol talks to the rsync daemon.",
    "- `netns`: the veth links uncapped. `netns1g`: h2's link capped with `tbf` at "
    "1 Gbit/s in both directions; the link-rate target divides file bytes by wall "
    "seconds (start-up included) and compares with 125,000,000 B/s.",
    "- Both hosts are this machine: sources are the ext4 cells' files (a path on h2 "
    "is the same file on h1), warm in the page cache; copies of many files go to a "
    "fresh no-journal ext4 re-made every round, as in the ext4 cells, copies of large "
    "files to the ext4 directory. Sender, receiver, ssh and TLS share the same cores, "
    "which two real hosts would not.",
    "- *h1* columns: the tool's process tree on h1 (rcp with its ssh client, rsync with "
    "its ssh client), measured as everywhere else. *h2* columns: rcp's source daemon, "
    "as rcp reports it (`--summary-json`); rsync's side on h2 (started by sshd or "
    "forked by the daemon) reports nothing, so it shows `-`.",
    "- Ratios are the tool's median wall time over rsync -a over ssh's (`< 1` = "
    "faster); targets speak of speed (rsync's time over rcp's).",
)


def is_remote(fs: str) -> bool:
    """Whether ``fs`` is one of the two-host filesystems."""
    return fs in REMOTE


def section(results: Results) -> list[str]:
    """The report's remote section (nothing when no remote cell ran or was planned)."""
    ran = [(fs, f) for fs, f in cells(results) if is_remote(fs)]
    planned = any(is_remote(c.get("fs", "")) for c in results.meta.get("cells", []))
    if not ran and not planned:
        return []
    lines = [f"## {TITLE}", "", *_SETUP]
    lines += [
        f"- `{f.name}`: {f.detail}." for f in results.filesystems if is_remote(f.name)
    ]
    rows = [
        (r.target, r.scenario, r.measured, f"**{r.status}**", r.margin, r.evidence)
        for r in targets(results)
    ]
    lines += [
        "",
        "### Remote targets",
        "",
        *md_table(
            ("target", "scenario", "measured", "status", "margin", "evidence"), rows, 6
        ),
        "",
    ]
    table = outcomes(results)
    notes = {
        (c["fs"], c["fileset"]): c.get("note", "")
        for c in results.meta.get("cells", [])
    }
    order = [t.id for t in results.tools]
    labels = {t.id: t.label for t in results.tools}
    for fs, fileset in ran:
        info = results.fileset(fileset)
        for mode in MODES:
            present = [t for t in order if (fs, fileset, mode, t) in table]
            if not present:
                continue
            what = f" ({info.description})" if info else ""
            lines += [f"### {fs} / {fileset}, {mode}{what}", ""]
            if notes.get((fs, fileset)):
                lines += [notes[(fs, fileset)], ""]
            reference = table.get((fs, fileset, mode, RSYNC_SSH))
            lines += md_table(
                (
                    "tool",
                    "wall s",
                    "MB/s",
                    "h1 CPU s",
                    "h1 peak RSS MiB",
                    "h2 CPU s",
                    "h2 peak RSS MiB",
                    "vs rsync -a over ssh",
                ),
                (
                    _row(
                        labels.get(t, t),
                        table[(fs, fileset, mode, t)],
                        reference,
                        info.bytes if info else 0,
                    )
                    for t in present
                ),
            )
            lines.append("")
    return lines


def _row(label: str, o: Outcome, reference: Outcome | None, size: int) -> list[str]:
    if not o.ok or o.wall is None:
        return [label, f"FAILED {o.failures}/{o.runs}: {o.problem}", *["-"] * 6]
    rate = f"{size / o.wall.median / 1e6:.0f}" if size and o.wall.median > 0 else "-"
    return [
        label,
        span(o.wall),
        rate,
        "-" if o.cpu is None else num(o.cpu.median),
        "-" if o.rss_mib is None else num(o.rss_mib.median),
        "-" if o.source_cpu is None else num(o.source_cpu.median),
        "-" if o.source_rss_mib is None else num(o.source_rss_mib.median),
        ratio(o, reference),
    ]
