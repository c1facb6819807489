"""``rcp`` with a URL store operand (``memory://``, ``s3://bucket/key``, any fsspec
store but this host's files and ``rcpd serve`` services, a site's own backend): a
copy through the generic engine, :mod:`rcp_core.engine.portcopy`.

Each operand is a backend port (:func:`rcp_provider.ports.port`, which ``rcmp`` and
``rcp --verify`` compare through too): a local path this host's
:class:`~rcp_core.engine.posixport.PosixPort`, a service its
:class:`~rcp_provider.fsspec.serviceport.ServicePlace`, and a URL store whatever
backend plugin answers ``rcp_backend_for`` for it (a site's, else fsspec's:
:mod:`rcp_provider.fsspec.plugin`), asked once per operand before anything is
written.

One source and one destination (several sources are refused when the operands are
routed: :func:`rcp_core.backends.routing.refuse_route`); a destination ending
in ``/`` receives the source under its name. What the store engine or the pair
cannot do is refused up front with the flags named
(:mod:`rcp_core.backends.capabilities`), nothing started. The copy runs in a worker
thread, so that Ctrl-C cancels it (files in flight are dropped, never published).
fsspec and the store's package are imported only for a URL.
"""

from __future__ import annotations

from collections.abc import Callable

from rcp_core import CopySettings, Summary
from rcp_core.backends.routing import Route
from rcp_core.run.progress import Progress
from rcp_provider.cli.common import in_worker


def run(
    route: Route,
    settings: CopySettings,
    renderer: Callable[[Progress], None] | None,
) -> Summary:
    """Copy the route's one source (``route`` passed
    :func:`~rcp_core.backends.routing.refuse_route`) to its destination; the
    summary.

    :raises UsageError: an unsupported option, a URL no backend serves or its
        backend cannot open, or the operand rules.
    :raises CopyFailedError: some entries were not copied.
    """
    from rcp_provider.ports import copy_store

    return in_worker(
        lambda cancel: copy_store(route, settings, on_progress=renderer, cancel=cancel),
        "rcp-store",
    )
