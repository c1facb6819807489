"""``rcp`` with a URL store operand (``memory://``, ``s3://bucket/key``, any fsspec
store but this host's files and ``rcpd serve`` services, a site's own backend): a
copy through the generic engine, :mod:`rcp_core.engine.portcopy`.

Each operand is a backend port (:func:`port`, which ``rcmp`` and ``rcp --verify``
compare through too): a local path this host's
:class:`~rcp_core.engine.posixport.PosixPort`, a service its
:class:`~rcp_provider.fsspec.serviceport.ServicePlace`, and a URL store whatever
backend plugin answers ``rcp_backend_for`` for it (a site's, else fsspec's:
:mod:`rcp_provider.fsspec.plugin`), asked once per operand before anything is
written.

One source and one destination (several sources are refused when the operands are
routed: :func:`rcp_core.backends.capabilities.refuse_route`); a destination ending
in ``/`` receives the source under its name. What the store engine or the pair
cannot do is refused up front with the flags named
(:mod:`rcp_core.backends.capabilities`), nothing started. The copy runs in a worker
thread, so that Ctrl-C cancels it (files in flight are dropped, never published).
fsspec and the store's package are imported only for a URL.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rcp_core import CopySettings, Summary, UsageError
from rcp_core.backends.operands import split_url
from rcp_core.backends.routing import Operand, Route, Storage
from rcp_core.run.progress import Progress
from rcp_core.site.plugins import plugin_manager
from rcp_provider.cli.common import in_worker

if TYPE_CHECKING:
    import pluggy

    from rcp_core.backends.port import Port


def run(
    route: Route,
    settings: CopySettings,
    renderer: Callable[[Progress], None] | None,
) -> Summary:
    """Copy the route's one source (``route`` passed
    :func:`~rcp_core.backends.capabilities.refuse_route`) to its destination; the
    summary.

    :raises UsageError: an unsupported option, a URL no backend serves or its
        backend cannot open, or the operand rules.
    :raises CopyFailedError: some entries were not copied.
    """
    from rcp_core.engine.portcopy import copy_tree

    hook = plugin_manager(backends=True).hook
    (source,) = route.sources
    source_port, destination_port = port(source, hook), port(route.destination, hook)
    return in_worker(
        lambda cancel: copy_tree(
            source_port,
            destination_port,
            settings,
            into=route.destination.text.endswith("/"),
            on_progress=renderer,
            cancel=cancel,
        ),
        "rcp-store",
    )


def port(operand: Operand, hook: pluggy.HookRelay | None = None) -> Port:
    """The backend port of one operand (not ``host:/path``), its trailing ``/``
    aside; ``hook``: a manager's with the backend plugins (made here for a URL store
    when not given).

    :raises UsageError: no backend plugin serves a URL store's scheme, or the one
        that does cannot open it.
    """
    if operand.storage is Storage.LOCAL:
        from rcp_core.engine.posixport import PosixPort

        return PosixPort(os.path.abspath(operand.path))
    scheme, rest = split_url(operand.text) or ("", "")  # not local: a URL
    url = f"{scheme}://{rest.rstrip('/')}"  # ``memory://`` stays one
    if operand.storage is Storage.SERVICE:
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
