"""Counters of a run: lock-free per-worker tallies, merged into one immutable summary.

Each worker thread owns one :class:`Tally` and is the only writer of it; readers (the
progress ticker, the final merge) only read. Every key exists from the start, so a
reader iterating a tally never sees it change size.
"""

from __future__ import annotations

import json
import resource
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

OUTCOMES = ("copied", "unchanged", "skipped", "removed")
KINDS = ("files", "dirs", "symlinks", "hardlinks", "specials", "bytes")
METHODS = ("reflink", "copy_file_range", "sparse", "readwrite", "link")
"""How files got their data: the data path's methods, or ``link`` (a hard link to an
identical file of the link-dest tree, ``rlink``)."""
KEYS = (
    *(f"{outcome}.{kind}" for outcome in OUTCOMES for kind in KINDS),
    *(f"method.{method}" for method in METHODS),
    "errors",
    "errors.vanished",
    "moved.bytes",
    "resumed.files",
    "resumed.bytes",
    "found.entries",
    "found.dirs",
    "scanned.dirs",
)
"""``errors.vanished`` counts the errors (among ``errors``) of source entries
that were gone when read (:class:`~rcp_core.errors.SourceVanishedError`).
``moved.bytes`` counts data as it is written, files in progress included (the
controller's measure of work, which must not arrive in lumps of whole large files);
``copied.bytes`` counts finished files only. ``found.entries`` (the jobs' sources
and the entries the walk's scans found, after filters), ``found.dirs`` (directories
among them) and ``scanned.dirs`` (directories whose scan began) are the walk's view
of the tree so far, from which the monitor estimates the work left. ``resumed.files``
are the copied files that went on from a partial (``--partial``), ``resumed.bytes``
the verified prefixes they kept: counted in ``copied.bytes``, never in
``moved.bytes``."""


class Tally(dict[str, int]):
    """Counters of one worker; ``tally["copied.files"] += 1`` is the whole API."""

    def __init__(self) -> None:
        super().__init__(dict.fromkeys(KEYS, 0))

    def moved(self, n: int) -> None:
        """``n`` more bytes of data written (called as a copy goes)."""
        self["moved.bytes"] += n


class ThreadTallies:
    """One :class:`Tally` per thread that asks, all of them in :attr:`tallies` (for
    progress and the final merge). A thread writes only its own; the list only grows
    (under a lock), so a reader that copied it sees a consistent, shorter list."""

    def __init__(self) -> None:
        self.tallies: list[Tally] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def mine(self) -> Tally:
        """The calling thread's counters."""
        tally: Tally | None = getattr(self._local, "tally", None)
        if tally is None:
            tally = self._local.tally = Tally()
            with self._lock:
                self.tallies.append(tally)
        return tally

    def adopt(self, tally: Tally) -> None:
        """The calling thread counts into ``tally`` from now on (a pool worker's own,
        so that its pool and these counters see the same counts)."""
        if getattr(self._local, "tally", None) is not tally:
            self._local.tally = tally
            with self._lock:
                self.tallies.append(tally)

    def include(self, tally: Tally) -> None:
        """Count ``tally`` too: another process's counters, which the thread that
        reads its reports keeps up to date."""
        with self._lock:
            self.tallies.append(tally)

    def merged(self) -> dict[str, int]:
        """Every thread's counters so far, summed (safe while threads count)."""
        return merge(list(self.tallies))


def merge(tallies: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum tallies key by key."""
    total = dict.fromkeys(KEYS, 0)
    for tally in tallies:
        for key, value in tally.items():
            total[key] += value
    return total


def human_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True, slots=True)
class Resources:
    """Wall time, CPU time and peak RSS of a run (its processes, helpers included)."""

    walltime: float
    cpu_user: float
    cpu_system: float
    peak_rss: int

    @classmethod
    def since(
        cls,
        start: float,
        usage: resource.struct_rusage,
        children: resource.struct_rusage | None = None,
    ) -> Resources:
        """Resources used since ``start`` (monotonic) and the ``usage`` then.

        :param children: ``RUSAGE_CHILDREN`` at the start: the helper processes reaped
            since then count too (peak RSS: the largest process).
        """
        now = resource.getrusage(resource.RUSAGE_SELF)
        user = now.ru_utime - usage.ru_utime
        system = now.ru_stime - usage.ru_stime
        peak = now.ru_maxrss
        if children is not None:
            reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
            user += reaped.ru_utime - children.ru_utime
            system += reaped.ru_stime - children.ru_stime
            peak = max(peak, reaped.ru_maxrss)
        return cls(
            walltime=time.monotonic() - start,
            cpu_user=user,
            cpu_system=system,
            peak_rss=peak * 1024,
        )


@dataclass(frozen=True, slots=True)
class Summary:
    """The result of a run: counters by outcome and kind, methods used, resources.

    ``counts`` has every key of :data:`KEYS`, e.g. ``counts["copied.files"]``.
    """

    counts: Mapping[str, int]
    resources: Resources
    errors: tuple[tuple[str, int, str], ...] = field(default=())
    dry_run: bool = False

    def __getitem__(self, key: str) -> int:
        return self.counts[key]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what Airflow pushes to XCom)."""
        out: dict[str, Any] = {
            outcome: {kind: self.counts[f"{outcome}.{kind}"] for kind in KINDS}
            for outcome in OUTCOMES
        }
        out["methods"] = {m: self.counts[f"method.{m}"] for m in METHODS}
        out["resumed"] = {
            "files": self.counts["resumed.files"],
            "bytes": self.counts["resumed.bytes"],
        }
        out["errors"] = self.counts["errors"]
        out["vanished"] = self.counts["errors.vanished"]
        out["error_list"] = [
            {"error": key, "count": count, "example": example}
            for key, count, example in self.errors
        ]
        out["dry_run"] = self.dry_run
        r = self.resources
        out["walltime_s"] = round(r.walltime, 6)
        out["cpu_user_s"] = round(r.cpu_user, 6)
        out["cpu_system_s"] = round(r.cpu_system, 6)
        out["peak_rss_bytes"] = r.peak_rss
        return out

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, sort_keys=True)

    def render(self) -> str:
        """Human text, one ``label: value`` per line, stable for scripts to parse."""
        c = self.counts
        lines = []
        for outcome in OUTCOMES:
            parts = [f"{kind} {c[f'{outcome}.{kind}']}" for kind in KINDS[:-1]]
            parts.append(human_bytes(c[f"{outcome}.bytes"]))
            lines.append(f"{outcome + ':':<11}" + "  ".join(parts))
        lines.append(
            "methods:   " + "  ".join(f"{m} {c[f'method.{m}']}" for m in METHODS)
        )
        if c["resumed.files"]:
            lines.append(
                f"resumed:   files {c['resumed.files']}  "
                f"{human_bytes(c['resumed.bytes'])} kept from partials"
            )
        gone = c["errors.vanished"]
        vanished = f" ({gone} vanished source(s))" if gone else ""
        lines.append(f"errors:    {c['errors']}{vanished}")
        for key, count, example in self.errors:
            lines.append(f"  {count} x {key} (e.g. {example})")
        r = self.resources
        lines.append(
            f"walltime:  {r.walltime:.2f}s  cpu user {r.cpu_user:.2f}s"
            f"  system {r.cpu_system:.2f}s  peak RSS {human_bytes(r.peak_rss)}"
        )
        return "\n".join(lines)
