"""The one run runtime: what every tool and role runs its entries under.

Every run -- a local copy and its helper processes, each role of a copy between hosts,
a removal -- holds one :class:`Runtime`:

- **classification** is decided in one place: :func:`classify` holds the errno table,
  and a run asks it through the ``rcp_classify_error`` hook (whose built-in
  implementation is :func:`classify`), told the storage of the entry at hand, so a
  site may override it for its storage:

  - *transient* errnos (EAGAIN, EINTR, ETIMEDOUT, ESTALE, EBUSY, ...) are retried a
    small, configurable number of times with jittered backoff (tenacity), and only
    they are (:meth:`Runtime.attempt`, :func:`retrying`);
  - *fatal* errnos (ENOSPC, EDQUOT, EROFS, EMFILE, ENFILE) stop the run: continuing
    would fail every remaining entry the same way;
  - everything else (EACCES, ENOENT, EPERM, ELOOP, ...) is *permanent* for that entry;

- **errors** (:meth:`Runtime.record`) are counted in the worker's tally, logged once
  per distinct kind and kept with their counts
  (:class:`~rcp_core.run.records.ErrorLog`); a fatal one, or any under
  ``fail_early``, stops the run;
- **stop** (:meth:`Runtime.stop`) happens once, for the first reason (a fatal error,
  fail-early, cancel, a peer's stop), and runs the ``on_stop`` callbacks once, in
  the stopping thread; from then on ``stopping`` is true and the run starts nothing
  new (it only ever goes from false to true, so reading it needs no lock);
- **throttle**: with ``ops_throttle``, the run's token bucket; a wait for a token
  ends when the run stops (a stopped run takes no more entries, so none waits on).

Whether running a whole command again may succeed is decided here too
(:func:`retry_may_help`, what Airflow's task retries follow): only for transient
errors. A copy that finished with errors already retried its transient failures;
what is left, like a bad argument or a copy that does not verify, fails the same way
again.
"""

from __future__ import annotations

import enum
import errno
import logging
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rcp_core.errors import CopyFailedError, EntryError, FatalError, RcpError
from rcp_core.run.records import ErrorLog
from rcp_core.run.summary import Resources, Summary, Tally, merge
from rcp_core.run.throttle import TokenBucket

if TYPE_CHECKING:
    from rcp_core.run.monitor import Observer
    from rcp_core.run.pool import WorkPool
    from rcp_core.run.records import ChangeLog, ChangeSink
    from rcp_core.run.tuning import Controller

