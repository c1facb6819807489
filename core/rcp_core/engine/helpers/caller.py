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
  sent tasks while fewer entries are out than a full task (:data:`TASK_ENTRIES`) for
  each batch it runs and one more (:class:`_Backlog`): a tree of small directories
  keeps many small tasks queued there, enough to cover the moments its feeder waits
  for the caller's GIL, while a tree of large directories keeps the two tasks it
  always did.
  When the controller moves the limit, :meth:`Team.set_limit` moves every helper's (a
  cold tree whose single worker waits for the disk grows to two in the helpers too);
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

import collections
import contextlib
import errno
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

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
    Setup,
    Stop,
    Task,
)
from rcp_core.engine.tree import DirNode
from rcp_core.engine.walk import OP_NAMES, Batch, Walker
from rcp_core.errors import ChannelError, FatalError
from rcp_core.paths import Job
from rcp_core.run.pool import Item, WorkPool
from rcp_core.run.summary import Tally

log = logging.getLogger("rcp_core")

TASK_ENTRIES = 256
"""A task joins consecutive batches of one directory up to this many entries: one
message pair per 256 small files instead of per 32."""
READY_TIMEOUT = 30.0
FINAL_TIMEOUT = 30.0
POLL = 0.2


class Team:
    """The helpers of one run, feeding on its pool.

    :param size: helper processes to start.
    :param eager: the helpers were asked for (``--max-processes``): the engine starts
        them before the walk, and :meth:`start` waits (bounded) until every one can
        take work. Otherwise the engine starts them when work queues up in a run
        expected to last long enough to repay them (:mod:`rcp_core.run.monitor`), and
        the caller goes on while they get ready.

    :meth:`start` and :meth:`close` may race (the monitor thread starts the team
    while the run ends): whichever comes first wins, and a team closed before it
    started never starts.
    """

    def __init__(self, walker: Walker, setup: Setup, size: int, *, eager: bool) -> None:
        self.walker = walker
        self.setup = setup
        self.eager = eager
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self.jobs: Mapping[Job, int] = {job: i for i, job in enumerate(setup.jobs)}
        self.helpers = [_Helper(self, number) for number in range(size)]
        self.tallies: list[Tally] = [
            tally
            for helper in self.helpers
            for tally in (helper.remote, helper.local, helper.walked)
        ]
        """Every helper's counters (for progress and the summary)."""

    def start(self) -> None:
        """Spawn the helpers (once; never after :meth:`close`)."""
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
            for helper in self.helpers:
                helper.start()
        self.walker.ctx.on_stop.append(self._stop)
        if self.eager:
            deadline = time.monotonic() + READY_TIMEOUT
            for helper in self.helpers:
                while not helper.dead and not helper.ready.wait(POLL):
                    if time.monotonic() > deadline:
                        break

    def set_limit(self, workers: int) -> None:
        """Have every helper run ``workers`` batches at once, as the caller now does
        (before :meth:`start`: from their start)."""
        for helper in self.helpers:
            helper.set_limit(workers)

    def _stop(self, reason: str) -> None:
        for helper in self.helpers:
            helper.send_quietly(Stop(reason))

    def close(self) -> None:
        """After the pool ended: let every helper finish, collect its counts, reap it."""
        with self._lock:
            self._closed = True
            if not self._started:
                return
        for helper in self.helpers:
            helper.finish()
        for helper in self.helpers:
            helper.reap()

    @property
    def batches(self) -> int:
        """Batches the helpers took."""
        return sum(helper.sent for helper in self.helpers)


