"""Trees to, from, between and within object stores: rcp beside s3fs, rclone and
Airflow's ``ObjectStoragePath`` (issue 26's benchmarks).

Every store is an emulator (:mod:`benchmarks.objectstores`; S3 the benchmark's moto,
:mod:`benchmarks.moto_emulator`, which lists from an index and reads a ranged GET's
bytes alone, as a real store does) behind the counting proxy
(:mod:`benchmarks.storeproxy`), which holds each request ``--delay-ms`` (20 ms: a
real store's latency) and counts requests by kind and object bytes each way. The
emulator's CPU bounds every tool's wall time on this machine, so each row shows it
beside the time; the requests a tool makes are what a real store bills and waits for.

Cells (:data:`CELLS`), each tool run ``--reps`` times, interleaved (the order rotates
each repetition), each run into a fresh bucket or directory:

- ``up_small``, ``down_small``: a tree of 4 KiB files (full: 10,000 in 100
  directories) from this host to S3 and back: ``rcp``, ``s3fs`` (``put``/``get``
  recursive) and ``rclone copy --transfers 16``;
- ``up_large``, ``down_large``: 4 large files (full: 256 MiB; parts): the same tools;
- ``rerun``: the small tree copied again, unchanged (``rcp -o``, ``rclone copy``);
  ``touched``: again after 1% of the files were touched (same bytes, new time);
- ``across``: S3 to GCS (full: 1,000 files): ``rcp`` and ``ObjectStoragePath.copy``;
- ``within``: S3 to another prefix of the same bucket: ``rcp``, ``s3fs`` ``copy``
  and ``rclone copy`` (server-side copies: no object bytes through the client);
- ``listing``: ``rcp --dry-run`` of one flat prefix of 100 times the small tree's
  files (full: a million objects), and of one of a tenth of it, both made in the
  benchmark's moto before it starts (:mod:`benchmarks.moto_emulator`, whose
  listing pages cost their own keys): the peak RSS of listing ten times the
  objects, each one decided and reported.

A run is ``ok`` only when its tool exited 0 and the copy holds exactly the source's
files, byte for byte (each read back, untimed, from the emulator directly), or, for
a dry run, when it wrote nothing and said it would copy each object; a failed
run's figures are never shown as a result. The targets and the report are
:mod:`benchmarks.storereport`'s.

Run: ``python -m benchmarks.stores --python .venv-bench-rcp/bin/python --out
benchmarks/results/stores.md`` (``make bench-stores``; ``--quick`` for a small run).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import objectstores, storeproxy
from benchmarks.harness import verify
from benchmarks.harness.measure import measure
from benchmarks.harness.verify import Census
from benchmarks.objectstores import S3_KEY, S3_REGION, S3_SECRET, Store
from benchmarks.storeproxy import Proxy

KiB, MiB = 1 << 10, 1 << 20
TOUCHED_SHARE = 0.01
RCLONE_TRANSFERS = 16
RCLONE_REMOTE = "benchs3"
TIMEOUT_S = 1800.0
LISTED_BUCKET = "listed"
LISTED_SHARE = 100
"""The listing cell's prefix holds this many times the small tree's files."""
LISTED_START_S = 900.0
"""Seconds the benchmark's moto has to make the listing cell's objects and answer."""
HASHED_IN_BATCH = 16 * MiB
"""Objects up to this size are read back in batches (fsspec's concurrent ``cat``)."""


@dataclass(frozen=True)
class Scale:
    """How big the trees are: small files (``dirs`` x ``per_dir`` of ``small``
    bytes), large files (``large_count`` of ``large`` bytes), the across tree."""

    dirs: int
    per_dir: int
    small: int
    large_count: int
    large: int
    across_per_dir: int

    @property
    def small_files(self) -> int:
        return self.dirs * self.per_dir


SCALES = {
    "quick": Scale(10, 100, 4 * KiB, 4, 32 * MiB, 20),
    "full": Scale(100, 100, 4 * KiB, 4, 256 * MiB, 10),
}


@dataclass(frozen=True)
class Run:
    """One timed run of a tool: what it cost and what it asked of the stores."""

    cell: str
    tool: str
    label: str
    """The tool as the report names it (its command)."""
    rep: int
    wall_s: float
    cpu_s: float
    maxrss_kib: int
    emulator_cpu_s: float
    proxy_cpu_s: float
    requests: dict[str, int]
    """Requests by :class:`~benchmarks.storeproxy.Kind` value, all stores summed."""
    sent: int
    received: int
    ok: bool
    problem: str = ""


@dataclass
class Report:
    """A whole run (``stores.json``): its settings, what each cell's source tree
    held (files, directories, bytes, touched), and the runs."""

    meta: dict[str, Any] = field(default_factory=dict)
    trees: dict[str, dict[str, int]] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)