log = logging.getLogger("rcp_core")

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What stops a run (Ctrl-C, ``kill``, a scheduler, a closed terminal): a tool stops
on each alike; its helper processes ignore them (the tool stops them itself)."""


class Kind(enum.Enum):
    """How an ``OSError`` is treated; see the module docstring."""

    TRANSIENT = "transient"
    PERMANENT = "permanent"
    FATAL = "fatal"


TRANSIENT_ERRNOS = frozenset(
    {
        errno.EAGAIN,
        errno.EINTR,
        errno.ETIMEDOUT,
        errno.ESTALE,
        errno.EBUSY,
        errno.ECONNRESET,
        errno.ENOLCK,
    }
)
FATAL_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EMFILE, errno.ENFILE}
)


def classify(exc: BaseException) -> Kind:
    """Decide whether ``exc`` is transient, permanent or fatal for the run."""
    cause = exc.cause if isinstance(exc, EntryError) else exc
    if isinstance(cause, OSError) and cause.errno is not None:
        if cause.errno in TRANSIENT_ERRNOS:
            return Kind.TRANSIENT
        if cause.errno in FATAL_ERRNOS:
            return Kind.FATAL
    return Kind.PERMANENT


def retry_may_help(exc: BaseException) -> bool:
    """Whether running the same command again may succeed where this failed: only
    transient errors (a lost or silent peer, EAGAIN, ESTALE, ...)."""
    if isinstance(exc, RcpError) and not isinstance(exc, OSError):
        return False
    return isinstance(exc, OSError) and classify(exc) is Kind.TRANSIENT


Classifier = Callable[[OSError], Kind]


def entry_error(
    op: str, path: str, cause: OSError, kind: Kind | None = None
) -> EntryError:
    """Wrap ``cause`` in the :class:`EntryError` subclass its ``kind`` calls for.

    :param kind: the classification, if the caller already made it.
    """
    if (kind or classify(cause)) is Kind.FATAL:
        return FatalError(op, path, cause)
    return EntryError(op, path, cause)


class Retry(Protocol):
    """What :func:`retrying` returns."""

    def __call__(
        self,
        fn: Callable[[], T],
        classifier: Classifier = ...,
        failure: OSError | None = ...,
    ) -> T: ...


def retrying(attempts: int, base_delay: float) -> Retry:
    """Return ``run(fn, classifier, failure=None)``: call ``fn``, retry it on transient
    errors only (``failure``: the first try was made, and failed so).

    :param attempts: total tries (1 disables retrying).
    :param base_delay: the backoff before the first retry in seconds; doubles with
        jitter, capped at 2 s.
    The classifier (the run's ``rcp_classify_error`` for the entry at hand) decides
    what is transient.
    """

    def run(
        fn: Callable[[], T],
        classifier: Classifier = classify,
        failure: OSError | None = None,
    ) -> T:
        # The first try is a plain call: the policy (and tenacity's import, which
        # a command copying a small tree should not pay) is built only after a
        # transient failure. Most calls never fail, and a removal makes one per file.
        # A caller that made the first try itself passes its ``failure``.
        if failure is None:
            try:
                return fn()
            except OSError as exc:
                failure = exc
        if attempts <= 1 or classifier(failure) is not Kind.TRANSIENT:
            raise failure
        failed = [failure]
        import tenacity

        def transient(exc: BaseException) -> bool:
            return isinstance(exc, OSError) and classifier(exc) is Kind.TRANSIENT

        def again() -> T:
            # The policy's first attempt is the plain call's failure, so even the
            # first retry waits its backoff.
            if failed:
                raise failed.pop()
            return fn()

        policy = tenacity.Retrying(
            retry=tenacity.retry_if_exception(transient),
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_exponential_jitter(
                multiplier=base_delay, max=2.0, jitter=base_delay
            ),
            reraise=True,
        )
        return policy(again)

    return run


Storage = Callable[[Any], tuple[Any, Any]]
"""``storage(where)``: the (source, destination) storage the ``rcp_classify_error``
hook is told for an error at ``where`` (a run's own notion of place: a directory node,
or ``None``)."""


def _no_storage(where: Any) -> tuple[None, None]:
    return None, None


class Runtime:
    """The run state every worker of one run shares (see the module).

    :param hook: the run's plugin hooks (``rcp_classify_error`` is asked).
    :param retries: tries after the first for a transient error.
    :param retry_delay: the backoff before the first retry, in seconds.
    :param fail_early: stop at the first entry error.
    :param ops_throttle: metadata operations per second across the run, if capped.
    :param storage: what the classification hook is told (default: nothing).
    """

    def __init__(
        self,
        hook: Any,
        *,
        retries: int,
        retry_delay: float,
        fail_early: bool,
        ops_throttle: float | None = None,
        storage: Storage = _no_storage,
    ) -> None:
        self.hook = hook
        self.fail_early = fail_early
        self.errors = ErrorLog()
        self.changes: ChangeSink | None = None
        """Where the run's workers record each change
        (:mod:`rcp_core.run.records`), when it keeps a record: see
        :meth:`record_changes`."""
        self._stopped = threading.Event()
        """Set with :attr:`stopping`: what waits for a throttle token wakes on it."""
        self.throttle = self.bucket(ops_throttle) if ops_throttle else None
        self.retry = retrying(retries + 1, retry_delay)
        self._stopping = False
        self.stop_reason: str | None = None
        """Why the run stopped (the first reason), if it did."""
        self.on_stop: list[Callable[[str], None]] = []
        """Called once, with the reason, when the run starts stopping."""
        self._storage = storage
        self._stop_lock = threading.Lock()

    def record_changes(self, changes: ChangeLog | None) -> None:
        """Record this run's changes and errors in ``changes`` (``None``: none)."""
        self.changes = changes
        self.errors.changes = changes

    def bucket(self, rate: float) -> TokenBucket:
        """A token bucket of ``rate`` per second whose waits end when the run stops
        (``--ops-throttle``'s operations, ``--bwlimit``'s bytes)."""
        return TokenBucket(rate, interrupt=self._stopped)

    @property
    def stopping(self) -> bool:
        """Whether the run stopped: it starts nothing new (set only by :meth:`stop`)."""
        return self._stopping

    def classify(self, error: OSError, where: Any = None) -> Kind:
        """Transient, permanent or fatal, as the ``rcp_classify_error`` hook says.

        :param where: where it happened, to tell the hook the storage there.
        """
        source, destination = self._storage(where)
        kind: Kind = self.hook.rcp_classify_error(
            error=error, source=source, destination=destination
        )
        return kind

    def attempt(self, fn: Callable[[], T], where: Any = None) -> T:
        """``fn()``, tried again on transient errors (``retries`` times at most)."""
        return self.retry(fn, lambda error: self.classify(error, where))

    def error(
        self, op: str, path: str, cause: OSError, where: Any = None
    ) -> EntryError:
        """The :class:`EntryError` for ``cause``, classified by the hook."""
        return entry_error(op, path, cause, self.classify(cause, where))

    def record(self, tally: Tally, error: EntryError) -> None:
        """Count and record an entry error (a vanished source's also as
        ``errors.vanished``); stop if it is fatal or under fail-early."""
        tally["errors"] += 1
        tally["errors.vanished"] += error.vanished
        self.errors.add(error)
        self.stop_for(error)

    def stop_for(self, error: EntryError) -> None:
        """Stop if ``error`` calls for it: a fatal one, or any under fail-early (a run
        that keeps its own record of errors, as a comparison does, asks this)."""
        if isinstance(error, FatalError) or self.fail_early:
            self.stop(str(error))

    def monitored(
        self,
        pool: WorkPool,
        walk: Callable[[], None],
        *,
        controller: Controller | None = None,
        on_progress: Observer | None = None,
        progress_interval: float = 1.0,
        cancel: threading.Event | None = None,
    ) -> dict[str, int]:
        """Run ``walk`` (it fills ``pool`` and runs it) under the run's monitor thread
        (:class:`~rcp_core.run.monitor.Monitor`): ``on_progress`` gets snapshots,
        ``controller`` (if any) moves the pool's limit, and ``cancel`` stops the run
        (``cancelled``, which :meth:`conclude` raises). The tallies of the pool's
        workers, merged.

        :raises BaseException: what ``walk`` raised (no entry error: a defect, an
            interrupt), told to the ``rcp_run_finished`` hook first.
        """
        # Imported here: a helper process holds a runtime but never a monitor.
        from rcp_core.run.monitor import Monitor

        monitor = Monitor(
            pool,
            controller,
            [on_progress] if on_progress is not None else [],
            progress_interval,
            cancel or threading.Event(),
            on_cancel=lambda: self.stop("cancelled"),
        )
        monitor.start()
        try:
            walk()
        except BaseException as exc:
            self.hook.rcp_run_finished(summary=None, error=exc)
            raise
        finally:
            monitor.stop()
        return merge(pool.tallies)

    def conclude(
        self,
        counts: dict[str, int],
        resources: Resources,
        *,
        dry_run: bool = False,
        what: str = "copy",
    ) -> Summary:
        """The run's end: its summary, told to the ``rcp_run_finished`` hook; a run
        with failed entries, or cancelled, raises
        :class:`~rcp_core.errors.CopyFailedError` (``what`` names the run), told to
        the hook as the error.
        """
        summary = Summary(
            counts=counts,
            resources=resources,
            errors=tuple(self.errors.report()),
            dry_run=dry_run,
        )
        failure: CopyFailedError | None = None
        if counts["errors"] or self.stop_reason == "cancelled":
            failure = CopyFailedError(
                summary, list(summary.errors), self.stopping, what=what
            )
        self.hook.rcp_run_finished(summary=summary, error=failure)
        if failure is not None:
            raise failure
        return summary

    def stop(self, reason: str) -> None:
        """Start nothing new from now on; the callbacks run once, in this thread."""
        with self._stop_lock:
            if self._stopping:
                return
            self.stop_reason = reason
            self._stopping = True
        self._stopped.set()
        log.debug("stopping: %s", reason)
        for callback in self.on_stop:
            callback(reason)
