"""Walking a tree and its copy at once: a comparison's work items on the pool.

A directory present on both sides is a pair, both open (:class:`_Pair`): its source
side is listed, its destination side streamed past that listing, a name on one side
only reported at once and the common names compared in batches, each by
:mod:`rcp_core.tools.verify.entrypair`; a pair of directories below goes onto the pool.

Invariants:

- read-only, and never through a symlink: directories are opened with
  ``O_NOFOLLOW | O_NONBLOCK`` relative to their open parent; only the two roots are
  taken by path, as given;
- a path one side lacks is one difference: a directory missing in the destination is
  one ``missing``, its subtree not entered. What the comparison's
  :class:`~rcp_core.tools.verify.scope.Scope` leaves out is compared on neither side;
- a directory's reads are units tried again on a transient error
  (:meth:`~rcp_core.tools.verify.comparerun.ComparisonRun.tried`): its two opens, its source
  listing, the pass over its destination side. That pass reports and hands out
  batches as it streams, so it resumes: a name it matched or reported before failing
  is passed over by its next try, so none is compared or reported twice;
- bounded memory: a pair in flight holds one listing (its source side's; the
  destination side streams past it), on the pool's depth-first work stack; a pair
  holds no reference on its parent (a comparison needs no post-order step), so its
  descriptors close as soon as its own entries are compared
  (:class:`~rcp_core.engine.tree.Lifecycle`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from rcp_core.engine.filters import GitIgnores, Verdict
from rcp_core.engine.tree import DIR_FLAGS, Lifecycle, Node, joined
from rcp_core.errors import EntryError
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import DiffKind, entry_type
from rcp_core.tools.verify.entrypair import EntryPair
from rcp_core.tools.verify.hashing import Contents
from rcp_core.tools.verify.scope import Listed

BATCH = 64
"""Entries of one directory compared by one work item."""

ROOT_DIR_FLAGS = DIR_FLAGS | os.O_NONBLOCK
CHILD_DIR_FLAGS = ROOT_DIR_FLAGS | os.O_NOFOLLOW

_ABSENT = object()
"""Not in the source listing (see :class:`_Listing`)."""


@dataclass(slots=True, eq=False)
class _Pair(Node["_Pair"]):
    """One directory in flight, both sides open; it is finished (both closed) when
    the last work item that refers to it is done (``parent`` is ``None``).

    :param under: it or an ancestor was included by the scope's filters.
    :param ignores: the ``.gitignore`` stack of its source side (with ``gitignore``).
    """

    src_fd: int
    dst_fd: int
    under: bool = False
    ignores: GitIgnores | None = None


def _close(tally: Tally, pair: _Pair) -> None:
    """A pair's finish: both sides close."""
    os.close(pair.src_fd)
    os.close(pair.dst_fd)


class _Batch:
    """A batch being compared by one worker: ``names[next:end]`` is still to do (the
    worker gives its tail away by lowering ``end``)."""

    __slots__ = ("end", "names", "next", "pair")

    def __init__(self, pair: _Pair, names: list[str]) -> None:
        self.pair = pair
        self.names = names
        self.next = 0
        self.end = len(names)


@dataclass(slots=True)
class _Listing:
    """A pair's source side, listed and filtered, being matched with its destination
    side: each entry by name, ``None`` once the destination side had it; the names
    the filters exclude or only traverse; the destination-only names reported. It
    outlives a failed pass over the destination side, so the next try resumes."""

    entries: dict[str, os.DirEntry[str] | None]
    excluded: set[str]
    traversed: set[str]
    extras: set[str]


def _open_both(
    src_dir: int | None,
    dst_dir: int | None,
    src: str,
    dst: str,
    rel: str,
    flags: int,
) -> tuple[int, int]:
    """A unit: both sides of a directory, open."""
    try:
        src_fd = os.open(src, flags, dir_fd=src_dir)
    except OSError as exc:
        raise EntryError("open source", rel, exc) from exc
    try:
        return src_fd, os.open(dst, flags, dir_fd=dst_dir)
    except OSError as exc:
        os.close(src_fd)
        raise EntryError("open destination", rel, exc) from exc


