"""Helper processes: the other cores, for trees where one Python process saturates one.

On local storage a small file costs the kernel about as much as it costs Python to ask
for it, so a single process keeps one core busy and leaves the rest idle, and threads
do not help (the GIL, and the kernel's per-directory locks). The run then spawns
helpers (``python -m rcp_core.engine.helpers.process``; spawned, not forked, so a threaded
caller such as an Airflow worker is safe) that copy *file batches*:

- the caller keeps the walk: it opens, creates and scans every directory and applies
  directory metadata after the children, so post-order metadata, ``--delete``, filters
  and ``-L`` loop detection stay in one process;
- a helper :meth:`~rcp_core.run.pool.WorkPool.steal`\\ s the *oldest* queued batch (the
  entries of one directory grouped by the scan), the one furthest from the caller's
  own depth-first path, so processes mostly work in different directories; the batch
  travels with its directory's two descriptors;
- a helper runs as many batches at once as the caller's pool runs workers, and is
  sent tasks while fewer entries are out than a full task for each batch it runs and
  one more (:mod:`rcp_core.engine.helpers.feeding`): a tree of small directories keeps
  many small tasks queued there, enough to cover the moments its feeder waits for the
  caller's GIL, while a tree of large directories keeps the two tasks it always did.
  When the controller moves the limit, the run's team
  (:mod:`rcp_core.engine.helpers.team`) moves every helper's (a cold tree whose single
  worker waits for the disk grows to two in the helpers too);
- a stolen batch holds its directory node until the helper's ``Done``, so a directory
  is finished after every entry wherever it was copied;
- hard-linked files and symlinks go back to the caller, which owns the link map
  (links across batches and processes are kept);
- errors, log records and counters flow back; the summary counts every process;
- a helper that dies without its ``Final`` fails its outstanding batches (their
  directories are not pruned) and stops the run: nothing is lost silently;
- every wait on a helper is bounded: ``READY_TIMEOUT`` to start (a helper that does not
  start is killed and the run goes on without it; it never took work), ``FINAL_TIMEOUT``
  to finish after ``Finish``.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from rcp_core.engine.entries import copy_other
from rcp_core.engine.helpers.channel import (
    Channel,
    Counts,
    Crash,
    Deferred,
    Done,
    Failure,
    Final,
    Finish,
    Limit,
    Ready,
    Record,
    Task,
)
from rcp_core.engine.helpers.feeding import (
    TASK_ENTRIES,
    Backlog,
    OwnWork,
    backlog_bound,
)
from rcp_core.engine.helpers.spawn import read_helper, spawn
from rcp_core.engine.tree import DirNode
from rcp_core.engine.walk import OP_NAMES, Batch
from rcp_core.errors import FatalError
from rcp_core.run.pool import Item
from rcp_core.run.records import Change
from rcp_core.run.summary import Tally

if TYPE_CHECKING:
    from rcp_core.engine.helpers.team import Team

log = logging.getLogger("rcp_core")

READY_TIMEOUT = 30.0
FINAL_TIMEOUT = 30.0
POLL = 0.2


class Helper:
    """One helper process and the two threads that talk to it.

    The *feeder* takes work: first its helper's own directories' work (``own``),
    else it steals the oldest directory visit -- and visits it here, with the
    directory's batches and scan continuations going to ``own`` -- else the oldest
    batch. Batches are sent; visits and scans run in the feeder (counted in
    ``walked``). The *reader* applies what comes back; ``remote`` holds the helper's
    own counters (replaced by each ``Counts``), ``local`` what the reader records
    itself (a lost helper's batches).
    """

    def __init__(self, team: Team, number: int) -> None:
        self.team = team
        self.number = number
        self.ctx = team.walker.ctx
        self.pool = team.walker.pool
        self.remote = Tally()
        self.local = Tally()
        self.walked = Tally()
        self.own = OwnWork(self.pool, team.walker.batch)
        self.ready = threading.Event()
        self.final = threading.Event()
        self.limit = team.setup.concurrency.initial
        """Batches the helper runs at once (what its process was last told)."""
        self.backlog = Backlog(backlog_bound(self.limit))
        self.tasks: dict[int, tuple[DirNode, int, int]] = {}
        """Task id -> its directory, how many batches (references) it joined, and
        how many entries it holds."""
        self.lock = threading.Lock()
        self.ids = itertools.count()
        self.sent = 0
        self.dead = False
        self.closing = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.chan: Channel | None = None
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        """Spawn the helper (:func:`~rcp_core.engine.helpers.spawn.spawn`); if that
        fails, the run goes on without it."""
        try:
            self.proc, chan = spawn("rcp_core.engine.helpers.process", self.team.setup)
        except OSError as exc:
            log.warning("cannot start helper process %d: %s", self.number, exc)
            self.dead = True
            return
        with self.lock:  # a limit set meanwhile is sent after the setup, not lost
            self.chan = chan
            if self.limit != self.team.setup.concurrency.initial:
                self.send_quietly(Limit(self.limit))
        for target, role in ((self._read, "reader"), (self._feed, "feeder")):
            thread = threading.Thread(
                target=target, name=f"rcp-helper-{self.number}-{role}", daemon=True
            )
            thread.start()
            self.threads.append(thread)

    def set_limit(self, workers: int) -> None:
        """Run ``workers`` batches at once there, with tasks sent ahead to match."""
        self.backlog.resize(backlog_bound(workers))
        with self.lock:
            self.limit = workers
            self.send_quietly(Limit(workers))  # before start: sent by start

    # -- feeding ----------------------------------------------------------------

    def _gone(self) -> bool:
        return self.dead or self.closing or not self.pool.outstanding

    def _feed(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.ready.wait(POLL):
            if self._gone():
                return
            if time.monotonic() > deadline:
                log.warning(
                    "helper process %d did not start; going on without it", self.number
                )
                self._kill()
                return
        walker = self.team.walker
        while True:
            while not self.backlog.wait_for_room(timeout=POLL):
                if self._gone():
                    return
            item = self.own.pop() or self.pool.steal(self._rank, give_up=self._gone)
            if item is None:
                return
            if item[0] == walker.batch:
                node, batch = item[1]
                more = self.own.pop_batches(node, TASK_ENTRIES - len(batch))
                self._send_task(node, [batch, *more])
                continue
            fn, args = item
            try:
                if fn == walker.visit:
                    parent, name, dst_name, rel = args
                    walker.visit(self.walked, parent, name, dst_name, rel, self.own)
                else:
                    fn(self.walked, *args)
            except BaseException as exc:  # noqa: BLE001 - re-raised by the pool's run
                self.pool.report_crash(exc)
            finally:
                self.pool.finish_external()

    def _rank(self, item: Item) -> int | None:
        """Steal a directory (visited here, its files sent over) before a batch."""
        walker = self.team.walker
        if item[0] == walker.visit:
            return 0
        if item[0] == walker.batch:
            return 1
        return None

    def _send_task(self, node: DirNode, batches: list[Batch]) -> None:
        """Send ``batches`` of ``node`` as one task; each holds its own reference on
        the node and its own reservation in the pool, given back at ``Done``."""
        entries = [entry for batch in batches for entry in batch]
        anchor = node.anchor or node
        assert anchor.job is not None
        assert self.chan is not None
        fds = [node.src_fd] if node.dst_fd is None else [node.src_fd, node.dst_fd]
        with self.lock:
            if not self.dead:
                task = next(self.ids)
                self.tasks[task] = (node, len(batches), len(entries))
                self.backlog.add(len(entries))
                try:
                    self.chan.send(
                        Task(
                            task=task,
                            job=self.team.jobs[anchor.job],
                            rel=node.rel,
                            fresh=node.fresh,
                            dst_dev=node.dst_dev,
                            has_dst=node.dst_fd is not None,
                            entries=[(name, OP_NAMES[op]) for name, op in entries],
                        ),
                        fds,
                    )
                    self.sent += 1
                    return
                except OSError:
                    del self.tasks[task]  # the reader will see the helper gone
                    self.backlog.done(len(entries))
        # Not sent: the caller copies them after all.
        for batch in batches:
            self.pool.push(self.team.walker.batch, node, batch)
            self.pool.finish_external()

    # -- reading ----------------------------------------------------------------

    def _read(self) -> None:
        assert self.chan is not None
        read_helper(self.chan, self._apply, self._lost, f"helper process {self.number}")

    def _apply(self, message: object) -> bool:
        """Act on one message; ``True`` when the helper is finished."""
        if isinstance(message, Done):
            self._done(message)
        elif isinstance(message, Deferred):
            node, _, _ = self.tasks[message.task]
            self.team.walker.hold(node)
            self.pool.push(self._copy_deferred, node, message.name, message.rel)
        elif isinstance(message, Counts):
            self.remote.update(message.counts)
        elif isinstance(message, Record):
            logging.getLogger(message.logger).log(message.level, "%s", message.message)
        elif isinstance(message, Change):
            assert self.ctx.changes is not None, "sent only when the run records"
            self.ctx.changes.add(message)
        elif isinstance(message, Failure):
            self.ctx.errors.add(message.error)
            if isinstance(message.error, FatalError) or self.ctx.settings.fail_early:
                self.ctx.stop(str(message.error))
        elif isinstance(message, Ready):
            self.ready.set()
        elif isinstance(message, Final):
            self.remote.update(message.counts)
            self.final.set()
            return True
        elif isinstance(message, Crash):
            log.error(
                "helper process %d crashed:\n%s", self.number, message.description
            )
            self._lost()
            return True
        return False

    def _done(self, message: Done) -> None:
        with self.lock:
            node, parts, entries = self.tasks.pop(message.task)
        if message.incomplete:
            node.incomplete = True
        if message.has_content:
            node.has_content = True
        for _ in range(parts):
            self.pool.push(self.team.walker.release, node)
            self.pool.finish_external()
        self.backlog.done(entries)

    def _copy_deferred(self, tally: Tally, node: DirNode, name: str, rel: str) -> None:
        """A hard-linked file or symlink of a helper's batch, copied here with the
        link map (by its type, which the helper does not say)."""
        self.team.walker.entry(tally, node, name, name, rel, copy_other)
        self.team.walker.release(tally, node)

    def _lost(self) -> None:
        """The helper ended without its ``Final``: fail what it held, stop the run."""
        with self.lock:
            self.dead = True
            lost, self.tasks = self.tasks, {}
        self.own.give_back()
        if self.final.is_set():
            return
        if not self.sent:  # it never took work: nothing lost but its help
            if not self.closing:
                log.warning("helper process %d ended before taking work", self.number)
            return
        status = self.proc.poll() if self.proc else None
        cause = OSError(errno.EPIPE, f"helper process exited (status {status})")
        paths = [node.display(node.rel) for node, _, _ in lost.values()]
        for path in paths or ["(its counts since the last report)"]:
            self.local["errors"] += 1
            self.ctx.errors.add(FatalError("copy batch", path, cause))
        for node, _, _ in lost.values():
            node.incomplete = True
        self.ctx.stop(str(cause))
        for node, parts, entries in lost.values():
            for _ in range(parts):
                self.pool.push(self.team.walker.release, node)
                self.pool.finish_external()
            self.backlog.done(entries)

    # -- ending -----------------------------------------------------------------

    def send_quietly(self, message: object) -> None:
        """Send if the helper is still there; a gone helper is the reader's news."""
        if self.chan is not None and not self.dead:
            with contextlib.suppress(OSError):
                self.chan.send(message)

    def finish(self) -> None:
        self.closing = True
        self.ready.set()  # wake the feeder wherever it waits: it sees ``closing``
        self.backlog.wake()
        if not self.sent:
            self._kill()  # it never took work: nothing to wait for
        else:
            self.send_quietly(Finish())

    def reap(self) -> None:
        deadline = time.monotonic() + FINAL_TIMEOUT
        while self.sent and not self.dead and not self.final.wait(POLL):
            if time.monotonic() > deadline:
                log.error("helper process %d did not finish; killing it", self.number)
                self._kill()
        if self.proc is not None:
            try:
                self.proc.wait(FINAL_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._kill()
                self.proc.wait()
        for thread in self.threads:
            thread.join(FINAL_TIMEOUT)
        if self.chan is not None:
            self.chan.close()

    def _kill(self) -> None:
        self.dead = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
