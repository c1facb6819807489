"""What every command-line tool of the project shares: parsing errors, logging, and the
output options (progress on stderr, the summary as text and JSON)."""

from __future__ import annotations

import argparse
import contextlib
import enum
import functools
import json
import logging
import math
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, ParamSpec, TypeVar

from rcp_core.errors import CopyFailedError, RemoteError, UsageError
from rcp_core.run.progress import BarProgress, Progress, TextProgress
from rcp_core.run.runtime import STOP_SIGNALS
from rcp_core.run.summary import Summary
from rcp_provider.cli.launch import Interrupted

T = TypeVar("T")
P = ParamSpec("P")


DISTRIBUTION = "airflow-provider-rcp"
"""The distribution every tool ships in (its version is each tool's)."""


class _Version(argparse.Action):
    """``--version``: the tool's name and the installed distribution's version, read
    only when asked (the metadata lookup is not every start-up's)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help=kwargs.get("help"))

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import version

        print(f"{parser.prog} {version(DISTRIBUTION)}", flush=True)
        parser.exit()


class _ExamplesKept(argparse.HelpFormatter):
    """argparse's formatter, except that an epilog of examples is printed as
    written (its lines aligned by hand), not refilled."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES):
            return text
        return super()._fill_text(text, width, indent)


EXAMPLES = "examples:\n"
"""How the examples of a tool's ``--help`` begin."""


class OneLineErrorParser(argparse.ArgumentParser):
    """Reports bad arguments as a :class:`UsageError`, without the usage dump, and
    gives every tool ``--version``.

    Each tool's ``main`` prints every usage error the same way: ``prog: error: ...`` on
    one line of stderr, exit status 2.

    :param examples: ``(command line, what it does)`` pairs, shown at the end of
        ``--help`` (the epilog, unless one is given).
    """

    def __init__(
        self, *args: Any, examples: Sequence[tuple[str, str]] = (), **kwargs: Any
    ) -> None:
        if examples:
            width = max(len(line) for line, _ in examples) + 2
            kwargs.setdefault(
                "epilog",
                EXAMPLES
                + "".join(f"  {line:<{width}}# {what}\n" for line, what in examples),
            )
            kwargs.setdefault("formatter_class", _ExamplesKept)
        super().__init__(*args, **kwargs)
        self.add_argument(
            "--version",
            action=_Version,
            help="print the tool's version and exit",
        )

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def configure_logging(verbose: int, quiet: bool) -> None:
    """Logs go to stdout (progress owns stderr): errors and dry-run lines by default.

    For the run of a ``main`` wrapped by :func:`logging_restored`, which puts the
    logger back when it returns.
    """
    level = logging.DEBUG if verbose > 1 else logging.INFO
    if quiet:
        level = logging.CRITICAL
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("rcp_core")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    # Where a copy's connections go (listening ports): with -v only.
    network = logging.getLogger("rcp_core.network")
    network.setLevel(logging.NOTSET if verbose else max(level, logging.WARNING))


