"""Comparing two trees wherever fsspec reaches them: ``rcmp`` with a URL operand.

:func:`rcp_core.verify.compare` compares two trees of this host through directory
descriptors. When a tree is on an ``rcpd serve`` service (``rcp://host:port/path``) or
in another fsspec store, :func:`compare_places` compares it here, by the same rules
(:mod:`rcp_core.comparison`) and into the same :class:`~rcp_core.comparison.Comparison`:

- each side is listed where it is: this host's trees by ``lstat`` (exact
  nanoseconds), a service's by its ``listdir`` requests (the same metadata, from its
  host), another store by ``find`` (its infos: what a store lacks, mode or mtime, is
  not compared);
- a path on one side only is one ``missing`` or ``extra`` difference (a directory's
  subtree is not listed below it), a type that differs one ``type`` difference;
- with ``checksum``, two regular files of equal size are compared by BLAKE3 digests of
  :data:`SEGMENT`-sized ranges, each computed **where the data is**: a service hashes
  its side on its host (the ``digest`` request, protocol 1.8), this host hashes its
  own files, and only another store's files are read here. No file content of a
  service crosses the network. Digests are taken by ``max_workers`` threads (each
  with its own connection to a service), the first differing range ends a file's;
- a file that cannot be read or hashed on either side is an ``error`` difference; the
  rest goes on; so is a name a store lists that is not safe (:mod:`rcp_core.names`),
  which is never joined to a path, read or compared;
- a :class:`~rcp_core.verify.Scope` (a copy's verification) leaves out what the copy
  was not asked to copy, by the rules :func:`rcp_core.verify.compare` follows; with
  ``follow`` the source is listed as the generic store copy reads it
  (:mod:`rcp_provider.fsspec.storecopy`: symlinks followed, specials left out).
"""

from __future__ import annotations

import os
import posixpath
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from blake3 import blake3
from fsspec.implementations.local import LocalFileSystem

from rcp_core.comparison import (
    DEFAULT_ATTRS,
    MAX_KEPT,
    Comparison,
    Difference,
    DiffKind,
    attr_differences,
    type_name,
)
from rcp_core.errors import UnsafeNameError
from rcp_core.filters import GitIgnores, Verdict
from rcp_core.remote.filewire import MAX_DIGEST
from rcp_core.settings import CompareAttr
from rcp_core.summary import Tally
from rcp_core.verify import EVERYTHING, Left, Scope
from rcp_provider.fsspec.service import RcpServiceFileSystem
from rcp_provider.fsspec.storetree import Place, source_items, stat_of, tree_infos