@dataclass
class Stage:
    """What a cell's runs share: the stores, the source tree and its census."""

    s3: Proxy
    gcs: Proxy | None
    python: str
    rcp: str
    work: Path
    scale: Scale
    source: Path = Path()
    census: Census = field(default_factory=lambda: Census(0, 0))
    """The source's files with their SHA-256 (:func:`.harness.verify.census`)."""
    seeded: str = ""
    """The ``bucket/prefix`` holding the source tree on S3, where a cell reads one."""

    def environ(self) -> dict[str, str]:
        """The environment of every tool: both stores' clients through the proxy,
        and rclone's remote for S3 (``AWS_CA_BUNDLE`` out: rclone 1.60 refuses a
        CA bundle for a plain-HTTP endpoint; ``PYTHONPATH`` out: rcp and s3fs are
        those of ``--python``, never a working tree's)."""
        env = self.s3.store.environ()
        if self.gcs is not None:
            env.update(self.gcs.store.environ())
        config = {
            "TYPE": "s3",
            "PROVIDER": "Other",
            "ENV_AUTH": "false",
            "ACCESS_KEY_ID": S3_KEY,
            "SECRET_ACCESS_KEY": S3_SECRET,
            "ENDPOINT": self.s3.store.endpoint,
            "REGION": S3_REGION,
            "FORCE_PATH_STYLE": "true",
        }
        env.update(
            {f"RCLONE_CONFIG_{RCLONE_REMOTE.upper()}_{k}": v for k, v in config.items()}
        )
        env.pop("AWS_CA_BUNDLE", None)
        env.pop("PYTHONPATH", None)  # each tool's own installation, not this tree
        return env


Argv = Callable[[Stage, str, str], list[str]]


S3FS_SCRIPT = """
import sys, fsspec
verb, src, dst = sys.argv[1:]
if verb == "put":
    fs, path = fsspec.core.url_to_fs(dst)
    fs.put(src, path, recursive=True)
elif verb == "get":
    fs, path = fsspec.core.url_to_fs(src)
    fs.get(path, dst, recursive=True)
else:
    fs, path = fsspec.core.url_to_fs(src)
    fs.copy(path, fsspec.core.url_to_fs(dst)[1], recursive=True)
"""
OBJECT_STORAGE_SCRIPT = """
import sys, fsspec
from airflow.sdk import ObjectStoragePath
from airflow.sdk.io import attach
src, dst = sys.argv[1:]
for protocol in ("s3", "gs"):
    attach(protocol, fs=fsspec.filesystem(protocol))
ObjectStoragePath(src).copy(ObjectStoragePath(dst + "/"), recursive=True)
"""
"""``ObjectStoragePath.copy`` between two stores, as a DAG's task calls it: the
destination ends in ``/`` (a directory), under which each object keeps its key."""


def _rclone(stage: Stage, src: str, dst: str) -> list[str]:
    def named(operand: str) -> str:
        return (
            f"{RCLONE_REMOTE}:{operand[5:]}" if operand.startswith("s3://") else operand
        )

    return [
        "rclone",
        "copy",
        "--transfers",
        str(RCLONE_TRANSFERS),
        named(src),
        named(dst),
    ]


def _s3fs(verb: str) -> Argv:
    return lambda stage, src, dst: [stage.python, "-c", S3FS_SCRIPT, verb, src, dst]


def _rcp(*options: str) -> Argv:
    return lambda stage, src, dst: [stage.rcp, *options, src, dst]


def _object_storage_path(stage: Stage, src: str, dst: str) -> list[str]:
    return [sys.executable, "-c", OBJECT_STORAGE_SCRIPT, src, dst]


@dataclass(frozen=True)
class Tool:
    """A command that copies ``src`` to ``dst``; ``nests`` when it lands the tree
    under ``dst`` plus the source's key (``ObjectStoragePath.copy``)."""

    id: str
    label: str
    argv: Argv
    nests: bool = False