def logging_restored(main: Callable[P, int]) -> Callable[P, int]:
    """``main``, leaving the ``rcp_core`` logger as it found it when it returns or
    raises: what :func:`configure_logging` sets lasts one run.

    A process goes on after ``main`` when a test or a program calls it: the logger
    must not keep a handler on the ``sys.stdout`` of that run (closed by then, every
    later record, a service job's among them, was a "Logging error"), nor stop its
    records reaching the root logger.
    """

    @functools.wraps(main)
    def run(*args: P.args, **kwargs: P.kwargs) -> int:
        logger = logging.getLogger("rcp_core")
        network = logging.getLogger("rcp_core.network")
        handlers, level = list(logger.handlers), logger.level
        propagate, network_level = logger.propagate, network.level
        try:
            return main(*args, **kwargs)
        finally:
            logger.handlers[:] = handlers
            logger.setLevel(level)
            logger.propagate = propagate
            network.setLevel(network_level)

    return run


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def add_output_options(
    parser: argparse.ArgumentParser, *, progress: bool = True
) -> None:
    """``--progress[-type|-interval]`` (unless ``progress`` is false: a step that
    reports no progress), ``--summary[-json]``, ``-v`` and ``-q``."""
    out = parser.add_argument_group("output")
    if progress:
        out.add_argument(
            "--progress", action="store_true", help="show progress on stderr"
        )
        out.add_argument(
            "--progress-type",
            choices=["auto", "bar", "text"],
            default="auto",
            help="a bar redrawn in place, or text lines (default auto: a bar on a "
            "terminal, text otherwise)",
        )
        out.add_argument(
            "--progress-interval",
            type=positive_seconds,
            metavar="SECONDS",
            help="seconds between text updates (default 10)",
        )
    out.add_argument(
        "--summary", action="store_true", help="print a summary at the end"
    )
    out.add_argument("--summary-json", metavar="PATH", help="write the summary as JSON")
    out.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="print the summary and where connections go; -vv also debug lines",
    )
    out.add_argument("-q", "--quiet", action="store_true", help="no error lines")


def progress_renderer(args: argparse.Namespace) -> Callable[[Progress], None] | None:
    if not (args.progress or args.progress_interval) or args.dry_run:
        return None
    kind = args.progress_type
    if kind == "auto":
        kind = "bar" if sys.stderr.isatty() else "text"
    if kind == "bar":
        return BarProgress(sys.stderr)
    return TextProgress(sys.stderr, interval=args.progress_interval or 10.0)


def report(
    args: argparse.Namespace, summary: Summary, extra: dict[str, Any] | None = None
) -> None:
    """The summary as text (``--summary``) and JSON (``--summary-json``, with
    ``extra`` keys such as a remote copy's ``roles``)."""
    if args.summary or args.verbose:
        print(summary.render(), flush=True)
    if args.summary_json:
        out = {**summary.as_dict(), **(extra or {})}
        Path(args.summary_json).write_text(
            json.dumps(out, indent=2, sort_keys=True) + "\n"
        )


