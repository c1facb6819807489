"""The fsspec filesystem ``rcp``: fsspec's local filesystem, copying with the engine.

``RcpFileSystem`` (protocol ``rcp``; ``rcp:///abs/path`` or a bare local path) lists,
stats and opens exactly like :class:`fsspec.implementations.local.LocalFileSystem`,
which it subclasses. Only the bulk transfers -- :meth:`~RcpFileSystem.copy`,
:meth:`~RcpFileSystem.put` and :meth:`~RcpFileSystem.get` -- run through
:class:`rcp_core.engine.Engine`, in parallel and keeping modes and times.

Invariants:

- **fsspec decides what is copied where.** Sources are expanded and destinations named
  by the same steps as ``AbstractFileSystem.copy``/``put``/``get`` (``expand_path``,
  the non-recursive directory filter, ``other_paths``, ``check_contained`` for
  ``get``); the engine only receives the resulting ``(source, destination)`` pairs.
- **A directory goes to the engine whole only where fsspec copies it whole**: in a
  recursive expansion without ``maxdepth`` every listed directory comes with its whole
  subtree, so when every listed descendant maps to the same relative path under the
  directory's destination, the directory is one engine job. Otherwise (the list form,
  ``maxdepth``, flattening) each file is its own job and directories are only created,
  in listing order, as ``LocalFileSystem.cp_file`` does. One directory going whole to
  a destination that does not exist yet is not even listed: its one pair follows from
  ``other_paths``' rule alone (unless a callback counts the pairs).
- Parents are created as ``LocalFileSystem`` creates them: for directories always,
  for files only with ``auto_mkdir=True``; a missing parent is a missing file.
- Nothing changes an entry's type: a file where a directory is (or the reverse) is
  ``IsADirectoryError`` (``FileExistsError``), as in ``LocalFileSystem``, but raised
  before anything is copied (the engine alone would replace the entry). Checking it
  costs a few ``stat`` calls per listed pair, only when merging into an existing tree.
- Errors: the engine collects them; when every one is "No such file or directory"
  it is ``FileNotFoundError`` (ignored under ``on_error="ignore"``, the default of a
  recursive ``copy``), any other failure raises the engine's
  :class:`~rcp_core.errors.CopyFailedError` with its partial summary.
- ``callback=`` (``put``/``get``), fsspec's contract: ``set_size`` with the number of
  pairs fsspec would transfer (directories included, also when a whole directory is one
  engine job); for each file the engine writes, ``callback.branched(source,
  destination)`` gives a child that gets ``set_size(size)`` and ``absolute_update(size)``
  and is closed, then the outer callback gets ``relative_update(1)``. These come from
  worker threads through the engine's ``rcp_file_copied`` hook, serialised by a lock,
  so a ``TqdmCallback`` is never updated concurrently; registering that plugin keeps the
  run in one process. Directories, files left as they are (see below) and names made as
  hard links get no child; the outer callback is set to the total at the end. A child
  sees a file's bytes at once, when the file is done, not while it is copied.

Deliberate differences from ``LocalFileSystem``: an existing destination file with the
same size and mtime (``overwrite_compare``) is left as it is rather than rewritten, and
symlinks inside a copied directory stay symlinks (the engine's rule).

Storage options set the engine's :class:`~rcp_core.settings.CopySettings`; strings (from
fsspec config files or ``FSSPEC_RCP_<OPTION>`` variables) are coerced.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterable
from glob import has_magic
from typing import Any

from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.implementations.local import (
    LocalFileSystem,
    make_path_posix,
    trailing_sep,
)
from fsspec.utils import check_contained, other_paths

from rcp_core.engine import Engine
from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.hookspecs import hookimpl
from rcp_core.paths import Job
from rcp_core.plugins import plugin_manager
from rcp_core.settings import CompareAttr, CopySettings, ExistingPolicy, Preserve

Pair = tuple[str, str]

_NOT_FOUND = os.strerror(errno.ENOENT)


def _int(name: str, value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise UsageError(f"storage option {name}={value!r} is not an integer")


_BOOLEANS = {
    "1": True,
    "true": True,
    "yes": True,
    "0": False,
    "false": False,
    "no": False,
}


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
        return _BOOLEANS[value.strip().lower()]
    raise UsageError(f"storage option {name}={value!r} is not a boolean")


ENGINE_OPTIONS = frozenset(
    {
        "max_workers",
        "max_processes",
        "max_open_files",
        "preserve",
        "existing",
        "overwrite_compare",
        "retries",
        "fail_early",
    }
)
"""The storage options :func:`settings_from_options` takes; others go to fsspec."""


def settings_from_options(
    *,
    max_workers: object = None,
    max_processes: object = None,
    max_open_files: object = None,
    preserve: object = "default",
    existing: object = "overwrite",
    overwrite_compare: object = None,
    retries: object = None,
    fail_early: object = False,
) -> CopySettings:
    """Engine settings from storage options, strings coerced (fsspec config and
    ``FSSPEC_RCP_*`` variables deliver strings).

    :raises UsageError: a value that does not parse, or settings the engine refuses.
    """
    if not isinstance(preserve, Preserve):
        preserve = Preserve.parse(str(preserve))
    compare = CopySettings().overwrite_compare
    if overwrite_compare is not None:
        compare = CompareAttr.parse(str(overwrite_compare))
    try:
        policy = ExistingPolicy(existing)
    except ValueError as exc:
        known = ", ".join(p.value for p in ExistingPolicy)
        raise UsageError(f"storage option existing={existing!r} (use {known})") from exc
    tries = _int("retries", retries)
    return CopySettings(
        existing=policy,
        overwrite_compare=compare,
        preserve=preserve,
        fail_early=_bool("fail_early", fail_early),
        max_workers=_int("max_workers", max_workers),
        max_processes=_int("max_processes", max_processes),
        max_open_files=_int("max_open_files", max_open_files),
        retries=CopySettings().retries if tries is None else tries,
    )


def _whole_roots(pairs: Iterable[Pair]) -> list[Pair] | None:
    """The pairs not inside another pair's source, if every pair inside one maps to
    the same relative path under that pair's destination; ``None`` if any does not.

    Sorting by path components puts a directory's descendants right after it (a plain
    string sort would put ``a.txt`` between ``a`` and ``a/b``).
    """
    tops: list[Pair] = []
    for src, dst in sorted(pairs, key=lambda pair: pair[0].split("/")):
        if tops:
            top_src, top_dst = tops[-1]
            prefix = top_src.rstrip("/") + "/"
            if src.startswith(prefix):
                if dst != os.path.join(top_dst, src[len(prefix) :]):
                    return None
                continue
        tops.append((src, dst))
    return tops


def _inside(pairs: Iterable[Pair], tops: list[Pair]) -> Iterable[Pair]:
    """The pairs whose source is one of ``tops``' sources or inside one."""
    if not tops:
        return
    roots = tuple(src.rstrip("/") + "/" for src, _ in tops)
    for src, dst in pairs:
        if (src + "/").startswith(roots):
            yield src, dst