def _list_below(
    parent_fd: int, name: str, rel: str
) -> tuple[int, list[tuple[str, bool]]]:
    """A unit: the source directory ``name``, open, and its entries (is each a
    directory); the caller closes it."""
    try:
        fd = os.open(name, CHILD_DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        raise EntryError("read source directory", rel, exc) from exc
    try:
        with os.scandir(fd) as it:
            return fd, [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError as exc:
        os.close(fd)
        raise EntryError("read source directory", rel, exc) from exc


class PairWalk:
    """The work items of one comparison (``fn(tally, *args)`` on the pool; the tally
    is not used): :meth:`root` starts it."""

    def __init__(self, run: ComparisonRun, pool: WorkPool) -> None:
        self.run = run
        self.pool = pool
        self.scope = run.scope
        self.tree: Lifecycle[_Pair] = Lifecycle(_close)
        self.entries = EntryPair(run, Contents(run, pool, self.give_away))
        self._local = threading.local()
        """Per worker: the :class:`_Batch` it is comparing, if any."""

    # -- work items ----------------------------------------------------------------

    def root(self, tally: Tally, src: str, dst: str) -> None:
        self.run.count(entries=1)
        examined = self.run.tried(self.entries.examine, None, None, src, dst, "")
        if examined is None:
            return
        both_dirs, found = examined
        self.run.report_all("", found)
        if both_dirs:
            top = GitIgnores.root() if self.scope.filter.gitignore else None
            pair = self.open_pair(None, None, src, dst, "", ROOT_DIR_FLAGS, False, top)
            if pair is not None:
                self.scan(tally, pair)

    def visit(
        self, tally: Tally, parent: _Pair, name: str, rel: str, under: bool
    ) -> None:
        """Open a directory present on both sides, then compare its entries."""
        pair: _Pair | None = None
        try:
            if not self.run.stopping:
                src, dst = parent.src_fd, parent.dst_fd
                pair = self.open_pair(
                    src, dst, name, name, rel, CHILD_DIR_FLAGS, under, parent.ignores
                )
        finally:
            self.tree.release(tally, parent)
        if pair is not None:
            self.scan(tally, pair)

    def batch(self, tally: Tally, pair: _Pair, names: list[str]) -> None:
        """Compare entries present on both sides of one directory (each path's
        first try made here: this is the hot path, see
        :meth:`~rcp_core.tools.verify.comparerun.ComparisonRun.again`)."""
        run, examine = self.run, self.entries.examine
        src_fd, dst_fd = pair.src_fd, pair.dst_fd
        todo = _Batch(pair, names)
        self._local.batch = todo
        done = 0
        try:
            while todo.next < todo.end and not run.stopping:
                name = names[todo.next]
                todo.next += 1
                done += 1
                rel = joined(pair.rel, name)
                try:
                    both_dirs, found = examine(src_fd, dst_fd, name, name, rel)
                except EntryError as exc:
                    examined = run.again(exc, examine, src_fd, dst_fd, name, name, rel)
                    if examined is None:
                        continue
                    both_dirs, found = examined
                if found:
                    run.report_all(rel, found)
                if both_dirs:
                    under = pair.under or (
                        self.scope.verdict(rel, True, False, pair.ignores)
                        is Verdict.INCLUDE
                    )
                    self.tree.hold(pair)
                    self.pool.push(self.visit, pair, name, rel, under)
        finally:
            self._local.batch = None
            run.count(entries=done)
            self.tree.release(tally, pair)

    def give_away(self) -> None:
        """Push the rest of this worker's batch as a batch of its own (it steps aside
        to hash a large segment: the worker taking its place gets them)."""
        todo: _Batch | None = getattr(self._local, "batch", None)
        if todo is not None and todo.next < todo.end:
            self.tree.hold(todo.pair)
            self.pool.push(self.batch, todo.pair, todo.names[todo.next : todo.end])
            todo.end = todo.next

    # -- directories ---------------------------------------------------------------

    def open_pair(
        self,
        src_dir: int | None,
        dst_dir: int | None,
        src: str,
        dst: str,
        rel: str,
        flags: int,
        under: bool,
        ignores: GitIgnores | None,
    ) -> _Pair | None:
        """Both sides of a directory, open; ``ignores`` is its parent's stack (it
        gets the directory's own ``.gitignore``)."""
        fds = self.run.tried(_open_both, src_dir, dst_dir, src, dst, rel, flags)
        if fds is None:
            return None
        if ignores is not None:
            ignores = ignores.with_dir(fds[0], rel)
        return _Pair(
            parent=None,
            rel=rel,
            src_fd=fds[0],
            dst_fd=fds[1],
            under=under,
            ignores=ignores,
        )

    def scan(self, tally: Tally, pair: _Pair) -> None:
        """List the source side and stream the destination side past it: a name on
        one side only is reported here, common names go out in batches."""
        try:
            listing = self.run.tried(self._list_source, pair)
            if listing is not None and self.run.tried(self._match, pair, listing):
                self._missing(pair, listing)
        finally:
            self.tree.release(tally, pair)

    def _list_source(self, pair: _Pair) -> _Listing:
        """A unit: the source side's listing, without what the filters exclude."""
        rel, scope = pair.rel, self.scope
        excluded: set[str] = set()
        traversed: set[str] = set()
        try:
            with os.scandir(pair.src_fd) as it:
                listed = {entry.name: entry for entry in it}
            if scope.filter.active:
                excluded, traversed = scope.sift(
                    rel,
                    pair.under,
                    pair.ignores,
                    ((n, e.is_dir(follow_symlinks=False)) for n, e in listed.items()),
                )
                for name in excluded:
                    del listed[name]
        except OSError as exc:
            raise EntryError("read source directory", rel, exc) from exc
        # Each entry is marked None once matched (no copy of a large listing).
        entries = cast("dict[str, os.DirEntry[str] | None]", listed)
        return _Listing(entries, excluded, traversed, set())

    def _match(self, pair: _Pair, listing: _Listing) -> bool:
        """A unit: the pass over the destination side; whether it went to the end
        (not stopped). Common names are marked in ``listing`` and go out in batches,
        destination-only ones are reported, each once over all tries."""
        rel, scope, entries = pair.rel, self.scope, listing.entries
        names: list[str] = []
        alone = 0
        try:
            with os.scandir(pair.dst_fd) as it:
                for entry in it:
                    if self.run.stopping:
                        return False
                    name = entry.name
                    found = entries.get(name, _ABSENT)
                    if found is not _ABSENT:
                        if found is not None:  # else matched by an earlier try
                            entries[name] = None
                            names.append(name)
                            if len(names) == BATCH:
                                self.tree.hold(pair)
                                self.pool.push(self.batch, pair, names)
                                names = []
                        continue
                    if name in listing.extras:
                        continue  # reported by an earlier try
                    child = joined(rel, name)
                    detail = scope.only_in_destination(
                        child,
                        entry.is_dir(follow_symlinks=False),
                        entry_type(entry),
                        name in listing.excluded,
                        pair.under,
                        pair.ignores,
                    )
                    if detail is not None:
                        listing.extras.add(name)
                        alone += 1
                        self.run.report(child, DiffKind.EXTRA, detail)
        except OSError as exc:
            # The next try lists it again; if none is left, which of the names not
            # yet matched are missing is unknown: the error says so.
            raise EntryError("read destination directory", rel, exc) from exc
        finally:
            self.run.count(entries=alone)
            if names:  # marked matched: they go out whatever happens next
                self.tree.hold(pair)
                self.pool.push(self.batch, pair, names)
        return True

    def _missing(self, pair: _Pair, listing: _Listing) -> None:
        """Report the source names the destination side did not have."""
        alone = 0
        try:
            for name, entry in listing.entries.items():
                if entry is None:
                    continue
                if self.run.stopping:
                    return
                child = joined(pair.rel, name)
                if name in listing.traversed and not self.scope.included_below(
                    pair.src_fd, name, child, pair.ignores, self._below
                ):
                    continue
                if self.excused(entry):
                    continue
                alone += 1
                what = f"{entry_type(entry)} missing in destination"
                self.run.report(child, DiffKind.MISSING, what)
        finally:
            self.run.count(entries=alone)

    @contextlib.contextmanager
    def _below(
        self, parent_fd: int, name: str, rel: str, ignores: GitIgnores | None
    ) -> Iterator[Listed[int] | None]:
        """The source directory ``name`` of ``parent_fd`` listed, open while in it
        (:meth:`~rcp_core.tools.verify.scope.Scope.included_below`)."""
        below = self.run.tried(_list_below, parent_fd, name, rel)
        if below is None:
            yield None
            return
        fd, entries = below
        try:
            yield fd, entries, None if ignores is None else ignores.with_dir(fd, rel)
        finally:
            os.close(fd)

    def excused(self, entry: os.DirEntry[str]) -> bool:
        """Whether the source entry ``entry`` may be missing in the destination."""
        if not self.scope.skip_specials:
            return False
        try:
            st = self.run.attempt(lambda: entry.stat(follow_symlinks=False))
        except OSError:
            return False  # gone or unreadable: reported as missing
        return self.scope.excused(st.st_mode)