@contextlib.contextmanager
def signals_after() -> Iterator[None]:
    """The block (a finished run's last lines) runs to its end: a stop signal that
    arrives meanwhile is held, then raised as :class:`Interrupted` after it, so a
    summary is never cut in half. In the main thread (where handlers are set)."""
    held: list[int] = []
    previous = {
        signum: signal.signal(signum, lambda got, _: held.append(got))
        for signum in STOP_SIGNALS
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if held:
        raise Interrupted(held[0])


def interrupted(
    prog: str,
    args: argparse.Namespace | None,
    exc: KeyboardInterrupt,
    extra: dict[str, Any] | None = None,
) -> int:
    """A run a signal stopped: its partial summary reported (where known, as
    ``--summary`` and ``--summary-json`` ask), one line on stderr naming the
    signal; the exit status, ``128 + signum``."""
    stop = Interrupted.of(exc)
    if args is not None and stop.summary is not None:
        report(args, stop.summary, extra)
    print(f"{prog}: interrupted by {stop.name}", file=sys.stderr, flush=True)
    return stop.status


def in_worker(work: Callable[[threading.Event], T], name: str) -> T:
    """``work(cancel)`` in a worker thread, so that a stop signal reaches this (the
    main) thread: it sets ``cancel``, waits until the work has stopped (every entry
    in flight finished or left as it was; more signals meanwhile do not cut the
    wait short), and raises :class:`Interrupted` with what the work had done (its
    partial summary) where the work returned one. What the work raised otherwise is
    raised here.

    The wait is on an event the work sets as it ends, never ``Thread.join``:
    CPython 3.11's join, when Ctrl-C interrupts it, may mark the still running
    thread as ended (the tstate lock it finds held is the living thread's, which it
    then releases), after which every join returns at once and the process exited
    under the copy, its workers killed mid-file, their temporaries left behind.
    """
    cancel, ended = threading.Event(), threading.Event()
    outcome: list[T | BaseException] = []

    def run() -> None:
        try:
            outcome.append(work(cancel))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            outcome.append(exc)
        finally:
            ended.set()

    worker = threading.Thread(target=run, name=name)
    worker.start()
    try:
        while not ended.wait(0.2):
            pass
    except KeyboardInterrupt as exc:
        cancel.set()
        while True:
            try:
                ended.wait()
                break
            except KeyboardInterrupt:
                continue  # stopping already: the work's end is what is awaited
        done = outcome[0]
        if isinstance(done, CopyFailedError):
            raise Interrupted.of(exc, done.summary) from None
        raise Interrupted.of(exc, done if isinstance(done, Summary) else None) from None
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


class Exit(enum.IntEnum):
    """Every tool's exit statuses: the one table (the README's "Exit statuses"),
    kept stable. A signal that stops a run gives ``128 + signum`` instead
    (:class:`~rcp_provider.cli.launch.Interrupted`)."""

    OK = 0
    """Everything asked was done."""
    FAILED = 1
    """Some entries failed; the rest was done (the partial summary is reported)."""
    USAGE = 2
    """Bad operands or flags, or an option the storage cannot honour: nothing was
    touched."""
    DIFFERENT = 3
    """A verification (``rcp --verify``, ``rcmp``) found differences."""
    VANISHED = 4
    """The only errors were source entries that vanished during the run (removed
    after they were listed); the rest was done."""
    REMOTE = 5
    """A host, daemon or service could not be reached, or failed (a connection
    lost, a session not started, a service's refusal that is not about a path)."""


def failed(summary: Summary) -> Exit:
    """The status of a run that ended with errors: :attr:`Exit.VANISHED` when
    every one was a vanished source, else :attr:`Exit.FAILED`."""
    errors = summary["errors"]
    return (
        Exit.VANISHED
        if errors and errors == summary["errors.vanished"]
        else Exit.FAILED
    )


def walk_options(args: argparse.Namespace) -> dict[str, Any]:
    """The settings every in-place tree walk takes (``rrm``'s, ``rchm``'s:
    :class:`rcp_core.tools.remove.treewalk.WalkSettings`) from their flags."""
    return {
        "includes": tuple(args.include),
        "excludes": tuple(args.exclude),
        "dry_run": args.dry_run,
        "fail_early": args.fail_early,
        "cross_devices": args.cross_devices,
        "max_workers": args.max_workers,
    }


def usage_error(prog: str, exc: UsageError) -> int:
    """Bad input: one line on stderr, :attr:`Exit.USAGE`."""
    print(f"{prog}: error: {exc}", file=sys.stderr)
    return Exit.USAGE


def remote_failure(prog: str, exc: object) -> int:
    """A host, daemon or service failed: one line on stderr, :attr:`Exit.REMOTE`."""
    print(f"{prog}: {exc}", file=sys.stderr, flush=True)
    return Exit.REMOTE


def run_and_report(
    prog: str, args: argparse.Namespace, work: Callable[[threading.Event], Summary]
) -> int:
    """Run ``work`` (:func:`in_worker`), report its summary (``--summary``,
    ``--summary-json``); the exit status (:class:`Exit`; a failed run's partial
    summary is reported; 128 + the signal that stopped it: :func:`interrupted`)."""
    try:
        summary = in_worker(work, f"{prog}-main")
    except UsageError as exc:
        return usage_error(prog, exc)
    except CopyFailedError as exc:
        report(args, exc.summary)
        print(f"{prog}: {exc}", file=sys.stderr)
        return failed(exc.summary)
    except RemoteError as exc:
        return remote_failure(prog, exc)
    except KeyboardInterrupt as exc:
        return interrupted(prog, args, exc)
    with signals_after():
        report(args, summary)
    return Exit.OK
