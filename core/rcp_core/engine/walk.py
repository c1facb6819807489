"""Walking and copying a tree: the work items a run's pool executes.

Work items (run by :class:`~rcp_core.run.pool.WorkPool`) are:

- *visit* a directory: open it relative to its parent, create or reuse its
  destination, then scan it;
- *scan* a chunk of a directory's entries (``os.scandir`` on the descriptor): child
  directories become visit items, other entries become batches; an unfinished scan
  pushes its own continuation *below* its children;
- copy a *batch* of entries of one directory (small files share one item; a batch
  splits itself when other workers are idle, so large files still spread).

Workers pop the most recent item first, so the walk is depth-first and the stack holds
at most about ``SCAN_CHUNK`` items per directory on the current paths: memory stays
flat however large the tree is. Threads release the GIL in every syscall, which is
where a copy spends its time on parallel and network filesystems.

Every item holds a reference on its directory (:class:`~rcp_core.engine.tree.DirNode`,
counted by the one :class:`~rcp_core.engine.tree.Lifecycle`); a directory is finished
(metadata applied, ``--delete`` pruning, descriptors closed) when the last one is
released, so directory metadata always comes after the children's. A node without a
parent (a job's anchor, or a helper process's stand-in for the caller's directory) is
reported to ``on_root_done`` when it is finished.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from rcp_core.engine.chunks import Chunking
from rcp_core.engine.context import Context
from rcp_core.engine.dirs import finish_dir, gitignores, make_dst_dir
from rcp_core.engine.entries import copy_file, copy_other, copy_symlink
from rcp_core.engine.filters import Verdict
from rcp_core.engine.tree import DIR_FLAGS, DirNode, Lifecycle, Sink
from rcp_core.errors import vanished
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally

if TYPE_CHECKING:
    from os import _ScandirIterator as ScandirIterator

SCAN_CHUNK = 256
BATCH = 32

Op = Callable[[Context, Tally, DirNode, str, str, str], None]
"""Copies one non-directory entry: ``op(ctx, tally, node, name, dst_name, rel)``."""

Batch = list[tuple[str, Op]]
"""Entries of one directory copied by one item: ``(name, op)`` pairs."""

OPS: dict[str, Op] = {"file": copy_file, "symlink": copy_symlink, "other": copy_other}
"""The ops by name, for batches sent to helper processes."""
OP_NAMES: dict[Op, str] = {op: name for name, op in OPS.items()}


def chunking(pool: WorkPool, chunk_size: int) -> Chunking:
    """Large files split into ``chunk_size`` pieces, helped by the pool's idle workers."""
    return Chunking(
        chunk_size,
        spawn=lambda work: pool.push(_help, work),
        helpers=lambda: pool.limit - 1,
    )


def _help(tally: Tally, work: Callable[[], None]) -> None:
    """A pool item that helps copy another worker's large file."""
    work()


class _Rest:
    """A batch being copied by one worker: ``batch[next:end]`` is still to do (the
    worker gives away its tail by lowering ``end``)."""

    __slots__ = ("batch", "end", "next", "node")

    def __init__(self, node: DirNode, batch: Batch) -> None:
        self.node = node
        self.batch = batch
        self.next = 0
        self.end = len(batch)


