"""What a benchmark run measures: cells (filesystem x fileset x modes) and tools.

Three profiles, scaled to this machine (2 cores, 24 GiB, one virtio disk at about
250 MiB/s, a session's time budget):

- ``quick`` (about 12 minutes): 10,000 x 1 KiB cold and warm on ext4, 3 x 100 MiB on
  ext4 and XFS, small sets through the latency FUSE, tmpfs, a memory probe; the peers,
  rcp automatic and rcp at 1, 4, 16 and 64 workers; the engine with and without its
  plugin layer on tmpfs; the tree chores of issue 7 (rrm and rm -rf on 10,000 x 1 KiB
  cold and warm and 100 x 1 KiB through the FUSE, rcmp --checksum and serial
  sha256sum and b3sum on ``mixed`` and 3 x 100 MiB); copies between two hosts of
  10,000 x 1 KiB and 3 x 100 MiB (about 1 minute).
- ``full`` (at most about 95 minutes): the issue's target scales (50,000 x 1 KiB and
  the Linux tree on ext4, 4 x 1 GiB on ext4 and reflinked on XFS, 100k -> 1M files
  for memory), rcp at 1..128 workers; the Linux tree again beside a busy loop, in a
  session of its own (``ext4busy``) and in the copy's cgroup (``ext4shared``): auto
  against 1, 4 and 16 workers, about 5 minutes each; the tree chores at their
  targets' scales (removal of 50,000 x 1 KiB warm, 10,000 cold, 200 through the FUSE;
  comparison of ``mixed``, 3 x 100 MiB and 4 x 1 GiB); then copies between two hosts
  at the remote targets' scales (50,000 x 1 KiB, the Linux tree, 500 x 1 MiB, 4 x 1
  GiB on an uncapped veth, 2 x 1 GiB over 1 Gbit/s).
- ``compare`` (about 40 minutes; :data:`SIDE_BY_SIDE`): issue 24's side-by-side speed
  check, only rcp with automatic settings and its twin from the previous build
  (:attr:`Plan.baseline`) on the committed cells, warm as in ``full``: ext4 1k_50k,
  linux and mixed, the latency FUSE 1k_200 and 1m_100, tmpfs 1k_10k, XFS 1g_4, and
  the five two-host cells of ``full``. 10 repetitions (even, so the rotation puts each
  build first equally often) and no confirmation rounds (each round holds only the
  two builds). Estimated from the runs' costs below: about 15-25 s a run where a run
  re-reads gigabytes (XFS 1g_4, the Linux tree, the remote large files), a few seconds
  elsewhere, so about 35 minutes of runs plus the sources' preparation.

The local cells of ``full`` took 42 minutes in the last run; the remote cells add
about 15 (4 tools each: rsync -a over ssh, rsync's daemon protocol, rcp over ssh
with TLS and with ``--no-encryption``; one repetition measured about 20 s for
50,000 x 1 KiB, 60 s for the Linux tree, 10 s for 500 x 1 MiB, 70 s for 4 x 1 GiB and
90 s for 2 x 1 GiB at 1 Gbit/s, plus up to 30 s per cell to prepare its source). The
link-rate cell copies 2 x 1 GiB, not 4: at 1 Gbit/s that is ~17 s of transfer per
run, enough to see the rate, where 4 GiB would cost ~35 s a run plus the re-read of
the source after each. Confirmation rounds (:attr:`Plan.confirm_reps`: 4 in ``full``)
add about 15 minutes, most of it in the 1 KiB and Linux cells whose references are
slow (fsspec, ObjectStoragePath). So the budget is 95 minutes (it was 75), and remote
cells come last: a slow local part can only cut them. The whole ``full`` run took 72
minutes before the tree chores; their cells add about 5 minutes (with
confirmation rounds: they compare every tool they run), most of it in making a
50,000-file tree for each removal (``cp -a``, untimed, about 10 s a run). On a quiet
machine the whole run, ``ext4busy`` included, took 67 minutes (2026-12-01, 1108
runs); ``ext4shared`` adds about 5.

Measured costs that set the scales (load ~1-5 from other sessions): a small-file copy
on ext4 costs its run and a verification (count, bytes, SHA-256); its deletion is a
re-made volume (about a second; ``rm -rf`` ran at about 10,000 files/s on this
``discard``-mounted disk), so 50,000 x 1 KiB with 19 tools is about 1.5 minutes per
repetition; a serial peer through the 0.5 ms-per-operation FUSE pays about 25 ms per
small file. Where a cell deviates from "every tool, cold and
warm", its ``note`` says why, and the report prints it.

Invariants: every id in a plan names a known fileset, filesystem and tool
(:func:`validate`); :func:`restrict` only narrows a plan (or replaces its cells by an
explicit cross product), it never invents tools; the previous build's twins run only
in a plan with :attr:`Plan.baseline`, each right after its tool and wherever it runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

from benchmarks.harness.filesets import FILESETS, GiB
from benchmarks.harness.filesystems import FILESYSTEMS, REMOTE, FsOptions
from benchmarks.harness.results import MODES, Mode
from benchmarks.harness.tools import (
    BASELINES,
    COMPARE_TOOLS,
    FSSPEC_RCP,
    PARALLEL_JOBS,
    RCP_FIXED,
    REMOTE_TOOLS,
    REMOVE_TOOLS,
    chore_of,
)

PEERS: Final = (
    "cp_r",
    "cp_a",
    "rsync_a",
    f"cp_par{PARALLEL_JOBS}",
    "rclone",
    "shutil",
    "fsspec",
    "airflow",
)
RCP_AUTO: Final = "rcp_auto"
OPERATOR: Final = "rcp_operator"
"""Airflow's RcpCopyOperator, beside ObjectStoragePath.copy, on the 1 KiB sets."""
HOOK_TOOLS: Final = ("rcp_hooks", "rcp_nohooks")
"""The engine with and without its plugin layer (:mod:`.bypass`), in a few cells."""
QUICK_FIXED: Final = (1, 4, 16, 64)
FIXED_TOOLS: Final = tuple(f"rcp_w{n}" for n in RCP_FIXED)
ALL_TOOLS: Final = (
    *PEERS,
    OPERATOR,
    FSSPEC_RCP,
    RCP_AUTO,
    *FIXED_TOOLS,
    *HOOK_TOOLS,
    *REMOVE_TOOLS,
    *COMPARE_TOOLS,
    *REMOTE_TOOLS,
)


