"""Walking two trees on any backend ports at once: the comparison
(:func:`rcp_core.tools.verify.compare.compare`) of every pair but two local trees (a
URL store, an ``rcpd serve`` service, a ``host:`` tree, a site's own backend, on either
side), for ``rcmp`` and ``rcp --verify``. Two local trees go through directory
descriptors (:mod:`rcp_core.tools.verify.pairwalk`), the fast path.

One comparison, by the same rules as two local trees': a path on both sides is judged
by :func:`~rcp_core.tools.verify.entrypair.judge`, a name on one side by the
:class:`~rcp_core.tools.verify.scope.Scope` (:meth:`~rcp_core.tools.verify.scope.
Scope.sift`, :meth:`~rcp_core.tools.verify.scope.Scope.only_in_destination`), into
the same :class:`~rcp_core.tools.verify.differences.Comparison`, on the same run (a
:class:`~rcp_core.tools.verify.comparerun.ComparisonRun`).

Invariants:

- **read only, one directory at a time**: each side is listed through
  :meth:`~rcp_core.backends.port.Port.list` one level when its turn comes (a source
  with ``follow`` as the generic copy reads it: symlinks followed to files); the
  roots are taken as a copy takes its operands (:meth:`~rcp_core.backends.port.Port.
  stat`, a symlink followed);
- **what a side does not give is not compared**: an attribute asked for is compared
  where both entries have it (a store without modes or mtimes: sizes and contents);
  mtimes within the coarser of the two ports' time precision
  (:attr:`~rcp_core.backends.capabilities.Backend.time_precision_ns`; a port that
  declares none gives them as fsspec does, in float seconds: :data:`FLOAT_MTIME_NS`);
  symlink targets where both listings give them;
- **contents** (``checksum``), of regular files of equal size: the same where a
  store's recorded MD5 (:attr:`~rcp_core.backends.port.Entry.checksum`) is the
  other side's recorded one or matches the other side's bytes read from this host
  (an upload verified without downloading it); else per
  :data:`~rcp_core.backends.port.DIGEST_RANGE` segment: each side's digest taken where
  its data is (:meth:`~rcp_core.backends.port.Port.digest`: a service hashes on its
  host, no data crosses the network), else read through
  :meth:`~rcp_core.backends.port.Port.read` and hashed here with the one hasher
  (:mod:`rcp_core.tools.verify.digests`); the first differing segment ends a file's;
- **errors** are the run's: the roots' reads, each side's listing of a directory, a
  ``.gitignore``'s read and one file's contents are each a unit, tried again while
  it fails with a transient error and reporting nothing until it succeeds; what
  fails after its tries is an ``error`` difference and the rest goes on (below a
  directory that could not be listed nothing is compared), a fatal one stops the
  comparison. A listed name that is not safe is an ``error`` difference, never
  joined, read or compared, and nothing below it is listed;
- **cancel** (or a fatal error) stops it: nothing more is listed or hashed, and the
  result is ``cancelled``, never same;
- **memory** follows the directories in flight: a directory's two listings live
  while its item runs; the pool's depth-first stack holds its subdirectories (a path
  and its filter state) and files to hash (a path and a size). Where the source
  lists in pages (:class:`~rcp_core.backends.port.ListsInPages`) and no
  ``.gitignore`` rules ask for a directory's whole listing first, a directory is
  compared a page at a time (:class:`~rcp_core.engine.portpages.PagedScan`, as the
  copy reads it: a destination that lists in pages too is read a window at a
  time), so a million-key prefix is compared in the memory of a few pages.

Over 400 lines because :class:`PortWalk` is one walk: its work items (the roots, a
directory, a pair of symlinks' targets, a pair of files' contents) and the reads
they share, each method short.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from rcp_core.backends.checksums import StoreChecksum
from rcp_core.backends.port import (
    DIGEST_RANGE,
    Entry,
    EntryKind,
    KeepsSymlinks,
    Listing,
    ListsInPages,
    Port,
)
from rcp_core.engine.filters import GitIgnores, Verdict
from rcp_core.engine.portexisting import proven_same, same_link
from rcp_core.engine.portpages import PagedScan
from rcp_core.engine.tree import joined
from rcp_core.errors import EntryError
from rcp_core.run.pool import WorkPool
from rcp_core.run.summary import Tally
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import (
    DiffKind,
    content_differs,
    link_differences,
    type_name,
)
from rcp_core.tools.verify.digests import Stopped, blake3_of, streamed
from rcp_core.tools.verify.entrypair import Next, judge
from rcp_core.tools.verify.hashing import READ_SIZE
from rcp_core.tools.verify.scope import Listed

if TYPE_CHECKING:
    from collections.abc import Callable


Recorded = tuple[StoreChecksum | None, StoreChecksum | None]
"""The MD5s the stores of a pair of files recorded (source's, destination's)."""
PORT_WORKERS = 8
"""Entries in flight when not told: a store answers each request after a round trip."""
FLOAT_MTIME_NS = 1000
"""How far apart two mtimes may be and still be the same where a port declares no
time precision: a float of today's seconds (fsspec's) holds them to about 0.24 us,
so a time set from one can fall on either side of a microsecond."""


def _known(entry: Entry) -> frozenset[CompareAttr]:
    """The attributes ``entry``'s port gave."""
    known = {CompareAttr.SIZE}
    if entry.mtime_ns is not None:
        known.add(CompareAttr.MTIME)
    if entry.mode is not None:
        known.add(CompareAttr.MODE)
    if entry.uid is not None:
        known.add(CompareAttr.UID)
    if entry.gid is not None:
        known.add(CompareAttr.GID)
    return frozenset(known)


