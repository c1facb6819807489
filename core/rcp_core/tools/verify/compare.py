"""Verifying a copy: compare a source tree with its copy, by metadata and by content.

:func:`compare` walks both trees at once, in parallel, and reports each relative path
where they differ as a :class:`~rcp_core.tools.verify.differences.Difference`; the
:class:`~rcp_core.tools.verify.differences.Comparison` it returns is what an Airflow task
pushes to XCom and what ``rcmp`` prints. Two trees of this host are walked through
directory descriptors (:mod:`rcp_core.tools.verify.pairwalk`, the fast path); any other
pair, a backend port on either side (a store, a service, a site's backend), through the
ports (:mod:`rcp_core.tools.verify.portcompare`), by the same rules. :func:`verify_copy`
compares each source of a copy with its copy, named by the copy's operand rules: what
``rcp --verify`` and the Airflow hook run after a copy; a
:class:`~rcp_core.tools.verify.scope.Scope` makes it compare what the copy was asked to
copy (its filters, specials it may skip, what its policy left alone), the same on every
path.

The parts: :mod:`rcp_core.tools.verify.scope` (what is compared),
:mod:`rcp_core.tools.verify.comparerun` (the run: errors, retries, the stop, what was
found), :mod:`rcp_core.tools.verify.pairwalk` and
:mod:`rcp_core.tools.verify.portcompare` (the walks of both trees),
:mod:`rcp_core.tools.verify.entrypair` (one path on both sides),
:mod:`rcp_core.tools.verify.hashing` and :mod:`rcp_core.tools.verify.digests`
(contents). This module holds the entry points; callers import from it (it names
:class:`~rcp_core.tools.verify.scope.Scope` and the comparison's values too).

The invariants below are those of two local trees; through ports, what a port does not
give is not compared, and the rest is :mod:`rcp_core.tools.verify.portcompare`'s.

Invariants:

- *Same* means: every path is on both sides with the same type (file, directory,
  symlink, fifo, socket, device and its number); for each pair the compared attributes
  are equal (size of regular files, mtime to the nanosecond, permission bits of all but
  symlinks, uid/gid when asked; rules in :mod:`rcp_core.tools.verify.differences`), symlinks
  have the same target; with ``checksum``, regular files of equal size have equal contents;
  nothing failed to read; and the comparison was not cancelled. Directory sizes,
  atimes and ctimes are never compared (no copy can make them equal). Hard links are
  compared name by name; the link structure is not checked.
- Read-only, and never through a symlink: entries are ``lstat``-ed, and opened with
  ``O_NOFOLLOW`` relative to their open parent directory; only the two roots are
  taken by path, as given. Contents are read only with ``checksum``, and only those of
  regular files of equal size.
- A path that one side lacks, or where the types differ, is one difference: a
  directory missing in the destination is one ``missing``; its subtree is not entered.
- An entry never crashes or stalls the comparison: a read failing with a transient
  error (as the run's ``rcp_classify_error`` hooks say, told both roots' storage) is
  tried again as the copy tries it (``retries``, ``retry_delay``: the copy's settings
  and defaults); a failing ``lstat``, ``open``, ``readlink``, listing or read left
  after that is an ``error`` difference and the rest goes on, unless the hooks call
  it fatal (then the comparison stops, cancelled). Files are opened ``O_NONBLOCK``
  and must still be regular files once open, so a FIFO swapped in cannot block a
  worker.
- Bounded memory: the first :data:`~rcp_core.tools.verify.differences.MAX_KEPT` differences
  found are kept (the counts cover all of them); the walk holds one listing per directory in
  flight (the source side's; the destination side streams past it), on the pool's
  depth-first work stack; each worker reads into one
  :data:`~rcp_core.tools.verify.hashing.READ_SIZE` buffer.
- Contents are hashed with BLAKE3 per :data:`~rcp_core.tools.verify.hashing.SEGMENT` of a
  file, both sides by the same worker, and the digests compared; a larger file's segments by
  several workers at once; the first differing segment stops the rest. A file that
  changes during the comparison may or may not be reported.
"""

from __future__ import annotations

import os
import posixpath
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rcp_core.backends.port import keeps_symlinks
from rcp_core.errors import UsageError, VerificationError
from rcp_core.run.pool import WorkPool
from rcp_core.settings import (
    RETRIES,
    RETRY_DELAY,
    CompareAttr,
    CopySettings,
    Preserve,
    PreserveAttr,
)
from rcp_core.site.storage import detect
from rcp_core.tools.verify.comparerun import ComparisonRun
from rcp_core.tools.verify.differences import (
    DEFAULT_ATTRS,
    Comparison,
    Difference,
    DiffKind,
)
from rcp_core.tools.verify.pairwalk import PairWalk
from rcp_core.tools.verify.scope import EVERYTHING, Left, Scope, snapshot

