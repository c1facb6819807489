"""What each data role of a remote copy runs its entries under: its host's site
plugins, the retry of transient errors, the error list, the stop, the throttle.

The local engine's rules (:mod:`rcp_core.context`, :mod:`rcp_core.walk`), for a role
that runs on its own host:

- **site plugins**: the role's host's own (its installed ``rcp`` entry points, the
  built-in plugin last), told the role's storage (``rcp_detect_storage`` of its root);
  ``rcp_classify_error`` decides what is transient, and the destination asks
  ``rcp_pre_create`` before it creates a file (e.g. Lustre striping);
- **retries**: an operation failing with a transient error is tried again up to
  ``retries`` times with jittered backoff from ``retry_delay``; only transient ones;
- **errors**: an entry error is counted, recorded (its message) and logged, with the
  classification of the hook; a fatal one, or any under ``fail_early``, stops the
  role: :meth:`RoleRun.stop` sets :attr:`RoleRun.stopping` and runs the ``on_stop``
  callbacks once (the destination tells the source), after which the role starts
  nothing new;
- **throttle**: with ``ops_throttle``, the source visits at most that many entries
  per second, so both ends go at its pace.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

import pluggy

from rcp_core.capacity import storage_of
from rcp_core.errors import FatalError, Kind, entry_error, retrying
from rcp_core.plugins import plugin_manager, site_implemented
from rcp_core.settings import CopySettings
from rcp_core.storage import StorageInfo
from rcp_core.summary import Tally
from rcp_core.throttle import TokenBucket

log = logging.getLogger("rcp_core")

T = TypeVar("T")


class RoleRun:
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
        self.settings = settings
        self.hook = hook if hook is not None else plugin_manager().hook
        self.storage: StorageInfo | None = None
        try:
            self.storage = storage_of(self.hook, root)
        except OSError as exc:  # gone or unreachable: the entries will say
            log.debug("%s: storage not detected: %s", root, exc)
        self._source = source
        self._retry = retrying(settings.retries + 1, settings.retry_delay)
        self.throttle = (
            TokenBucket(settings.ops_throttle) if settings.ops_throttle else None
        )
        self.pre_create = site_implemented(self.hook.rcp_pre_create)
        """Whether a site plugin prepares new files (asked only then)."""
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.on_stop: list[Callable[[str], None]] = []
        """Called once, with the reason, when the role starts stopping."""
        self._lock = threading.Lock()

    def classify(self, error: OSError) -> Kind:
        """Transient, permanent or fatal, as this host's ``rcp_classify_error`` says."""
        source, destination = (
            (self.storage, None) if self._source else (None, self.storage)
        )
        kind: Kind = self.hook.rcp_classify_error(
            error=error, source=source, destination=destination
        )
        return kind

    def attempt(self, fn: Callable[[], T]) -> T:
        """``fn()``, tried again on transient errors (``retries`` times at most)."""
        return self._retry(fn, self.classify)

    def fail(self, tally: Tally, rel: str, op: str, exc: OSError) -> None:
        """Count and record an entry error; stop if it is fatal or under fail-early."""
        error = entry_error(op, rel or ".", exc, self.classify(exc))
        tally["errors"] += 1
        with self._lock:
            self.errors.append(str(error))
        log.error("%s", error)
        if isinstance(error, FatalError) or self.settings.fail_early:
            self.stop(str(error))

    def stop(self, reason: str) -> None:
        """Start nothing new from now on; the callbacks run once, in this thread."""
        with self._lock:
            if self.stopping.is_set():
                return
            self.stopping.set()
        log.debug("stopping: %s", reason)
        for callback in self.on_stop:
            callback(reason)