RCP = Tool("rcp", "rcp", _rcp())
RCP_RERUN = Tool("rcp", "rcp -o", _rcp("-o"))
LISTS_TENTH = Tool(
    "rcp_tenth", "rcp --dry-run, a tenth as many", _rcp("--dry-run=brief")
)
LISTS_ALL = Tool("rcp_all", "rcp --dry-run", _rcp("--dry-run=brief"))
RCLONE = Tool("rclone", f"rclone copy --transfers {RCLONE_TRANSFERS}", _rclone)
OSP = Tool("osp", "ObjectStoragePath.copy", _object_storage_path, nests=True)


@dataclass(frozen=True)
class Cell:
    """A copy measured for each of ``tools``: ``direction`` says where the source
    and the destination are (``up``: this host to S3, ``down``, ``within`` one S3
    bucket, ``across`` S3 to GCS, ``rerun``: this host to S3 over the tool's own
    earlier copy, ``touched``: the same after 1% of the files were touched)."""

    id: str
    title: str
    direction: str
    large: bool
    tools: tuple[Tool, ...]


CELLS = (
    Cell(
        "up_small",
        "Upload, small files",
        "up",
        False,
        (RCP, Tool("s3fs", "s3fs put", _s3fs("put")), RCLONE),
    ),
    Cell(
        "down_small",
        "Download, small files",
        "down",
        False,
        (RCP, Tool("s3fs", "s3fs get", _s3fs("get")), RCLONE),
    ),
    Cell(
        "up_large",
        "Upload, large files",
        "up",
        True,
        (RCP, Tool("s3fs", "s3fs put", _s3fs("put")), RCLONE),
    ),
    Cell(
        "down_large",
        "Download, large files",
        "down",
        True,
        (RCP, Tool("s3fs", "s3fs get", _s3fs("get")), RCLONE),
    ),
    Cell("rerun", "Unchanged rerun", "rerun", False, (RCP_RERUN, RCLONE)),
    Cell("touched", "Rerun after touching 1%", "touched", False, (RCP_RERUN, RCLONE)),
    Cell("across", "S3 to GCS", "across", False, (RCP, OSP)),
    Cell(
        "within",
        "Within one S3 bucket",
        "within",
        False,
        (RCP, Tool("s3fs", "s3fs copy", _s3fs("copy")), RCLONE),
    ),
    Cell("listing", "Listing 1M objects", "listing", False, (LISTS_TENTH, LISTS_ALL)),
)