if TYPE_CHECKING:
    from rcp_core.backends.capabilities import Backend
    from rcp_core.backends.port import Port
    from rcp_core.tools.verify.comparerun import Plugins

__all__ = [
    "EVERYTHING",
    "Comparison",
    "DiffKind",
    "Difference",
    "Left",
    "Scope",
    "check_settings",
    "compare",
    "copy_trees",
    "kept_attrs",
    "prepare_scopes",
    "verdict_of",
    "verify_copy",
]

SHARED_WORKERS = 32
"""Workers in flight where a root is on network or parallel storage."""


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
    sources: Sequence[str],
    destination: str,
    settings: CopySettings,
    *,
    ports: Callable[[str], Port] | None = None,
) -> dict[str, Scope]:
    """Before a copy of ``sources`` to ``destination``: each destination tree's
    :class:`Scope`, by its path (:func:`verify_copy`'s ``scopes``); a tree read
    through its port as ``ports`` gives it (a copy to or from a URL), else as this
    host's path."""
    port_of = ports or _port_of
    return {
        dst: Scope.of(
            settings, snapshot(port_of(dst)) if Scope.keeps(settings) else None
        )
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
    src: str | os.PathLike[str] | Port,
    dst: str | os.PathLike[str] | Port,
    *,
    checksum: bool = False,
    attrs: frozenset[CompareAttr] = DEFAULT_ATTRS,
    max_workers: int | None = None,
    scope: Scope = EVERYTHING,
    follow: bool = False,
    cancel: threading.Event | None = None,
    on_difference: Callable[[Difference], None] | None = None,
    plugins: Plugins = None,
    retries: int = RETRIES,
    retry_delay: float = RETRY_DELAY,
) -> Comparison:
    """Compare the tree ``src`` with its copy ``dst`` (the copy itself, not its parent):
    two paths of this host through directory descriptors
    (:mod:`rcp_core.tools.verify.pairwalk`, the fast path), any other pair through
    their backend ports (:mod:`rcp_core.tools.verify.portcompare`; a path beside a port
    is this host's :class:`~rcp_core.engine.posixport.PosixPort`), by the same rules.

    :param checksum: also compare the contents of regular files of equal size
        (``CompareAttr.CHECKSUM`` in ``attrs`` asks for it too).
    :param attrs: attributes compared where they apply (size, mtime and mode by
        default; add uid, gid). ``CompareAttr.CTIME`` is refused: no copy keeps it.
    :param max_workers: workers in flight. By default, as the copy's defaults
        (:mod:`rcp_core.site.builtin`): :data:`SHARED_WORKERS` where a root is on network or
        parallel storage, where each request waits for a round trip; else one, since
        threads on a local disk mostly wait for the GIL, plus one per CPU hashing
        large segments aside (:meth:`~rcp_core.run.pool.WorkPool.aside`). Through
        ports, :data:`~rcp_core.tools.verify.portcompare.PORT_WORKERS`.
    :param scope: what the copy was asked to copy (default: everything).
    :param follow: list ``src`` as the generic copy reads a source (symlinks followed
        to files, those to directories or dangling left out): through ports.
    :param cancel: set it from any thread to stop soon; the result is then
        ``cancelled`` (and not ``same``).
    :param on_difference: called with each difference as it is found (also those
        beyond ``MAX_KEPT``), from worker threads, one call at a time; an exception it
        raises stops the comparison and is raised here.
    :param plugins: the run's plugins: a manager, or plugin objects besides the
        installed site plugins; their ``rcp_classify_error``, told both roots'
        storage, says which errors are tried again (made at the first error).
    :param retries: tries again of a read failing with a transient error (0: never).
    :param retry_delay: the backoff before the first of them, in seconds.
    :raises UsageError: bad ``attrs``, ``max_workers``, ``retries`` or
        ``retry_delay``.
    """
    check_settings(attrs, max_workers, retries, retry_delay)
    paths = _path_of(src), _path_of(dst)
    ports: tuple[Port, Port] | None = None
    if paths[0] is None or paths[1] is None or follow:
        # Imported here: a comparison of two local trees does not pay for ports.
        from rcp_core.tools.verify.portcompare import PORT_WORKERS, PortWalk

        ports = _port_of(src), _port_of(dst)
        roots = ports[0].local_path, ports[1].local_path
        limit, aside = max_workers or PORT_WORKERS, 0
    else:
        roots = paths
        limit, aside = _concurrency(paths[0], paths[1], max_workers)
    run = ComparisonRun(
        plugins,
        roots,
        retries=retries,
        retry_delay=retry_delay,
        checksum=checksum or CompareAttr.CHECKSUM in attrs,
        attrs=attrs,
        scope=scope,
        cancel=cancel or threading.Event(),
        on_difference=on_difference,
    )
    pool = WorkPool(limit, limit, on_crash=run.crash, aside=aside)
    start = time.monotonic()
    if not run.stopping:
        if ports is not None:
            pool.push(PortWalk(run, pool, *ports, follow).root)
        else:
            pool.push(PairWalk(run, pool).root, *roots)
        pool.run()
    return run.result(time.monotonic() - start)


