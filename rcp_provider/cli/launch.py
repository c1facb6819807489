"""The installed commands' entry points (``[project.scripts]``): each imports its tool
with the cyclic garbage collector paused, then runs it.

A command's start-up is mostly imports, which allocate enough to run the collector
some thirty times (6 ms of a one-file copy's 75 ms, all of it scanning objects that
live as long as the process: modules, classes, functions). So the collector is paused
while the tool is imported, and what the imports made is frozen out of its reach
(:func:`gc.freeze`): neither those collections nor every later one scan it, which
also shortens the collections of a long run.

Invariants: the collector is running again (if it was) before the tool's ``main``
starts; only objects that exist when the imports end are frozen, and they are never
collected (the imports' garbage cycles, a few, stay for the process's life).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; then freeze every object that
    exists and let the collector run again, if it ran before."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if running:
            gc.enable()


def _run(module: str) -> int:
    """Import ``module`` with the collector paused, then return its ``main()``."""
    with collector_paused():
        main = importlib.import_module(module).main
    status: int = main()
    return status


def rcp() -> int:
    return _run("rcp_provider.cli.rcp")


def rcpd() -> int:
    return _run("rcp_provider.cli.rcpd")


def rrm() -> int:
    return _run("rcp_provider.cli.rrm")


def rcmp() -> int:
    return _run("rcp_provider.cli.rcmp")


def rlink() -> int:
    return _run("rcp_provider.cli.rlink")


def rcp_filegen() -> int:
    return _run("rcp_provider.cli.filegen")
