"""Measured runs, grouped in rounds: one round = every tool once, one mode, one cell.

Protocol of a round (:class:`Round`):

- Entry: ``sync`` and drop caches. Nothing is deleted *during* a round: every run
  writes a destination path never used before, and all of them are deleted together
  at the end, followed by ``sync`` and a drop of the caches. Where the filesystem has
  a *fresh* volume for copies of many files (ext4: see :mod:`.filesystems`), those
  copies go there and the volume is re-made empty instead of deleting them, so no
  run allocates inodes among ones freed minutes before.
- A *cold* run: ``sync``, drop caches, an unmeasured warm-up of the tool on a
  three-entry tree (so Python's imports and the binaries are cached: "cold" is the
  data, not the tool's start-up from disk), then the measured run.
- A *warm* run: the source was read once when the round started; the tool is warmed
  up once; then ``sync`` (so the previous tool's writeback does not overlap) and the
  measured run. Caches are not dropped between warm runs, so the source stays warm.
- Every copy is verified right after its run (:mod:`.verify`): count and bytes of
  regular files for the tool's symlink semantics, content hashes on the small
  filesets, reflink sharing on large files where the filesystem can reflink.
- When a round's copies would not fit, or hold much data (``batch`` false; see
  ``runner._batch``), each destination is deleted right after its verification
  instead (before its writeback, so the delete is cheap), caches are dropped, and for
  warm runs the source and the tool are warmed again before the next run.
- Tree chores (``Tool.chore``, issue 7) work on trees the round makes for them,
  untimed, with ``cp -a`` through the backing tree (like the sources: through the
  latency FUSE a 200-file tree took 10 s to make, and the FUSE keeps no state of its
  own), checked by a census (a bad preparation fails the sample, never the tool): a
  *remove* tool gets a copy of the source of its own as ``DST`` (then ``sync``; cold
  runs settle after it) and must leave nothing of it; a *compare* tool gets ``SRC``
  and one copy of it that every compare tool of the round shares (made at the first,
  made again after a flush) and must exit 0. Their warm-ups work on a copy of the
  warm-up tree. The sample's ``files`` and ``bytes`` count the tree removed or
  compared.
- On another host (``Mounted.prefix``, ``Mounted.env``: the two-host filesystems) every
  run and warm-up starts with the prefix and gets the environment. A tool that writes
  rcp's JSON summary gets ``RCP_BENCH_SUMMARY`` (a file per run beside its logs),
  and the sample records the source daemon's CPU time and peak RSS from it.

Invariant: a sample is ``ok`` only when the tool exited 0 within its timeout *and* the
copy verified (a chore: its tree is gone, or the copy was found the same); otherwise
``problem`` says what went wrong. Deletion is confined to the filesystem's ``dst``
directory (and its fresh volume) and the warm-up area, and happens even when a run or
the harness is interrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from benchmarks.harness import extents
from benchmarks.harness.cache import CacheControl, warm
from benchmarks.harness.filesets import Fileset
from benchmarks.harness.filesystems import Mounted
from benchmarks.harness.measure import Measurement, measure
from benchmarks.harness.results import Mode, Sample
from benchmarks.harness.tools import SUMMARY_VAR, Tool
from benchmarks.harness.verify import FOLLOW, Census, Symlinks, census, compare

_WARMUP_TIMEOUT = 120.0
BLOCK = 4096  # a small file still takes a block on disk


@dataclass(frozen=True, slots=True)
class Bench:
    """What every round of a run shares."""

    work: Path
    cache: CacheControl
    timeout_s: float

    @property
    def warmup_src(self) -> Path:
        """The tiny tree tools are warmed up on."""
        return self.work / "warmup" / "src"

    @property
    def logs(self) -> Path:
        """Where each tool's last stdout, stderr and peak RSS are kept."""
        return self.work / "logs"

    def prepare(self) -> None:
        """Create the warm-up tree (a file, a subdirectory with a file, a symlink)."""
        src = self.warmup_src
        if not (src / "sub" / "b").exists():
            (src / "sub").mkdir(parents=True, exist_ok=True)
            (src / "a").write_bytes(b"a" * 1000)
            (src / "sub" / "b").write_bytes(b"b" * 5000)
        if not (src / "link").is_symlink():
            (src / "link").symlink_to("a")


@dataclass(frozen=True, slots=True)
class Source:
    """A fileset on one filesystem: where tools read it, and its expected census."""

    fileset: Fileset
    path: Path  # as tools see it
    direct: Path  # through the backing tree
    expected: Mapping[Symlinks, Census]

    @property
    def data_bytes(self) -> int:
        """Bytes of regular-file data in one copy."""
        return next(iter(self.expected.values())).bytes

    @property
    def disk_bytes(self) -> int:
        """About what one copy takes on disk (data plus a block per file)."""
        plain = next(iter(self.expected.values()))
        return plain.bytes + plain.files * BLOCK