def _check_types(pairs: Iterable[Pair]) -> None:
    """Refuse, as fsspec's local copy fails, to put a file where a directory is or a
    directory where a non-directory is (the engine would replace it)."""
    for src, dst in pairs:
        if not os.path.lexists(dst):
            continue
        if os.path.isdir(src) and not os.path.isdir(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), dst)
        if not os.path.isdir(src) and os.path.isdir(dst):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), dst)


class RcpFileSystem(LocalFileSystem):  # type: ignore[misc]  # fsspec is untyped
    """fsspec's local filesystem whose ``copy``/``put``/``get`` run the rcp engine.

    :param auto_mkdir: as for ``LocalFileSystem``: create a file's parent directories
        when writing or copying it.
    :param storage_options: engine settings (:data:`ENGINE_OPTIONS`, see
        :func:`settings_from_options`); the rest are fsspec's own
        (``use_listings_cache``, ...).
    :raises UsageError: a storage option that does not parse.
    """

    protocol = ("rcp",)
    root_marker = "/"

    def __init__(self, auto_mkdir: object = False, **storage_options: Any) -> None:
        engine = {
            k: storage_options.pop(k) for k in ENGINE_OPTIONS & storage_options.keys()
        }
        super().__init__(auto_mkdir=_bool("auto_mkdir", auto_mkdir), **storage_options)
        self.settings = settings_from_options(**engine)

    def copy(
        self,
        path1: str | list[str],
        path2: str | list[str],
        recursive: bool = False,
        maxdepth: int | None = None,
        on_error: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy within the filesystem, as ``AbstractFileSystem.copy`` decides.

        ``on_error`` defaults to ``"ignore"`` (missing files skipped) when
        ``recursive``, else ``"raise"``.
        """
        if on_error is None:
            on_error = "ignore" if recursive else "raise"
        plan = self._plan(path1, path2, recursive, maxdepth, counted=False, **kwargs)
        if plan is not None:
            self._transfer(*plan, ignore_missing=on_error == "ignore")

    def put(
        self,
        lpath: str | list[str],
        rpath: str | list[str],
        recursive: bool = False,
        callback: Callback = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy local file(s) here, as ``AbstractFileSystem.put`` decides."""
        if isinstance(lpath, str):
            lpath = make_path_posix(lpath)
        counted = callback is not DEFAULT_CALLBACK
        plan = self._plan(lpath, rpath, recursive, maxdepth, counted=counted, **kwargs)
        if plan is not None:
            self._transfer(*plan, ignore_missing=False, callback=callback)

    def get(
        self,
        rpath: str | list[str],
        lpath: str | list[str],
        recursive: bool = False,
        callback: Callback = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy file(s) from here to local, as ``AbstractFileSystem.get`` decides,
        refusing names that would land outside ``lpath``."""
        if isinstance(lpath, str):
            lpath = make_path_posix(lpath)
        counted = callback is not DEFAULT_CALLBACK
        plan = self._plan(
            rpath, lpath, recursive, maxdepth, counted=counted, contained=True, **kwargs
        )
        if plan is not None:
            self._transfer(*plan, ignore_missing=False, callback=callback)

    def _plan(
        self,
        path1: str | list[str],
        path2: str | list[str],
        recursive: bool,
        maxdepth: int | None,
        *,
        counted: bool,
        contained: bool = False,
        **kwargs: Any,
    ) -> tuple[list[Pair], bool] | None:
        """fsspec's ``(source, destination)`` pairs, stripped, and whether they come
        from a recursive expansion without ``maxdepth`` (every listed directory with
        its whole subtree); ``None`` when nothing is to be copied.

        The steps are ``AbstractFileSystem.copy``'s (``get``/``put`` differ only in
        which side is local, and both sides are local here). When fsspec would list
        one directory only to copy it whole to a new place, the listing is skipped
        (:meth:`_new_tree`) unless the caller counts pairs (a callback's size).
        """
        if not counted and not kwargs:
            tree = self._new_tree(path1, path2, recursive, maxdepth)
            if tree is not None:
                return [tree], True
        if isinstance(path1, list) and isinstance(path2, list):
            pairs = zip(path1, path2, strict=True)
            return [
                (self._strip_protocol(a), self._strip_protocol(b)) for a, b in pairs
            ], False
        source_is_str = isinstance(path1, str)
        paths1 = self.expand_path(
            path1, recursive=recursive, maxdepth=maxdepth, **kwargs
        )
        if source_is_str and (not recursive or maxdepth is not None):
            # Without a full recursion, directories themselves are not transferred.
            paths1 = [p for p in paths1 if not (trailing_sep(p) or self.isdir(p))]
            if not paths1:
                return None
        source_is_file = len(paths1) == 1
        dest_is_dir = isinstance(path2, str) and (
            trailing_sep(path2) or self.isdir(path2)
        )
        exists = isinstance(path1, str) and (
            (has_magic(path1) and source_is_file)
            or (not has_magic(path1) and dest_is_dir and not trailing_sep(path1))
        )
        paths2 = other_paths(paths1, path2, exists=exists, flatten=not source_is_str)
        if contained and isinstance(path2, str):
            check_contained(path2, paths2)
        pairs = zip(paths1, paths2, strict=True)
        stripped = [
            (self._strip_protocol(a), self._strip_protocol(b)) for a, b in pairs
        ]
        return stripped, recursive and maxdepth is None

    def _new_tree(
        self,
        path1: str | list[str],
        path2: str | list[str],
        recursive: bool,
        maxdepth: int | None,
    ) -> Pair | None:
        """The one pair fsspec's plan reduces to when it copies a single directory,
        whole, to a destination that does not exist yet; ``None`` otherwise.

        Such a plan lists the directory (``expand_path``: a ``stat`` per entry, about
        15 us each) and maps every entry below one destination, which the engine then
        walks again. The destination follows ``other_paths``: the listing's common
        prefix is the directory, replaced by ``path2``, or by ``path2/<name>`` when
        ``path2`` is an existing directory (or ends with ``/``) and ``path1`` does not
        end with ``/``. A destination that exists is a merge, whose type checks need
        the listing: that goes the general way.
        """
        if not (isinstance(path1, str) and isinstance(path2, str)):
            return None
        if not recursive or maxdepth is not None or has_magic(path1):
            return None
        src = self._strip_protocol(path1)
        if src == self.root_marker or not os.path.isdir(src):
            return None
        dst = self._strip_protocol(path2)
        if (trailing_sep(path2) or os.path.isdir(dst)) and not trailing_sep(path1):
            dst = os.path.join(dst, os.path.basename(src))
        return None if os.path.lexists(dst) else (src, dst)

    def _transfer(
        self,
        pairs: list[Pair],
        whole: bool,
        *,
        ignore_missing: bool,
        callback: Callback = DEFAULT_CALLBACK,
    ) -> None:
        """Copy ``pairs`` in one engine run; see the module docstring for which
        directories go whole and how errors are reported.

        :raises IsADirectoryError: a file would replace a directory.
        :raises FileExistsError: a directory would replace a non-directory.
        """
        callback.set_size(len(pairs))
        tops = _whole_roots(pairs) if whole else None
        if tops is not None:
            merged = [top for top in tops if os.path.lexists(top[1])]
            _check_types(_inside(pairs, merged))
        jobs: list[Job] = []
        missing: list[str] = []
        for src, dst in pairs if tops is None else tops:
            if tops is None and os.path.isdir(src):
                os.makedirs(dst, exist_ok=True)  # as LocalFileSystem.cp_file
                continue
            if not os.path.exists(src):
                missing.append(src)
                continue
            _check_types([(src, dst)])
            parent, name = os.path.split(dst)
            if not os.path.isdir(parent) and (self.auto_mkdir or os.path.isdir(src)):
                os.makedirs(parent, exist_ok=True)
            if not os.path.isdir(parent):
                missing.append(parent)
                continue
            src_parent, src_name = os.path.split(src)
            exists = os.path.lexists(dst)
            jobs.append(Job(src_parent, src_name, parent, name, exists, True))
        if jobs:
            self._run(jobs, ignore_missing, callback)
        if missing and not ignore_missing:
            raise FileNotFoundError(errno.ENOENT, _NOT_FOUND, missing[0])
        callback.absolute_update(len(pairs))

    def _run(self, jobs: list[Job], ignore_missing: bool, callback: Callback) -> None:
        plugins: list[object] = []
        if callback is not DEFAULT_CALLBACK:
            plugins.append(CallbackPlugin(callback))
        try:
            Engine(jobs, self.settings, plugins=plugin_manager(plugins)).run()
        except CopyFailedError as exc:
            keys = [key for key, _, _ in exc.errors]
            if not keys or not all(key.endswith(_NOT_FOUND) for key in keys):
                raise
            if not ignore_missing:
                raise FileNotFoundError(errno.ENOENT, str(exc)) from exc


class CallbackPlugin:
    """An ``rcp_file_copied`` implementation driving an fsspec callback per file.

    Worker threads call it concurrently; the lock makes the callback's updates one at
    a time (fsspec callbacks, ``TqdmCallback`` among them, are not thread-safe).
    """

    def __init__(self, callback: Callback) -> None:
        self.callback = callback
        self._lock = threading.Lock()

    @hookimpl
    def rcp_file_copied(self, source: str, destination: str, size: int) -> None:
        with self._lock:
            child = self.callback.branched(source, destination)
            child.set_size(size)
            child.absolute_update(size)
            child.close()
            self.callback.relative_update(1)
