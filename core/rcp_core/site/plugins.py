"""Building the plugin manager a run uses, and the engine's view of it.

The manager is made per call and passed into the engine, never global. Order of
registration: the built-in plugin (``trylast``), site plugins from the ``rcp``
entry-point group (unless ``RCP_DISABLE_PLUGINS`` is set to a non-empty value), with
``backends`` the backend plugins of the ``rcp.backends`` group (the fsspec backend,
a site's own storage: what ``rcp_backend_for`` asks; never skipped by
``RCP_DISABLE_PLUGINS``, which rules out tuning, not the storages ``rcp`` can reach),
then explicit ``plugins=[...]`` (tests, per-call overrides). Hooks are validated
with ``check_pending()``, so a misspelled hook name fails at once.

Backend plugins have a group of their own so that only a copy with a URL store
operand loads them: the provider declares one, and loading any group costs the
lookup below.

Finding entry points through :mod:`importlib.metadata` costs a command-line run about
30 ms of imports alone, so :func:`may_declare` first reads the installed
distributions' ``entry_points.txt`` for the group's section and skips that machinery
where no distribution declares one (the usual case).
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from collections.abc import Iterable

import pluggy

from rcp_core.site import hookspecs
from rcp_core.site.builtin import BuiltinPlugin

PROJECT = "rcp"
BACKENDS = "rcp.backends"
BUILTIN = "rcp-builtin"
DISABLE_ENV = "RCP_DISABLE_PLUGINS"


def plugin_manager(
    plugins: Iterable[object] = (), *, entry_points: bool = True, backends: bool = False
) -> pluggy.PluginManager:
    """A manager with the built-in plugin, installed site plugins (with
    ``backends``, the installed backend plugins too) and ``plugins``."""
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(BuiltinPlugin(), name=BUILTIN)
    groups = [
        group
        for group, wanted in (
            (PROJECT, not os.environ.get(DISABLE_ENV)),
            (BACKENDS, backends),
        )
        if entry_points and wanted and may_declare(group)
    ]
    for group in groups:
        pm.load_setuptools_entrypoints(group)
    if groups:
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


def may_declare(group: str) -> bool:
    """Whether a distribution on ``sys.path`` may declare entry points in ``group``.

    Conservative: ``False`` only when every place :mod:`importlib.metadata` would look
    was read and none has a ``[group]`` section; a zip on ``sys.path``, an unreadable
    ``entry_points.txt`` or a meta-path finder of its own distributions answer
    ``True``, and the full lookup decides.
    """
    header = f"[{group}]"
    for finder in sys.meta_path:
        if hasattr(finder, "find_distributions") and not _reads_sys_path(finder):
            return True
    for entry in sys.path:
        try:
            infos = _metadata_dirs(entry or ".")
        except NotADirectoryError:
            return True  # a zip file: read by zipimport, not here
        except OSError:
            continue  # missing or unreadable: importlib.metadata skips it too
        for info in infos:
            try:
                with open(os.path.join(info, "entry_points.txt"), "rb") as file:
                    text = file.read().decode("utf-8", "replace")
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError:
                return True
            if any(line.strip() == header for line in text.splitlines()):
                return True
    return False


def _reads_sys_path(finder: object) -> bool:
    """Finders whose distributions are the metadata directories on ``sys.path`` read
    here: the standard ``PathFinder``, and the ``importlib_metadata`` backport's
    ``MetadataPathFinder`` (which Airflow's dependencies install)."""
    kind = finder if isinstance(finder, type) else type(finder)
    return finder is importlib.machinery.PathFinder or (
        kind.__module__,
        kind.__qualname__,
    ) == ("importlib_metadata", "MetadataPathFinder")


def _metadata_dirs(path: str) -> list[str]:
    """The metadata directories :mod:`importlib.metadata` finds in one ``sys.path``
    entry: ``*.dist-info`` and ``*.egg-info``, and an egg's ``EGG-INFO``."""
    is_egg = os.path.basename(path).lower().endswith(".egg")
    with os.scandir(path) as children:
        return [
            child.path
            for child in children
            if child.name.lower().endswith((".dist-info", ".egg-info"))
            or (is_egg and child.name.lower() == "egg-info")
        ]