class Walker:
    """The work items of one run (or of one helper process).

    :param on_root_done: called with each parentless node once it is finished.
    """

    def __init__(
        self,
        ctx: Context,
        pool: WorkPool,
        on_root_done: Callable[[DirNode], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.settings = ctx.settings
        self.pool = pool
        self.on_root_done = on_root_done
        self.tree = Lifecycle(self._finish)
        self.hold = self.tree.hold
        self.release = self.tree.release
        self._current = threading.local()
        """Per worker: the :class:`_Rest` of the batch it is copying, if any."""

    def _finish(self, tally: Tally, node: DirNode) -> None:
        finish_dir(self.ctx, tally, node, self.guarded)
        if node.parent is None and self.on_root_done is not None:
            self.on_root_done(node)

    # -- entries ----------------------------------------------------------------

    def guarded(
        self, tally: Tally, node: DirNode, op: str, rel: str, fn: Callable[[], None]
    ) -> bool:
        """Run ``fn``, retrying transient errors; record others. ``True`` on success."""
        try:
            try:
                fn()
            except OSError as exc:
                self.ctx.retry(fn, lambda e: self.ctx.classify(e, node), exc)
        except OSError as exc:
            error = self.ctx.error(op, node.display(rel), exc, node)
            self.ctx.fail(tally, node, error)
            return False
        return True

    def entry(
        self, tally: Tally, node: DirNode, name: str, dst_name: str, rel: str, op: Op
    ) -> None:
        ctx = self.ctx
        if ctx.throttle is not None:
            ctx.throttle.take()  # returns early on a stop: then the entry waits
            if ctx.stopping:
                return
        if self.guarded(
            tally,
            node,
            "copy",
            rel,
            lambda: op(ctx, tally, node, name, dst_name, rel),
        ):
            node.has_content = True

    def batch(self, tally: Tally, node: DirNode, batch: Batch) -> None:
        rest = _Rest(node, batch)
        self._current.rest = rest
        try:
            while rest.next < rest.end and not self.ctx.stopping:
                if self.pool.starving and rest.end - rest.next > 1:
                    # Others are idle: give them half of the rest, so big files spread
                    # out (the next idle one takes half of what is left, and so on).
                    self._give_away(rest, rest.next + (rest.end - rest.next + 1) // 2)
                name, op = batch[rest.next]
                rest.next += 1
                self.entry(tally, node, name, name, node.child_rel(name), op)
        finally:
            self._current.rest = None
        self.release(tally, node)

    def _give_away(self, rest: _Rest, keep: int) -> None:
        """Push the entries of ``rest`` from ``keep`` on as a batch of their own."""
        if keep < rest.end:
            self.hold(rest.node)
            self.pool.push(self.batch, rest.node, rest.batch[keep : rest.end])
            rest.end = keep

    def step_aside(self) -> contextlib.AbstractContextManager[None]:
        """For a large file's in-kernel copy: let another worker run beside it (see
        :meth:`WorkPool.aside`), taking the rest of this worker's batch."""

        def give_away() -> None:
            rest: _Rest | None = getattr(self._current, "rest", None)
            if rest is not None:
                self._give_away(rest, rest.next)

        return self.pool.aside(give_away)

    # -- directories ------------------------------------------------------------

    def visit(
        self,
        tally: Tally,
        parent: DirNode,
        name: str,
        dst_name: str,
        rel: str,
        sink: Sink | None = None,
    ) -> None:
        """Open the source directory, create or reuse its destination, scan it.

        :param sink: where the directory's batches go (default: the pool).
        """
        node: DirNode | None = None
        if not self.ctx.stopping:
            holder: list[DirNode | None] = [None]

            def open_dir() -> None:
                holder[0] = self._open_dir(tally, parent, name, dst_name, rel)

            self.guarded(tally, parent, "copy directory", rel, open_dir)
            node = holder[0]
        if node is None:
            self.release(tally, parent)
            return
        node.sink = sink
        if (
            self.settings.one_file_system
            and parent.st is not None
            and node.st is not None
            and node.st.st_dev != parent.st.st_dev
        ):
            self.release(tally, node)  # a mount point: made, never entered
            return
        self.scan(tally, node, None)

    def _open_dir(
        self, tally: Tally, parent: DirNode, name: str, dst_name: str, rel: str
    ) -> DirNode | None:
        ctx = self.ctx
        follow = ctx.settings.dereference or (
            parent.job is not None and parent.job.follow_root
        )
        flags = DIR_FLAGS if follow else DIR_FLAGS | os.O_NOFOLLOW
        try:
            src_fd = os.open(name, flags, dir_fd=parent.src_fd)
        except FileNotFoundError as exc:
            raise vanished(exc) from exc
        try:
            st = os.fstat(src_fd)
            if ctx.settings.dereference and parent.ancestors_contain(st):
                raise OSError(40, "symlink loop: directory contains itself", name)
            decision = (
                ctx.filter.decide(
                    rel,
                    True,
                    under_include=parent.under_include,
                    ignores=parent.ignores,
                )
                if ctx.filter.active and rel
                else None
            )
            node = DirNode(
                parent=parent,
                name=name,
                dst_name=dst_name,
                rel=rel,
                src_fd=src_fd,
                dst_fd=None,
                st=st,
                anchor=parent.anchor or parent,
                under_include=parent.under_include
                or (decision is not None and decision.verdict is Verdict.INCLUDE),
                traverse_only=decision is not None
                and decision.verdict is Verdict.TRAVERSE,
                ignores=parent.ignores,
            )
            if not make_dst_dir(self.ctx, tally, parent, node):
                os.close(src_fd)
                return None
        except BaseException:
            os.close(src_fd)
            raise
        if ctx.filter.gitignore:
            node.ignores = gitignores(node)
        return node

    def _classify(self, entry: os.DirEntry[str]) -> Op | None:
        """The copy op for a non-directory entry; ``None`` means it is a directory.

        An entry whose type cannot be read (a -L loop, a vanished entry) goes to
        ``copy_other``, which reports it as that entry's error.
        """
        follow = self.settings.dereference
        try:
            if entry.is_dir(follow_symlinks=follow):
                return None
            if entry.is_file(follow_symlinks=follow):
                return copy_file
        except OSError:
            return copy_other
        if entry.is_symlink() and not follow:
            return copy_symlink
        return copy_other

    def scan(
        self, tally: Tally, node: DirNode, it: ScandirIterator[str] | None
    ) -> None:
        """Read up to ``SCAN_CHUNK`` entries and push their work; continue later."""
        ctx = self.ctx
        try:
            if it is None:
                it = os.scandir(node.src_fd)
                tally["scanned.dirs"] += 1
            if ctx.stopping:
                it.close()
                self.release(tally, node)
                return
            dirs: list[tuple[str, str]] = []
            files: list[tuple[str, Op]] = []
            done = True
            filtering = ctx.filter.active
            for entry in it:
                name = entry.name
                op = self._classify(entry)
                if filtering and not self._included(tally, node, name, op is None):
                    continue
                if op is None:
                    dirs.append((name, node.child_rel(name)))
                else:
                    files.append((name, op))
                if len(dirs) + len(files) >= SCAN_CHUNK:
                    done = False
                    break
        except OSError as exc:
            self.ctx.fail(
                tally,
                node,
                self.ctx.error("read directory", node.display(node.rel), exc, node),
            )
            if it is not None:
                it.close()
            self.release(tally, node)
            return
        tally["found.entries"] += len(dirs) + len(files)
        tally["found.dirs"] += len(dirs)
        sink: Sink = node.sink or self.pool
        if not done:
            self.hold(node)
            sink.push(self.scan, node, it)
        else:
            it.close()
        self.hold(node, len(dirs) + (len(files) + BATCH - 1) // BATCH)
        for start in range(0, len(files), BATCH):
            sink.push(self.batch, node, files[start : start + BATCH])
        for name, rel in dirs:
            self.pool.push(self.visit, node, name, name, rel)
        self.release(tally, node)

    def _included(self, tally: Tally, node: DirNode, name: str, is_dir: bool) -> bool:
        rel = node.child_rel(name)
        decision = self.ctx.filter.decide(
            rel, is_dir, under_include=node.under_include, ignores=node.ignores
        )
        if decision.verdict is not Verdict.EXCLUDE:
            return True
        kind = "dir" if is_dir else "entry"
        tally["skipped.dirs" if is_dir else "skipped.files"] += 1
        self.ctx.dry("skip", kind, node, rel, f"excluded by {decision.pattern}")
        return False

    def root_entry(
        self, tally: Tally, anchor: DirNode, name: str, dst_name: str, op: Op
    ) -> None:
        """A job whose source is not a directory: its one entry, in the anchor."""
        self.entry(tally, anchor, name, dst_name, "", op)
        self.release(tally, anchor)