SEGMENT = MAX_DIGEST
"""Bytes per digest: what one ``digest`` request of a service may hash."""
DEFAULT_WORKERS = 8
FLOAT_MTIME_NS = 1000
"""Two mtimes of which one came as a float of seconds differ when they are this many
nanoseconds apart: a float of today's seconds holds them to about 0.24 us, so a time
set from one (the store copy's ``utime``) can fall on either side of a microsecond."""
READ = 1 << 20


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
) -> Comparison:
    """Compare the tree ``src`` with ``dst`` (see the module docstring).

    :param scope: what a copy was asked to copy (default: everything).
    :param follow: list ``src`` as the generic store copy reads it.
    """
    started = time.monotonic()
    listed, unsafe = _copied(src) if follow else _listed(src)
    ours, states, dropped = _in_scope(listed, src, scope)
    theirs, unsafe_there = _listed(dst)
    differences = [
        Difference(rel, DiffKind.ERROR, str(error))
        for rel, error in sorted({**unsafe_there, **unsafe}.items())
    ]
    pairs: list[tuple[str, int]] = []
    gone: list[str] = []  # directories on one side only, or retyped: not entered
    for rel in sorted(ours.keys() | theirs.keys()):
        if any(rel.startswith(top + "/") for top in gone):
            continue
        name = rel or "."
        a, b = ours.get(rel), theirs.get(rel)
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
            what = type_name(here.st)
            differences.append(Difference(name, kind, f"{what} not in the {where}"))
            continue
        left = scope.left(rel, a.st)
        if left is Left.ALONE:
            gone.append(rel)
            continue
        if stat.S_IFMT(a.st.st_mode) != stat.S_IFMT(b.st.st_mode):
            detail = f"{type_name(a.st)} != {type_name(b.st)}"
            differences.append(Difference(name, DiffKind.TYPE, detail))
            gone.append(rel)
            continue
        if a.target != b.target:
            detail = f"target {a.target!r} != {b.target!r}"
            differences.append(Difference(name, DiffKind.LINK, detail))
        if left is Left.METADATA:
            continue  # a directory merged into: its own attributes
        wanted = attrs & a.known & b.known
        if stat.S_ISDIR(a.st.st_mode):
            wanted -= {CompareAttr.SIZE}
        if CompareAttr.MTIME in wanted and not (a.exact and b.exact):
            wanted -= {CompareAttr.MTIME}
            if abs(a.st.st_mtime_ns - b.st.st_mtime_ns) >= FLOAT_MTIME_NS:
                ta, tb = a.st.st_mtime_ns / 1e9, b.st.st_mtime_ns / 1e9
                detail = f"mtime {ta:.6f} != {tb:.6f}"
                differences.append(Difference(name, DiffKind.MTIME, detail))
        for kind, detail in attr_differences(wanted, a.st, b.st):
            differences.append(Difference(name, kind, detail))
        same_size = a.st.st_size == b.st.st_size
        if checksum and stat.S_ISREG(a.st.st_mode) and same_size:
            pairs.append((rel, a.st.st_size))
    hashed = _contents(src, dst, pairs, max_workers or DEFAULT_WORKERS)
    differences.extend(hashed.differences)
    counts = Counter(d.kind for d in differences)
    return Comparison(
        entries=len(ours.keys() | theirs.keys()),
        files_hashed=hashed.files,
        bytes_hashed=hashed.bytes_hashed,
        counts={kind: counts.get(kind, 0) for kind in DiffKind},
        differences=tuple(sorted(differences, key=lambda d: (d.path, d.kind.value)))[
            :MAX_KEPT
        ],
        walltime=time.monotonic() - started,
    )


_State = tuple[bool, GitIgnores | None]
"""A source directory in scope: included (or below an include), its ``.gitignore``
stack."""


