"""``rcp`` with a URL operand (``memory://``, ``s3://bucket/key``, ``file:///path``):
a copy to or from an fsspec store through :mod:`rcp_provider.fsspec.storecopy`.

One source and one destination; a destination ending in ``/`` receives the source
under its name. What the generic backend does not do
(:func:`rcp_provider.fsspec.storecopy.unsupported`: mirroring, filters, dry runs, ...) is
refused up front with the flags named, nothing started. fsspec and the store's package
are imported only when an operand is a URL.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rcp_core import CopySettings, Summary, UsageError
from rcp_core.progress import Progress

if TYPE_CHECKING:
    from rcp_provider.fsspec.storecopy import Place

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def names_a_store(paths: Sequence[str]) -> bool:
    """Whether an operand is a URL."""
    return any(_URL.match(path) for path in paths)


def run(
    paths: Sequence[str],
    settings: CopySettings,
    renderer: Callable[[Progress], None] | None,
) -> Summary:
    """Copy ``paths[0]`` to ``paths[1]``; the summary.

    :raises UsageError: more than one source, an unsupported option, a URL fsspec
        cannot open (an unknown protocol, its package missing), or the operand rules.
    :raises CopyFailedError: some entries were not copied.
    """
    if len(paths) != 2:
        raise UsageError("a copy to or from a URL takes one source and a destination")
    from rcp_provider.fsspec.storecopy import copy_tree

    source, destination = paths
    return copy_tree(
        place(source),
        place(destination.rstrip("/") or destination),
        settings,
        into=destination.endswith("/"),
        on_progress=renderer,
    )


def place(operand: str) -> Place:
    """The place a URL (or path) names.

    :raises UsageError: fsspec does not know its protocol, or its package is missing.
    """
    from rcp_provider.fsspec.storecopy import Place

    try:
        return Place.of(operand)
    except ImportError as exc:
        raise UsageError(
            f"{operand}: its fsspec package is not installed ({exc})"
        ) from exc
    except ValueError as exc:
        raise UsageError(f"{operand}: {exc}") from exc