def fits(tool: str, fs: str) -> bool:
    """Whether ``tool`` runs on ``fs``: remote tools between two hosts, the others on
    one (a local copy inside a namespace measures nothing new)."""
    return (tool in REMOTE_TOOLS) == (fs in REMOTE)


@dataclass(frozen=True, slots=True)
class Cell:
    """One filesystem x fileset, measured in ``modes`` with ``tools`` (None: all)."""

    fs: str
    fileset: str
    modes: tuple[Mode, ...] = MODES
    tools: tuple[str, ...] | None = None
    reps: int | None = None  # None: the plan's
    note: str = ""
    confirm: tuple[str, ...] = ()
    """The references of the cell's targets, re-run in its confirmation rounds."""


@dataclass(frozen=True, slots=True)
class Plan:
    """A named list of cells, the tools to run, repetitions and a time budget."""

    name: str
    cells: tuple[Cell, ...]
    tools: tuple[str, ...]
    reps: int
    budget_s: float
    confirm_reps: int = 0
    """Confirmation rounds after each cell's repetitions: rcp automatic, the fixed
    setting with the best median so far and the cell's ``confirm`` tools, side by
    side again. The best of eight settings by three noisy runs each is partly the
    luckiest (on this shared 2-core machine one tool's runs spread by 10-30%), so a
    target judged on it alone would be biased; more runs of exactly the compared
    tools shrink that bias and the noise in the ratios the targets read."""
    baseline: bool = False
    """Whether the previous build runs beside this one (``--baseline-rcp``): each
    tool of :data:`~benchmarks.harness.tools.BASELINES` is followed by its twin
    wherever it runs, confirmation rounds included, so both are interleaved in the
    same rounds."""

    @property
    def tool_ids(self) -> tuple[str, ...]:
        """Every tool the plan may run, in its order: :attr:`tools`, with each one's
        twin from the previous build after it when :attr:`baseline`."""
        return self._twinned(self.tools)

    def tools_of(self, cell: Cell) -> tuple[str, ...]:
        """The tools ``cell`` runs, in the plan's order (only those that fit its
        filesystem: :func:`fits`; twins follow their tool: :attr:`baseline`)."""
        wanted = self.tools if cell.tools is None else cell.tools
        return self._twinned(t for t in self.tools if t in wanted and fits(t, cell.fs))

    def _twinned(self, ids: Iterable[str]) -> tuple[str, ...]:
        """``ids``, each followed by its previous build's twin when :attr:`baseline`."""
        twins = BASELINES if self.baseline else {}
        return tuple(x for t in ids for x in (t, twins.get(t)) if x is not None)

    def reps_of(self, cell: Cell) -> int:
        """Repetitions of ``cell``."""
        return self.reps if cell.reps is None else cell.reps

    def confirming(self, cell: Cell) -> tuple[str, ...]:
        """The tools of ``cell``'s confirmation rounds, besides the best fixed setting
        (known only once the cell ran: see :meth:`confirms_best`)."""
        runs = self.tools_of(cell)
        auto = (RCP_AUTO,) if RCP_AUTO in runs else ()
        return self._twinned((*auto, *(t for t in cell.confirm if t in runs)))

    def confirms_best(self, cell: Cell) -> bool:
        """Whether ``cell``'s confirmation rounds include the best fixed setting."""
        runs = self.tools_of(cell)
        return RCP_AUTO in runs and any(t in FIXED_TOOLS for t in runs)

    def confirm_rounds(self, cell: Cell) -> int:
        """Confirmation rounds of ``cell`` per mode: none where fewer than two tools
        would be compared."""
        return self.confirm_reps if self._compared(cell) > 1 else 0

    def _compared(self, cell: Cell) -> int:
        """Tools in each of ``cell``'s confirmation rounds."""
        return len(self.confirming(cell)) + self.confirms_best(cell)

    def runs(self) -> int:
        """How many timed runs the plan asks for (before anything is skipped)."""
        return sum(
            len(c.modes)
            * (
                len(self.tools_of(c)) * self.reps_of(c)
                + self._compared(c) * self.confirm_rounds(c)
            )
            for c in self.cells
        )


