"""Verifying a copy: compare a source tree with its copy, by metadata and by content.

:func:`compare` walks both trees at once, in parallel, and reports each relative path
where they differ as a :class:`~rcp_core.comparison.Difference`; the
:class:`~rcp_core.comparison.Comparison` it returns is what an Airflow task pushes to
XCom and what ``rcmp`` prints. :func:`verify_copy` compares each source of a copy with
its copy, named by the copy's operand rules: what ``rcp --verify`` and the Airflow
hook run after a copy; a :class:`Scope` makes it compare what the copy was asked to
copy (its filters, specials it may skip, what its policy left alone), the same on
every path (:mod:`rcp_provider.fsspec.storecompare` takes one too).

Invariants:

- *Same* means: every path is on both sides with the same type (file, directory,
  symlink, fifo, socket, device and its number); for each pair the compared attributes
  are equal (size of regular files, mtime to the nanosecond, permission bits of all but
  symlinks, uid/gid when asked; rules in :mod:`rcp_core.comparison`), symlinks have the
  same target; with ``checksum``, regular files of equal size have equal contents;
  nothing failed to read; and the comparison was not cancelled. Directory sizes,
  atimes and ctimes are never compared (no copy can make them equal). Hard links are
  compared name by name; the link structure is not checked.
- Read-only, and never through a symlink: entries are ``lstat``-ed, and opened with
  ``O_NOFOLLOW`` relative to their open parent directory; only the two roots are
  taken by path, as given. Contents are read only with ``checksum``, and only those of
  regular files of equal size.
- A path that one side lacks, or where the types differ, is one difference: a
  directory missing in the destination is one ``missing``; its subtree is not entered.
- An entry never crashes or stalls the comparison: a failing ``lstat``, ``open``,
  ``readlink``, listing or read is an ``error`` difference and the rest goes on. Files
  are opened ``O_NONBLOCK`` and must still be regular files once open, so a FIFO
  swapped in cannot block a worker.
- Bounded memory: the first :data:`~rcp_core.comparison.MAX_KEPT` differences found
  are kept (the counts cover all of them); the walk holds one listing per directory in
  flight (the source side's; the destination side streams past it), on the pool's
  depth-first work stack; each worker reads into one :data:`READ_SIZE` buffer.
- Contents are hashed with BLAKE3 per :data:`SEGMENT` of a file, both sides by the same
  worker, and the digests compared. A larger file's segments are hashed by several
  workers at once (:class:`~rcp_core.chunks.ChunkedCopy`), so one big file uses several
  cores and has several reads in flight; the first differing segment stops the rest. A
  file that changes during the comparison may or may not be reported.
"""

from __future__ import annotations

import enum
import errno
import os
import posixpath
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from blake3 import blake3

from rcp_core.chunks import ChunkedCopy
from rcp_core.comparison import (
    DEFAULT_ATTRS,
    MAX_KEPT,
    Comparison,
    Difference,
    DiffKind,
    attr_differences,
    entry_type,
    same_type,
    type_name,
)
from rcp_core.errors import EntryError, UsageError, VerificationError
from rcp_core.existing import Action, decide
from rcp_core.filters import Filter, GitIgnores, Verdict
from rcp_core.pool import WorkPool
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy, Preserve
from rcp_core.storage import detect
from rcp_core.summary import Tally
from rcp_core.tree import DIR_FLAGS, Lifecycle, Node, joined

__all__ = ["Comparison", "DiffKind", "Difference", "Scope", "compare"]

SEGMENT = 16 << 20
"""Bytes of one file hashed by one worker; larger files are split across workers."""
READ_SIZE = 4 << 20
ASIDE_BYTES = 1 << 20
"""A segment at least this large is hashed aside of the workers' limit: BLAKE3 hashes
it in a fraction of a millisecond without the GIL, time enough for another worker."""
BATCH = 64
"""Entries of one directory compared by one work item."""
SHARED_WORKERS = 32
"""Workers in flight where a root is on network or parallel storage."""