def _precision(port: Port) -> int:
    return port.backend.time_precision_ns or FLOAT_MTIME_NS


class PortWalk:
    """The work items of one comparison of two ports (``fn(tally, *args)`` on the
    pool; the tally is not used): :meth:`root` starts it. With ``follow``, ``src`` is
    listed as the generic copy reads a source (symlinks followed to files)."""

    def __init__(
        self, run: ComparisonRun, pool: WorkPool, src: Port, dst: Port, follow: bool
    ) -> None:
        self.run = run
        self.pool = pool
        self.scope = run.scope
        self.src = src
        self.dst = dst
        self.follow = follow
        self.within = max(_precision(src), _precision(dst))
        self._local = threading.local()
        """Per worker: its read buffer."""

    # -- work items ----------------------------------------------------------------

    def root(self, tally: Tally) -> None:
        self.run.count(entries=1)
        roots = self.run.tried(self._roots)
        if roots is not None:
            top = GitIgnores.root() if self.scope.filter.gitignore else None
            self._pair("", *roots, False, top)

    def directory(
        self, tally: Tally, rel: str, under: bool, ignores: GitIgnores | None
    ) -> None:
        """Compare the entries of a directory both sides have (``under``: it or an
        ancestor was included; ``ignores``: its parent's ``.gitignore`` stack)."""
        if self.run.stopping:
            return
        run = self.run
        paged = self.src if isinstance(self.src, ListsInPages) else None
        if paged is not None and ignores is None:
            target = self.dst if isinstance(self.dst, ListsInPages) else None
            whole = None
            if target is None:
                whole = run.tried(self._list, self.dst, rel, "destination", False)
                if whole is None:
                    return
            scan = PagedScan(
                paged,
                rel,
                run.attempt,
                self.follow,
                target=target,
                whole=whole,
                unmatched=True,
            )
            self.page(tally, rel, under, scan)
            return
        mine = run.tried(self._list, self.src, rel, "source", self.follow)
        if mine is None:
            return
        theirs = run.tried(self._list, self.dst, rel, "destination", False)
        if theirs is None:
            return
        self._level(rel, under, ignores, mine, theirs)

    def page(self, tally: Tally, rel: str, under: bool, scan: PagedScan) -> None:
        """Compare the next page of a directory whose source lists in pages
        (:class:`~rcp_core.engine.portpages.PagedScan`: what the destination holds
        under its names, and what only the destination holds, each once): the
        page after it goes below its entries on the pool, so the pages in flight
        stay few. A page that cannot be listed (after the run's tries of each
        request) is an ``error`` difference of the directory, and its scan ends."""
        run = self.run
        if run.stopping:
            return
        try:
            mine, theirs = scan.next_page()
        except OSError as exc:
            run.failed(EntryError("read directory", rel, exc))
            return
        if scan.more:
            self.pool.push(self.page, rel, under, scan)
        self._level(rel, under, None, mine, theirs)

    def _level(
        self,
        rel: str,
        under: bool,
        ignores: GitIgnores | None,
        mine: Listing,
        theirs: Listing,
    ) -> None:
        """Compare what the source listed of the directory ``rel`` (``mine``) with
        what the destination holds under those names and nothing else of it: the
        whole level, or a page with the destination's part (``theirs``)."""
        run, scope = self.run, self.scope
        for name, error in sorted({**theirs.unsafe, **mine.unsafe}.items()):
            run.report(joined(rel, name), DiffKind.ERROR, str(error))
        if ignores is not None:
            ignores = ignores.with_file(rel, self._gitignore(rel, mine))
        ours = mine.entries
        excluded: set[str] = set()
        traversed: set[str] = set()
        if scope.filter.active:
            named = ((name, entry.is_dir) for name, entry in ours.items())
            excluded, traversed = scope.sift(rel, under, ignores, named)
        examined = 0
        try:
            for name, b in theirs.entries.items():
                if run.stopping:
                    return
                child = joined(rel, name)
                a = None if name in excluded else ours.get(name)
                if a is not None:
                    examined += 1
                    self._pair(child, a, b, under, ignores)
                    continue
                what = type_name(b.stat())
                is_excluded = name in excluded
                detail = scope.only_in_destination(
                    child, b.is_dir, what, is_excluded, under, ignores
                )
                if detail is not None:
                    examined += 1
                    run.report(child, DiffKind.EXTRA, detail)
            for name, a in ours.items():
                if run.stopping:
                    return
                if name in theirs.entries or name in excluded:
                    continue
                child = joined(rel, name)
                if name in traversed and not self.scope.included_below(
                    None, name, child, ignores, self._below
                ):
                    continue
                st = a.stat()
                if not scope.excused(st.st_mode):
                    examined += 1
                    what = f"{type_name(st)} missing in destination"
                    run.report(child, DiffKind.MISSING, what)
        finally:
            run.count(entries=examined)

    def targets(self, tally: Tally, rel: str, a: Entry, b: Entry) -> None:
        """Compare the targets of a pair of symlinks a listing gave without one
        (a store's link object): the same where the MD5 a store recorded of one
        proves it (:func:`~rcp_core.engine.portexisting.same_link`: no request),
        else each read where its port reads symlinks."""
        if self.run.stopping or same_link(a, b):
            return
        found = self.run.tried(self._targets, rel, a, b)
        if found is not None and found[0] is not None and found[1] is not None:
            self.run.report_all(rel, link_differences(found[0], found[1]))

    def _targets(self, rel: str, a: Entry, b: Entry) -> tuple[str | None, str | None]:
        """Both symlinks' targets (``None`` where a port has no way to read it).

        :raises EntryError: a target could not be read.
        """
        read = []
        for port, entry, side in (
            (self.src, a, "source"),
            (self.dst, b, "destination"),
        ):
            if entry.target is None and isinstance(port, KeepsSymlinks):
                try:
                    entry = port.read_link(rel, entry)
                except OSError as exc:
                    raise EntryError(f"read {side} symlink", rel, exc) from exc
            read.append(entry.target)
        return read[0], read[1]

    def contents(self, tally: Tally, rel: str, size: int, recorded: Recorded) -> None:
        """Compare the contents of a pair of regular files of ``size`` bytes
        (``recorded``: the MD5s their stores recorded, where they did)."""
        if self.run.stopping:
            return
        same = self.run.tried(self._same_as_recorded, rel, size, recorded)
        if same is None:
            return  # its read failed: an error difference already
        if same:
            self.run.count(files=1, data=size)
            return
        found = self.run.tried(self._hashed, rel, size)
        if found is not None:
            hashed, detail = found
            self.run.count(files=1, data=hashed)
            if detail is not None:
                self.run.report(rel, DiffKind.CONTENT, detail)

    # -- one path on both sides ------------------------------------------------------

    def _pair(
        self, rel: str, a: Entry, b: Entry, under: bool, ignores: GitIgnores | None
    ) -> None:
        """Judge one path both sides have (no I/O: what the listings said); its
        directory's entries, its contents go onto the pool."""
        run = self.run
        attrs = run.attrs & _known(a) & _known(b)
        step, found = judge(
            self.scope, attrs, run.checksum, rel, a.stat(), b.stat(), self.within
        )
        if step is Next.ENTER:
            below = under or (  # the root is never filtered, nor included
                rel != ""
                and self.scope.verdict(rel, True, False, ignores) is Verdict.INCLUDE
            )
            self.pool.push(self.directory, rel, below, ignores)
        elif step is Next.TARGETS and a.target is not None and b.target is not None:
            found += link_differences(a.target, b.target)
        elif step is Next.TARGETS:
            self.pool.push(self.targets, rel, a, b)
        elif step is Next.CONTENTS:
            self.pool.push(self.contents, rel, a.size, (a.checksum, b.checksum))
        run.report_all(rel, found)

    # -- units ---------------------------------------------------------------------

    def _roots(self) -> tuple[Entry, Entry]:
        """Both roots, as a copy takes its operands."""
        found = []
        for port, side in ((self.src, "source"), (self.dst, "destination")):
            try:
                entry = port.stat("")
                if entry is None:
                    missing = os.strerror(errno.ENOENT)
                    raise FileNotFoundError(errno.ENOENT, missing, port.describe(""))
            except OSError as exc:
                raise EntryError(f"read {side}", "", exc) from exc
            found.append(entry)
        return found[0], found[1]

    @staticmethod
    def _list(port: Port, rel: str, side: str, follow: bool) -> Listing:
        try:
            return port.list(rel, follow=follow)
        except OSError as exc:
            raise EntryError(f"read {side} directory", rel, exc) from exc

    def _read(self, rel: str) -> bytes:
        """The whole source file ``rel`` (a ``.gitignore``)."""
        try:
            with self.src.read(rel) as stream:
                return stream.read()
        except OSError as exc:
            raise EntryError("read source", rel, exc) from exc

    def _same_as_recorded(self, rel: str, size: int, recorded: Recorded) -> bool:
        """Whether a store's recorded MD5 proves the pair the same, without reading
        the store: both sides recorded the same one, or one side's matches the other
        side's bytes, read here from this host's file. ``False`` where nothing is
        proven (a mismatch proves nothing either:
        :mod:`rcp_core.backends.checksums`); the segments' digests decide then.

        :raises EntryError: this host's file could not be read.
        """
        try:
            return proven_same(
                self.src, self.dst, rel, size, recorded, lambda: self.run.stopping
            )
        except OSError as exc:
            raise EntryError("read this host's side", rel, exc) from exc

    def _hashed(self, rel: str, size: int) -> tuple[int, str | None] | None:
        """Bytes hashed of the pair of files ``rel`` (both sides), and where their
        contents differ, if they do; ``None`` when the run stopped meanwhile."""
        buf: bytearray | None = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = bytearray(READ_SIZE)
        hashed = 0
        with contextlib.ExitStack() as opened:
            sides = [
                _Side(port, rel, side, opened, buf, lambda: self.run.stopping)
                for port, side in ((self.src, "source"), (self.dst, "destination"))
            ]
            for offset in range(0, size, DIGEST_RANGE):
                length = min(DIGEST_RANGE, size - offset)
                try:
                    mine, theirs = (side.digest(offset, length) for side in sides)
                except Stopped:
                    return None
                hashed += 2 * length
                if mine != theirs:
                    return hashed, content_differs(size, DIGEST_RANGE, offset, length)
        return hashed, None

    # -- the scope -----------------------------------------------------------------

    def _gitignore(self, rel: str, listing: Listing) -> str:
        """The text of the source directory ``rel``'s ``.gitignore`` (a file as
        listed), ``""`` if it has none or it cannot be read (an ``error``
        difference)."""
        entry = listing.entries.get(".gitignore")
        if entry is None or entry.kind is not EntryKind.FILE:
            return ""
        data = self.run.tried(self._read, joined(rel, ".gitignore"))
        return "" if data is None else data.decode("utf-8", "surrogateescape")

    @contextlib.contextmanager
    def _below(
        self, parent: None, name: str, rel: str, ignores: GitIgnores | None
    ) -> Iterator[Listed[None] | None]:
        """The source directory ``rel`` listed
        (:meth:`~rcp_core.tools.verify.scope.Scope.included_below`)."""
        listing = self.run.tried(self._list, self.src, rel, "source", self.follow)
        if listing is None:
            yield None
            return
        if ignores is not None:
            ignores = ignores.with_file(rel, self._gitignore(rel, listing))
        yield None, [(n, e.is_dir) for n, e in listing.entries.items()], ignores


@dataclass(slots=True)
class _Side:
    """One side's digests of one file, segment after segment: where its port takes
    them, else of its data read here (the file opened once, into ``opened``)."""

    port: Port
    rel: str
    side: str
    opened: contextlib.ExitStack
    buf: bytearray
    stopping: Callable[[], bool]
    stream: BinaryIO | None = None

    def digest(self, offset: int, length: int) -> bytes:
        """The digest of ``length`` bytes from ``offset``; segments come in order.

        :raises EntryError: the side could not be read.
        :raises Stopped: the run is stopping.
        """
        try:
            if self.stream is None:
                there = self.port.digest(self.rel, offset, length)
                if there is not None:
                    return there
                self.stream = self.opened.enter_context(self.port.read(self.rel))
                if offset:  # a port that gave the digests before, but not this one
                    self.stream.seek(offset)
            digest, _ = blake3_of(
                streamed(self.stream), length, self.buf, self.stopping
            )
        except OSError as exc:
            raise EntryError(f"read {self.side}", self.rel, exc) from exc
        return digest