_MEMORY_NOTE = "memory probe: rcp only, peak RSS against the file count (empty files)"
_FUSE_NOTE = (
    "warm only (latencyfs caches nothing client-side, so cold differs only in the "
    "backing disk); small, because serial peers pay ~25 ms per small file here"
)
_LINUX_NOTE = (
    "warm only (the target); rcp fixed at 1, 4, 16, 64 only: each run is followed by "
    "a fresh volume and a re-read of the 1.2 GiB source"
)
_EXT4_LARGE_NOTE = (
    "large files within one filesystem (copy_file_range copies in the kernel): at "
    "3 x 100 MiB cp takes ~0.1 s, about one Python start-up, so 4 x 1 GiB shows the "
    "copy itself; warm only, a few tools (each run writes 4 GiB)"
)
_FIXED_COST_NOTE = (
    "each tool's fixed cost (start-up, exit) on a tree too small to matter; the "
    "floor under every other cell"
)
_BUSY_NOTE = (
    "the Linux tree beside a busy loop in a session of its own, which keeps a core "
    "(autogroup), as a neighbour on a shared worker: automatic settings against fixed "
    "ones when more workers cannot win more CPU; warm only"
)
_SHARED_NOTE = (
    "the Linux tree beside a busy loop in the same cpu cgroup, as tasks of one "
    "container share it: more workers win more of the CPUs; warm only"
)
_REFLINK_NOTE = (
    "the reflink target: tools that can reflink (cp, parallel cp, rcp) plus shutil "
    "as the byte-copy reference; the other byte copiers would each write 4 GiB per "
    "run (they run on xfs/1k_10k)"
)
_REMOTE_NOTE = "between two hosts, h1 pulling from h2; warm only (the targets are warm)"
_REMOTE_LINK_NOTE = (
    "h2's link capped at 1 Gbit/s (tbf); 2 x 1 GiB (~17 s per run at the link rate) "
    "is enough to see the rate"
)
_REMOVE_NOTE = (
    "tree chore (issue 7): each run removes an untimed cp -a of the source, rrm "
    "against rm -rf"
)
_FUSE_REMOVE_NOTE = (
    f"{_REMOVE_NOTE}; warm only (latencyfs caches nothing client-side); the tree is "
    "made through the backing directory"
)
_COMPARE_NOTE = (
    "tree chore (issue 7): rcmp --checksum against hashing both trees serially, the "
    "source with one untimed cp -a of it per round; warm only (the target)"
)
_QUICK_FIXED = tuple(f"rcp_w{n}" for n in QUICK_FIXED)
_QUICK_TOOLS = (*PEERS, RCP_AUTO, *_QUICK_FIXED)
_FULL_TOOLS = (*PEERS, RCP_AUTO, *FIXED_TOOLS)
_PYTHON_REFS = ("fsspec", FSSPEC_RCP, "airflow", OPERATOR)
"""Issue 5's and 6's pairs: the operator against ObjectStoragePath, our fsspec
filesystem against fsspec's local one."""
_BUSY_TOOLS = ("cp_a", RCP_AUTO, "rcp_w1", "rcp_w4", "rcp_w16")
"""The contended cells' tools: cp -a for scale, automatic against 1, 4 and 16."""
_REFLINKERS = ("cp_r", "cp_a", f"cp_par{PARALLEL_JOBS}", "shutil", RCP_AUTO)