def _path_of(tree: str | os.PathLike[str] | Port) -> str | None:
    return os.fspath(tree) if isinstance(tree, str | os.PathLike) else None


def _port_of(tree: str | os.PathLike[str] | Port) -> Port:
    from rcp_core.engine.posixport import PosixPort

    return PosixPort(os.fspath(tree)) if isinstance(tree, str | os.PathLike) else tree


def check_settings(
    attrs: frozenset[CompareAttr],
    max_workers: int | None,
    retries: int,
    retry_delay: float,
) -> None:
    """Refuse what no comparison takes.

    :raises UsageError: ``CompareAttr.CTIME`` in ``attrs``, ``max_workers`` below 1,
        a negative ``retries`` or ``retry_delay``.
    """
    if CompareAttr.CTIME in attrs:
        raise UsageError("ctime cannot be verified: no copy preserves it")
    if max_workers is not None and max_workers < 1:
        raise UsageError("max-workers must be at least 1")
    if retries < 0 or retry_delay < 0:
        raise UsageError("retries and retry-delay must not be negative")


def verify_copy(
    sources: Sequence[str],
    destination: str,
    *,
    checksum: bool,
    preserve: Preserve,
    scopes: Mapping[str, Scope] | None = None,
    max_workers: int | None = None,
    cancel: threading.Event | None = None,
    plugins: Plugins = None,
    retries: int = RETRIES,
    retry_delay: float = RETRY_DELAY,
    ports: Callable[[str], Port] | None = None,
) -> dict[str, Any]:
    """Compare each source with its copy (:func:`copy_trees`): the verdict
    (:func:`verdict_of`). Sizes and link targets always count; times, mode and owner
    only where the copy ``preserve``-d them.

    :param scopes: each destination tree's :class:`Scope` by its path, from
        :func:`prepare_scopes` before the copy; a tree without one is compared whole.
    :param plugins: as :func:`compare` takes them; ``retries`` and
        ``retry_delay``: the copy's.
    :param ports: each tree's port, for a copy to or from a URL (the generic
        engine's), compared as it copied: the source listed with its symlinks
        followed to files where a side keeps none
        (:func:`~rcp_core.backends.port.keeps_symlinks`), an attribute only where
        both ports keep it; without it,
        the trees are this host's paths.
    :raises VerificationError: a copy differs.
    """
    trees = []
    for src, dst in copy_trees(sources, destination):
        a: str | Port = src
        b: str | Port = dst
        kept_by: tuple[Backend, ...] = ()
        follow = False
        if ports is not None:
            a, b = ports(src), ports(dst)
            kept_by = (a.backend, b.backend)  # the generic copy kept what both keep
            follow = not keeps_symlinks(a, b)
        result = compare(
            a,
            b,
            checksum=checksum,
            attrs=kept_attrs(preserve, *kept_by),
            follow=follow,
            scope=(scopes or {}).get(dst, EVERYTHING),
            max_workers=max_workers,
            cancel=cancel,
            plugins=plugins,
            retries=retries,
            retry_delay=retry_delay,
        )
        trees.append((src, dst, result))
    return verdict_of(trees)


def kept_attrs(preserve: Preserve, *backends: Backend) -> frozenset[CompareAttr]:
    """The attributes a copy with ``preserve`` made equal to its source's; with
    ``backends`` (a copy through the generic engine: its two ports'), those every one
    of them keeps (that copy keeps an attribute only where both sides have it)."""
    from rcp_core.backends.capabilities import KEPT_BY

    attrs = {CompareAttr.SIZE}
    for kept, compared in _COMPARED.items():
        if kept in preserve.attrs and all(b.has(KEPT_BY[kept]) for b in backends):
            attrs |= compared
    return frozenset(attrs)


_COMPARED = {
    PreserveAttr.TIMES: {CompareAttr.MTIME},
    PreserveAttr.MODE: {CompareAttr.MODE},
    PreserveAttr.OWNER: {CompareAttr.UID, CompareAttr.GID},
}
"""What a comparison compares of each attribute a copy preserves."""


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
