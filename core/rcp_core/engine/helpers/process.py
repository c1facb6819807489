"""A helper process of a run (``python -P -m rcp_core.engine.helpers.process FD``); see
``caller``.

It copies the batches the caller sends, with the caller's settings, storage view and
plugins (the built-in one and the installed site plugins), through the same
:class:`~rcp_core.engine.walk.Walker` items. What only the caller can do goes back to it:
hard-linked files and symlinks (``Deferred``), errors (``Failure``, logged and counted
there) and log records. It runs as many batches at once as the caller runs workers: the
caller's controller moves that limit, and ``Limit`` brings each move here. Each batch's
directory is a parentless stand-in node holding the descriptors that came with the
task; releasing it answers ``Done``.

The helper lives until ``Finish`` (then answers ``Final`` and exits 0), or until its
socket closes (the caller is gone: it stops at once). A bug stops it with ``Crash``
and exit status 1. It ignores the stop signals (SIGINT, SIGTERM, SIGHUP): sent to the
process group they reach the caller too, which stops its helpers itself.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import traceback

from rcp_core.engine.context import Context
from rcp_core.engine.helpers.channel import (
    Channel,
    Crash,
    Deferred,
    Done,
    Final,
    Finish,
    ForwardedChanges,
    ForwardedErrors,
    Limit,
    Ready,
    Setup,
    Stop,
    Task,
)
from rcp_core.engine.helpers.spawn import helper_main, send_counts
from rcp_core.engine.tree import DirNode
from rcp_core.engine.walk import OPS, Walker, chunking
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import merge
from rcp_core.site.plugins import plugin_manager

log = logging.getLogger("rcp_core")


class Helper:
    """Serves one caller over ``chan``, as set up by ``setup``."""

    def __init__(self, chan: Channel, setup: Setup) -> None:
        self.chan = chan
        self.jobs = list(setup.jobs)
        hook = plugin_manager(entry_points=setup.entry_points).hook
        self.ctx = Context(
            setup.settings,
            setup.umask,
            hook,
            dict(zip(setup.jobs, setup.storage, strict=True)),
        )
        self.ctx.errors = ForwardedErrors(chan)
        if setup.settings.itemize_changes or setup.settings.log_file is not None:
            self.ctx.changes = ForwardedChanges(chan)
        self.ctx.defer = self._defer
        concurrency = setup.concurrency
        self.pool = WorkPool(concurrency.maximum, concurrency.initial, self._crashed)
        if concurrency.chunk_size:
            self.ctx.chunking = chunking(self.pool, concurrency.chunk_size)
        self.walker = Walker(self.ctx, self.pool, on_root_done=self._done)
        self.tasks: dict[DirNode, int] = {}
        self.finished = threading.Event()

    def serve(self) -> int:
        """Copy batches until told to finish; the exit status."""
        self.pool.reserve()  # the session: ends at Finish or when the caller is gone
        threading.Thread(
            target=self._read, name="rcp-helper-reader", daemon=True
        ).start()
        threading.Thread(
            target=send_counts,
            args=(self.chan, lambda: list(self.pool.tallies), self.finished),
            name="rcp-helper-counts",
            daemon=True,
        ).start()
        self.chan.send(Ready())
        try:
            self.pool.run()  # a crash was reported with Crash; exit status 1
        finally:
            self.finished.set()
        try:
            self.chan.send(Final(merge(self.pool.tallies)))
        except OSError:
            return 1
        return 0

    def _read(self) -> None:
        """Take the caller's messages until ``Finish`` or until the caller is gone;
        either way the session's reservation is released, so the pool ends."""
        try:
            while True:
                try:
                    got = self.chan.recv()
                except OSError:  # ECONNRESET: it died with our messages unread
                    got = None
                if got is None:
                    self.ctx.stop("the calling process went away")
                    return
                message, fds = got
                if isinstance(message, Task):
                    self._start(message, fds)
                elif isinstance(message, Limit):
                    self.pool.limit = message.workers
                    log.debug("helper: %d batches at once", message.workers)
                elif isinstance(message, Stop):
                    self.ctx.stop(message.reason)
                elif isinstance(message, Finish):
                    return
        except BaseException as exc:  # noqa: BLE001 - a bug: reported, exit status 1
            self.pool.report_crash(exc)
        finally:
            self.pool.finish_external()

    def _start(self, task: Task, fds: list[int]) -> None:
        node = DirNode(
            parent=None,
            name="",
            dst_name="",
            rel=task.rel,
            src_fd=fds[0],
            dst_fd=fds[1] if task.has_dst else None,
            st=None,
            anchor=None,
            job=self.jobs[task.job],
            fresh=task.fresh,
            dst_dev=task.dst_dev,
        )
        self.tasks[node] = task.task
        self.pool.push(
            self.walker.batch, node, [(name, OPS[op]) for name, op in task.entries]
        )

    def _done(self, node: DirNode) -> None:
        task = self.tasks.pop(node)
        self.chan.send(Done(task, node.incomplete, node.has_content))

    def _defer(self, node: DirNode, name: str, rel: str) -> None:
        self.chan.send(Deferred(self.tasks[node], name, rel))

    def _crashed(self, exc: BaseException) -> None:
        self.ctx.stop(f"internal error: {exc!r}")
        description = "".join(traceback.format_exception(exc))
        with contextlib.suppress(OSError):
            self.chan.send(Crash(description))


def main(argv: list[str]) -> int:
    return helper_main(argv, Setup, lambda chan, setup: Helper(chan, setup).serve())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