QUICK: Final = Plan(
    name="quick",
    tools=(
        *_QUICK_TOOLS,
        OPERATOR,
        FSSPEC_RCP,
        *HOOK_TOOLS,
        *REMOVE_TOOLS,
        *COMPARE_TOOLS,
        *REMOTE_TOOLS,
    ),
    reps=3,
    budget_s=12 * 60,
    confirm_reps=1,
    cells=(
        Cell("ext4", "1k_10k", tools=(*_QUICK_TOOLS, OPERATOR, FSSPEC_RCP)),
        Cell("ext4", "100m_3", ("warm",), _QUICK_TOOLS),
        Cell("xfs", "100m_3", ("warm",), _QUICK_TOOLS),
        Cell(
            "fuse",
            "1k_100",
            ("warm",),
            (*_QUICK_TOOLS, OPERATOR, FSSPEC_RCP),
            note=_FUSE_NOTE,
        ),
        Cell("fuse", "1m_50", ("warm",), _QUICK_TOOLS, note=_FUSE_NOTE),
        Cell("tmpfs", "1k_10k", ("warm",), (*_QUICK_TOOLS, *HOOK_TOOLS)),
        Cell("tmpfs", "empty_10k", ("warm",), (RCP_AUTO,), 1, _MEMORY_NOTE),
        Cell("tmpfs", "empty_100k", ("warm",), (RCP_AUTO,), 1, _MEMORY_NOTE),
        Cell("ext4", "1k_10k", tools=REMOVE_TOOLS, note=_REMOVE_NOTE),
        Cell("fuse", "1k_100", ("warm",), REMOVE_TOOLS, note=_FUSE_REMOVE_NOTE),
        Cell("ext4", "mixed", ("warm",), COMPARE_TOOLS, note=_COMPARE_NOTE),
        Cell("ext4", "100m_3", ("warm",), COMPARE_TOOLS, note=_COMPARE_NOTE),
        Cell("netns", "1k_10k", ("warm",), REMOTE_TOOLS, note=_REMOTE_NOTE),
        Cell("netns", "100m_3", ("warm",), REMOTE_TOOLS, note=_REMOTE_NOTE),
    ),
)

