"""What every removal shares, whatever the storage: its settings, the rules that choose
what goes, the words of a dry run, the post-order removal of emptied directories, and
the run's life.

Two walks remove trees, each a :class:`Removal`: the local one through directory
descriptors (:mod:`rcp_core.tools.remove.rmtree`, the fast path for this host's
paths) and the one through a backend port (:mod:`rcp_core.tools.remove.portremove`:
a URL store, an ``rcpd serve`` service, a site's backend). Each lists a directory when
a worker scans it and hands every listed entry to the rules here; each directory is a
node of the one :class:`~rcp_core.engine.tree.Lifecycle`, finished after its last
child.

Invariants (both walks):

- **selection**: the filters (:class:`~rcp_core.engine.filters.Filter`, paths
  relative to the operand, which itself is never filtered) decide each listed entry
  with its parent's ``under_include``; an excluded entry stays, counted
  ``skipped.*``, and so does every directory holding it;
- **age rules** apply to everything but directories: an entry goes only if modified
  before ``modified_before`` (:meth:`Removal.too_young`); a time the storage does not
  give keeps the entry, never guessed (each walk says where its times come from);
- **a directory goes only when emptied**: after its last child, and only if nothing
  beneath it stays (a rule kept it, a failure, or the run stopped: ``incomplete``
  folds upwards, :meth:`Removal.finish`);
- **dry runs** change nothing: each entry that would go is logged in the same words
  (``would remove 'PATH'``, a directory ``'PATH/'``) and counted as removed;
- **errors**: an entry already gone is not an error; transient errors are tried again
  (:meth:`~rcp_core.run.runtime.Runtime.attempt`), others recorded with the entry
  kept; fatal ones and ``fail_early`` stop the run, which then raises
  :class:`~rcp_core.errors.CopyFailedError` ("remove", :meth:`Removal.run`).
"""

from __future__ import annotations

import abc
import logging
import os
import resource
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pluggy

from rcp_core.engine.filters import Filter, Verdict
from rcp_core.engine.tree import Lifecycle, Node
from rcp_core.errors import UsageError
from rcp_core.run.monitor import Observer
from rcp_core.run.pool import WorkPool
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Resources, Summary, Tally, merge
from rcp_core.run.tuning import Controller
from rcp_core.settings import RETRIES, RETRY_DELAY
from rcp_core.site.plugins import plugin_manager

log = logging.getLogger("rcp_core")


@dataclass(frozen=True, slots=True)
class RemoveSettings:
    """How a removal runs.

    :param includes: only entries these globs match go (see
        :mod:`rcp_core.engine.filters`; paths relative to each operand).
    :param excludes: entries these match stay, and so do their directories.
    :param modified_before: only entries modified before this time (epoch seconds) go.
    :param created_before: only entries born before this time go.
    :param dry_run: log and count what would go; change nothing.
    :param fail_early: stop at the first error.
    :param force: allow ``/``, mount points and the top of a storage as operands.
    :param missing_ok: an operand that does not exist is no error (``rm -f``).
    :param cross_devices: enter directories on other filesystems inside the tree.
    :param max_workers: directories emptied at once, fixed; ``None`` adapts.
    :param retries: tries again of an operation failing with a transient error.
    """

    includes: Sequence[str] = ()
    excludes: Sequence[str] = ()
    modified_before: float | None = None
    created_before: float | None = None
    dry_run: bool = False
    fail_early: bool = False
    force: bool = False
    missing_ok: bool = False
    cross_devices: bool = False
    max_workers: int | None = None
    retries: int = RETRIES
    retry_delay: float = RETRY_DELAY

    def __post_init__(self) -> None:
        if self.max_workers is not None and self.max_workers < 1:
            raise UsageError("max_workers must be at least 1")
        if self.retries < 0:
            raise UsageError("retries must not be negative")


@dataclass(slots=True, eq=False, kw_only=True)
class Emptied(Node["Emptied"]):
    """A directory being emptied; ``rel`` is relative to its operand. Its references
    are its own scan and its subdirectories in flight; ``incomplete`` means something
    beneath it stays, so it stays too.

    :param display: how messages name it (a path, a URL).
    :param under_include: it or an ancestor matched an include rule.
    """

    display: str
    under_include: bool


D = TypeVar("D", bound=Emptied)
T = TypeVar("T")
U = TypeVar("U")