def _in_scope(
    listed: dict[str, Listed], place: Place, scope: Scope
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
                ignores = ignores.with_file(rel, _gitignore(listed, place, rel))
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


def _gitignore(listed: dict[str, Listed], place: Place, rel: str) -> str:
    """The text of the source directory ``rel``'s ``.gitignore`` (a regular file,
    never a symlink's target), ``""`` if it has none."""
    name = posixpath.join(rel, ".gitignore") if rel else ".gitignore"
    entry = listed.get(name)
    if entry is None or not stat.S_ISREG(entry.st.st_mode):
        return ""
    data: bytes = place.fs.cat_file(place.join(name))
    return data.decode("utf-8", "surrogateescape")


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


_Listing = tuple[dict[str, Listed], dict[str, UnsafeNameError]]
"""A tree's entries by safe relative path, and the names its store listed that are
not safe (:attr:`rcp_provider.fsspec.storetree.Tree.unsafe`)."""


def _copied(place: Place) -> _Listing:
    """The tree at ``place`` as the store copy lists it (its own listing)."""
    items = list(source_items(place, Tally()))
    listed = {
        item.rel: _from_info(item.info)
        for item in items
        if item.unsafe is None and not item.is_special
    }
    unsafe = {item.rel: item.unsafe for item in items if item.unsafe is not None}
    return listed, unsafe


def listing(place: Place) -> dict[str, Listed]:
    """Every entry of the tree at ``place`` by path relative to it ("" itself); a
    name a store lists that is not safe is left out."""
    return _listed(place)[0]


def _listed(place: Place) -> _Listing:
    """:func:`listing`, and the names left out. A service's names are checked on
    the wire (:func:`rcp_core.remote.filewire.entry_from_wire`), this host's come
    from its kernel."""
    if isinstance(place.fs, RcpServiceFileSystem):
        return dict(_service_tree(place.fs, place.path)), {}
    if place.posix:
        return dict(_posix_tree(place.path)), {}
    return _store_tree(place)


def _posix_tree(root: str) -> Iterator[tuple[str, Listed]]:
    yield "", _posix(root)
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        for name in (*dirs, *files):
            rel = name if rel_top == "." else posixpath.join(rel_top, name)
            yield rel, _posix(os.path.join(top, name))


def _posix(path: str) -> Listed:
    st = os.lstat(path)
    target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else None
    return Listed(st, target, ALL_ATTRS)


def _service_tree(fs: RcpServiceFileSystem, root: str) -> Iterator[tuple[str, Listed]]:
    """A service's tree by its ``stat`` and ``listdir`` requests (never following a
    symlink)."""
    top = fs.client.stat(root)
    yield "", Listed(top.stat, top.target, ALL_ATTRS)
    if top.kind != "directory":
        return
    stack = [""]
    while stack:
        rel = stack.pop()
        for entry in fs.client.listdir(posixpath.join(root, rel) if rel else root):
            child = posixpath.join(rel, entry.name) if rel else entry.name
            yield child, Listed(entry.stat, entry.target, ALL_ATTRS)
            if entry.kind == "directory":
                stack.append(child)


def _store_tree(place: Place) -> _Listing:
    """Another store's tree by its ``find``: what its infos carry."""
    tree = tree_infos(place)
    return {rel: _from_info(entry) for rel, entry in tree.infos.items()}, tree.unsafe


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


@dataclass
class _Hashed:
    files: int = 0
    bytes_hashed: int = 0
    differences: list[Difference] = field(default_factory=list)


def _contents(
    src: Place, dst: Place, pairs: list[tuple[str, int]], workers: int
) -> _Hashed:
    """Compare the contents of ``pairs`` (relative path, size) by digests taken on
    each side, ``workers`` files at once."""
    result = _Hashed()
    lock = threading.Lock()
    local = threading.local()

    def one(pair: tuple[str, int]) -> None:
        rel, size = pair
        sides = getattr(local, "sides", None)
        if sides is None:
            sides = local.sides = (_digester(src), _digester(dst))
        try:
            for offset in range(0, max(size, 1), SEGMENT):
                length = min(SEGMENT, size - offset)
                mine = sides[0](src.join(rel), offset, length)
                theirs = sides[1](dst.join(rel), offset, length)
                with lock:
                    result.bytes_hashed += 2 * length
                if mine != theirs:
                    detail = f"contents differ in bytes {offset}-{offset + length}"
                    with lock:
                        result.differences.append(
                            Difference(rel or ".", DiffKind.CONTENT, detail)
                        )
                    break
        except OSError as exc:
            with lock:
                result.differences.append(
                    Difference(rel or ".", DiffKind.ERROR, f"hashing: {exc}")
                )
        with lock:
            result.files += 1

    with ThreadPoolExecutor(workers, thread_name_prefix="rcp-compare") as pool:
        list(pool.map(one, pairs))
    return result


def _digester(place: Place) -> Any:
    """``digest(path, offset, length)`` for ``place``'s side, for one thread: a
    service hashes on its host (a connection of this thread's own), other sides are
    hashed here."""
    if isinstance(place.fs, RcpServiceFileSystem):
        fs = type(place.fs)(*place.fs.storage_args, **place.fs.storage_options)

        def remote(path: str, offset: int, length: int) -> str:
            digest, _ = fs.client.digest(path, offset, length)
            return digest

        return remote
    opener = open if isinstance(place.fs, LocalFileSystem) else place.fs.open

    def here(path: str, offset: int, length: int) -> str:
        hasher = blake3()
        with opener(path, "rb") as f:
            f.seek(offset)
            left = length
            while left > 0 and (piece := f.read(min(READ, left))):
                hasher.update(piece)
                left -= len(piece)
        return str(hasher.hexdigest())

    return here
