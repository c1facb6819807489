"""Comparing two trees wherever fsspec reaches them: ``rcmp`` with a URL operand.

:func:`rcp_core.tools.verify.compare.compare` compares two trees of this host through
directory descriptors. When a tree is on an ``rcpd serve`` service
(``rcp://host:port/path``) or in another fsspec store, :func:`compare_places` compares it
here, by the same rules (:mod:`rcp_core.tools.verify.differences`) and into the same
:class:`~rcp_core.tools.verify.differences.Comparison`, on the same run: a
:class:`~rcp_core.tools.verify.comparerun.ComparisonRun` (the run runtime).

- each side is listed where it is, one directory at a time: this host's trees by
  ``lstat`` (exact nanoseconds), a service's by its ``listdir`` requests (the same
  metadata, from its host), another store's by
  :func:`~rcp_provider.fsspec.storetree.list_dir`, as the store copy lists it (its
  infos: what a store lacks, mode or mtime, is not compared);
- a path on one side only is one ``missing`` or ``extra`` difference (a directory's
  subtree is not listed below it), a type that differs one ``type`` difference;
- with ``checksum``, two regular files of equal size are compared by digests taken
  **where the data is** (:mod:`rcp_provider.fsspec.storehash`): no file content of a
  service crosses the network;
- **errors** are the run's: a root's read, a directory's listing, a ``.gitignore``'s
  read and one file's whole content comparison are each a unit, tried again while
  it fails with a transient error (as the site plugins' ``rcp_classify_error``
  says; ``retries``, ``retry_delay``), and reporting nothing until it succeeds; what
  fails after its tries is an ``error`` difference and the rest goes on (below a
  directory that could not be listed nothing is compared), a fatal one stops the
  comparison. A name a store lists that is not safe (:mod:`rcp_core.names`, checked
  per component) is an ``error`` difference too, never joined to a path, read or
  compared, and nothing below it is listed;
- **cancel** (or a fatal error) stops it: nothing more is listed or hashed, and the
  result is ``cancelled``, never same;
- a :class:`~rcp_core.tools.verify.compare.Scope` (a copy's verification) leaves out what
  the copy was not asked to copy, by the rules :func:`rcp_core.tools.verify.compare.compare`
  follows; with ``follow`` the source is listed as the generic store copy reads it
  (:mod:`rcp_core.engine.portcopy`: symlinks followed, specials left out).

Memory: both listings are held whole (paired in sorted order), with the first
:data:`~rcp_core.tools.verify.differences.MAX_KEPT` differences. Size: over 400 lines, as
the one place that pairs two listings under a copy's scope (the scope's source-side state,
``.gitignore`` reads included, is what the pairing asks).
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rcp_core.engine.filters import GitIgnores, Verdict
from rcp_core.engine.tree import joined
from rcp_core.errors import EntryError, UnsafeNameError
from rcp_core.settings import RETRIES, RETRY_DELAY, CompareAttr
from rcp_core.tools.verify.compare import EVERYTHING, Left, Scope, check_settings
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import (
    DEFAULT_ATTRS,
    Comparison,
    Difference,
    DiffKind,
    attr_differences,
    type_name,
)
from rcp_provider.fsspec.service import RcpServiceFileSystem
from rcp_provider.fsspec.storehash import contents
from rcp_provider.fsspec.storetree import Place, list_dir, stat_of

if TYPE_CHECKING:
    from rcp_core.tools.verify.comparerun import Plugins

DEFAULT_WORKERS = 8
FLOAT_MTIME_NS = 1000
"""Two mtimes of which one came as a float of seconds differ when they are this many
nanoseconds apart: a float of today's seconds holds them to about 0.24 us, so a time
set from one (the store copy's ``utime``) can fall on either side of a microsecond."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of a tree: its ``lstat`` (or what a store's info gives of it) and,
    for a symlink, its target. ``known`` names the attributes the side really has;
    ``exact`` is false where the mtime came as a float of seconds (a store's info),
    which is then compared within :data:`FLOAT_MTIME_NS`."""

    st: os.stat_result
    target: str | None
    known: frozenset[CompareAttr]
    exact: bool = True


ALL_ATTRS = frozenset(CompareAttr) - {CompareAttr.CTIME, CompareAttr.CHECKSUM}


def compare_places(
    src: Place,
    dst: Place,
    *,
    checksum: bool = False,
    attrs: frozenset[CompareAttr] = DEFAULT_ATTRS,
    max_workers: int | None = None,
    scope: Scope = EVERYTHING,
    follow: bool = False,
    cancel: threading.Event | None = None,
    plugins: Plugins = None,
    retries: int = RETRIES,
    retry_delay: float = RETRY_DELAY,
) -> Comparison:
    """Compare the tree ``src`` with ``dst`` (see the module docstring).

    :param checksum: also compare the contents of regular files of equal size
        (``CompareAttr.CHECKSUM`` in ``attrs`` asks for it too).
    :param scope: what a copy was asked to copy (default: everything).
    :param follow: list ``src`` as the generic store copy reads it.
    :param cancel: set it from any thread to stop soon; the result is then
        ``cancelled`` (and not ``same``).
    :param plugins, retries, retry_delay: as :func:`rcp_core.tools.verify.compare.compare`
    takes
        them (the copy's ``retries`` and ``retry_delay`` for a verification).
    :raises UsageError: bad ``attrs``, ``max_workers``, ``retries`` or
        ``retry_delay`` (:func:`rcp_core.tools.verify.compare.check_settings`).
    """
    check_settings(attrs, max_workers, retries, retry_delay)
    run = ComparisonRun(
        plugins,
        (_root(src), _root(dst)),
        retries=retries,
        retry_delay=retry_delay,
        checksum=checksum or CompareAttr.CHECKSUM in attrs,
        attrs=attrs,
        scope=scope,
        cancel=cancel or threading.Event(),
        on_difference=None,
    )
    started = time.monotonic()
    mine = _tree(run, src, "source", follow=follow)
    theirs = _tree(run, dst, "destination", follow=False)
    if mine is not None and theirs is not None and not run.stopping:
        pairs = _differences(run, src, mine, theirs)
        if not run.stopping:
            contents(run, src, dst, pairs, max_workers or DEFAULT_WORKERS)
    return run.result(time.monotonic() - started)


def _root(place: Place) -> str | None:
    """``place``'s root as a path of this host, whose storage the hooks are told."""
    return place.path if place.posix else None


def _differences(
    run: ComparisonRun, src: Place, mine: _Tree, theirs: _Tree
) -> list[tuple[str, int]]:
    """Report every difference of the two listed trees but their contents; the
    regular files whose contents are to be compared (relative path, size)."""
    scope = run.scope
    ours, states, dropped = _in_scope(run, mine.listed, src, scope)
    for rel, error in sorted({**theirs.unsafe, **mine.unsafe}.items()):
        run.report(rel, DiffKind.ERROR, str(error))
    pairs: list[tuple[str, int]] = []
    # Not entered: directories on one side only, or retyped, and those whose
    # listing failed (their error is reported; what is below them is unknown).
    gone = sorted(mine.unread | theirs.unread)
    both = ours.keys() | theirs.listed.keys()
    run.count(entries=len(both))
    for rel in sorted(both):
        if any(rel.startswith(top + "/") for top in gone):
            continue
        a, b = ours.get(rel), theirs.listed.get(rel)
        if a is None or b is None:
            here = a or b
            assert here is not None
            if stat.S_ISDIR(here.st.st_mode):
                gone.append(rel)
            if a is None and not _extra(rel, here, scope, states, dropped):
                continue
            if b is None and scope.excused(here.st.st_mode):
                continue
            kind = DiffKind.EXTRA if a is None else DiffKind.MISSING
            where = "source" if a is None else "destination"
            run.report(rel, kind, f"{type_name(here.st)} not in the {where}")
            continue
        left = scope.left(rel, a.st)
        if left is Left.ALONE:
            gone.append(rel)
            continue
        if stat.S_IFMT(a.st.st_mode) != stat.S_IFMT(b.st.st_mode):
            detail = f"{type_name(a.st)} != {type_name(b.st)}"
            run.report(rel, DiffKind.TYPE, detail)
            gone.append(rel)
            continue
        if a.target != b.target:
            run.report(rel, DiffKind.LINK, f"target {a.target!r} != {b.target!r}")
        if left is Left.METADATA:
            continue  # a directory merged into: its own attributes
        wanted = run.attrs & a.known & b.known
        if stat.S_ISDIR(a.st.st_mode):
            wanted -= {CompareAttr.SIZE}
        if CompareAttr.MTIME in wanted and not (a.exact and b.exact):
            wanted -= {CompareAttr.MTIME}
            if abs(a.st.st_mtime_ns - b.st.st_mtime_ns) >= FLOAT_MTIME_NS:
                ta, tb = a.st.st_mtime_ns / 1e9, b.st.st_mtime_ns / 1e9
                run.report(rel, DiffKind.MTIME, f"mtime {ta:.6f} != {tb:.6f}")
        run.report_all(rel, attr_differences(wanted, a.st, b.st))
        same_size = a.st.st_size == b.st.st_size
        if run.checksum and stat.S_ISREG(a.st.st_mode) and same_size:
            pairs.append((rel, a.st.st_size))
    return pairs


_State = tuple[bool, GitIgnores | None]
"""A source directory in scope: included (or below an include), its ``.gitignore``
stack."""


def _in_scope(
    run: ComparisonRun, listed: dict[str, Listed], place: Place, scope: Scope
) -> tuple[dict[str, Listed], dict[str, _State], dict[str, Verdict]]:
    """The entries of the source listing ``listed`` the copy was asked to copy; the
    state of each source directory in scope; and the entries left out (by their
    verdict: excluded, or traversed with nothing included below)."""
    if not scope.filter.active:
        return listed, dict.fromkeys(listed, (False, None)), {}
    chosen: dict[str, Listed] = {}
    states: dict[str, _State] = {}
    dropped: dict[str, Verdict] = {}
    traversed: set[str] = set()
    for rel in sorted(listed):  # a directory before what is below it
        entry = listed[rel]
        is_dir = stat.S_ISDIR(entry.st.st_mode)
        if rel:
            parent = posixpath.dirname(rel)
            if parent not in states:
                continue  # below an entry left out
            under, ignores = states[parent]
            verdict = scope.verdict(rel, is_dir, under, ignores)
        else:
            ignores = GitIgnores.root() if scope.filter.gitignore else None
            under, verdict = False, Verdict.INCLUDE
        if verdict is Verdict.EXCLUDE:
            dropped[rel] = verdict
            continue
        if is_dir:
            if ignores is not None:
                ignores = ignores.with_file(rel, _gitignore(run, listed, place, rel))
            states[rel] = (under or verdict is Verdict.INCLUDE, ignores)
        if verdict is Verdict.TRAVERSE:
            traversed.add(rel)
        else:
            chosen[rel] = entry
    for rel in list(chosen):  # a traversed directory holding a chosen entry is made
        parent = posixpath.dirname(rel)
        while rel and parent in traversed and parent not in chosen:
            chosen[parent] = listed[parent]
            rel, parent = parent, posixpath.dirname(parent)
    dropped.update(dict.fromkeys(traversed - chosen.keys(), Verdict.TRAVERSE))
    return chosen, states, dropped


def _gitignore(
    run: ComparisonRun, listed: dict[str, Listed], place: Place, rel: str
) -> str:
    """The text of the source directory ``rel``'s ``.gitignore`` (a regular file,
    never a symlink's target), ``""`` if it has none or it cannot be read (an
    ``error`` difference)."""
    name = joined(rel, ".gitignore")
    entry = listed.get(name)
    if entry is None or not stat.S_ISREG(entry.st.st_mode):
        return ""
    data = run.tried(_read, place, name, "source")
    return "" if data is None else data.decode("utf-8", "surrogateescape")


def _read(place: Place, rel: str, side: str) -> bytes:
    """The whole file ``rel`` of ``place`` (a unit: fails as an entry error)."""
    try:
        data: bytes = place.fs.cat_file(place.join(rel))
    except OSError as exc:
        raise EntryError(f"read {side}", rel, exc) from exc
    return data


def _extra(
    rel: str,
    entry: Listed,
    scope: Scope,
    states: dict[str, _State],
    dropped: dict[str, Verdict],
) -> bool:
    """Whether ``entry``, which only the destination has, is a difference."""
    if rel in dropped:
        return (
            scope.extras and scope.delete_excluded and dropped[rel] is Verdict.EXCLUDE
        )
    state = states.get(posixpath.dirname(rel))
    if state is None:
        return False  # below a source entry left out
    return scope.extra(rel, stat.S_ISDIR(entry.st.st_mode), *state)


@dataclass(frozen=True, slots=True)
class _Tree:
    """One side's tree as listed.

    :param listed: its entries by safe relative path, the root itself as ``""``.
    :param unsafe: the names a store's directory listed that are not safe, by
        relative path (a prefix with its ``/``, as :func:`list_dir` names it), and
        why; none is in ``listed``, nothing below one is listed.
    :param unread: the directories whose listing failed (an ``error`` difference):
        what is below them is unknown, and not compared.
    """

    listed: dict[str, Listed]
    unsafe: dict[str, UnsafeNameError]
    unread: frozenset[str]


def _tree(run: ComparisonRun, place: Place, side: str, *, follow: bool) -> _Tree | None:
    """The tree at ``place``, one directory at a time, each listing a unit of
    ``run`` (tried again on a transient error, an ``error`` difference after its
    tries); ``None`` when its root cannot be read. A stopped run lists no more.

    :param side: ``"source"`` or ``"destination"``, in the errors.
    :param follow: list it as the store copy reads a source (:func:`list_dir`
        following symlinks to files, specials left out); else as it is.
    """
    root = run.tried(_top, place, side, follow)
    if root is None:
        return None
    listed = {"": root}
    unsafe: dict[str, UnsafeNameError] = {}
    unread: set[str] = set()
    pending = [""] if stat.S_ISDIR(root.st.st_mode) else []
    while pending and not run.stopping:
        rel = pending.pop()
        found = run.tried(_children, place, rel, side, follow)
        if found is None:
            unread.add(rel)
            continue
        children, bad = found
        unsafe.update({joined(rel, name): error for name, error in bad.items()})
        for name, entry in children.items():
            child = joined(rel, name)
            listed[child] = entry
            if stat.S_ISDIR(entry.st.st_mode):
                pending.append(child)
    return _Tree(listed, unsafe, frozenset(unread))


def _top(place: Place, side: str, follow: bool) -> Listed:
    """The root of ``place``'s tree (a unit): as :func:`_children` lists entries."""
    try:
        if isinstance(place.fs, RcpServiceFileSystem) and not follow:
            top = place.fs.client.stat(place.path)
            return Listed(top.stat, top.target, ALL_ATTRS)
        if place.posix and not follow:
            return _posix(place.path)
        return _from_info(place.fs.info(place.path))
    except OSError as exc:
        raise EntryError(f"read {side}", "", exc) from exc


def _children(
    place: Place, rel: str, side: str, follow: bool
) -> tuple[dict[str, Listed], dict[str, UnsafeNameError]]:
    """The entries of ``place``'s directory ``rel`` by name (a unit), and the names
    listed that are not safe: this host's by ``lstat`` (exact nanoseconds), a
    service's by its ``listdir`` request (the same metadata, from its host, names
    checked on the wire by :func:`rcp_core.remote.filewire.entry_from_wire`), a
    store's (and any, with ``follow``) by :func:`list_dir` (what its infos carry)."""
    path = place.join(rel)
    try:
        if isinstance(place.fs, RcpServiceFileSystem) and not follow:
            listed = place.fs.client.listdir(path)
            return {e.name: Listed(e.stat, e.target, ALL_ATTRS) for e in listed}, {}
        if place.posix and not follow:
            with os.scandir(path) as entries:
                return {e.name: _posix(e.path) for e in entries}, {}
        listing = list_dir(place, path, follow=follow)
    except OSError as exc:
        raise EntryError(f"read {side} directory", rel, exc) from exc
    # Following, as the copy reads a source: a POSIX special (``"other"``) is left
    # out; else a store's ``"other"`` is what it is (a symlink, its mode says).
    return {
        name: _from_info(info)
        for name, info in listing.infos.items()
        if not (follow and info.get("type") == "other")
    }, listing.unsafe


def listing(place: Place) -> dict[str, Listed]:
    """Every entry of the tree at ``place`` by path relative to it ("" itself), as
    a comparison lists a destination; a name a store lists that is not safe is left
    out.

    :raises OSError: something could not be listed (after the default tries).
    """

    def refuse(difference: Difference) -> None:
        detail = f"{place.path}: {difference.path}: {difference.detail}"
        raise OSError(errno.EIO, detail)

    run = ComparisonRun(
        None,
        (_root(place), _root(place)),
        retries=RETRIES,
        retry_delay=RETRY_DELAY,
        checksum=False,
        attrs=DEFAULT_ATTRS,
        scope=EVERYTHING,
        cancel=threading.Event(),
        on_difference=refuse,
    )
    tree = _tree(run, place, "destination", follow=False)
    assert tree is not None  # a failure raised
    return tree.listed


def _posix(path: str) -> Listed:
    st = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return Listed(st, target, ALL_ATTRS)


def _from_info(info: dict[str, Any]) -> Listed:
    """An entry from an fsspec info: its type, size, and mode and mtime when the
    store gives them."""
    known = {CompareAttr.SIZE}
    if isinstance(info.get("mode"), int):
        known.add(CompareAttr.MODE)
    mtime = info.get("mtime")
    if isinstance(mtime, (int, float)) and not isinstance(mtime, bool):
        known.add(CompareAttr.MTIME)
    st = stat_of(info)
    target = info.get("destination") if info.get("islink") else None
    return Listed(st, target, frozenset(known), exact=False)