def listed(scale: Scale) -> dict[str, int]:
    """The listing cell's prefixes and the objects each holds, by the tool that
    lists it."""
    whole = scale.small_files * LISTED_SHARE
    return {LISTS_TENTH.id: whole // 10, LISTS_ALL.id: whole}


def _cpu_of(pid: int | None) -> float:
    """The CPU seconds (user + system) process ``pid`` has used; 0 without one."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _make_tree(stage: Stage, cell: Cell) -> dict[str, int]:
    """The cell's source tree, made by ``rcp-filegen`` (reused from the cell before
    when the same), and its census; what it holds (files, directories, bytes)."""
    scale = stage.scale
    if cell.direction == "listing":
        counts = listed(scale)
        whole = counts[LISTS_ALL.id]
        return {"files": whole, "directories": 1, "bytes": whole, "touched": 0} | {
            f"files_{tool}": n for tool, n in counts.items()
        }
    if cell.large:
        shape = ("1", str(scale.large_count), str(scale.large))
    elif cell.direction == "across":
        shape = (str(scale.dirs), str(scale.across_per_dir), str(scale.small))
    else:
        shape = (str(scale.dirs), str(scale.per_dir), str(scale.small))
    root = stage.work / "src-{}-{}-{}".format(*shape)
    if stage.source != root:
        if not root.exists():
            filegen = str(Path(stage.rcp).with_name("rcp-filegen"))
            subprocess.run([filegen, "--seed", "26", str(root), *shape], check=True)
        stage.source = root
        stage.census = verify.census(root, hashes=True)
        stage.seeded = ""
    return {
        "files": stage.census.files,
        "directories": 1 + stage.census.dirs,
        "bytes": stage.census.bytes,
        "touched": len(_touched(stage)),
    }


def _seed(stage: Stage) -> str:
    """The source tree on S3 (put once a tree, untimed, by s3fs past the proxy)."""
    if not stage.seeded:
        bucket = stage.s3.upstream.bucket()
        stage.s3.upstream.fs().put(str(stage.source), f"{bucket}/src", recursive=True)
        stage.seeded = f"{bucket}/src"
    return stage.seeded


def _census_of_objects(store: Store, root: str) -> Census:
    """The objects under ``root`` (markers left out) as a census of files: their
    count, bytes and SHA-256 by path relative to ``root``, each object read back
    (those up to :data:`HASHED_IN_BATCH` in fsspec's concurrent batches)."""
    fs = store.fs()
    listed = {
        path: int(info["size"])
        for path, info in fs.find(root, detail=True).items()
        if not path.endswith("/") and info["type"] == "file"
    }
    small = [p for p, size in listed.items() if size <= HASHED_IN_BATCH]
    contents = fs.cat(small) if small else {}
    digests: dict[str, str] = {}
    for path in listed:
        digest = hashlib.sha256()
        if path in contents:
            digest.update(contents[path])
        else:
            with fs.open(path, "rb", block_size=8 * MiB) as f:
                while block := f.read(8 * MiB):
                    digest.update(block)
        digests[path[len(root) + 1 :]] = digest.hexdigest()
    return Census(len(listed), sum(listed.values()), digests=digests)


def _problem(stage: Stage, where: str, store: Store | None) -> str:
    """Why the copy at ``where`` is not the source's files exactly, or ``""``
    (:func:`~benchmarks.harness.verify.compare`)."""
    if store is None:
        found = verify.census(Path(where), hashes=True)
    else:
        found = _census_of_objects(store, where)
    return verify.compare(stage.census, found)


def _dry_problem(said: Path, dst: str, objects: int) -> str:
    """Why a dry run did not do what it should, or ``""``: it wrote nothing at
    ``dst`` and said it would copy each of the ``objects`` (its stdout ``said``)."""
    if os.path.lexists(dst):
        return f"a dry run made {dst}"
    with said.open("rb") as lines:
        would = sum(line.startswith(b"would copy file ") for line in lines)
    return (
        "" if would == objects else f"{would} files would be copied, expected {objects}"
    )


@dataclass(frozen=True)
class Operands:
    """A run's source and destination (URLs or paths), and where its copy is read
    back for verification: the store (``None``: this host) and the path on it."""

    src: str
    dst: str
    check: str
    check_store: Store | None


def _prepare(stage: Stage, cell: Cell, tool: Tool, rep: int) -> Operands:
    """The operands of one run, its destination fresh (untimed work done here)."""
    s3 = stage.s3.store
    if cell.direction == "listing":
        dry = str(stage.work / f"dry-{tool.id}-{rep}")
        return Operands(s3.url(f"{LISTED_BUCKET}/{tool.id}"), dry, dry, None)
    if cell.direction in ("up", "rerun", "touched"):
        bucket = stage.s3.upstream.bucket()
        dst = s3.url(f"{bucket}/t")
        if cell.direction != "up":  # the tool's own earlier copy, untimed
            run_tool(stage, tool, str(stage.source), dst)
        if cell.direction == "touched":
            for rel in _touched(stage):
                (stage.source / rel).touch()
        return Operands(str(stage.source), dst, f"{bucket}/t", stage.s3.upstream)
    if cell.direction == "down":
        down = str(stage.work / f"down-{cell.id}-{tool.id}-{rep}")
        return Operands(s3.url(_seed(stage)), down, down, None)
    seeded = _seed(stage)
    if cell.direction == "within":
        bucket = seeded.split("/")[0]
        dst = f"{bucket}/copy-{tool.id}-{rep}"
        return Operands(s3.url(seeded), s3.url(dst), dst, stage.s3.upstream)
    assert stage.gcs is not None, "the across cell runs with GCS"
    bucket = stage.gcs.upstream.bucket()
    landed = f"{bucket}/t/{seeded.split('/', 1)[1]}" if tool.nests else f"{bucket}/t"
    return Operands(
        s3.url(seeded), stage.gcs.store.url(f"{bucket}/t"), landed, stage.gcs.upstream
    )


def _touched(stage: Stage) -> list[str]:
    """The files a ``touched`` run touches: every hundredth, at least one."""
    names = sorted(stage.census.digests or {})
    step = max(1, round(1 / TOUCHED_SHARE))
    return names[::step]


def run_tool(stage: Stage, tool: Tool, src: str, dst: str) -> None:
    """``tool`` copying ``src`` to ``dst``, untimed (a run's preparation)."""
    subprocess.run(
        tool.argv(stage, src, dst),
        env=stage.environ(),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=TIMEOUT_S,
    )


def _clean(operands: Operands) -> None:
    """The run's destination removed (a bucket whole: moto lists in O(keys))."""
    if operands.check_store is None:
        shutil.rmtree(operands.check, ignore_errors=True)
    elif operands.check_store.protocol == "s3" and "/copy-" in operands.check:
        operands.check_store.fs().rm(operands.check, recursive=True)
    else:
        operands.check_store.fs().rm(operands.check.split("/")[0], recursive=True)


def measure_run(stage: Stage, cell: Cell, tool: Tool, rep: int) -> Run:
    """One timed, verified run of ``tool`` in ``cell``."""
    operands = _prepare(stage, cell, tool, rep)
    proxies = [p for p in (stage.s3, stage.gcs) if p is not None]
    for proxy in proxies:
        proxy.reset()
    emulators = [p.upstream.pid for p in proxies]
    emulated = sum(_cpu_of(pid) for pid in emulators)
    proxied = time.process_time()
    with tempfile.TemporaryDirectory() as logs:
        got = measure(
            tool.argv(stage, operands.src, operands.dst),
            log_dir=Path(logs),
            timeout_s=TIMEOUT_S,
            env=stage.environ(),
        )
        proxy_cpu = time.process_time() - proxied
        emulator_cpu = sum(_cpu_of(pid) for pid in emulators) - emulated
        requests: dict[str, int] = {}
        sent = received = 0
        for proxy in proxies:
            counts = proxy.reset()
            for kind, n in counts.requests.items():
                requests[kind.value] = requests.get(kind.value, 0) + n
            sent, received = sent + counts.sent, received + counts.received
        if got.exit_code != 0:
            problem = f"exit {got.exit_code}: {got.stderr_tail[-300:]}"
        elif cell.direction == "listing":
            said = Path(logs) / "stdout"
            problem = _dry_problem(said, operands.dst, listed(stage.scale)[tool.id])
        else:
            problem = _problem(stage, operands.check, operands.check_store)
    _clean(operands)
    return Run(
        cell.id,
        tool.id,
        tool.label,
        rep,
        got.wall_s,
        got.user_s + got.sys_s,
        got.maxrss_kib,
        emulator_cpu,
        proxy_cpu,
        requests,
        sent,
        received,
        not problem,
        problem,
    )


def _rotated(tools: tuple[Tool, ...], rep: int) -> list[Tool]:
    shift = rep % len(tools)
    return [*tools[shift:], *tools[:shift]]


@contextlib.contextmanager
def _stores(
    delay_s: float, gcs: bool, fill: dict[str, int]
) -> Iterator[tuple[Proxy, Proxy | None]]:
    """S3 (holding ``fill``'s objects, by prefix of :data:`LISTED_BUCKET`: the
    benchmark's moto) and, with ``gcs``, GCS, each behind a proxy."""
    with contextlib.ExitStack() as stack:
        s3_served = objectstores.serve(
            "s3",
            benchmark=True,
            fill=[f"{LISTED_BUCKET}/{prefix}={n}" for prefix, n in fill.items()],
            start_timeout=LISTED_START_S if fill else objectstores.START_TIMEOUT,
        )
        s3 = stack.enter_context(
            storeproxy.proxied(stack.enter_context(s3_served), delay_s)
        )
        other = None
        if gcs:
            served = stack.enter_context(objectstores.serve("gcs"))
            other = stack.enter_context(storeproxy.proxied(served, delay_s))
        yield s3, other


def bench(
    *,
    python: str,
    scale: Scale,
    reps: int,
    delay_s: float,
    work: Path,
    cells: tuple[Cell, ...] = CELLS,
    say: Callable[[str], None] = print,
    done: Callable[[Report], None] = lambda report: None,
) -> Report:
    """Every cell's runs; each cell on emulators of its own (a fresh start),
    ``done`` told the report so far after each."""
    report = Report(
        meta={
            "delay_ms": delay_s * 1000,
            "reps": reps,
            "scale": asdict(scale),
            "python": python,
            "rclone": _version(["rclone", "version"])
            if any(RCLONE in c.tools for c in cells)
            else "not run",
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "cores": os.cpu_count() or 1,
        }
    )
    rcp = str(Path(python).with_name("rcp"))
    for cell in cells:
        fill = listed(scale) if cell.direction == "listing" else {}
        with _stores(delay_s, cell.direction == "across", fill) as (s3, gcs):
            stage = Stage(s3, gcs, python, rcp, work, scale)
            report.trees[cell.id] = _make_tree(stage, cell)
            for rep in range(reps):
                for tool in _rotated(cell.tools, rep):
                    run = measure_run(stage, cell, tool, rep)
                    say(
                        f"{cell.id} {tool.id} rep {rep}: {run.wall_s:.2f} s "
                        f"{'ok' if run.ok else run.problem}"
                    )
                    report.runs.append(run)
        done(report)
    return report


def _version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except OSError as exc:
        return f"unavailable: {exc}"
    return out.splitlines()[0] if out else ""


def save(report: Report, path: Path) -> None:
    """``report`` as JSON at ``path``, whole (written beside it, then renamed)."""
    written = path.with_name(path.name + ".tmp")
    written.write_text(json.dumps(asdict(report), indent=1, sort_keys=True) + "\n")
    written.replace(path)


def load(path: Path) -> Report:
    raw = json.loads(path.read_text())
    return Report(raw["meta"], raw["trees"], [Run(**r) for r in raw["runs"]])


def merged(earlier: Report, now: Report) -> Report:
    """``earlier``'s runs of the cells ``now`` did not run, with ``now``'s: a partial
    rerun's report. Its header says which cells were run again, when, and how many
    times a tool (the rest keep ``earlier``'s settings)."""
    cells = sorted({run.cell for run in now.runs})
    rerun = f"cells {', '.join(cells)}: {now.meta['started']}, {now.meta['reps']} runs"
    return Report(
        {**earlier.meta, "started": f"{earlier.meta['started']} ({rerun} a tool)"},
        {**earlier.trees, **now.trees},
        [run for run in earlier.runs if run.cell not in cells] + now.runs,
    )


def main(argv: list[str] | None = None) -> int:
    from benchmarks import storereport
    from benchmarks.harness.markdown import publish

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.stores", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--python",
        help="the Python of the rcp and s3fs measured (a venv with rcp[s3,gcs]); "
        "needed but with --report-only",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small trees (1,000 files, 4 x 32 MiB), one repetition",
    )
    parser.add_argument(
        "--reps", type=int, help="runs of each tool in each cell (default 3; --quick 1)"
    )
    parser.add_argument("--delay-ms", type=float, default=storeproxy.DELAY * 1000)
    parser.add_argument("--cells", help="only these cells (comma list)")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path("/dev/shm/rcp-bench-stores"),
        help="where the local trees go (tmpfs: the stores are measured, not this disk)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="the report (markdown); its runs beside it (.json, saved after each cell)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="JSON",
        help="an earlier run whose other cells' runs the report keeps (a partial rerun)",
    )
    parser.add_argument(
        "--report-only",
        type=Path,
        metavar="JSON",
        help="write the report of these runs (an interrupted run's too), run nothing",
    )
    args = parser.parse_args(argv)
    if args.report_only is not None:
        return publish(storereport.render(load(args.report_only)), args.out)
    if args.python is None:
        parser.error("--python is needed to run the cells")
    scale = SCALES["quick" if args.quick else "full"]
    try:
        kept = None if args.keep is None else load(args.keep)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"{args.keep} is no store benchmark's runs: {exc}")
    if kept is not None and (kept.meta["scale"], kept.meta["delay_ms"]) != (
        asdict(scale),
        args.delay_ms,
    ):
        parser.error(f"{args.keep} was run at another scale or delay: not kept")
    chosen: tuple[Cell, ...] = CELLS
    if args.cells:
        names = args.cells.split(",")
        unknown = sorted(set(names) - {c.id for c in CELLS})
        if unknown:
            parser.error(f"unknown cells {unknown}; known: {[c.id for c in CELLS]}")
        chosen = tuple(c for c in CELLS if c.id in names)
    for name in ("s3", "gcs"):
        if (why := objectstores.missing(name)) is not None:
            parser.error(why)
    if shutil.which("rclone") is None:
        parser.error("rclone is not installed (make bench-system)")
    args.work.mkdir(parents=True, exist_ok=True)
    reps = args.reps or (1 if args.quick else 3)
    runs = None if args.out is None else args.out.with_suffix(".json")

    def whole(report: Report) -> Report:
        return report if kept is None else merged(kept, report)

    try:
        report = bench(
            python=args.python,
            scale=scale,
            reps=reps,
            delay_s=args.delay_ms / 1000,
            work=args.work,
            cells=chosen,
            done=lambda report: None if runs is None else save(whole(report), runs),
        )
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
    return publish(storereport.render(whole(report)), args.out)


if __name__ == "__main__":
    sys.exit(main())