ROOT_DIR_FLAGS = DIR_FLAGS | os.O_NONBLOCK
CHILD_DIR_FLAGS = ROOT_DIR_FLAGS | os.O_NOFOLLOW
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

SPECIALS = frozenset({stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK})
"""File types a copy may skip when it cannot recreate them (``skip_specials``)."""


class Left(enum.Enum):
    """How a copy's policy left an entry that was in the destination before it."""

    ALONE = "alone"
    """Kept as it was (ignore-existing, or update with a destination at least as
    new): not compared, nor anything below it."""
    METADATA = "metadata"
    """A directory merged into under ignore-existing: it keeps its own attributes;
    its entries are compared one by one."""


@dataclass(frozen=True, slots=True)
class Scope:
    """What a copy was asked to copy, so that verifying it compares that and no more.

    ``Scope()`` compares everything (``rcmp``); :meth:`of` is a copy's. Every rule
    is the copy's own, from the same code (:class:`~rcp_core.filters.Filter`,
    :func:`~rcp_core.existing.decide`):

    - an entry the filters exclude is compared on neither side (nor below it); a
      directory they only traverse is ``missing`` only when an entry below it is
      included (the copy removes a traverse-only directory it left empty);
    - a destination-only entry is ``extra`` only for a mirror (``extras``, the copy's
      ``--delete``), and then not where the filters exclude it (protected), unless
      ``delete_excluded``, which also makes an excluded name the source has ``extra``
      in the destination (the copy removes it);
    - with ``skip_specials``, a FIFO, socket or device missing in the destination is
      no difference (the copy may have been unable to recreate it);
    - ``before`` is what the destination tree held before the copy (``lstat`` by
      relative path, the root as ``""``; ``None``: nothing, or not recorded): an entry
      there that ``existing``'s policy kept is :attr:`Left.ALONE`, an existing
      directory merged into under ignore-existing :attr:`Left.METADATA`.
    """

    filter: Filter = field(default_factory=Filter)
    skip_specials: bool = False
    extras: bool = True
    delete_excluded: bool = False
    existing: ExistingPolicy = ExistingPolicy.ERROR
    before: Mapping[str, os.stat_result] | None = None

    @classmethod
    def of(
        cls, settings: CopySettings, before: Mapping[str, os.stat_result] | None = None
    ) -> Scope:
        """The scope of a copy run with ``settings``.

        :raises UsageError: a filter that does not compile, an unreadable filter file.
        """
        return cls(
            filter=Filter.build(
                includes=settings.includes,
                excludes=settings.excludes,
                filter_file=settings.filter_file,
                gitignore=settings.gitignore,
            ),
            skip_specials=settings.skip_specials,
            extras=settings.delete,
            delete_excluded=settings.delete_excluded,
            existing=settings.existing,
            before=before,
        )

    @staticmethod
    def keeps(settings: CopySettings) -> bool:
        """Whether the copy's policy may keep existing entries: then its scope needs
        ``before``, recorded before the copy starts."""
        return settings.existing in (
            ExistingPolicy.IGNORE_EXISTING,
            ExistingPolicy.UPDATE,
        )

    def verdict(
        self, rel: str, is_dir: bool, under: bool, ignores: GitIgnores | None
    ) -> Verdict:
        """The filters' verdict on a source entry (the root is never filtered);
        ``under``: an ancestor was included."""
        if not rel or not self.filter.active:
            return Verdict.INCLUDE
        decision = self.filter.decide(rel, is_dir, under_include=under, ignores=ignores)
        return decision.verdict

    def extra(
        self, rel: str, is_dir: bool, under: bool, ignores: GitIgnores | None
    ) -> bool:
        """Whether an entry only the destination has is a difference."""
        if not self.extras:
            return False
        return (
            self.delete_excluded
            or self.verdict(rel, is_dir, under, ignores) is not Verdict.EXCLUDE
        )

    def excused(self, st_mode: int) -> bool:
        """Whether a source entry of this type may be missing in the destination."""
        return self.skip_specials and stat.S_IFMT(st_mode) in SPECIALS

    def left(self, rel: str, src: os.stat_result) -> Left | None:
        """How the copy's policy left ``rel`` (``None``: the copy made it)."""
        old = self.before.get(rel) if self.before is not None else None
        if old is None:
            return None
        action, _ = decide(self.existing, frozenset(), src, old)
        if action is Action.KEEP:
            return Left.ALONE
        if action is Action.REUSE and self.existing is ExistingPolicy.IGNORE_EXISTING:
            return Left.METADATA
        return None