FULL: Final = Plan(
    name="full",
    tools=ALL_TOOLS,
    reps=3,
    budget_s=95 * 60,
    confirm_reps=4,
    cells=(
        Cell(
            "ext4",
            "1k_50k",
            ("warm",),
            (*_FULL_TOOLS, OPERATOR, FSSPEC_RCP, *HOOK_TOOLS),
            note="warm only (the target); cold: 1k_10k",
            confirm=("cp_r", *_PYTHON_REFS, *HOOK_TOOLS),
        ),
        Cell(
            "ext4",
            "linux",
            ("warm",),
            (*PEERS, RCP_AUTO, FSSPEC_RCP, *_QUICK_FIXED),
            None,
            _LINUX_NOTE,
            confirm=("cp_a", "fsspec", FSSPEC_RCP),
        ),
        Cell("ext4", "100m_3", tools=_FULL_TOOLS, confirm=("cp_r",)),
        Cell(
            "ext4",
            "1g_4",
            ("warm",),
            ("cp_r", "cp_a", "rsync_a", "shutil", RCP_AUTO, "rcp_w1", "rcp_w4"),
            None,
            _EXT4_LARGE_NOTE,
            confirm=("cp_r",),
        ),
        Cell("ext4", "1k_10k", ("cold",), _FULL_TOOLS),
        Cell("ext4", "mixed", ("warm",), _FULL_TOOLS),
        Cell(
            "ext4",
            "tiny",
            ("warm",),
            _FULL_TOOLS,
            9,
            f"{_FIXED_COST_NOTE}; 9 repetitions: runs of 0.1 s vary by a fifth",
        ),
        *(
            Cell(fs, "linux", ("warm",), _BUSY_TOOLS, note=note, confirm=("cp_a",))
            for fs, note in (("ext4busy", _BUSY_NOTE), ("ext4shared", _SHARED_NOTE))
        ),
        Cell(
            "xfs",
            "1g_4",
            ("warm",),
            (*_REFLINKERS, *FIXED_TOOLS),
            None,
            _REFLINK_NOTE,
        ),
        Cell("xfs", "1k_10k", ("warm",), _FULL_TOOLS),
        Cell(
            "fuse",
            "1k_200",
            ("warm",),
            (*_FULL_TOOLS, OPERATOR, FSSPEC_RCP),
            note=_FUSE_NOTE,
            confirm=("cp_r", f"cp_par{PARALLEL_JOBS}", *_PYTHON_REFS),
        ),
        Cell(
            "fuse",
            "1m_100",
            ("warm",),
            _FULL_TOOLS,
            note=_FUSE_NOTE,
            confirm=("cp_r", f"cp_par{PARALLEL_JOBS}"),
        ),
        Cell(
            "tmpfs",
            "1k_10k",
            ("warm",),
            (*_FULL_TOOLS, *HOOK_TOOLS),
            confirm=HOOK_TOOLS,
        ),
        Cell("tmpfs", "empty_100k", ("warm",), (RCP_AUTO,), 1, _MEMORY_NOTE),
        Cell("tmpfs", "empty_1m", ("warm",), (RCP_AUTO,), 1, _MEMORY_NOTE),
        Cell(
            "ext4",
            "1k_50k",
            ("warm",),
            REMOVE_TOOLS,
            note=f"{_REMOVE_NOTE}; warm only (the target); cold: 1k_10k",
            confirm=REMOVE_TOOLS,
        ),
        Cell("ext4", "1k_10k", ("cold",), REMOVE_TOOLS, note=_REMOVE_NOTE),
        Cell(
            "fuse",
            "1k_200",
            ("warm",),
            REMOVE_TOOLS,
            note=_FUSE_REMOVE_NOTE,
            confirm=REMOVE_TOOLS,
        ),
        Cell(
            "ext4",
            "mixed",
            ("warm",),
            COMPARE_TOOLS,
            note=_COMPARE_NOTE,
            confirm=COMPARE_TOOLS,
        ),
        Cell(
            "ext4",
            "100m_3",
            ("warm",),
            COMPARE_TOOLS,
            note=_COMPARE_NOTE,
            confirm=COMPARE_TOOLS,
        ),
        Cell(
            "ext4",
            "1g_4",
            ("warm",),
            COMPARE_TOOLS,
            note=f"{_COMPARE_NOTE}; 8 GiB hashed per run, so start-up costs little",
        ),
        Cell("netns", "1k_50k", ("warm",), REMOTE_TOOLS, note=_REMOTE_NOTE),
        Cell("netns", "linux", ("warm",), REMOTE_TOOLS, note=_REMOTE_NOTE),
        Cell("netns", "1m_500", ("warm",), REMOTE_TOOLS, note=_REMOTE_NOTE),
        Cell("netns", "1g_4", ("warm",), REMOTE_TOOLS, note=_REMOTE_NOTE),
        Cell("netns1g", "1g_2", ("warm",), REMOTE_TOOLS, note=_REMOTE_LINK_NOTE),
    ),
)

