"""Progress of a running copy: snapshots, and how to show them to people.

The engine hands a :class:`Progress` snapshot to a callback (from its ticker thread).
Renderers here write to a stream, normally stderr, so stdout stays clean for logs and the
summary: :class:`TextProgress` prints timestamped blocks (logs, CI, files, Airflow),
:class:`BarProgress` a live tqdm line when the stream is a terminal.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

from rcp_core.run.summary import OUTCOMES, human_bytes


@dataclass(frozen=True, slots=True)
class Progress:
    """Counters so far; ``counts`` has the keys of :data:`rcp_core.run.summary.KEYS`.

    :param pending: work items queued or running (directories and batches).
    :param final: this is the last snapshot of the run.
    :param concurrency: the work items the run lets run at once now (its
        controller's choice); 0 where the snapshot does not say.
    """

    counts: Mapping[str, int]
    elapsed: float
    pending: int
    final: bool = False
    concurrency: int = 0

    @property
    def entries(self) -> int:
        """Entries handled so far, whatever their outcome."""
        return entries(self.counts)

    def brief(self) -> dict[str, int | float]:
        """``entries``, ``bytes`` (written so far, large files in flight included),
        ``errors`` and ``elapsed``: what a service shows of a running job and what
        Airflow's task log reports."""
        return {
            "entries": self.entries,
            "bytes": self.counts["copied.bytes"] + self.counts["moved.bytes"],
            "errors": self.counts["errors"],
            "elapsed": round(self.elapsed, 3),
        }


def entries(counts: Mapping[str, int]) -> int:
    """Entries counted in ``counts``, whatever their outcome."""
    return sum(
        counts[f"{o}.{k}"]
        for o in OUTCOMES
        for k in ("files", "dirs", "symlinks", "hardlinks", "specials")
    )


class TextProgress:
    """Timestamped blocks, at most one per ``interval`` seconds (and the last one)."""

    def __init__(self, stream: IO[str], interval: float = 10.0) -> None:
        self.stream = stream
        self.interval = interval
        self._last_shown = -interval
        self._last: Progress | None = None

    def __call__(self, p: Progress) -> None:
        if not p.final and p.elapsed - self._last_shown < self.interval:
            return
        prev = self._last
        dt = p.elapsed - (prev.elapsed if prev else 0.0)
        c = p.counts
        rate_files = (p.entries - (prev.entries if prev else 0)) / dt if dt > 0 else 0.0
        copied = c["copied.bytes"]
        rate_bytes = (
            (copied - (prev.counts["copied.bytes"] if prev else 0)) / dt if dt else 0.0
        )
        now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        lines = [
            f"==== {now} ({p.elapsed:.1f}s)",
            f"entries:  {p.entries}  ({rate_files:.0f}/s)  pending work {p.pending}",
            f"copied:   files {c['copied.files']}  dirs {c['copied.dirs']}  "
            f"symlinks {c['copied.symlinks']}  hard links {c['copied.hardlinks']}  "
            f"{human_bytes(copied)} ({human_bytes(rate_bytes)}/s)",
            f"unchanged {c['unchanged.files'] + c['unchanged.dirs']}  "
            f"skipped {c['skipped.files'] + c['skipped.dirs']}  "
            f"removed {c['removed.files'] + c['removed.dirs']}  errors {c['errors']}",
        ]
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()
        self._last_shown = p.elapsed
        self._last = p


class BarProgress:
    """A live tqdm line: entries done, bytes copied and their rates."""

    def __init__(self, stream: IO[str]) -> None:
        # tqdm is imported only when a bar is drawn (start-up cost).
        from tqdm import tqdm

        self._bar = tqdm(
            file=stream, unit=" entries", dynamic_ncols=True, mininterval=0.2
        )

    def __call__(self, p: Progress) -> None:
        bar = self._bar
        bar.n = p.entries
        c = p.counts
        rate = c["copied.bytes"] / p.elapsed if p.elapsed else 0.0
        bar.set_postfix_str(
            f"{human_bytes(c['copied.bytes'])} {human_bytes(rate)}/s errors {c['errors']}",
            refresh=False,
        )
        bar.refresh()
        if p.final:
            bar.close()