EVERYTHING = Scope()
"""The scope that compares everything (``rcmp``)."""


def snapshot(path: str) -> dict[str, os.stat_result] | None:
    """What the tree at ``path`` holds now (:attr:`Scope.before`), by ``lstat``, never
    following a symlink; ``None`` if nothing is there.

    :raises OSError: a directory of it cannot be listed.
    """
    try:
        top = os.lstat(path)
    except FileNotFoundError:
        return None
    found = {"": top}
    if not stat.S_ISDIR(top.st_mode):
        return found

    def fail(exc: OSError) -> None:
        raise exc

    for parent, dirs, files in os.walk(path, onerror=fail):
        rel = os.path.relpath(parent, path)
        for name in (*dirs, *files):
            child = name if rel == "." else posixpath.join(rel, name)
            found[child] = os.lstat(os.path.join(parent, name))
    return found


def copy_trees(sources: Sequence[str], destination: str) -> list[tuple[str, str]]:
    """Each source and its copy, by ``rcp``'s operand rules: into ``destination``
    under the source's name when it ends in ``/`` or there are several sources,
    else ``destination`` itself. Operands are strings (paths, ``host:/path``, URLs)."""
    into = destination.endswith("/") or len(sources) > 1
    return [
        (
            src,
            posixpath.join(destination, posixpath.basename(src.rstrip("/")))
            if into
            else destination,
        )
        for src in sources
    ]


def prepare_scopes(
    sources: Sequence[str], destination: str, settings: CopySettings
) -> dict[str, Scope]:
    """Before a copy of ``sources`` to ``destination`` on this host: each destination
    tree's :class:`Scope`, by its path (:func:`verify_copy`'s ``scopes``)."""
    return {
        dst: Scope.of(settings, snapshot(dst) if Scope.keeps(settings) else None)
        for _, dst in copy_trees(sources, destination)
    }


def verdict_of(trees: Sequence[tuple[str, str, Comparison]]) -> dict[str, Any]:
    """The verdict on a copy from each tree's comparison: ``same`` and each tree's
    ``src``, ``dst`` and :meth:`Comparison.as_dict` (one shape on every path).

    :raises VerificationError: a tree differs (the verdict is its ``result``); its
        message is one line: how many differences, by kind.
    """
    result = {
        "same": all(comparison.same for _, _, comparison in trees),
        "trees": [{"src": s, "dst": d, **c.as_dict()} for s, d, c in trees],
    }
    if not result["same"]:
        counts: dict[str, int] = {}
        for _, _, comparison in trees:
            for kind, n in comparison.counts.items():
                counts[kind.value] = counts.get(kind.value, 0) + n
        kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        cancelled = any(comparison.cancelled for _, _, comparison in trees)
        raise VerificationError(
            "the copy differs from its source: "
            + (kinds or "the verification was cancelled")
            + (" (cancelled)" if cancelled and kinds else ""),
            result,
        )
    return result


