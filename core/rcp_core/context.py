"""State shared by every worker of one run, and the run's error log.

Everything here is either immutable, internally locked, or a flag whose races are
harmless (``stopping`` only ever goes from False to True).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping

import pluggy

from rcp_core.chunks import Chunking
from rcp_core.errors import EntryError, FatalError, Kind, entry_error
from rcp_core.filters import Filter
from rcp_core.links import LinkMap
from rcp_core.metadata import Metadata
from rcp_core.methods import DataCopier
from rcp_core.paths import Job
from rcp_core.plugins import site_implemented
from rcp_core.settings import CopySettings, DryRun
from rcp_core.storage import StorageInfo
from rcp_core.summary import Tally
from rcp_core.throttle import TokenBucket
from rcp_core.tree import DirNode

log = logging.getLogger("rcp_core")

MAX_DISTINCT_ERRORS = 20


class ErrorLog:
    """Deduplicated errors: each distinct kind is logged once, then only counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._examples: dict[str, str] = {}

    def add(self, error: EntryError) -> None:
        key = error.key
        with self._lock:
            self._counts[key] += 1
            first = key not in self._examples
            if first:
                self._examples[key] = error.path
        if first:
            log.error("%s", error)

    def report(self) -> list[tuple[str, int, str]]:
        """The most frequent distinct errors, at most ``MAX_DISTINCT_ERRORS``."""
        with self._lock:
            return [
                (key, count, self._examples[key])
                for key, count in self._counts.most_common(MAX_DISTINCT_ERRORS)
            ]


class Context:
    """What every work item of a run needs.

    :param hook: the run's plugin hooks.
    :param storage: each job's (source, destination) storage.
    """

    def __init__(
        self,
        settings: CopySettings,
        umask: int,
        hook: pluggy.HookRelay,
        storage: Mapping[Job, tuple[StorageInfo, StorageInfo]],
    ) -> None:
        self.settings = settings
        self.hook = hook
        self.storage = storage
        self.chunking: Chunking | None = None
        """Set by the engine when the run splits large files."""
        self.aside: Callable[[], contextlib.AbstractContextManager[None]] | None = None
        """Set by the engine when a large file's in-kernel copy may run beside the
        limit's Python work (:meth:`rcp_core.walk.Walker.step_aside`)."""
        self.defer: Callable[[DirNode, str, str], None] | None = None
        """Set in a helper process: ``defer(node, name, rel)`` hands a hard-linked
        file or symlink to the caller, which owns the run's link map."""
        self.on_stop: list[Callable[[str], None]] = []
        """Called once, with the reason, when the run starts stopping."""
        # Per-file hooks are called only if a site plugin implements them (hot path).
        self.choose_method = site_implemented(hook.rcp_choose_method)
        self.pre_create = site_implemented(hook.rcp_pre_create)
        self.file_copied = site_implemented(hook.rcp_file_copied)
        self.metadata = Metadata(settings.preserve, umask)
        self.copier = DataCopier()
        self.links = LinkMap()
        self.filter = Filter.build(
            includes=settings.includes,
            excludes=settings.excludes,
            filter_file=settings.filter_file,
            gitignore=settings.gitignore,
        )
        self.errors = ErrorLog()
        self.throttle = (
            TokenBucket(settings.ops_throttle) if settings.ops_throttle else None
        )
        self.dry_run = settings.dry_run
        self.stopping = False
        self.stop_reason: str | None = None

    def storage_of(self, node: DirNode) -> tuple[StorageInfo, StorageInfo]:
        """The (source, destination) storage of the job ``node`` belongs to."""
        anchor = node.anchor or node
        assert anchor.job is not None
        return self.storage[anchor.job]

    def classify(self, error: OSError, node: DirNode | None = None) -> Kind:
        """Transient, permanent or fatal, as the ``rcp_classify_error`` hook says.

        :param node: where the error happened, to tell the hook the job's storage.
        """
        source, destination = self.storage_of(node) if node else (None, None)
        kind: Kind = self.hook.rcp_classify_error(
            error=error, source=source, destination=destination
        )
        return kind

    def error(
        self, op: str, path: str, cause: OSError, node: DirNode | None = None
    ) -> EntryError:
        """The :class:`EntryError` for ``cause``, classified by the hook."""
        return entry_error(op, path, cause, self.classify(cause, node))

    def fail(self, tally: Tally, node: DirNode, error: EntryError) -> None:
        """Record a per-entry error; stop the run if it is fatal or fail-early is on."""
        tally["errors"] += 1
        node.incomplete = True
        self.errors.add(error)
        if isinstance(error, FatalError) or self.settings.fail_early:
            self.stop(str(error))

    def stop(self, reason: str) -> None:
        if not self.stopping:
            self.stop_reason = reason
            self.stopping = True
            for callback in self.on_stop:
                callback(reason)

    def dry(
        self, action: str, kind: str, node: DirNode, rel: str, reason: str = ""
    ) -> None:
        """Report one dry-run line for ``rel`` in ``node``'s job; skips and unchanged
        entries only above ``brief``. Costs one comparison outside dry runs."""
        if self.dry_run is None:
            return
        path = node.display(rel)
        quiet = action in ("skip", "unchanged", "keep")
        if quiet and self.dry_run is DryRun.BRIEF:
            return
        verb = action if quiet else f"would {action}"
        if self.dry_run is DryRun.EXPLAIN and reason:
            log.info("%s %s %r (%s)", verb, kind, path, reason)
        else:
            log.info("%s %s %r", verb, kind, path)
