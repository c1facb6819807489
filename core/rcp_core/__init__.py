"""rcp_core: a fast, safe parallel copy engine for POSIX trees.

Data flows one way: operands -> plan -> execute -> summary. The engine never imports
Airflow or fsspec; those layers live in ``rcp_provider`` and drive this package.

The names below are imported when first used (PEP 562), so a tool that needs one
module (``rrm`` its remover, ``rcmp`` its comparer, every command ``rcp_core.errors``)
does not pay at start-up for the copy engine it never runs.

Modules and packages (each package's docstring lists its own):

============  ==========================================================================
``errors``    the one error tree (exceptions only)
``settings``  ``CopySettings``, what a copy run is asked to do: one frozen value
              validated when built
``schema``    the one table of copy options (name, type, default, help, front-ends) from
              which ``rcp``'s flags, the operators' keyword arguments, the fsspec
              storage options and the wire codec are made
``paths``     rcp operand rules: ``SRC... DST`` into copy jobs; every refusal a
              ``UsageError`` before anything is written
``names``     the one check of names from outside the process (store keys, wire,
              manifests)
``sizes``     byte counts as people write them (``50M``: 1024-based units)
``run``       the run runtime every tool and role runs under: errors, retries, stop,
              pool, adaptive concurrency, progress, summary
``site``      the site layer: pluggy hooks, the plugin manager, the built-in plugin,
              storage detection, the plugins' choice of what a run may use
``engine``    the local copy engine: the walk, one entry's copy, its data path and
              metadata, helper processes
``backends``  kinds of storage (local, ``host:``, ``rcpd serve``, URL stores), the
              engine each pair of them is copied by, what each storage keeps and each
              engine honours, the one refusal of what a pair cannot do, and the feature
              table derived from them (the README's)
``tools``     the other tools on the same runtime: verify (``rcmp``), remove (``rrm``),
              shards, file trees (``rcp-filegen``)
``remote``    copies between hosts: the wire, the two data roles, ``rcpd`` and
              ``rcpd serve`` (protocol in ``docs/remote_protocol.md``)
============  ==========================================================================
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rcp_core.engine.copyrun import copy
    from rcp_core.errors import (
        CopyFailedError,
        EntryError,
        FatalError,
        RcpError,
        UsageError,
    )
    from rcp_core.run.runtime import Kind
    from rcp_core.run.summary import Summary
    from rcp_core.settings import (
        CompareAttr,
        CopySettings,
        DryRun,
        ExistingPolicy,
        Preserve,
    )
    from rcp_core.site.hookspecs import hookimpl
    from rcp_core.site.plugins import plugin_manager

_HOMES = {
    "CompareAttr": "rcp_core.settings",
    "CopyFailedError": "rcp_core.errors",
    "CopySettings": "rcp_core.settings",
    "DryRun": "rcp_core.settings",
    "EntryError": "rcp_core.errors",
    "ExistingPolicy": "rcp_core.settings",
    "FatalError": "rcp_core.errors",
    "Kind": "rcp_core.run.runtime",
    "Preserve": "rcp_core.settings",
    "RcpError": "rcp_core.errors",
    "Summary": "rcp_core.run.summary",
    "UsageError": "rcp_core.errors",
    "copy": "rcp_core.engine.copyrun",
    "hookimpl": "rcp_core.site.hookspecs",
    "plugin_manager": "rcp_core.site.plugins",
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
