"""Modes and owners of this host's trees changed in parallel (``rchm``): the walk of
``rrm``'s fast path (:mod:`rcp_core.tools.remove.localwalk`), whose action on an
entry is a change of its mode, owner and group (:class:`~rcp_core.tools.chmod.rules.
Rules`) instead of its removal.

Invariants (besides every local walk's: nothing outside the operands, a mount point
inside the tree left as it is unless ``cross_devices``, filters, errors):

- **directories after their contents**: a non-directory is changed when its
  directory's scan finds it; a directory when everything beneath it is done (the
  walk's post-order finish), so taking away its ``r`` or ``x`` (``--mode 000``) never
  cuts off the walk of its contents; a directory that cannot be read (its scan an
  error) is still changed itself, so ``u+rwx`` makes it readable and the next run
  walks it (the Rust ``rchm`` changes directories first by default: one run repairs
  an unreadable directory there, and ``000`` cuts off its own walk);
- **an entry is changed through what the walk found**: it is opened ``O_PATH |
  O_NOFOLLOW`` relative to its directory's descriptor, looked at (``fstat``) and
  changed through that descriptor (``/proc/self/fd``), so what is changed is what
  was looked at, never a symlink's target; a symlink's own owner and group change
  (``lchown`` by its name, which never follows it), its mode never does;
- **only what differs changes** (:meth:`~rcp_core.tools.chmod.rules.Rules.plan`):
  an entry already as asked costs no ``chmod``/``chown``; counted ``unchanged``,
  the others ``changed``;
- **selection**: a non-directory under an include is changed, an excluded entry left
  alone (an excluded directory not entered), a directory entered only to find
  includes beneath it is not changed itself (counted ``skipped``); with include
  rules the operand itself is such a directory;
- **dry runs** change nothing: each entry that would change is logged
  (``would change 'PATH': mode 0644 -> 0755, owner 0 -> 65534``) and counted
  ``changed``; entries that would not are not logged;
- **errors**: an entry gone meanwhile is not an error; transient errors are tried
  again, others recorded with the entry left as it was (the rest is still changed);
  the run then raises :class:`~rcp_core.errors.CopyFailedError` ("change").

The run's counters have no ``changed`` outcome: changed entries are counted under
``copied.*``, and :class:`Changes` (the summary this returns and raises) names them
``changed``, in its text and its JSON.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import stat
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, ClassVar

import pluggy

from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.run.monitor import Observer
from rcp_core.run.progress import Progress, entries
from rcp_core.run.summary import Summary, Tally
from rcp_core.tools.chmod.rules import Plan, Rules
from rcp_core.tools.remove.localwalk import LocalDir, LocalWalk, Looked, kind_of
from rcp_core.tools.remove.treewalk import WalkSettings, run_walk

log = logging.getLogger("rcp_core")

_PATH = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
KINDS = ("files", "dirs", "symlinks", "specials")
OUTCOMES = {"changed": "copied", "unchanged": "unchanged", "skipped": "skipped"}
"""Each outcome of a change, and the run's counter it is counted under."""
_KEPT = (
    "errors",
    "error_list",
    "dry_run",
    "walltime_s",
    "cpu_user_s",
    "cpu_system_s",
    "peak_rss_bytes",
)
"""What a change's JSON summary keeps of every run's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChmodSettings(WalkSettings):
    """How a change runs: a walk's settings (selection, dry run, errors, devices,
    workers, retries: :class:`~rcp_core.tools.remove.treewalk.WalkSettings`), and

    :param rules: the mode, owner and group each type of entry gets.
    """

    rules: Rules


def change(
    paths: Sequence[str | os.PathLike[str]],
    settings: ChmodSettings,
    *,
    plugins: pluggy.PluginManager | Iterable[object] | None = None,
    on_progress: Observer | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Changes:
    """Change the modes and owners of ``paths`` (whole trees) as ``settings`` say;
    the summary.

    :raises UsageError: an operand that does not exist, or ``/``; nothing was changed.
    :raises CopyFailedError: an entry could not be changed (the others were), or the
        run was cancelled; its summary is the partial :class:`Changes`.
    """
    try:
        summary = run_walk(
            _Change.WHAT,
            _Change,
            lambda path, _: _checked(os.fspath(path)),
            paths,
            settings,
            plugins,
            on_progress,
            progress_interval,
            cancel,
        )
    except CopyFailedError as failed:
        partial = Changes.of(failed.summary, settings.dry_run)
        raise CopyFailedError(
            partial, failed.errors, failed.stopped, what=_Change.WHAT
        ) from None
    return Changes.of(summary, settings.dry_run)


def _checked(path: str) -> str:
    """The operand, absolute, once it is known to exist and not to be ``/``."""
    if not path:
        raise UsageError("an empty path")
    absolute = os.path.abspath(path)
    if not absolute.strip("/"):
        raise UsageError(f"{path}: refusing to change / (name what is below it)")
    if not os.path.lexists(absolute):
        raise UsageError(f"{path}: no such file or directory")
    return absolute


class _Change(LocalWalk):
    """One change run: the local walk, each non-directory changed as found, each
    directory once its contents are done."""

    WHAT: ClassVar[str] = "change"
    settings: ChmodSettings

    def leaf(
        self, tally: Tally, node: LocalDir, name: str, kind: str, st: Looked
    ) -> None:
        self._change(tally, node.fd, os.path.join(node.display, name), name, None)

    def finish(self, tally: Tally, node: LocalDir) -> None:
        """Change the directory, its contents done (unless the run stops, or it was
        entered only to find includes), then close it."""
        try:
            if self.stopping:
                return
            if node.under_include:
                self._change(tally, node.parent_fd, node.display, node.name, node.dev)
            else:
                tally["skipped.dirs"] += 1
        finally:
            self.close(node)

    def _change(
        self, tally: Tally, dir_fd: int, display: str, name: str, dev: int | None
    ) -> None:
        """Change ``name`` of ``dir_fd`` (``display`` in messages) as the rules
        say, if it differs; ``dev``: a directory's device (a directory found on
        another since its listing was the scan's error, and stays as it is)."""
        try:
            fd = os.open(name, _PATH, dir_fd=dir_fd)
        except FileNotFoundError:
            return  # gone meanwhile
        except OSError as exc:
            self.failed(tally, "open", display, exc)
            return
        try:
            st = os.fstat(fd)
            if dev is not None and st.st_dev != dev:
                return
            kind = "dirs" if stat.S_ISDIR(st.st_mode) else kind_of(st.st_mode)
            plan = self.settings.rules.plan(st)
            if plan is None:
                tally[f"unchanged.{kind}"] += 1
                return
            if self.settings.dry_run:
                log.info("would change %r: %s", display, plan.describe(st))
            else:
                symlink = stat.S_ISLNK(st.st_mode)
                self.attempt(lambda: _apply(plan, fd, dir_fd, name, symlink))
            tally[f"copied.{kind}"] += 1
        except OSError as exc:
            self.failed(tally, "change", display, exc)
        finally:
            os.close(fd)