class Removal(Runtime, Generic[D], abc.ABC):
    """One removal run: its runtime (errors, retries, stop), pool, filters and
    directory lifecycle; a walk supplies how its storage lists, removes and closes
    (the module's invariants).

    :param workers: ``(maximum, initial)`` directories emptied at once.
    """

    def __init__(
        self,
        settings: RemoveSettings,
        plugins: pluggy.PluginManager,
        workers: tuple[int, int],
    ) -> None:
        self.started = time.monotonic()
        self.usage = resource.getrusage(resource.RUSAGE_SELF)
        super().__init__(
            plugins.hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
        )
        self.settings = settings
        self.filter = Filter.build(
            includes=settings.includes, excludes=settings.excludes
        )
        self.pool = WorkPool(*workers, self._crashed)
        self.tree: Lifecycle[D] = Lifecycle(self.finish)

    @abc.abstractmethod
    def execute(self) -> None:
        """Push each operand's work and run the pool until everything is done."""

    @abc.abstractmethod
    def remove_dir(self, node: D) -> None:
        """Remove ``node``'s emptied directory (raises ``OSError``)."""

    def close(self, node: D) -> None:
        """Release what ``node`` holds (a descriptor), once it is finished."""

    def controller(self) -> Controller | None:
        """What adapts the number of workers while the removal runs (none: fixed)."""
        return None

    def run(
        self,
        *,
        on_progress: Observer | None = None,
        progress_interval: float = 1.0,
        cancel: threading.Event | None = None,
    ) -> Summary:
        """Execute the removal under the run's monitor; its summary.

        :raises CopyFailedError: something that should have gone stayed, or the
            removal was cancelled (the partial summary).
        """
        counts = self.monitored(
            self.pool,
            self.execute,
            controller=self.controller(),
            on_progress=on_progress,
            progress_interval=progress_interval,
            cancel=cancel,
        )
        resources = Resources.since(self.started, self.usage)
        return self.conclude(counts, resources, what="remove")

    def _crashed(self, exc: BaseException) -> None:
        self.stop(f"internal error: {exc!r}")

    def selected(self, tally: Tally, node: D, rel: str, is_dir: bool) -> bool | None:
        """The filters' verdict on ``node``'s entry ``rel`` (call only when they are
        :attr:`~rcp_core.engine.filters.Filter.active`): whether it is under an
        include (a non-directory then goes), or ``None`` when excluded: it stays,
        counted, and so does ``node``."""
        verdict = self.filter.decide(
            rel, is_dir, under_include=node.under_include, ignores=None
        ).verdict
        if verdict is Verdict.EXCLUDE:
            node.incomplete = True
            tally["skipped.dirs" if is_dir else "skipped.files"] += 1
            return None
        return verdict is Verdict.INCLUDE

    def too_young(self, modified: float | None) -> bool:
        """Whether ``--modified-before`` keeps an entry modified at ``modified``
        (epoch seconds; ``None``: its storage does not say, so it stays)."""
        before = self.settings.modified_before
        return before is not None and (modified is None or modified >= before)

    def kept(self, tally: Tally, node: D | None, kind: str) -> None:
        """A non-directory of the summary ``kind`` an age rule keeps."""
        if node is not None:
            node.incomplete = True
        tally[f"skipped.{kind}"] += 1

    def drop(
        self,
        tally: Tally,
        node: D | None,
        where: str,
        name: str,
        unlink: Callable[[], object],
    ) -> bool:
        """Remove ``name`` (a non-directory of ``where``, as messages name them) by
        ``unlink``, or in a dry run say it would go; whether it went (the caller counts
        it). Gone meanwhile is not gone by this run; a failure is recorded and keeps
        ``node``."""
        if self.settings.dry_run:
            would_remove(os.path.join(where, name))
            return True
        try:
            self.attempt(unlink)
        except FileNotFoundError:
            return False  # gone meanwhile
        except OSError as exc:
            if node is not None:
                node.incomplete = True
            self.failed(tally, "remove", os.path.join(where, name), exc)
            return False
        return True

    def finish(self, tally: Tally, node: D) -> None:
        """Everything beneath ``node`` is done: close it, and remove it unless
        something beneath it stays (then it stays too)."""
        self.close(node)
        if node.incomplete or self.stopping or not self._rmdir(tally, node):
            node.incomplete = True

    def _rmdir(self, tally: Tally, node: D) -> bool:
        """Remove ``node``'s (empty) directory; whether it is gone."""
        if self.settings.dry_run:
            would_remove(node.display + "/")
            tally["removed.dirs"] += 1
            return True
        try:
            self.attempt(lambda: self.remove_dir(node))
        except FileNotFoundError:
            return True
        except OSError as exc:
            self.failed(tally, "remove directory", node.display, exc)
            return False
        tally["removed.dirs"] += 1
        return True

    def failed(self, tally: Tally, op: str, display: str, exc: OSError) -> None:
        self.record(tally, self.error(op, display, exc))


def run_removal(
    walk: Callable[[RemoveSettings, pluggy.PluginManager, list[U]], Removal[Any]],
    check: Callable[[T, RemoveSettings], U | None],
    operands: Sequence[T],
    settings: RemoveSettings | None,
    plugins: pluggy.PluginManager | Iterable[object] | None,
    on_progress: Observer | None,
    progress_interval: float,
    cancel: threading.Event | None,
) -> Summary:
    r"""Remove ``operands`` as ``settings`` say: each is ``check``\ ed (what it
    refuses is refused before anything goes; ``None``: missing, with
    ``missing_ok``), then the ``walk`` made of the rest runs; the summary. Operands
    all missing make a run with nothing to do, whose end ``rcp_run_finished`` hears
    as any run's.

    :raises UsageError: no operands, or what ``check`` refuses; nothing was removed.
    :raises CopyFailedError: see :meth:`Removal.run`.
    """
    settings = settings or RemoveSettings()
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins or ())
    if not operands:
        raise UsageError("nothing to remove")
    checked = (check(operand, settings) for operand in operands)
    found = [operand for operand in checked if operand is not None]
    if found:
        return walk(settings, plugins, found).run(
            on_progress=on_progress, progress_interval=progress_interval, cancel=cancel
        )
    now = Resources.since(time.monotonic(), resource.getrusage(resource.RUSAGE_SELF))
    summary = Summary(merge([]), now)
    plugins.hook.rcp_run_finished(summary=summary, error=None)
    return summary


def would_remove(path: str) -> None:
    """A dry run's line for one entry (a directory's ``path`` ends in ``/``)."""
    log.info("would remove %r", path)
