"""Operands as backend ports, for every front-end (the command line, the hook).

An operand names a kind of storage (:func:`rcp_core.backends.routing.operand`); its
port (:class:`rcp_core.backends.port.Port`) is

- a local path (also ``file:///path``): this host's
  :class:`~rcp_core.engine.posixport.PosixPort`;
- an ``rcpd serve`` service's ``rcp://host:port/path``: its
  :class:`~rcp_provider.fsspec.serviceport.ServicePlace` (no site's to serve it);
- any other URL: whatever backend plugin answers ``rcp_backend_for`` for it (a
  site's, else fsspec's: :mod:`rcp_provider.fsspec.plugin`), asked once per
  operand before anything is written;
- a ``host:/path``: none here (refused: its service's ``rcp://`` URL reaches it);
  the tools that start a session over SSH (``rcmp``, ``rrm``) reach it through
  :func:`rcp_provider.cli.remote.port`.

:func:`copy_store` copies a route of the generic engine through its operands' ports;
:func:`tree` is what a tool that takes either a path or a port is given (shard plans,
shards); :func:`remove` routes ``rrm``'s operands to the removal that reaches them:
this host's paths through descriptors, URLs (and ``host:/path``, when the caller
says how to reach one) through their ports. fsspec and a store's package are
imported only for a URL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from rcp_core.backends.operands import parse_operand, split_url
from rcp_core.backends.routing import Operand, Route, Storage, operand
from rcp_core.errors import UnsafeNameError, UsageError
from rcp_core.names import check_relative
from rcp_core.site.plugins import plugin_manager

if TYPE_CHECKING:
    import pluggy

    from rcp_core.backends.port import Port
    from rcp_core.run.monitor import Observer
    from rcp_core.run.summary import Summary
    from rcp_core.settings import CopySettings
    from rcp_core.tools.remove.removal import RemoveSettings


def port(given: Operand, hook: pluggy.HookRelay | None = None) -> Port:
    """The backend port of one operand, its trailing ``/`` aside; ``hook``: a
    manager's with the backend plugins (made here for a URL store when not given).

    :raises UsageError: a ``host:/path``, no backend plugin serves a URL store's
        scheme, or the one that does cannot open it.
    """
    if given.storage is Storage.LOCAL:
        from rcp_core.engine.posixport import PosixPort

        return PosixPort(os.path.abspath(given.path))
    if given.storage is Storage.HOST:
        raise UsageError(
            f"{given.text}: a host:/path is reached as its service (rcp://host/path)"
        )
    scheme, rest = split_url(given.text) or ("", "")  # neither local nor a host
    url = f"{scheme}://{rest.rstrip('/')}"  # ``memory://`` stays one
    if given.storage is Storage.SERVICE:
        from rcp_provider.fsspec.storetree import port_of_url

        return port_of_url(url)  # rcp's own filesystem, no site's to serve
    if hook is None:
        hook = plugin_manager(backends=True).hook
    found: Port | None = hook.rcp_backend_for(url=url)
    if found is None:
        raise UsageError(
            f"no backend for {scheme}://: install its fsspec package or a site plugin"
        )
    return found


def copy_store(
    route: Route,
    settings: CopySettings,
    *,
    on_progress: Observer | None = None,
    cancel: threading.Event | None = None,
    plugins: Iterable[object] = (),
) -> Summary:
    """Copy a route of the generic engine (a URL store on a side: ``route`` passed
    :func:`~rcp_core.backends.routing.refuse_route`) from its one source to its
    destination, each operand's port answered by ``plugins`` first (a run's own
    backends: an Airflow connection's stores), then the installed backends; the
    summary (:func:`rcp_core.engine.portcopy.copy_tree`: a destination ending in
    ``/`` receives the source under its name).

    :raises UsageError: no backend serves an operand, the settings the pair cannot
        honour, or the operand rules; nothing was written.
    :raises CopyFailedError: some entries were not copied, or ``cancel`` stopped it.
    """
    from rcp_core.engine.portcopy import copy_tree

    plugins = list(plugins)
    hook = plugin_manager(plugins, backends=True).hook
    (source,) = route.sources
    return copy_tree(
        port(source, hook),
        port(route.destination, hook),
        settings,
        into=route.destination.text.endswith("/"),
        on_progress=on_progress,
        cancel=cancel,
        plugins=plugins,
    )


def tree(text: str) -> str | Port:
    """A tree a tool is given: a local path as the path (the tool's fast path), any
    other operand as its port.

    :raises UsageError: as :func:`port`.
    """
    given = operand(text)
    if given.storage is Storage.LOCAL:
        return given.path
    return port(given)


def remove(
    paths: Sequence[str],
    settings: RemoveSettings,
    *,
    on_progress: Observer | None = None,
    cancel: threading.Event | None = None,
    host_port: Callable[[Operand], Port] | None = None,
    plugins: Iterable[object] = (),
) -> Summary:
    """Remove ``paths`` as ``rrm`` does: local paths through descriptors
    (:func:`rcp_core.tools.remove.rmtree.remove`), URLs and ``host:/path`` through
    their ports (:func:`rcp_core.tools.remove.portremove.remove_ports`); local paths
    in a run of their own. A URL or ``host:/path`` whose path has an empty, ``.`` or
    ``..`` component is refused: a store would take it literally, a filesystem would
    resolve it, neither what it looks like.

    :param host_port: the port of a ``host:/path`` operand (``rrm``'s: a session
        over SSH); without it one is refused.
    :param plugins: the run's own backends, asked first for a URL's port (an
        Airflow connection's stores).
    :raises UsageError: local paths beside other operands, a ``host:/path`` without
        ``host_port``, an unsafe path, a URL no backend serves, or what the removal
        refuses; nothing removed.
    :raises CopyFailedError: something selected stayed (the partial summary).
    """
    operands = [operand(path) for path in paths]
    kinds = {o.storage for o in operands}
    if kinds == {Storage.LOCAL}:
        from rcp_core.tools.remove.rmtree import remove as remove_paths

        local = [o.path for o in operands]
        return remove_paths(local, settings, on_progress=on_progress, cancel=cancel)
    if Storage.LOCAL in kinds:
        raise UsageError(
            "the operands are local paths and URLs or host:/paths: remove local "
            "paths in a run of their own"
        )
    for given in operands:
        _, rest = split_url(given.text) or ("", "")
        if given.storage is Storage.HOST:
            where = parse_operand(given.text)
            rest = where.path if where is not None else ""
        try:
            if rest.strip("/"):  # else the top of a storage: --force decides
                check_relative(rest.strip("/"))
        except UnsafeNameError as exc:
            raise UsageError(f"{given.text}: {exc.reason}") from exc
    from rcp_core.tools.remove.portremove import remove_ports

    manager = plugin_manager(plugins, backends=True)
    ports = [
        host_port(given)
        if given.storage is Storage.HOST and host_port is not None
        else port(given, manager.hook)
        for given in operands
    ]
    return remove_ports(
        ports, settings, plugins=manager, on_progress=on_progress, cancel=cancel
    )