_SIDE_BY_SIDE_NOTE = "warm only, as in the full profile"
_SIDE_BY_SIDE_CELLS: Final = (
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
"""Issue 24's committed cells: the full profile's copy cells it names, warm."""

SIDE_BY_SIDE: Final = Plan(
    name="compare",
    tools=(RCP_AUTO, "rcp_remote"),
    reps=10,
    budget_s=75 * 60,
    baseline=True,
    cells=tuple(
        Cell(
            fs,
            fileset,
            ("warm",),
            ("rcp_remote",) if fs in REMOTE else (RCP_AUTO,),
            note=_SIDE_BY_SIDE_NOTE,
        )
        for fs, fileset in _SIDE_BY_SIDE_CELLS
    ),
)

PROFILES: Final = {p.name: p for p in (QUICK, FULL, SIDE_BY_SIDE)}


def validate(plan: Plan) -> None:
    """Raise ``ValueError`` naming the first unknown fileset, filesystem or tool."""
    for tool in plan.tools:
        if tool not in ALL_TOOLS:
            raise ValueError(
                f"unknown tool {tool!r}: expected some of {', '.join(ALL_TOOLS)}"
            )
    for cell in plan.cells:
        if cell.fs not in FILESYSTEMS:
            raise ValueError(
                f"unknown filesystem {cell.fs!r}: expected some of {', '.join(FILESYSTEMS)}"
            )
        if cell.fileset not in FILESETS:
            raise ValueError(
                f"unknown fileset {cell.fileset!r}: expected some of {', '.join(FILESETS)}"
            )
        for tool in cell.tools or ():
            if tool not in ALL_TOOLS:
                raise ValueError(
                    f"unknown tool {tool!r} in cell {cell.fs}/{cell.fileset}"
                )
            if not fits(tool, cell.fs):
                where = "between two hosts" if tool in REMOTE_TOOLS else "on one host"
                raise ValueError(
                    f"tool {tool!r} copies {where}: it cannot run in cell "
                    f"{cell.fs}/{cell.fileset}"
                )
        chores = sorted({chore_of(t) for t in cell.tools or ()})
        if len(chores) > 1:
            raise ValueError(
                f"cell {cell.fs}/{cell.fileset} mixes {' and '.join(chores)} tools: "
                "each chore gets cells of its own"
            )


def restrict(
    plan: Plan,
    *,
    filesets: tuple[str, ...] | None = None,
    filesystems: tuple[str, ...] | None = None,
    tools: tuple[str, ...] | None = None,
    modes: tuple[Mode, ...] | None = None,
    reps: int | None = None,
    budget_s: float | None = None,
    confirm_reps: int | None = None,
    baseline: bool | None = None,
) -> Plan:
    """Narrow ``plan`` to the given ids (``None`` keeps what the plan has); with
    ``baseline``, measure the previous build beside this one (:attr:`Plan.baseline`).

    With ``filesets`` the plan's cells are replaced by every ``filesystems`` (or the
    plan's filesystems) x ``filesets`` pair, in both modes unless ``modes`` narrows
    them. Cells left with no mode or no tool are dropped.
    """
    cells = plan.cells
    if filesystems is not None:
        cells = tuple(c for c in cells if c.fs in filesystems)
    if filesets is not None:
        names = filesystems or tuple(dict.fromkeys(c.fs for c in plan.cells))
        cells = tuple(Cell(fs, f) for fs in names for f in filesets)
    if modes is not None:
        cells = tuple(
            replace(c, modes=tuple(m for m in c.modes if m in modes)) for c in cells
        )
    if reps is not None:
        cells = tuple(replace(c, reps=None) for c in cells)
    narrowed = replace(
        plan,
        tools=plan.tools if tools is None else tools,
        reps=plan.reps if reps is None else reps,
        budget_s=plan.budget_s if budget_s is None else budget_s,
        confirm_reps=plan.confirm_reps if confirm_reps is None else confirm_reps,
        baseline=plan.baseline if baseline is None else baseline,
        cells=cells,
    )
    if tools is not None:
        for tool in tools:
            if tool not in ALL_TOOLS:
                raise ValueError(
                    f"unknown tool {tool!r}: expected some of {', '.join(ALL_TOOLS)}"
                )
    kept = tuple(c for c in narrowed.cells if c.modes and narrowed.tools_of(c))
    result = replace(narrowed, cells=kept)
    validate(result)
    return result


def fs_options(plan: Plan, fuse_delay_ms: float = 0.5) -> FsOptions:
    """Size the XFS image and the tmpfs for the filesets the plan puts on them.

    Room for every source on that filesystem, two copies of the largest one (the copy
    being made, and one being deleted), and 3 GiB so a round of small copies can keep
    them all until its end.
    """

    def need(fs: str) -> int:
        sizes = [FILESETS[c.fileset].approx_bytes for c in plan.cells if c.fs == fs]
        if not sizes:
            return 0
        return sum(sizes) + 2 * max(sizes) + 3 * GiB

    return FsOptions(
        xfs_bytes=max(2 * GiB, need("xfs")),
        tmpfs_bytes=max(GiB, need("tmpfs")),
        fuse_delay_ms=fuse_delay_ms,
    )