def expectations(
    fileset: Fileset, direct: Path, kinds: set[Symlinks]
) -> dict[Symlinks, Census]:
    """The census of ``direct`` for every symlink semantics in ``kinds``."""
    by_follow = {
        follow: census(direct, follow=follow, hashes=fileset.hashes)
        for follow in {FOLLOW[kind] for kind in kinds}
    }
    return {kind: by_follow[FOLLOW[kind]] for kind in kinds}


class Round:
    """Every tool once, back to back, in one mode, on one source (a context manager)."""

    def __init__(
        self,
        bench: Bench,
        mounted: Mounted,
        source: Source,
        mode: Mode,
        *,
        batch: bool,
    ) -> None:
        self.bench, self.mounted, self.source, self.mode = bench, mounted, source, mode
        self.batch = batch
        self.fresh = mounted.fresh_for(source.fileset.large)
        self.dst_root = mounted.dst_for(source.fileset.large)
        self._trash: list[tuple[Path, Path]] = []  # (path, the dir it must be below)
        self._renew = False  # the fresh volume holds copies: re-make it
        self._warmed: set[str] = set()
        self._copy: tuple[Path, Census] | None = None  # what compare tools compare

    def __enter__(self) -> Round:
        self.bench.cache.settle()
        if self.mode == "warm":
            warm(self.source.direct)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._flush()

    def run(self, tool: Tool, *, rep: int, position: int, seq: int) -> Sample:
        """Measure ``tool`` once and verify its copy (or chore); return the
        :class:`Sample`."""
        mounted, source = self.mounted, self.source
        name = f"{source.fileset.id}-{self.mode}-r{rep}-{tool.id}-{seq}"
        dst = self.dst_root / name
        dst_direct = mounted.direct(dst)
        warm_dst = self.bench.work / "warmup" / f"dst-{seq}"
        if dst_direct.exists() or warm_dst.exists():
            raise RuntimeError(f"destination {dst_direct} or {warm_dst} exists already")
        self._trash.append((warm_dst, self.bench.work / "warmup"))
        self._keep(dst_direct)
        log_dir = self.bench.logs / tool.id
        env = {**os.environ, **mounted.env, **tool.env}
        summary = log_dir / f"{name}.json"
        warm_env = env
        if tool.summary_json:
            log_dir.mkdir(parents=True, exist_ok=True)
            summary.unlink(missing_ok=True)
            env[SUMMARY_VAR] = str(summary)
            warm_env = {**env, SUMMARY_VAR: str(log_dir / "warm-up.json")}
        target, worked_on, unprepared = self._tree_for(tool, dst, rep, seq)
        if unprepared:
            return self._unprepared(tool, rep, position, unprepared)
        if self.mode == "cold":
            self.bench.cache.settle()
            self._warm_up(tool, warm_dst, warm_env)
        else:
            if tool.id not in self._warmed:
                self._warm_up(tool, warm_dst, warm_env)
                self._warmed.add(tool.id)
            os.sync()
        load1 = os.getloadavg()[0]
        m = measure(
            [*mounted.prefix, *tool.argv(source.path, target)],
            log_dir=log_dir,
            timeout_s=self.bench.timeout_s,
            env=env,
        )
        source_role = _source_role(summary) if tool.summary_json else None
        problem, found, shared = self._verify(tool, m, dst_direct, worked_on)
        if not self.batch:
            self._flush()
            if self.mode == "warm":
                warm(source.direct)
                self._warmed.clear()
        return Sample(
            fs=mounted.name,
            fileset=source.fileset.id,
            tool=tool.id,
            mode=self.mode,
            rep=rep,
            position=position,
            wall_s=round(m.wall_s, 6),
            user_s=round(m.user_s, 6),
            sys_s=round(m.sys_s, 6),
            maxrss_kib=m.maxrss_kib,
            load1=round(load1, 2),
            exit_code=m.exit_code,
            ok=not problem,
            problem=problem,
            files=found.files,
            bytes=found.bytes,
            shared_fraction=None if shared is None else round(shared, 4),
            rss_source=m.rss_source,
            source_cpu_s=None if source_role is None else round(source_role[0], 6),
            source_maxrss_kib=None if source_role is None else source_role[1],
        )

    def _tree_for(
        self, tool: Tool, dst: Path, rep: int, seq: int
    ) -> tuple[Path, Census, str]:
        """The tree ``tool`` works on, its census (a copy's: not yet known) and why it
        could not be made ("" when it was): ``dst`` for a copy (the tool makes it), a
        copy of the source at ``dst`` for a removal, the round's shared copy for a
        comparison."""
        if tool.chore == "copy":
            return dst, Census(0, 0), ""
        if tool.chore == "remove":
            found, problem = self._prepare(dst, tool.symlinks)
            os.sync()
            return dst, found, problem
        if self._copy is None:
            name = f"{self.source.fileset.id}-{self.mode}-r{rep}-copy-{seq}"
            copy = self.dst_root / name
            self._keep(self.mounted.direct(copy))
            found, problem = self._prepare(copy, tool.symlinks)
            if problem:
                return copy, found, problem
            self._copy = (copy, found)
        return (*self._copy, "")

    def _verify(
        self, tool: Tool, m: Measurement, dst_direct: Path, worked_on: Census
    ) -> tuple[str, Census, float | None]:
        """What went wrong in a run ("" when nothing), the census of its copy (of a
        chore: of the tree it worked on), and a large copy's reflinked share."""
        problem = ""
        if m.timed_out:
            problem = f"timed out after {self.bench.timeout_s:g} s"
        elif m.exit_code != 0:
            last = m.stderr_tail.splitlines()[-1] if m.stderr_tail else ""
            if tool.chore == "compare" and m.exit_code == 1:
                said = ("a difference reported between identical trees", last)
                last = "; ".join(x for x in said if x)
            problem = f"exit {m.exit_code}: {last}"
        if tool.chore == "remove" and (dst_direct.exists() or dst_direct.is_symlink()):
            problem = problem or "the tree is still there after its removal"
        if tool.chore != "copy":
            return problem, worked_on, None
        if not dst_direct.is_dir():
            return problem or "no destination directory was made", Census(0, 0), None
        source = self.source
        found = census(dst_direct, hashes=source.fileset.hashes and not problem)
        problem = problem or compare(source.expected[tool.symlinks], found)
        shared = None
        if not problem and self.mounted.reflink and source.fileset.large:
            shared = extents.shared_fraction(dst_direct)
        return problem, found, shared

    def _warm_up(self, tool: Tool, dst: Path, env: Mapping[str, str]) -> None:
        # Unmeasured and unchecked: a tool that fails here fails the measured run
        # visibly.
        src = self.bench.warmup_src
        if tool.chore != "copy":  # a chore removes or compares a copy of the tree
            self._quietly(["cp", "-a", "--", str(src), str(dst)], env)
        self._quietly(tool.argv(src, dst), env)

    def _quietly(self, argv: list[str], env: Mapping[str, str]) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [*self.mounted.prefix, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                timeout=_WARMUP_TIMEOUT,
                check=False,
            )

    def _prepare(self, tree: Path, symlinks: Symlinks) -> tuple[Census, str]:
        """Copy the source to ``tree`` (``cp -a`` through the backing tree), untimed;
        its census, and what is wrong with it ("" when it is a copy)."""
        source, direct = self.source, self.mounted.direct(tree)
        proc = subprocess.run(
            ["cp", "-a", "--", str(source.direct), str(direct)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()
            why = tail[-1] if tail else ""
            return Census(0, 0), f"exit {proc.returncode}: {why}"
        found = census(direct)
        return found, compare(source.expected[symlinks], found)

    def _unprepared(self, tool: Tool, rep: int, position: int, why: str) -> Sample:
        """The failed sample of a chore whose tree could not be made: never timed."""
        return Sample(
            fs=self.mounted.name,
            fileset=self.source.fileset.id,
            tool=tool.id,
            mode=self.mode,
            rep=rep,
            position=position,
            wall_s=0.0,
            user_s=0.0,
            sys_s=0.0,
            maxrss_kib=0,
            load1=round(os.getloadavg()[0], 2),
            exit_code=0,
            ok=False,
            problem=f"untimed copy of the source for {tool.id} failed: {why}",
        )

    def _keep(self, direct: Path) -> None:
        """Delete ``direct`` (a path below the destination root) with the round's
        other destinations."""
        if self.fresh is not None:
            self._renew = True
        else:
            self._trash.append((direct, self.mounted.direct(self.mounted.dst)))

    def _flush(self) -> None:
        """Delete every destination of this round so far (or re-make the fresh volume
        holding them), then sync and drop caches."""
        trash, self._trash = self._trash, []
        self._copy = None  # deleted with the rest
        for path, confine in trash:
            _delete(path, confine)
        if self._renew and self.fresh is not None:
            self.fresh.renew()
            self._renew = False
        if trash:
            self.bench.cache.settle()


def _source_role(summary: Path) -> tuple[float, int] | None:
    """CPU seconds (user + system) and peak RSS (KiB) of the source daemon, from rcp's
    ``--summary-json`` (``roles.source``; ``null`` when the source ran in rcp itself,
    whose figures the measurement already has). ``None`` when not there."""
    try:
        role = json.loads(summary.read_text())["roles"]["source"]
        cpu = float(role["cpu_user_s"]) + float(role["cpu_system_s"])
        return cpu, int(role["peak_rss_bytes"]) // 1024
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _delete(path: Path, confine: Path) -> None:
    """``rm -rf path``, only when ``path`` is strictly below ``confine``."""
    if confine.resolve() not in path.resolve().parents:
        raise RuntimeError(f"refusing to delete {path}: not below {confine}")
    if path.exists() or path.is_symlink():
        subprocess.run(["rm", "-rf", "--", str(path)], check=True)
