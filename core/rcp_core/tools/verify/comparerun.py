"""One comparison's run: the project's run runtime (:class:`~rcp_core.run.runtime.Runtime`)
under a comparison of two local trees, and what the comparison found.

Invariants:

- **errors** are classified by the run's ``rcp_classify_error`` hooks, told the
  storage of the two roots, as every run's are. A comparison reads in *units*, and a
  unit failing with a transient error is tried again from its start
  (:meth:`ComparisonRun.tried`, with the copy's ``retries`` and ``retry_delay``): a
  directory's two opens, its source listing, the pass over its destination side
  (:mod:`rcp_core.tools.verify.pairwalk`), one path's whole comparison
  (:mod:`rcp_core.tools.verify.entrypair`). A unit reports nothing until it has succeeded,
  or resumes where its failed try left (the destination pass), so a try again neither loses
  a difference nor reports one twice; a unit is larger than a system call, so that trying
  costs nothing until something fails;
- an error left after its tries is an ``error`` difference of its path, whose detail
  is the error's kind (``"open source: Permission denied"``), never a crash; a fatal
  one (EMFILE, ENFILE, ... by the table, or what a site's hook calls fatal) also stops
  the comparison (:meth:`~rcp_core.run.runtime.Runtime.stop_for`): the rest would fail
  the same way. Errors are not logged: the differences are their record;
- the comparison **stops** once, through the runtime's one stop: when ``cancel`` is
  seen set (at the next look at :attr:`ComparisonRun.stopping`, so an
  ``on_difference`` that cancels stops it before another difference), at a fatal
  error, or at an internal error (a bug, or ``on_difference`` raising: the pool
  raises it to the caller). A comparison that stopped is ``cancelled``, never same;
- **differences**: the first :data:`~rcp_core.tools.verify.differences.MAX_KEPT` found are
  kept, the counts cover all; ``on_difference`` sees each, one call at a time.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

from rcp_core.errors import EntryError
from rcp_core.run.runtime import Kind, Runtime
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.differences import MAX_KEPT, Comparison, Difference, DiffKind
from rcp_core.tools.verify.scope import Scope

if TYPE_CHECKING:
    import pluggy

    from rcp_core.site.storage import StorageInfo

    Plugins = pluggy.PluginManager | Iterable[object] | None
    """A run's plugins: a manager, or plugin objects besides the installed ones."""
    Storage = tuple[StorageInfo | None, StorageInfo | None]
    """The storage of the source and destination roots (``None``: not opened)."""

Roots = tuple[str | None, str | None]
"""The source and destination roots as paths of this host (``None``: not one)."""

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class _Hooks:
    """A comparison's plugin hooks, made when first asked: at its first error, since
    classifying errors is all a comparison asks of them. Making them (pluggy
    imported, the installed distributions searched for site plugins) would cost
    every ``rcmp`` start-up about 10 ms, as long as comparing a thousand files takes.

    :param plugins: as :func:`~rcp_core.tools.verify.compare.compare` takes them.
    :param roots: the source and destination roots, whose storage
        (``rcp_detect_storage``) the classification hook is told; ``None``: a root
        that is no path of this host (a store's, a service's), whose storage is
        ``None`` as that of a root that cannot be opened.
    """

    def __init__(self, plugins: Plugins, roots: Roots) -> None:
        self._plugins = plugins
        self._roots = roots
        self._lock = threading.Lock()
        self._made: tuple[Any, Storage] | None = None

    def _make(self) -> tuple[Any, Storage]:
        with self._lock:
            if self._made is None:
                import pluggy

                from rcp_core.site.plugins import plugin_manager

                manager = self._plugins
                if not isinstance(manager, pluggy.PluginManager):
                    manager = plugin_manager(manager or ())
                src, dst = self._roots
                storage = _storage(manager.hook, src), _storage(manager.hook, dst)
                self._made = manager.hook, storage
            return self._made

    def rcp_classify_error(self, **kwargs: Any) -> Any:
        """The hook :class:`~rcp_core.run.runtime.Runtime` asks."""
        return self._make()[0].rcp_classify_error(**kwargs)

    def storage(self, where: object) -> Storage:
        """Both roots' storage, wherever the error is (``None``: a root that cannot
        be opened)."""
        return self._make()[1]


def _storage(hook: Any, root: str | None) -> StorageInfo | None:
    from rcp_core.site.capacity import storage_of

    if root is None:
        return None
    try:
        return storage_of(hook, root)
    except OSError:
        return None


