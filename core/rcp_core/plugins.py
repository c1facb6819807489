"""Building the plugin manager a run uses, and the engine's view of it.

The manager is made per call and passed into the engine, never global. Order of
registration: the built-in plugin (``trylast``), site plugins from the ``rcp``
entry-point group (unless ``RCP_DISABLE_PLUGINS`` is set to a non-empty value), then
explicit ``plugins=[...]`` (tests, per-call overrides). Hooks are validated with
``check_pending()``, so a misspelled hook name fails at once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pluggy

from rcp_core import hookspecs
from rcp_core.defaults import BuiltinPlugin

PROJECT = "rcp"
BUILTIN = "rcp-builtin"
DISABLE_ENV = "RCP_DISABLE_PLUGINS"


def plugin_manager(
    plugins: Iterable[object] = (), *, entry_points: bool = True
) -> pluggy.PluginManager:
    """A manager with the built-in plugin, installed site plugins and ``plugins``."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(BuiltinPlugin(), name=BUILTIN)
    if entry_points and not os.environ.get(DISABLE_ENV):
        pm.load_setuptools_entrypoints(PROJECT)
        for name, plugin in pm.list_name_plugin():
            if isinstance(plugin, type):
                # Its hooks would fail on first call, in a worker; fail here instead.
                raise pluggy.PluginValidationError(
                    plugin,
                    f"entry point {name!r} names the class {plugin.__qualname__}: "
                    "point it at an instance or a module",
                )
    for plugin in plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


def site_implemented(hook: pluggy.HookCaller) -> bool:
    """Whether a plugin other than the built-in one implements ``hook``.

    The engine asks this once per run for each per-file hook, so that a hook nobody
    customised costs nothing per file.
    """
    return any(impl.plugin_name != BUILTIN for impl in hook.get_hookimpls())
