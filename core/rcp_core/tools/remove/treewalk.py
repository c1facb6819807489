"""The one post-order walk of the tools that act on trees in place: removal (``rrm``,
:mod:`rcp_core.tools.remove.removal`) and mode and owner changes (``rchm``,
:mod:`rcp_core.tools.chmod.changetree`).

A :class:`TreeRun` is one run of such a tool: its runtime (errors, retries, stop), its
work pool and adaptive controller, its filters, and the directory lifecycle
(:class:`~rcp_core.engine.tree.Lifecycle`) that finishes each directory after its
last child (:meth:`TreeRun.finish`: removal removes it there, a change of modes and
owners changes it there, so a directory's own permissions never cut off the walk of
its contents). A storage supplies how it lists (:class:`LocalWalk` for this host's
trees, through descriptors, :mod:`rcp_core.tools.remove.localwalk`; the removal
through backend ports its own); a tool supplies what it does with each
non-directory and each finished directory.

Invariants of every walk:

- **selection**: the filters (:class:`~rcp_core.engine.filters.Filter`, paths
  relative to the operand, which itself is never filtered) decide each listed entry
  with its parent's ``under_include``; an excluded entry is left alone, counted
  ``skipped.*``, never entered (:meth:`TreeRun.selected`), and its directory is
  ``incomplete``;
- **post-order**: a directory is finished once, after everything beneath it, by the
  worker that finished its last child (each node counts the work in flight beneath
  it); ``incomplete`` folds upwards;
- **errors**: recorded in the worker's tally (:meth:`TreeRun.failed`), the entry left
  as it was; fatal ones and ``fail_early`` stop the run, which then raises
  :class:`~rcp_core.errors.CopyFailedError` (:attr:`TreeRun.WHAT` names the run).
"""

from __future__ import annotations

import abc
import resource
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

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


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkSettings:
    """How a walk runs, whatever it does to the entries.

    :param includes: only entries these globs match are acted on (see
        :mod:`rcp_core.engine.filters`; paths relative to each operand).
    :param excludes: entries these match are left alone, and not entered.
    :param dry_run: log and count what would be done; change nothing.
    :param fail_early: stop at the first error.
    :param cross_devices: enter directories on other filesystems inside the tree.
    :param max_workers: directories worked on at once, fixed; ``None`` adapts.
    :param retries: tries again of an operation failing with a transient error.
    """

    includes: Sequence[str] = ()
    excludes: Sequence[str] = ()
    dry_run: bool = False
    fail_early: bool = False
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
class Walked(Node["Walked"]):
    """A directory being walked; ``rel`` is relative to its operand. Its references
    are its own scan and its subdirectories in flight; ``incomplete`` means something
    beneath it was left as it was.

    :param display: how messages name it (a path, a URL).
    :param under_include: it or an ancestor matched an include rule.
    """

    display: str
    under_include: bool


D = TypeVar("D", bound=Walked)
S = TypeVar("S", bound=WalkSettings)
T = TypeVar("T")
U = TypeVar("U")


class TreeRun(Runtime, Generic[D], abc.ABC):
    """One run of a walk: its runtime (errors, retries, stop), pool, filters and
    directory lifecycle; a walk supplies how its storage lists, a tool what it does
    (the module's invariants).

    :param workers: ``(maximum, initial)`` directories worked on at once.
    """

    WHAT: ClassVar[str]
    """The run in messages: ``remove stopped after 1 error(s)``."""

    def __init__(
        self,
        settings: WalkSettings,
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
    def finish(self, tally: Tally, node: D) -> None:
        """Everything beneath ``node`` is done (post-order, once): act on the
        directory itself, then :meth:`close` it."""

    def close(self, node: D) -> None:
        """Release what ``node`` holds (a descriptor), once it is finished."""

    def controller(self) -> Controller | None:
        """What adapts the number of workers while the walk runs (none: fixed)."""
        return None

    def run(
        self,
        *,
        on_progress: Observer | None = None,
        progress_interval: float = 1.0,
        cancel: threading.Event | None = None,
    ) -> Summary:
        """Execute the walk under the run's monitor; its summary.

        :raises CopyFailedError: an entry failed, or the walk was cancelled (the
            partial summary).
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
        return self.conclude(counts, resources, what=self.WHAT)

    def _crashed(self, exc: BaseException) -> None:
        self.stop(f"internal error: {exc!r}")

    def selected(self, tally: Tally, node: D, rel: str, is_dir: bool) -> bool | None:
        """The filters' verdict on ``node``'s entry ``rel`` (call only when they are
        :attr:`~rcp_core.engine.filters.Filter.active`): whether it is under an
        include (a non-directory then is acted on), or ``None`` when excluded: left
        alone, counted, and ``node`` incomplete."""
        verdict = self.filter.decide(
            rel, is_dir, under_include=node.under_include, ignores=None
        ).verdict
        if verdict is Verdict.EXCLUDE:
            node.incomplete = True
            tally["skipped.dirs" if is_dir else "skipped.files"] += 1
            return None
        return verdict is Verdict.INCLUDE

    def failed(self, tally: Tally, op: str, display: str, exc: OSError) -> None:
        self.record(tally, self.error(op, display, exc))


def run_walk(
    what: str,
    walk: Callable[[S, pluggy.PluginManager, list[U]], TreeRun[Any]],
    check: Callable[[T, S], U | None],
    operands: Sequence[T],
    settings: S,
    plugins: pluggy.PluginManager | Iterable[object] | None,
    on_progress: Observer | None,
    progress_interval: float,
    cancel: threading.Event | None,
) -> Summary:
    r"""Walk ``operands`` as ``settings`` say (``what``: the walk's
    :attr:`TreeRun.WHAT`): each is ``check``\ ed (what it refuses is refused before
    anything is done; ``None``: missing, and no error), then the ``walk`` made of the
    rest runs; the summary. Operands all missing make a run with nothing to do, whose
    end ``rcp_run_finished`` hears as any run's.

    :raises UsageError: no operands, or what ``check`` refuses; nothing was done.
    :raises CopyFailedError: see :meth:`TreeRun.run`.
    """
    if not isinstance(plugins, pluggy.PluginManager):
        plugins = plugin_manager(plugins or ())
    if not operands:
        raise UsageError(f"nothing to {what}")
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
