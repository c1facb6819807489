"""``rcp`` with a URL store operand (``memory://``, ``s3://bucket/key``, any fsspec
store but this host's files and ``rcpd serve`` services): a copy through the store
engine, :mod:`rcp_provider.fsspec.storecopy`.

One source and one destination (several sources are refused when the operands are
routed: :func:`rcp_core.backends.capabilities.refuse_route`); a destination ending
in ``/`` receives the source under its name. What the store engine or the pair
cannot do is refused up front with the flags named
(:mod:`rcp_core.backends.capabilities`), nothing started. The copy runs in a worker
thread, so that Ctrl-C cancels it (files in flight are dropped, never published).
fsspec and the store's package are imported only for a URL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rcp_core import CopySettings, Summary, UsageError
from rcp_core.backends.routing import Route
from rcp_core.run.progress import Progress
from rcp_provider.cli.common import in_worker

if TYPE_CHECKING:
    from rcp_provider.fsspec.storetree import Place


def run(
    route: Route,
    settings: CopySettings,
    renderer: Callable[[Progress], None] | None,
) -> Summary:
    """Copy the route's one source (``route`` passed
    :func:`~rcp_core.backends.capabilities.refuse_route`) to its destination; the
    summary.

    :raises UsageError: an unsupported option, a URL fsspec cannot open (an unknown
        protocol, its package missing), or the operand rules.
    :raises CopyFailedError: some entries were not copied.
    """
    from rcp_provider.fsspec.storecopy import copy_tree

    source, destination = route.paths
    return in_worker(
        lambda cancel: copy_tree(
            place(source),
            place(destination.rstrip("/") or destination),
            settings,
            into=destination.endswith("/"),
            on_progress=renderer,
            cancel=cancel,
        ),
        "rcp-store",
    )


def place(operand: str, **storage_options: Any) -> Place:
    """The place a URL (or path) names (with fsspec's ``storage_options``).

    :raises UsageError: fsspec does not know its protocol, or its package is missing.
    """
    from rcp_provider.fsspec.storetree import Place

    try:
        return Place.of(operand, **storage_options)
    except ImportError as exc:
        raise UsageError(
            f"{operand}: its fsspec package is not installed ({exc})"
        ) from exc
    except ValueError as exc:
        raise UsageError(f"{operand}: {exc}") from exc