class ComparisonRun(Runtime):
    """One comparison: its runtime, what it compares, and what it found.

    :param plugins: the run's plugins (see :class:`_Hooks`).
    :param roots: the source and destination roots, as given (see :class:`_Hooks`).
    :param retries: tries again of a unit failing with a transient error.
    :param retry_delay: the backoff before the first of them, in seconds.
    :param cancel: set from any thread to stop the comparison.
    """

    def __init__(
        self,
        plugins: Plugins,
        roots: Roots,
        *,
        retries: int,
        retry_delay: float,
        checksum: bool,
        attrs: frozenset[CompareAttr],
        scope: Scope,
        cancel: threading.Event,
        on_difference: Callable[[Difference], None] | None,
    ) -> None:
        hooks = _Hooks(plugins, roots)
        super().__init__(
            hooks,
            retries=retries,
            retry_delay=retry_delay,
            fail_early=False,
            storage=hooks.storage,
        )
        self.checksum = checksum
        self.attrs = attrs
        self.scope = scope
        self.cancel = cancel
        self.on_difference = on_difference
        self.counts = dict.fromkeys(DiffKind, 0)
        self.kept: list[Difference] = []
        self.entries = self.files_hashed = self.bytes_hashed = 0
        self._found = threading.Lock()
        """Guards the differences and counters; serialises ``on_difference``."""

    @property
    def stopping(self) -> bool:
        """Whether the comparison stopped; a set ``cancel`` stops it here."""
        if self.cancel.is_set():
            self.stop("cancelled")
        return self._stopping

    def crash(self, exc: BaseException) -> None:
        """An item failed unexpectedly (a bug, or ``on_difference`` raised): stop;
        the pool raises it from ``run``."""
        self.stop(f"internal error: {exc!r}")

    # -- errors --------------------------------------------------------------------

    def tried(self, unit: Callable[[*Ts], T], *args: *Ts) -> T | None:
        """``unit(*args)``, tried again while it fails with a transient error;
        ``None`` once its last failure is an ``error`` difference (a unit returns
        something else, and raises only :class:`~rcp_core.errors.EntryError`, naming
        its operation and path)."""
        try:
            return unit(*args)
        except EntryError as exc:
            return self.again(exc, unit, *args)

    def again(
        self, failure: EntryError, unit: Callable[[*Ts], T], *args: *Ts
    ) -> T | None:
        """:meth:`tried` after the first try failed with ``failure``: the hot path
        (a path's comparison) makes that try itself, so that a unit that succeeds
        costs its own call and no more (going through :meth:`tried` packs the
        arguments and calls once more: measured, 2% of comparing one entry's
        metadata on tmpfs)."""
        try:
            return self.retry(functools.partial(unit, *args), self._kind, failure)
        except EntryError as exc:
            self.failed(exc)
            return None

    def _kind(self, error: OSError) -> Kind:
        """What the hooks say of a unit's failure: of the error that happened."""
        return self.classify(error.cause if isinstance(error, EntryError) else error)

    def failed(self, failure: EntryError) -> None:
        """An error left after its tries: an ``error`` difference, and a stop if the
        hooks call it fatal."""
        error = self.error(failure.op, failure.path, failure.cause)
        self.report(failure.path, DiffKind.ERROR, error.key)
        self.stop_for(error)

    # -- what was found ------------------------------------------------------------

    def report(self, rel: str, kind: DiffKind, detail: str) -> None:
        difference = Difference(rel or ".", kind, detail)
        with self._found:
            self.counts[kind] += 1
            if len(self.kept) < MAX_KEPT:
                self.kept.append(difference)
            if self.on_difference is not None:
                self.on_difference(difference)

    def report_all(self, rel: str, found: Iterable[tuple[DiffKind, str]]) -> None:
        """Report the differences ``(kind, detail)`` of ``rel``."""
        for kind, detail in found:
            self.report(rel, kind, detail)

    def count(self, entries: int = 0, files: int = 0, data: int = 0) -> None:
        with self._found:
            self.entries += entries
            self.files_hashed += files
            self.bytes_hashed += data

    def result(self, walltime: float) -> Comparison:
        """What the comparison found, once its pool has ended."""
        return Comparison(
            entries=self.entries,
            files_hashed=self.files_hashed,
            bytes_hashed=self.bytes_hashed,
            counts=dict(self.counts),
            differences=tuple(sorted(self.kept, key=lambda d: (d.path, d.kind.value))),
            cancelled=self.stopping,
            walltime=walltime,
        )