def compare(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    checksum: bool = False,
    attrs: frozenset[CompareAttr] = DEFAULT_ATTRS,
    max_workers: int | None = None,
    scope: Scope = EVERYTHING,
    cancel: threading.Event | None = None,
    on_difference: Callable[[Difference], None] | None = None,
) -> Comparison:
    """Compare the tree ``src`` with its copy ``dst`` (the copy itself, not its parent).

    :param checksum: also compare the contents of regular files of equal size
        (``CompareAttr.CHECKSUM`` in ``attrs`` asks for it too).
    :param attrs: attributes compared where they apply (size, mtime and mode by
        default; add uid, gid). ``CompareAttr.CTIME`` is refused: no copy keeps it.
    :param max_workers: workers in flight. By default, as the copy's defaults
        (:mod:`rcp_core.defaults`): :data:`SHARED_WORKERS` where a root is on network or
        parallel storage, where each request waits for a round trip; else one, since
        threads on a local disk mostly wait for the GIL, plus one per CPU hashing
        large segments aside (:meth:`~rcp_core.pool.WorkPool.aside`).
    :param scope: what the copy was asked to copy (default: everything).
    :param cancel: set it from any thread to stop soon; the result is then
        ``cancelled`` (and not ``same``).
    :param on_difference: called with each difference as it is found (also those
        beyond ``MAX_KEPT``), from worker threads, one call at a time; an exception it
        raises stops the comparison and is raised here.
    :raises UsageError: bad ``attrs`` or ``max_workers``.
    """
    if CompareAttr.CTIME in attrs:
        raise UsageError("ctime cannot be verified: no copy preserves it")
    if max_workers is not None and max_workers < 1:
        raise UsageError("max-workers must be at least 1")
    src, dst = os.fspath(src), os.fspath(dst)
    checksum = checksum or CompareAttr.CHECKSUM in attrs
    limit, aside = _concurrency(src, dst, max_workers)
    run = _Run(checksum, attrs, scope, cancel or threading.Event(), on_difference)
    run.pool = WorkPool(limit, limit, on_crash=run.crash, aside=aside)
    start = time.monotonic()
    if not run.stopping:
        run.pool.push(run.root, src, dst)
        run.pool.run()
    return Comparison(
        entries=run.entries,
        files_hashed=run.files_hashed,
        bytes_hashed=run.bytes_hashed,
        counts=dict(run.counts),
        differences=tuple(sorted(run.kept, key=lambda d: (d.path, d.kind.value))),
        cancelled=run.cancel.is_set(),
        walltime=time.monotonic() - start,
    )


