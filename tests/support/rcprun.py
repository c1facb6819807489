"""Running ``rcp`` for the conformance suite: its own ``main``, in this process, or the
``rcp`` program.

:func:`rcp` calls :func:`rcp_provider.cli.rcp.main` -- what the ``rcp`` console script
runs -- with stdout and stderr captured, the fsspec configuration of the backends
involved applied only while it runs (``main`` itself leaves the ``rcp_core`` logger
as it found it). This is the front-end the suite drives: the same argument parsing,
refusals, exit statuses and output as the program, at a hundredth of its start-up,
and the only way to reach ``memory://`` (a store no other process sees).
:func:`start` runs the program itself, for what only a process shows (an interrupt).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.backends import Launch

RCP = str(Path(sys.executable).with_name("rcp"))


@dataclass(frozen=True, repr=False)
class Run:
    """What one ``rcp`` run showed: exit status, stdout, stderr, the JSON summary
    (``None`` when it wrote none)."""

    code: int
    out: str
    err: str
    summary: dict[str, Any] | None

    def counts(self, group: str) -> dict[str, int]:
        """``copied``, ``unchanged``, ``skipped``, ... of the summary."""
        assert self.summary is not None, (self.code, self.out, self.err)
        counts: dict[str, int] = self.summary[group]
        return counts

    @property
    def errors(self) -> int:
        """The summary's count of failed entries."""
        assert self.summary is not None, self
        errors: int = self.summary["errors"]
        return errors

    def __repr__(self) -> str:
        errors = (self.summary or {}).get("error_list")
        return (
            f"exit {self.code}\nstdout: {self.out}\nstderr: {self.err}"
            f"\nerrors: {errors}"
        )


def merged(launches: Sequence[Launch]) -> Launch:
    args: list[str] = []
    config: dict[str, Mapping[str, Any]] = {}
    environ: dict[str, str] = {}
    for launch in launches:
        if launch.args and launch.args[0] not in args:
            args.extend(launch.args)
        config.update(launch.fsspec)
        environ.update(launch.environ)
    return Launch(tuple(args), config, environ)


@contextlib.contextmanager
def _fsspec_config(config: Mapping[str, Mapping[str, Any]]) -> Iterator[None]:
    import fsspec.config

    saved = {key: fsspec.config.conf.get(key) for key in config}
    fsspec.config.conf.update({key: dict(value) for key, value in config.items()})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                fsspec.config.conf.pop(key, None)
            else:
                fsspec.config.conf[key] = value


NOTHING = Launch()


def rcp(args: Sequence[str], launch: Launch = NOTHING) -> Run:
    """``rcp ARGS`` in this process, reaching the backends as ``launch`` says; the
    summary is asked for with ``--summary-json``. An exception ``main`` lets out is
    what the program would show: its traceback on stderr, exit status 1."""
    from rcp_provider.cli.rcp import main

    with tempfile.TemporaryDirectory() as there:
        summary = os.path.join(there, "summary.json")
        argv = ["--summary-json", summary, *launch.args, *args]
        out, err = io.StringIO(), io.StringIO()
        with (
            _fsspec_config(launch.fsspec),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(argv)
            except Exception:  # noqa: BLE001 - what the program would show
                traceback.print_exc()
                code = 1  # Python's status for an uncaught exception
        data = (
            json.loads(Path(summary).read_text()) if os.path.exists(summary) else None
        )
    return Run(code, out.getvalue(), err.getvalue(), data)


def program(
    args: Sequence[str], environ: Mapping[str, str], timeout: float = 120
) -> Run:
    """The ``rcp`` program run to its end with ``args`` in the environment
    ``environ`` (a store's, say); the summary is asked for with ``--summary-json``.

    :raises subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory() as there:
        summary = os.path.join(there, "summary.json")
        done = subprocess.run(
            [RCP, "--summary-json", summary, *args],
            env=dict(environ),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        data = (
            json.loads(Path(summary).read_text()) if os.path.exists(summary) else None
        )
    return Run(done.returncode, done.stdout, done.stderr, data)


def start(args: Sequence[str], launch: Launch = NOTHING) -> subprocess.Popen[str]:
    """The ``rcp`` program with ``args``, started (stdout and stderr piped).

    SIGINT is set back to its default in the child: a suite launched in the background
    (``nohup``, ``&`` without job control) inherits it ignored, and Python installs its
    interrupt handler only where SIGINT was not ignored at start-up.
    """
    return subprocess.Popen(
        [RCP, *launch.args, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **launch.environ},
        preexec_fn=_interruptible,
    )


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
