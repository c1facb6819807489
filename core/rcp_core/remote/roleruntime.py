"""What each data role of a remote copy runs its entries under: the run runtime
(:class:`~rcp_core.run.runtime.Runtime`, as every run has) with its host's site plugins.

The local engine's rules, for a role that runs on its own host:

- **site plugins**: the role's host's own (its installed ``rcp`` entry points, the
  built-in plugin last), told the role's storage (``rcp_detect_storage`` of its root);
  ``rcp_classify_error`` decides what is transient, and the destination asks
  ``rcp_pre_create`` before it creates a file (e.g. Lustre striping);
- **retries**: an operation failing with a transient error is tried again up to
  ``retries`` times with jittered backoff from ``retry_delay``; only transient ones;
- **errors**: an entry error is counted, recorded (deduplicated, the first of each
  kind logged; the role reports them to its master as
  :meth:`~rcp_core.run.records.ErrorLog.messages`), with the classification of the hook;
  a fatal one, or any under ``fail_early``, stops the role: ``stop`` sets
  ``stopping`` and runs the ``on_stop`` callbacks once (the destination tells the
  source), after which the role starts nothing new;
- **throttle**: with ``ops_throttle``, the source visits at most that many entries
  per second, so both ends go at its pace.
"""

from __future__ import annotations

import logging

import pluggy

from rcp_core.run.runtime import Runtime
from rcp_core.run.summary import Tally
from rcp_core.settings import CopySettings
from rcp_core.site.capacity import storage_of
from rcp_core.site.plugins import plugin_manager, site_implemented
from rcp_core.site.storage import StorageInfo

log = logging.getLogger("rcp_core")


class RoleRun(Runtime):
    """The run state one role shares between its threads.

    :param root: the role's root on this host (a source operand, or the directory that
        receives the copy), for ``rcp_detect_storage``.
    :param source: whether this is the source role (the storage the hooks are told is
        then the source's, else the destination's).
    :param hook: the plugins' hooks (default: this host's installed plugins).
    """

    def __init__(
        self,
        settings: CopySettings,
        root: str,
        *,
        source: bool,
        hook: pluggy.HookRelay | None = None,
    ) -> None:
        super().__init__(
            hook if hook is not None else plugin_manager().hook,
            retries=settings.retries,
            retry_delay=settings.retry_delay,
            fail_early=settings.fail_early,
            ops_throttle=settings.ops_throttle,
            storage=self._storage_here,
        )
        self.settings = settings
        self.storage: StorageInfo | None = None
        try:
            self.storage = storage_of(self.hook, root)
        except OSError as exc:  # gone or unreachable: the entries will say
            log.debug("%s: storage not detected: %s", root, exc)
        self._source = source
        self.pre_create = site_implemented(self.hook.rcp_pre_create)
        """Whether a site plugin prepares new files (asked only then)."""

    def _storage_here(
        self, where: object
    ) -> tuple[StorageInfo | None, StorageInfo | None]:
        return (self.storage, None) if self._source else (None, self.storage)

    def fail(self, tally: Tally, rel: str, op: str, exc: OSError) -> None:
        """Count and record an entry error (:meth:`Runtime.record`)."""
        self.record(tally, self.error(op, rel or ".", exc))
