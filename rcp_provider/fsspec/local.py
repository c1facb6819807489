"""The fsspec filesystem ``rcp``: fsspec's local filesystem, copying with the engine.

``RcpFileSystem`` (protocol ``rcp``; ``rcp:///abs/path`` or a bare local path) lists,
stats and opens exactly like :class:`fsspec.implementations.local.LocalFileSystem`,
which it subclasses. Only the bulk transfers -- :meth:`~RcpFileSystem.copy`,
:meth:`~RcpFileSystem.put` and :meth:`~RcpFileSystem.get` -- run through
:class:`rcp_core.engine.copyrun.Engine`, in parallel and keeping modes and times.

Invariants:

- **fsspec decides what is copied where.** Sources are expanded and destinations named
  by the same steps as ``AbstractFileSystem.copy``/``put``/``get`` (``expand_path``,
  the non-recursive directory filter, ``other_paths``, ``check_contained`` for
  ``get``: :mod:`rcp_provider.fsspec.plan`); the engine only receives the resulting
  ``(source, destination)`` pairs.
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

``rm`` of directories runs the engine's parallel removal
(:mod:`rcp_core.tools.remove.rmtree`), and ``find`` on shared storage lists directories in
parallel.

Deliberate differences from ``LocalFileSystem``: an existing destination file with the
same size and mtime (``overwrite_compare``) is left as it is rather than rewritten, and
symlinks inside a copied directory stay symlinks (the engine's rule), and ``rm`` refuses
``/`` and mount points and keeps other filesystems mounted inside a tree.

Storage options set the engine's :class:`~rcp_core.settings.CopySettings`; strings (from
fsspec config files or ``FSSPEC_RCP_<OPTION>`` variables) are coerced.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from glob import has_magic
from typing import Any

import pluggy
from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.implementations.local import LocalFileSystem, trailing_sep
from fsspec.spec import _Cached  # the metaclass of every fsspec filesystem

from rcp_core.engine.copyrun import Engine
from rcp_core.errors import CopyFailedError, UsageError
from rcp_core.paths import Job
from rcp_core.site.capacity import choose_concurrency, storage_of
from rcp_core.site.hookspecs import hookimpl
from rcp_core.site.plugins import plugin_manager
from rcp_core.tools.remove.removal import RemoveSettings
from rcp_core.tools.remove.rmtree import remove
from rcp_provider.fsspec.base import RcpBase, Transfer
from rcp_provider.fsspec.plan import Pair, Plan, inside, plan_transfer, whole_roots
from rcp_provider.fsspec.storage_options import (
    bool_option,
    service_path,
    service_url_options,
)

_NOT_FOUND = os.strerror(errno.ENOENT)


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


class _OneProtocol(_Cached):  # type: ignore[misc]  # fsspec is untyped
    """``rcp``'s two forms behind one protocol: a ``host`` (given, or from a
    ``rcp://host/...`` URL by ``_get_kwargs_from_urls``) makes the service form,
    :class:`rcp_provider.fsspec.service.RcpServiceFileSystem` (imported only then)."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is RcpFileSystem and kwargs.get("host"):
            from rcp_provider.fsspec.service import RcpServiceFileSystem

            return RcpServiceFileSystem(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class _StripProtocol:
    """``RcpFileSystem._strip_protocol``: ``LocalFileSystem``'s, except for a service's
    URL. Asked on the class (fsspec's URL chaining does, before it knows which form
    the URL makes), that gives the path on the service; asked by a local instance it
    is refused, never read as a local path (``rcp://host/x`` would be ``./host/x``)."""

    def __get__(
        self, instance: object, owner: type[RcpFileSystem]
    ) -> Callable[[Any], Any]:
        def strip(path: Any) -> Any:
            if isinstance(path, str) and service_url_options(path):
                if instance is not None:
                    raise UsageError(
                        f"{path} is on an rcpd service: open it with fsspec.open or "
                        "fsspec.url_to_fs, or make the filesystem with host="
                    )
                return service_path(path)
            return super(RcpFileSystem, owner)._strip_protocol(path)

        return strip


class RcpFileSystem(RcpBase, LocalFileSystem, metaclass=_OneProtocol):  # type: ignore[misc]
    """fsspec's local filesystem whose ``copy``/``put``/``get`` run the rcp engine.

    Constructed with a ``host`` (as ``fsspec.open("rcp://host:port/path", ...)``
    does), it is the service form instead (:mod:`rcp_provider.fsspec.service`).

    :param auto_mkdir: as for ``LocalFileSystem``: create a file's parent directories
        when writing or copying it.
    :param storage_options: engine settings
        (:data:`~rcp_provider.fsspec.storage_options.ENGINE_OPTIONS`, see
        :func:`~rcp_provider.fsspec.storage_options.settings_from_options`); the rest
        are fsspec's own (``use_listings_cache``, ...).
    :raises UsageError: a storage option that does not parse.
    """

    def __init__(self, auto_mkdir: object = False, **storage_options: Any) -> None:
        super().__init__(
            auto_mkdir=bool_option("auto_mkdir", auto_mkdir), **storage_options
        )
        self._plugins: pluggy.PluginManager | None = None

    _strip_protocol = _StripProtocol()

    def _bulk(self, transfer: Transfer) -> None:
        """One engine run of the plan (:meth:`_transfer`); a missing source is
        skipped only under ``on_error="ignore"``."""
        plan = self._plan(transfer)
        if plan is not None:
            self._transfer(
                plan,
                ignore_missing=transfer.on_error == "ignore",
                callback=transfer.callback,
            )

    def find(
        self,
        path: str,
        maxdepth: int | None = None,
        withdirs: bool = False,
        detail: bool = False,
        **kwargs: Any,
    ) -> Any:
        """fsspec's ``find``, the same names and infos; on shared storage (network,
        parallel, FUSE: every listing waits a round trip) directories are listed in
        parallel, as many at once as the engine's storage plugins start a copy
        with there. On a local disk fsspec's own walk is as fast (one core's work)."""
        root = self._strip_protocol(path)
        if kwargs or not os.path.isdir(root):
            return super().find(path, maxdepth, withdirs, detail, **kwargs)
        workers = self._listing_workers(root)
        if workers < 2:
            return super().find(path, maxdepth, withdirs, detail, **kwargs)
        if maxdepth is not None and maxdepth < 1:
            raise ValueError("maxdepth must be at least 1")
        out = {root: self.info(root)} if withdirs and root else {}
        for info in self._listed(root, maxdepth, workers):
            if withdirs or info["type"] != "directory":
                out[info["name"]] = info
        names = sorted(out)
        return {name: out[name] for name in names} if detail else names

    def _listing_workers(self, path: str) -> int:
        """Directories listed at once below the directory ``path``: the plugins'
        starting concurrency for its storage (1 where it is local)."""
        if self._plugins is None:
            self._plugins = plugin_manager()
        hook = self._plugins.hook
        place = storage_of(hook, path)
        chosen = choose_concurrency(hook, [(place, place)], self.settings, 1 << 16)
        return chosen.initial

    def _listed(
        self, root: str, maxdepth: int | None, workers: int
    ) -> list[dict[str, Any]]:
        """Every entry below ``root`` within ``maxdepth`` levels, as ``ls(detail=True)``
        gives it (symlinks are not directories, so never entered); a directory that
        cannot be listed is left out, as fsspec's ``walk`` omits it."""
        found: list[dict[str, Any]] = []
        with ThreadPoolExecutor(workers, thread_name_prefix="rcp-find") as pool:
            listings = {pool.submit(self._entries, root): 1}
            while listings:
                done, _ = wait(listings, return_when=FIRST_COMPLETED)
                for listing in done:
                    depth = listings.pop(listing)
                    for info in listing.result():
                        found.append(info)
                        deeper = maxdepth is None or depth < maxdepth
                        if info["type"] == "directory" and deeper:
                            listings[pool.submit(self._entries, info["name"])] = (
                                depth + 1
                            )
        return found

    def _entries(self, directory: str) -> list[dict[str, Any]]:
        try:
            entries: list[dict[str, Any]] = self.ls(directory, detail=True)
        except OSError:
            return []
        return entries

    def rm(
        self,
        path: str | list[str],
        recursive: bool = False,
        maxdepth: int | None = None,
    ) -> None:
        """Remove files, and with ``recursive`` directories, as ``LocalFileSystem.rm``
        decides; the directories go through the engine's parallel removal
        (:func:`rcp_core.tools.remove.rmtree.remove`: symlinks never followed, other
        filesystems mounted inside kept, ``/`` and mount points refused).

        :raises ValueError: a directory without ``recursive``, or the working
            directory.
        :raises CopyFailedError: something in a directory could not be removed.
        """
        trees: list[str] = []
        for item in path if isinstance(path, list) else [path]:
            name = self._strip_protocol(item)
            if self.isdir(name) and not self.islink(name):
                if not recursive:
                    raise ValueError("Cannot delete directory, set recursive=True")
                if os.path.abspath(name) == os.getcwd():
                    raise ValueError("Cannot delete current working directory")
                trees.append(name)
            else:
                os.remove(name)
        if trees:
            remove(trees, RemoveSettings(max_workers=self.settings.max_workers))

    def _plan(self, transfer: Transfer) -> Plan | None:
        """fsspec's plan (:func:`rcp_provider.fsspec.plan.plan_transfer`; ``get``/``put``
        differ from ``copy`` only in which side is local, and both sides are local here).
        When fsspec would list one directory only to copy it whole to a new place,
        the listing is skipped (:meth:`_new_tree`) unless the transfer is counted (a
        callback's size)."""
        t = transfer
        if not t.counted and not t.options:
            tree = self._new_tree(t.source, t.destination, t.recursive, t.maxdepth)
            if tree is not None:
                return Plan([tree], True)
        return plan_transfer(
            self,
            self,
            t.source,
            t.destination,
            t.recursive,
            t.maxdepth,
            contained=t.contained,
            **t.options,
        )

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
        plan: Plan,
        *,
        ignore_missing: bool,
        callback: Callback = DEFAULT_CALLBACK,
    ) -> None:
        """Copy ``pairs`` in one engine run; see the module docstring for which
        directories go whole and how errors are reported.

        :raises IsADirectoryError: a file would replace a directory.
        :raises FileExistsError: a directory would replace a non-directory.
        """
        pairs = plan.pairs
        callback.set_size(len(pairs))
        tops = whole_roots(pairs) if plan.whole else None
        if tops is not None:
            merged = [top for top in tops if os.path.lexists(top[1])]
            _check_types(inside(pairs, merged))
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