def _apply(plan: Plan, fd: int, dir_fd: int, name: str, symlink: bool) -> None:
    """Owner and group first (``chown`` clears a file's set-ID bits, which the
    mode then sets again where it keeps them), then the mode; through ``fd``
    (``O_PATH``: its ``/proc/self/fd`` link is the entry itself), a symlink's by
    its ``name`` in ``dir_fd``, never followed."""
    proc = f"/proc/self/fd/{fd}"
    if plan.chown:
        if symlink:
            os.chown(name, plan.uid, plan.gid, dir_fd=dir_fd, follow_symlinks=False)
        else:
            os.chown(proc, plan.uid, plan.gid)
    if plan.mode is not None:
        os.chmod(proc, plan.mode)


def counts_of(counts: Mapping[str, int]) -> dict[str, dict[str, int]]:
    """The run's counters as a change's outcomes: ``{"changed": {"files": 3, ...},
    "unchanged": ..., "skipped": ...}``."""
    return {
        outcome: {kind: counts[f"{key}.{kind}"] for kind in KINDS}
        for outcome, key in OUTCOMES.items()
    }


@dataclass(frozen=True, slots=True)
class Changes(Summary):
    """A change's summary: the run's, in a change's words (``changed``,
    ``unchanged``, ``skipped``, by kind; ``entries``: all of them)."""

    @classmethod
    def of(cls, summary: Summary, dry_run: bool) -> Changes:
        """A run's ``summary`` as a change's (``dry_run``: the run was one)."""
        given = {f.name: getattr(summary, f.name) for f in dataclasses.fields(summary)}
        return cls(**{**given, "dry_run": dry_run})

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``entries``, the outcomes by kind, ``errors`` and
        ``error_list``, ``dry_run``, the resources."""
        whole = Summary.as_dict(self)
        return {
            "entries": entries(self.counts),
            **counts_of(self.counts),
            **{key: whole[key] for key in _KEPT},
        }

    def render(self) -> str:
        """Human text, one ``label: value`` per line: the outcomes by kind, then
        the errors and resources as every summary gives them."""
        lines = [
            f"{outcome + ':':<11}" + "  ".join(f"{k} {n}" for k, n in by_kind.items())
            for outcome, by_kind in counts_of(self.counts).items()
        ]
        whole = Summary.render(self).split("\n")
        errors = next(i for i, line in enumerate(whole) if line.startswith("errors:"))
        return "\n".join(lines + whole[errors:])


class ChangeProgress:
    """Timestamped lines of a running change (``--progress-type text``), at most one
    per ``interval`` seconds (and the last one): entries so far, and each outcome's."""

    def __init__(self, stream: IO[str], interval: float = 10.0) -> None:
        self.stream = stream
        self.interval = interval
        self._shown = -interval

    def __call__(self, p: Progress) -> None:
        if not p.final and p.elapsed - self._shown < self.interval:
            return
        self._shown = p.elapsed
        outcomes = "  ".join(
            f"{outcome} {sum(by_kind.values())}"
            for outcome, by_kind in counts_of(p.counts).items()
        )
        now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.stream.write(
            f"{now} ({p.elapsed:.1f}s)  entries {p.entries}  {outcomes}  "
            f"errors {p.counts['errors']}  pending work {p.pending}\n"
        )
        self.stream.flush()