class _Helper:
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
        self.own = _Own(self.pool, team.walker.batch)
        self.ready = threading.Event()
        self.final = threading.Event()
        self.limit = team.setup.concurrency.initial
        """Batches the helper runs at once (what its process was last told)."""
        self.backlog = _Backlog(_backlog_bound(self.limit))
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
        """Spawn the helper; if that fails, the run goes on without it.

        ``-P``: the caller's working directory is not put on the helper's import
        path, so a directory holding an ``rcp_core`` cannot stand in for ours.
        """
        try:
            chan, theirs = Channel.pair()
        except OSError as exc:
            log.warning("cannot start helper process %d: %s", self.number, exc)
            self.dead = True
            return
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "rcp_core.engine.helpers.process",
                    str(theirs.fileno()),
                ],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
            )
            chan.send(self.team.setup)
        except OSError as exc:
            log.warning("cannot start helper process %d: %s", self.number, exc)
            self._kill()
            chan.close()
            return
        finally:
            theirs.close()
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
        self.backlog.resize(_backlog_bound(workers))
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
        while True:
            try:
                got = self.chan.recv()
            except ChannelError as exc:
                log.error("helper process %d: %s", self.number, exc)
                got = None
            except OSError:  # ECONNRESET: it ended with our messages unread
                got = None
            if got is None:
                self._lost()
                return
            message, fds = got
            for fd in fds:  # no message from a helper carries descriptors
                os.close(fd)
            if self._apply(message):
                return

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


def _backlog_bound(workers: int) -> int:
    """Entries a helper running ``workers`` batches at once may hold (one task more
    may pass it): one full task for each, and one ahead."""
    return (workers + 1) * TASK_ENTRIES


class _Backlog:
    """Entries sent to a helper and not yet done, against a bound that can change.

    The feeder sends a task while fewer entries than the bound are out, so the bound
    is passed by at most one task. A smaller bound takes effect as tasks come back;
    :meth:`wake` lets a waiting feeder through at the end, to see that it is done.
    """

    def __init__(self, bound: int) -> None:
        self._bound = bound
        self._out = 0
        self._woken = False
        self._cond = threading.Condition()

    def resize(self, bound: int) -> None:
        with self._cond:
            self._bound = bound
            self._cond.notify_all()

    def wait_for_room(self, timeout: float) -> bool:
        """Whether another task may be sent (or :meth:`wake` was called), waiting at
        most ``timeout`` seconds for it."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._out < self._bound or self._woken, timeout
            )

    def add(self, entries: int) -> None:
        with self._cond:
            self._out += entries

    def done(self, entries: int) -> None:
        with self._cond:
            self._out -= entries
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()


class _Own:
    """The work of the directories a helper owns, LIFO like the pool (batches before
    the scan continuation that would add more). Each item is reserved in the pool.

    After :meth:`give_back` (the helper is gone) items go to the pool itself.
    """

    def __init__(self, pool: WorkPool, batch_fn: Callable[..., None]) -> None:
        self.pool = pool
        self.batch_fn = batch_fn
        """The walker's batch item, which :meth:`pop_batches` joins."""
        self.items: collections.deque[Item] = collections.deque()
        self.lock = threading.Lock()
        self.returned = False

    def push(self, fn: Callable[..., None], *args: Any) -> None:
        with self.lock:
            if not self.returned:
                self.pool.reserve()
                self.items.append((fn, args))
                return
        self.pool.push(fn, *args)

    def pop(self) -> Item | None:
        with self.lock:
            return self.items.pop() if self.items else None

    def pop_batches(self, node: DirNode, room: int) -> list[Batch]:
        """Take the batches of ``node`` on top of the queue, up to ``room`` entries
        in all (each stays reserved in the pool, as it was)."""
        taken: list[Batch] = []
        with self.lock:
            while self.items:
                fn, args = self.items[-1]
                if fn != self.batch_fn or args[0] is not node or len(args[1]) > room:
                    break
                self.items.pop()
                taken.append(args[1])
                room -= len(args[1])
        return taken

    def give_back(self) -> None:
        """Move every item to the pool, and send later ones there directly."""
        with self.lock:
            self.returned = True
            items, self.items = list(self.items), collections.deque()
        for fn, args in items:
            self.pool.push(fn, *args)
            self.pool.finish_external()
