"""rcp_core: a fast, safe parallel copy engine for POSIX trees.

Data flows one way: operands -> plan -> execute -> summary. The engine never imports
Airflow or fsspec; those layers live in ``rcp_provider`` and drive this package.

The names below are imported when first used (PEP 562), so a tool that needs one
module (``rrm`` its remover, ``rcmp`` its comparer, every command ``rcp_core.errors``)
does not pay at start-up for the copy engine it never runs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rcp_core.engine import copy
    from rcp_core.errors import (
        CopyFailedError,
        EntryError,
        FatalError,
        RcpError,
        UsageError,
    )
    from rcp_core.hookspecs import hookimpl
    from rcp_core.plugins import plugin_manager
    from rcp_core.runtime import Kind
    from rcp_core.settings import (
        CompareAttr,
        CopySettings,
        DryRun,
        ExistingPolicy,
        Preserve,
    )
    from rcp_core.summary import Summary

_HOMES = {
    "CompareAttr": "rcp_core.settings",
    "CopyFailedError": "rcp_core.errors",
    "CopySettings": "rcp_core.settings",
    "DryRun": "rcp_core.settings",
    "EntryError": "rcp_core.errors",
    "ExistingPolicy": "rcp_core.settings",
    "FatalError": "rcp_core.errors",
    "Kind": "rcp_core.runtime",
    "Preserve": "rcp_core.settings",
    "RcpError": "rcp_core.errors",
    "Summary": "rcp_core.summary",
    "UsageError": "rcp_core.errors",
    "copy": "rcp_core.engine",
    "hookimpl": "rcp_core.hookspecs",
    "plugin_manager": "rcp_core.plugins",
}
"""Each public name and the module that defines it."""

__all__ = [
    "CompareAttr",
    "CopyFailedError",
    "CopySettings",
    "DryRun",
    "EntryError",
    "ExistingPolicy",
    "FatalError",
    "Kind",
    "Preserve",
    "RcpError",
    "Summary",
    "UsageError",
    "copy",
    "hookimpl",
    "plugin_manager",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rcp_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
