"""What every work item of a copy shares: the run's runtime (errors, retries, stop,
throttle: :class:`~rcp_core.run.runtime.Runtime`) and the copy's own state.

Everything here is either immutable, internally locked, or a flag whose races are
harmless (``stopping`` only ever goes from False to True).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping

import pluggy

from rcp_core.engine.chunks import Chunking
from rcp_core.engine.filters import Filter
from rcp_core.engine.links import LinkMap
from rcp_core.engine.metadata import Metadata, Remap
from rcp_core.engine.methods import DataCopier
from rcp_core.engine.tree import DirNode
from rcp_core.errors import EntryError
from rcp_core.paths import Job
from rcp_core.run.records import NEW, Change, differences, of_stat
from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Tally
from rcp_core.settings import CopySettings
from rcp_core.site.plugins import site_implemented
from rcp_core.site.storage import StorageInfo

log = logging.getLogger("rcp_core")


class Context(Runtime):
    """What every work item of a copy needs.

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
        super().__init__(
            hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
            ops_throttle=settings.ops_throttle,
            storage=self._storage_at,
        )
        self.settings = settings
        self.storage = storage
        self.chunking: Chunking | None = None
        """Set by the engine when the run splits large files."""
        self.aside: Callable[[], contextlib.AbstractContextManager[None]] | None = None
        """Set by the engine when a large file's in-kernel copy may run beside the
        limit's Python work (:meth:`rcp_core.engine.walk.Walker.step_aside`)."""
        self.defer: Callable[[DirNode, str, str], None] | None = None
        """Set in a helper process: ``defer(node, name, rel)`` hands a hard-linked
        file or symlink to the caller, which owns the run's link map."""
        # Per-file hooks are called only if a site plugin implements them (hot path).
        self.choose_method = site_implemented(hook.rcp_choose_method)
        self.pre_create = site_implemented(hook.rcp_pre_create)
        self.file_copied = site_implemented(hook.rcp_file_copied)
        self.metadata = Metadata(settings.preserve, umask, Remap.of(settings))
        self.copier = DataCopier()
        self.links = LinkMap()
        self.filter = Filter.of(settings)
        self.dry_run = settings.dry_run

    def storage_of(self, node: DirNode) -> tuple[StorageInfo, StorageInfo]:
        """The (source, destination) storage of the job ``node`` belongs to."""
        anchor = node.anchor or node
        assert anchor.job is not None
        return self.storage[anchor.job]

    def _storage_at(
        self, node: DirNode | None
    ) -> tuple[StorageInfo, StorageInfo] | tuple[None, None]:
        return self.storage_of(node) if node is not None else (None, None)

    def fail(self, tally: Tally, node: DirNode, error: EntryError) -> None:
        """Record a per-entry error (:meth:`Runtime.record`); ``node`` is incomplete."""
        node.incomplete = True
        self.record(tally, error)

    def dry(
        self, action: str, kind: str, node: DirNode, rel: str, reason: str = ""
    ) -> None:
        """Report one dry-run line for ``rel`` in ``node``'s job; skips and unchanged
        entries only above ``brief``. Costs one comparison outside dry runs."""
        if self.dry_run is None:
            return
        line = self.dry_run.line(action, kind, node.display(rel), reason)
        if line is not None:
            log.info("%s", line)

    def changed(
        self,
        node: DirNode,
        rel: str,
        action: str,
        kind: str,
        st: os.stat_result,
        old: os.stat_result | None,
        *,
        bytes: int = 0,
        method: str | None = None,
        target: str | None = None,
    ) -> None:
        """Record that ``rel`` in ``node``'s job was changed, by its destination
        path (``st``: its source's
        ``lstat``; ``old``: what the destination held, ``None`` if nothing); call it
        only when the run records changes (:attr:`changes`)."""
        assert self.changes is not None
        attributes = (
            NEW
            if old is None
            else differences(kind, of_stat(st), of_stat(old), self.settings.preserve)
        )
        self.changes.add(
            Change(
                node.dst_path(rel),
                action,
                kind,
                attributes,
                bytes=bytes,
                method=method,
                target=target,
            )
        )
