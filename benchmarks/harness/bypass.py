"""The engine with its hooks bypassed, for the "built-in hooks cost < 3%" target.

``python -m benchmarks.harness.bypass [--bypass] SRC DST`` copies like ``rcp SRC DST``
through :class:`rcp_core.engine.copyrun.Engine`. Without ``--bypass`` the engine gets the
real plugin manager (built-in plugin, installed site plugins, pluggy dispatch); with it, a
manager that loads nothing and whose hooks call the built-in implementations directly,
as if the engine had no plugin layer. Both run the same script, so the difference
between the two tools is the plugin layer alone.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable
from typing import Any

import pluggy

from rcp_core import CopySettings
from rcp_core.engine.copyrun import Engine
from rcp_core.paths import plan_jobs
from rcp_core.site.builtin import BuiltinPlugin
from rcp_core.site.plugins import PROJECT, plugin_manager

HOOKS = (
    "rcp_detect_storage",
    "rcp_choose_concurrency",
    "rcp_choose_method",
    "rcp_pre_create",
    "rcp_classify_error",
    "rcp_progress",
    "rcp_run_finished",
    "rcp_file_copied",
)


class _Direct:
    """A hook that calls one function with the arguments it declares, no dispatch.

    It reports no implementations, so the engine treats it as "not customised".
    """

    def __init__(self, fn: Callable[..., Any] | None) -> None:
        self.fn = fn
        self.names = set(inspect.signature(fn).parameters) if fn else set()

    def __call__(self, **kwargs: Any) -> Any:
        if self.fn is None:
            return None
        return self.fn(**{k: v for k, v in kwargs.items() if k in self.names})

    def get_hookimpls(self) -> list[Any]:
        return []


def bypassed() -> pluggy.PluginManager:
    """A manager with no plugins whose hooks are the built-in implementations."""
    pm = pluggy.PluginManager(PROJECT)  # no hookspecs: its relay is empty
    builtin = BuiltinPlugin()
    for name in HOOKS:
        setattr(pm.hook, name, _Direct(getattr(builtin, name, None)))
    return pm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.harness.bypass")
    parser.add_argument("--bypass", action="store_true", help="no plugin layer")
    parser.add_argument("src")
    parser.add_argument("dst")
    args = parser.parse_args(argv)
    settings = CopySettings()
    plugins = bypassed() if args.bypass else plugin_manager()
    jobs = plan_jobs([args.src, args.dst], settings)
    Engine(jobs, settings, plugins=plugins).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