def verify_copy(
    sources: Sequence[str],
    destination: str,
    *,
    checksum: bool,
    preserve: Preserve,
    scopes: Mapping[str, Scope] | None = None,
    max_workers: int | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Compare each source with its copy (:func:`copy_trees`): the verdict
    (:func:`verdict_of`). Sizes and link targets always count; times, mode and owner
    only where the copy ``preserve``-d them.

    :param scopes: each destination tree's :class:`Scope` by its path, from
        :func:`prepare_scopes` before the copy; a tree without one is compared whole.
    :raises VerificationError: a copy differs.
    """
    trees = []
    for src, dst in copy_trees(sources, destination):
        result = compare(
            src,
            dst,
            checksum=checksum,
            attrs=kept_attrs(preserve),
            scope=(scopes or {}).get(dst, EVERYTHING),
            max_workers=max_workers,
            cancel=cancel,
        )
        trees.append((src, dst, result))
    return verdict_of(trees)


def kept_attrs(preserve: Preserve) -> frozenset[CompareAttr]:
    """The attributes a copy with ``preserve`` made equal to its source's."""
    attrs = {CompareAttr.SIZE}
    if preserve.times:
        attrs.add(CompareAttr.MTIME)
    if preserve.mode:
        attrs.add(CompareAttr.MODE)
    if preserve.owner:
        attrs |= {CompareAttr.UID, CompareAttr.GID}
    return frozenset(attrs)


def _concurrency(src: str, dst: str, max_workers: int | None) -> tuple[int, int]:
    """Workers in flight, and workers that may hash aside (see :func:`compare`)."""
    limit, aside = max_workers or 1, 0
    if max_workers is None:
        aside = len(os.sched_getaffinity(0))
        for path in (src, dst):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # the comparison reports it
            try:
                if detect(fd).shared:
                    limit, aside = SHARED_WORKERS, 0
            finally:
                os.close(fd)
    return limit, aside


class _Mismatch(Exception):
    """A segment's digests differ: stops the file's other segments; never escapes."""

    def __init__(self, offset: int, length: int) -> None:
        super().__init__(offset, length)
        self.offset = offset
        self.length = length


class _Stopped(Exception):
    """The comparison is stopping: stops the file's other segments; never escapes."""


class _Batch:
    """A batch being compared by one worker: ``names[next:end]`` is still to do (the
    worker gives its tail away by lowering ``end``)."""

    __slots__ = ("end", "names", "next", "pair")

    def __init__(self, pair: _Pair, names: list[str]) -> None:
        self.pair = pair
        self.names = names
        self.next = 0
        self.end = len(names)


@dataclass(slots=True, eq=False)
class _Pair(Node["_Pair"]):
    """One directory in flight, both sides open; it is finished (both closed) when
    the last work item that refers to it is done. A comparison needs no post-order
    step, so a pair holds no reference on its parent (``parent`` is ``None``): a
    directory's descriptors close as soon as its own entries are compared.

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


def _open_file(dir_fd: int | None, name: str, side: str, rel: str) -> int:
    """Open a regular file for reading; :class:`EntryError` if it cannot be opened or
    is no longer a regular file."""
    op = f"open {side}"
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise EntryError(op, rel, exc) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise EntryError(op, rel, OSError(errno.EINVAL, "not a regular file any more"))
    return fd


class _Run:
    """One comparison: the pool, its work items, and what they found."""

    def __init__(
        self,
        checksum: bool,
        attrs: frozenset[CompareAttr],
        scope: Scope,
        cancel: threading.Event,
        on_difference: Callable[[Difference], None] | None,
    ) -> None:
        self.checksum = checksum
        self.attrs = attrs
        self.scope = scope
        self.cancel = cancel
        self.on_difference = on_difference
        self.crashed = threading.Event()
        self.pool: WorkPool
        self.counts = dict.fromkeys(DiffKind, 0)
        self.kept: list[Difference] = []
        self.entries = self.files_hashed = self.bytes_hashed = 0
        self._found = threading.Lock()
        """Guards the differences and counters; serialises ``on_difference``."""
        self.tree: Lifecycle[_Pair] = Lifecycle(_close)
        self._local = threading.local()

    @property
    def stopping(self) -> bool:
        return self.cancel.is_set() or self.crashed.is_set()

    def crash(self, exc: BaseException) -> None:
        """An item failed unexpectedly (a bug, or ``on_difference`` raised): stop;
        the pool raises it from ``run``."""
        self.crashed.set()

    def report(self, rel: str, kind: DiffKind, detail: str) -> None:
        difference = Difference(rel or ".", kind, detail)
        with self._found:
            self.counts[kind] += 1
            if len(self.kept) < MAX_KEPT:
                self.kept.append(difference)
            if self.on_difference is not None:
                self.on_difference(difference)

    def failed(self, rel: str, op: str, exc: OSError) -> None:
        self.report(rel, DiffKind.ERROR, EntryError(op, rel, exc).key)

    def count(self, entries: int = 0, files: int = 0, data: int = 0) -> None:
        with self._found:
            self.entries += entries
            self.files_hashed += files
            self.bytes_hashed += data

    # -- work items: ``fn(tally, *args)`` on the pool (the tally is not used) -------

    def root(self, tally: Tally, src: str, dst: str) -> None:
        self.count(entries=1)
        if self.entry(None, None, src, dst, ""):
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
            if not self.stopping:
                src, dst = parent.src_fd, parent.dst_fd
                pair = self.open_pair(
                    src, dst, name, name, rel, CHILD_DIR_FLAGS, under, parent.ignores
                )
        finally:
            self.tree.release(tally, parent)
        if pair is not None:
            self.scan(tally, pair)

    def batch(self, tally: Tally, pair: _Pair, names: list[str]) -> None:
        """Compare entries present on both sides of one directory."""
        todo = _Batch(pair, names)
        self._local.batch = todo
        done = 0
        try:
            while todo.next < todo.end and not self.stopping:
                name = names[todo.next]
                todo.next += 1
                rel = joined(pair.rel, name)
                if self.entry(pair.src_fd, pair.dst_fd, name, name, rel):
                    under = pair.under or (
                        self.scope.verdict(rel, True, False, pair.ignores)
                        is Verdict.INCLUDE
                    )
                    self.tree.hold(pair)
                    self.pool.push(self.visit, pair, name, rel, under)
                done += 1
        finally:
            self._local.batch = None
            self.count(entries=done)
            self.tree.release(tally, pair)

    def give_away(self) -> None:
        """Push the rest of this worker's batch as a batch of its own (it steps aside
        to hash a large segment: the worker taking its place gets them)."""
        todo: _Batch | None = getattr(self._local, "batch", None)
        if todo is not None and todo.next < todo.end:
            self.tree.hold(todo.pair)
            self.pool.push(self.batch, todo.pair, todo.names[todo.next : todo.end])
            todo.end = todo.next

    def helper(self, tally: Tally, work: Callable[[], None]) -> None:
        """Hash segments of another worker's large file."""
        work()

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
        try:
            src_fd = os.open(src, flags, dir_fd=src_dir)
        except OSError as exc:
            self.failed(rel, "open source", exc)
            return None
        try:
            dst_fd = os.open(dst, flags, dir_fd=dst_dir)
        except OSError as exc:
            os.close(src_fd)
            self.failed(rel, "open destination", exc)
            return None
        if ignores is not None:
            ignores = ignores.with_dir(src_fd, rel)
        return _Pair(
            parent=None,
            rel=rel,
            src_fd=src_fd,
            dst_fd=dst_fd,
            under=under,
            ignores=ignores,
        )

    def scan(self, tally: Tally, pair: _Pair) -> None:
        """List the source side and stream the destination side past it: a name on
        one side only is reported here, common names go out in batches."""
        try:
            self._scan(pair)
        finally:
            self.tree.release(tally, pair)

    def _scan(self, pair: _Pair) -> None:
        rel, scope = pair.rel, self.scope
        excluded: set[str] = set()
        traversed: set[str] = set()
        try:
            with os.scandir(pair.src_fd) as it:
                listing = {entry.name: entry for entry in it}
            if scope.filter.active:
                for name, entry in list(listing.items()):
                    is_dir = entry.is_dir(follow_symlinks=False)
                    verdict = scope.verdict(
                        joined(rel, name), is_dir, pair.under, pair.ignores
                    )
                    if verdict is Verdict.EXCLUDE:
                        del listing[name]
                        excluded.add(name)
                    elif verdict is Verdict.TRAVERSE:
                        traversed.add(name)
        except OSError as exc:
            self.failed(rel, "read source directory", exc)
            return
        names: list[str] = []
        alone = 0
        try:
            with os.scandir(pair.dst_fd) as it:
                for entry in it:
                    if self.stopping:
                        return
                    if listing.pop(entry.name, None) is not None:
                        names.append(entry.name)
                        if len(names) == BATCH:
                            self.tree.hold(pair)
                            self.pool.push(self.batch, pair, names)
                            names = []
                        continue
                    child = joined(rel, entry.name)
                    if entry.name in excluded:
                        extra = scope.extras and scope.delete_excluded
                        what = "excluded entry left in destination"
                    else:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        extra = scope.extra(child, is_dir, pair.under, pair.ignores)
                        what = f"{entry_type(entry)} only in destination"
                    if extra:
                        alone += 1
                        self.report(child, DiffKind.EXTRA, what)
            for name, entry in listing.items():
                if self.stopping:
                    return
                child = joined(rel, name)
                if name in traversed and not self.wanted_below(pair, name, child):
                    continue
                if self.excused(entry):
                    continue
                alone += 1
                what = f"{entry_type(entry)} missing in destination"
                self.report(child, DiffKind.MISSING, what)
        except OSError as exc:
            # Which of the names left are missing is unknown: the error says so.
            self.failed(rel, "read destination directory", exc)
        finally:
            self.count(entries=alone)
        if names:
            self.tree.hold(pair)
            self.pool.push(self.batch, pair, names)

    def wanted_below(self, pair: _Pair, name: str, rel: str) -> bool:
        """Whether the scope's filters include an entry below ``name`` of ``pair``'s
        source side, a directory they only traverse (the copy then makes it)."""
        return self._wanted(pair.src_fd, name, rel, pair.ignores)

    def _wanted(
        self, parent_fd: int, name: str, rel: str, ignores: GitIgnores | None
    ) -> bool:
        # Only traversed: no ancestor was included, so ``under`` is false below.
        fd = -1
        try:
            fd = os.open(name, CHILD_DIR_FLAGS, dir_fd=parent_fd)
            if ignores is not None:
                ignores = ignores.with_dir(fd, rel)
            with os.scandir(fd) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            for child, is_dir in entries:
                child_rel = joined(rel, child)
                verdict = self.scope.verdict(child_rel, is_dir, False, ignores)
                if verdict is Verdict.INCLUDE or (
                    verdict is Verdict.TRAVERSE
                    and self._wanted(fd, child, child_rel, ignores)
                ):
                    return True
        except OSError as exc:
            self.failed(rel, "read source directory", exc)
        finally:
            if fd >= 0:
                os.close(fd)
        return False

    def excused(self, entry: os.DirEntry[str]) -> bool:
        """Whether the source entry ``entry`` may be missing in the destination."""
        if not self.scope.skip_specials:
            return False
        try:
            return self.scope.excused(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            return False  # gone or unreadable: reported as missing

    # -- one entry -----------------------------------------------------------------

    def entry(
        self, src_dir: int | None, dst_dir: int | None, src: str, dst: str, rel: str
    ) -> bool:
        """Compare one path present on both sides; ``True``: two directories, whose
        entries the caller compares next."""
        try:
            a = os.stat(src, dir_fd=src_dir, follow_symlinks=False)
        except OSError as exc:
            self.failed(rel, "lstat source", exc)
            return False
        try:
            b = os.stat(dst, dir_fd=dst_dir, follow_symlinks=False)
        except FileNotFoundError:
            what = f"{type_name(a)} missing in destination"
            self.report(rel, DiffKind.MISSING, what)
            return False
        except OSError as exc:
            self.failed(rel, "lstat destination", exc)
            return False
        left = self.scope.left(rel, a)
        if left is Left.ALONE:
            return False
        if not same_type(a, b):
            self.report(rel, DiffKind.TYPE, f"{type_name(a)} != {type_name(b)}")
            return False
        if left is None:
            for kind, detail in attr_differences(self.attrs, a, b):
                self.report(rel, kind, detail)
        if stat.S_ISDIR(a.st_mode):
            return True
        if stat.S_ISLNK(a.st_mode):
            self.link(src_dir, dst_dir, src, dst, rel)
        elif stat.S_ISREG(a.st_mode) and self.checksum:
            if a.st_size == b.st_size:
                self.content(src_dir, dst_dir, src, dst, rel, a.st_size)
            elif CompareAttr.SIZE not in self.attrs:  # else reported as a size
                detail = f"content differs: size {a.st_size} != {b.st_size}"
                self.report(rel, DiffKind.CONTENT, detail)
        return False

    def link(
        self, src_dir: int | None, dst_dir: int | None, src: str, dst: str, rel: str
    ) -> None:
        targets: list[str] = []
        for side, dir_fd, name in (
            ("source", src_dir, src),
            ("destination", dst_dir, dst),
        ):
            try:
                targets.append(os.readlink(name, dir_fd=dir_fd))
            except OSError as exc:
                self.failed(rel, f"readlink {side}", exc)
                return
        if targets[0] != targets[1]:
            self.report(rel, DiffKind.LINK, f"link {targets[0]!r} != {targets[1]!r}")

    # -- contents ------------------------------------------------------------------

    def content(
        self,
        src_dir: int | None,
        dst_dir: int | None,
        src: str,
        dst: str,
        rel: str,
        size: int,
    ) -> None:
        """Compare both files' first ``size`` bytes (their size at ``lstat``)."""
        if not size:
            self.count(files=1)
            return
        fds: list[int] = []
        try:
            fds.append(_open_file(src_dir, src, "source", rel))
            fds.append(_open_file(dst_dir, dst, "destination", rel))
            self.segments(fds[0], fds[1], rel, size)
        except _Stopped:
            return
        except _Mismatch as exc:
            where = ""
            if size > SEGMENT:
                where = f" in bytes {exc.offset}-{exc.offset + exc.length - 1}"
            self.report(rel, DiffKind.CONTENT, "content differs" + where)
        except EntryError as exc:
            self.report(rel, DiffKind.ERROR, exc.key)
            return
        finally:
            for fd in fds:
                os.close(fd)
        self.count(files=1)

    def segments(self, src_fd: int, dst_fd: int, rel: str, size: int) -> None:
        """Compare all segments; a large file's with the help of idle workers."""
        if size <= SEGMENT:
            self.segment(src_fd, dst_fd, rel, 0, size)
            return
        job = ChunkedCopy(
            size,
            SEGMENT,
            lambda offset, n: self.segment(src_fd, dst_fd, rel, offset, n),
        )
        helpers = self.pool.limit - 1 + self.pool.aside_max
        job.run(lambda work: self.pool.push(self.helper, work), helpers)

    def segment(
        self, src_fd: int, dst_fd: int, rel: str, offset: int, length: int
    ) -> int:
        """Hash ``length`` bytes at ``offset`` of both files; :class:`_Mismatch` if the
        digests differ."""
        if length < ASIDE_BYTES:
            return self.hash_both(src_fd, dst_fd, rel, offset, length)
        with self.pool.aside(self.give_away):
            return self.hash_both(src_fd, dst_fd, rel, offset, length)

    def hash_both(
        self, src_fd: int, dst_fd: int, rel: str, offset: int, length: int
    ) -> int:
        a = self.digest(src_fd, "source", rel, offset, length)
        b = self.digest(dst_fd, "destination", rel, offset, length)
        if a != b:
            raise _Mismatch(offset, length)
        return length

    def digest(self, fd: int, side: str, rel: str, offset: int, length: int) -> bytes:
        """BLAKE3 of ``length`` bytes at ``offset`` (of fewer if the file shrank)."""
        buf: bytearray | None = getattr(self._local, "buf", None)
        if buf is None:
            buf = self._local.buf = bytearray(READ_SIZE)
        view = memoryview(buf)
        hasher = blake3()
        end = offset + length
        done = 0
        try:
            while offset < end:
                if self.stopping:
                    raise _Stopped
                try:
                    n = os.preadv(fd, [view[: min(READ_SIZE, end - offset)]], offset)
                except OSError as exc:
                    raise EntryError(f"read {side}", rel, exc) from exc
                if not n:
                    break
                hasher.update(view[:n])
                offset += n
                done += n
        finally:
            self.count(data=done)
        return hasher.digest()
