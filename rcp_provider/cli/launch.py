"""The installed commands' entry points (``[project.scripts]``): each imports its tool
with the cyclic garbage collector paused, then runs it.

A command's start-up is mostly imports, which allocate enough to run the collector
some thirty times (6 ms of a one-file copy's 75 ms, all of it scanning objects that
live as long as the process: modules, classes, functions). So the collector is paused
while the tool is imported, and what the imports made is frozen out of its reach
(:func:`gc.freeze`): neither those collections nor every later one scan it, which
also shortens the collections of a long run.

The launcher also sets how the process stops: SIGTERM and SIGHUP raise
:class:`Interrupted` in the main thread as SIGINT raises ``KeyboardInterrupt``
(:func:`stop_on_signals`), before the tool is imported, so a tool stops the same
way for a Ctrl-C, a ``kill``, a scheduler's end of job or a closed terminal, and a
signal during the imports, or one the tool did not handle, ends the process with one
line and ``128 + signum``; once the tool's ``main`` returned, they are ignored (a
finished run exits with its own status, never killed in its exit). A reader of its
output that goes away (``rcp ... | head``) ends it quietly too, with 141
(``128 + SIGPIPE``), as a shell's own pipelines do.

Invariants: the collector is running again (if it was) before the tool's ``main``
starts; only objects that exist when the imports end are frozen, and they are never
collected (the imports' garbage cycles, a few, stay for the process's life).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rcp_core.run.summary import Summary


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


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal: SIGINT (Ctrl-C), SIGTERM or SIGHUP.

    :param signum: the signal; the tool's exit status is ``128 + signum`` (130,
        143, 129), the shell's convention for a process a signal ended.
    :param summary: what the run had done when it stopped, where it is known.
    """

    def __init__(self, signum: int, summary: Summary | None = None) -> None:
        super().__init__(signum)
        self.signum = signum
        self.summary = summary

    @property
    def status(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @classmethod
    def of(cls, exc: KeyboardInterrupt, summary: Summary | None = None) -> Interrupted:
        """``exc`` as an :class:`Interrupted` (a plain ``KeyboardInterrupt`` is
        Python's SIGINT), with ``summary`` where it has none."""
        if isinstance(exc, Interrupted):
            return cls(exc.signum, exc.summary or summary)
        return cls(signal.SIGINT, summary)


def _raise_interrupted(signum: int, _: FrameType | None) -> None:
    raise Interrupted(signum)


def _stop_signals() -> tuple[int, ...]:
    """:data:`rcp_core.run.runtime.STOP_SIGNALS` (imported when first asked: with
    the tool's modules, while the collector is paused)."""
    from rcp_core.run.runtime import STOP_SIGNALS

    return STOP_SIGNALS


def stop_on_signals() -> None:
    """Make SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread, as
    SIGINT raises ``KeyboardInterrupt`` (:data:`rcp_core.run.runtime.STOP_SIGNALS`).
    A daemon with handlers of its own (``rcpd serve``) sets them after."""
    for signum in _stop_signals():
        if signum != signal.SIGINT:  # Python's own: KeyboardInterrupt
            signal.signal(signum, _raise_interrupted)


def _run(module: str) -> int:
    """Import ``module`` with the collector paused, then return its ``main()``;
    the stop signals set first (:func:`stop_on_signals`)."""
    try:
        with collector_paused():
            stop_on_signals()
            main = importlib.import_module(module).main
    except KeyboardInterrupt as exc:  # before the tool could run: nothing to report
        return _stopped(exc)
    try:
        status: int = main()
    except KeyboardInterrupt as exc:  # past the tool's own handling: its last lines
        return _stopped(exc)
    except BrokenPipeError:  # `rcp ... | head`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit's flush fails no more
        return 128 + signal.SIGPIPE
    finally:  # the run is over: a signal now must not kill the exit under it
        for signum in _stop_signals():
            signal.signal(signum, signal.SIG_IGN)
    return status


def _stopped(exc: KeyboardInterrupt) -> int:
    """A stop signal the tool did not handle (in the imports, or after its run):
    one line naming it; ``128 + signum``."""
    stop = Interrupted.of(exc)
    prog = os.path.basename(sys.argv[0])
    print(f"{prog}: interrupted by {stop.name}", file=sys.stderr, flush=True)
    return stop.status


def rcp() -> int:
    return _run("rcp_provider.cli.rcp")


def rcpd() -> int:
    return _run("rcp_provider.cli.rcpd")


def rrm() -> int:
    return _run("rcp_provider.cli.rrm")


def rchm() -> int:
    return _run("rcp_provider.cli.rchm")


def rcmp() -> int:
    return _run("rcp_provider.cli.rcmp")


def rlink() -> int:
    return _run("rcp_provider.cli.rlink")


def rcp_filegen() -> int:
    return _run("rcp_provider.cli.filegen")


def rcp_shard() -> int:
    return _run("rcp_provider.cli.shard")
