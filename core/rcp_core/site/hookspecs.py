"""The hooks through which a site tunes the engine for its storage (pluggy project "rcp").

Every hook is called with keyword arguments. ``firstresult`` hooks stop at the first
implementation returning something other than ``None``; the built-in plugin
(:mod:`rcp_core.site.builtin`) is registered ``trylast``, so any site plugin answering first
wins and the built-in answer is the fallback.

Per-file hooks (:func:`rcp_choose_method`, :func:`rcp_pre_create`,
:func:`rcp_file_copied`) are called only when a plugin other than the built-in one
implements them, so they cost nothing otherwise.

:func:`rcp_backend_for` is asked only by a copy with a URL store operand, whose
manager loads the ``rcp.backends`` entry-point group too
(:func:`rcp_core.site.plugins.plugin_manager`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from rcp_core.backends.port import Port
    from rcp_core.run.progress import Progress
    from rcp_core.run.runtime import Kind
    from rcp_core.run.summary import Summary
    from rcp_core.run.tuning import Concurrency
    from rcp_core.site.storage import StorageInfo

hookspec = pluggy.HookspecMarker("rcp")
hookimpl = pluggy.HookimplMarker("rcp")
"""Decorate a plugin's hook implementations with this (``rcp_core.hookimpl``)."""


@hookspec(firstresult=True)
def rcp_backend_for(url: str) -> Port | None:
    """The backend port of the tree ``url`` names, if this plugin serves its scheme
    (or the mount it names); ``None`` otherwise.

    Called once per operand that routing classifies as a URL store
    (:attr:`rcp_core.backends.routing.Storage.STORE`: never a local path, a
    ``host:`` operand or an ``rcpd serve`` service), in the thread that starts the
    copy, before anything is written. firstresult: the first answer that is not
    ``None`` wins; the fsspec backend (``rcp_provider.fsspec.plugin``, every
    protocol fsspec knows) answers ``trylast``, so a site's plugin serving a scheme
    fsspec also knows is asked first.

    The port returned keeps every invariant of :mod:`rcp_core.backends.port` (one
    level listed at a time, names checked, nothing half-written under its name, no
    writing through a symlink, errors as :class:`OSError`); its root is what
    ``url`` names, which need not exist yet (a copy's destination). The copy reaches
    the storage through the port alone, so the engine's features (filters,
    ``--delete``, the existing-file policy, dry runs) work on it as on any other.

    A plugin does no I/O beyond what opening the storage needs (a client, a
    session): the operand rules, then the copy, do the rest.

    :param url: the operand as given, without the trailing ``/`` that asks for a
        copy into it.
    :raises UsageError: the URL is this plugin's but it cannot open it (a bad
        address, credentials missing).
    """


@hookspec(firstresult=True)
def rcp_detect_storage(path: str, fd: int) -> StorageInfo | None:
    """Describe the storage holding ``path``.

    Called once per job for its source and its destination, in the thread that starts
    the run, before any worker exists. firstresult.

    :param path: the source operand, or the destination (its parent directory when it
        does not exist yet), for messages and path-based tools.
    :param fd: an ``O_PATH`` descriptor of it: ``fstatfs`` works, reads do not.
    """


@hookspec(firstresult=True)
def rcp_choose_concurrency(
    source: StorageInfo, destination: StorageInfo, cpus: int
) -> Concurrency | None:
    """Choose the starting concurrency and its bounds for a source/destination pair.

    Called once per run, in the thread that starts it; the adaptive controller then
    moves within the returned bounds. With several sources, the most demanding pair
    (the largest ``initial``) is used. firstresult.

    :param cpus: CPUs this process may run on.
    """


@hookspec(firstresult=True)
def rcp_choose_method(
    path: str, size: int, source: StorageInfo, destination: StorageInfo
) -> str | None:
    """Choose where the data-path chain starts for one file.

    Return one of ``reflink``, ``copy_file_range``, ``sparse``, ``readwrite`` to skip
    the methods before it, or ``None`` for the full chain. Called in a worker thread,
    per file, only if a non-built-in plugin implements it. firstresult.

    :param path: the file, relative to the source root's parent.
    """


@hookspec(firstresult=True)
def rcp_pre_create(
    dir_fd: int, name: str, size: int, destination: StorageInfo
) -> bool | None:
    """Prepare a destination file before its data is written (e.g. Lustre striping).

    Return ``True`` if the hook created ``name`` itself (an empty regular file, e.g. with
    ``lfs setstripe``); the engine then opens it instead of creating it. Called in a
    worker thread, per new file, only if a non-built-in plugin implements it.
    firstresult.

    :param dir_fd: the destination directory.
    :param name: the name the file will have there.
    :param size: the source file's size.
    """


@hookspec(firstresult=True)
def rcp_classify_error(
    error: OSError, source: StorageInfo | None, destination: StorageInfo | None
) -> Kind | None:
    """Classify an error as transient (retried), permanent (this entry) or fatal (stop).

    Called in a worker thread, only when an operation failed. The built-in
    implementation uses the errno table in :mod:`rcp_core.errors`. firstresult.

    :param source: the storage of the job the error happened in (``None`` if the
        error is not tied to one job), so a site can say "EIO is transient on Lustre".
    :param destination: likewise.
    """


@hookspec
def rcp_file_copied(source: str, destination: str, size: int) -> None:
    """Observe one regular file whose data this run wrote (e.g. a per-file progress bar).

    Called in a worker thread, once per file, after its data, mode and times are in
    place (a replaced file after the rename). Not called for a file found up to date
    or kept by the existing-file policy, for a name made as a hard link to a file
    already copied, in a dry run, or for a failed attempt (a retry that succeeds
    calls it once). Not firstresult: every implementation is called. Implementations
    must be thread-safe (workers call them concurrently) and cheap (they hold up a
    worker each time). A plugin registered as an object keeps the run in one process
    (helper processes cannot load it); an installed plugin may be called in helper
    processes too, each in its own.

    :param source: the file's full source path (under the job's source operand).
    :param destination: the full path of its copy.
    :param size: the file's size in bytes, as the copy holds it.
    """


@hookspec
def rcp_progress(progress: Progress) -> None:
    """Observe progress; called from the progress ticker thread about once a second,
    and once at the end. Must return quickly."""


@hookspec
def rcp_run_finished(summary: Summary | None, error: BaseException | None) -> None:
    """Observe a finished run, in the thread that ran it.

    :param summary: the (partial, if ``error``) summary; ``None`` if the run crashed.
    :param error: the failure, if any (a :class:`~rcp_core.errors.CopyFailedError`,
        or an unexpected exception).
    """
