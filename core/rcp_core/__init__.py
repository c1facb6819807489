"""rcp_core: a fast, safe parallel copy engine for POSIX trees.

Data flows one way: operands -> plan -> execute -> summary. The engine never imports
Airflow or fsspec; those layers live in ``rcp_provider`` and drive this package.
"""

from __future__ import annotations

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
from rcp_core.settings import (
    CompareAttr,
    CopySettings,
    DryRun,
    ExistingPolicy,
    Preserve,
)
from rcp_core.summary import Summary

__all__ = [
    "CompareAttr",
    "CopyFailedError",
    "CopySettings",
    "DryRun",
    "EntryError",
    "ExistingPolicy",
    "FatalError",
    "Preserve",
    "RcpError",
    "Summary",
    "UsageError",
    "copy",
    "hookimpl",
    "plugin_manager",
]
