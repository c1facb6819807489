"""Malformed operands and options: each tool answers with one line and exit 2, and
touches nothing.

Every case runs the real command in a sandbox holding a source tree, an existing
destination and a file; afterwards the sandbox must be exactly as it was (names,
types, sizes, modes, mtimes, contents), stdout empty, and stderr one line naming the
tool.

Figure: malformed invocations tried / refused cleanly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.reliability import Figure, Sandbox, published, state

BIN = Path(sys.executable).parent
"""The console scripts, as installed: what a user runs."""
# SRC, DST, FILE and NEW stand for paths of the Sandbox.
CASES: list[tuple[str, list[str]]] = [
    ("rcp", []),
    ("rcp", ["SRC"]),
    ("rcp", ["--max-workers", "0", "SRC", "NEW"]),
    ("rcp", ["--max-workers", "many", "SRC", "NEW"]),
    ("rcp", ["--max-processes", "-1", "SRC", "NEW"]),
    ("rcp", ["--max-open-files", "0", "SRC", "NEW"]),
    ("rcp", ["--preserve", "colour", "SRC", "NEW"]),
    ("rcp", ["--overwrite-compare", "size,colour", "SRC", "NEW"]),
    ("rcp", ["--dry-run", "sometimes", "SRC", "NEW"]),
    ("rcp", ["--verify", "always", "SRC", "NEW"]),
    ("rcp", ["--ops-throttle", "-5", "SRC", "NEW"]),
    ("rcp", ["--retries", "-1", "SRC", "NEW"]),
    ("rcp", ["--retry-delay", "-1", "SRC", "NEW"]),
    ("rcp", ["--progress-interval", "0", "SRC", "NEW"]),
    ("rcp", ["--include", "SRC", "NEW"]),
    ("rcp", ["--no-such-flag", "SRC", "NEW"]),
    ("rcp", ["-u", "--ignore-existing", "SRC", "DST"]),
    ("rcp", ["SRC", "FILE", "NEW"]),  # several sources, no trailing slash
    ("rcp", ["--delete", "SRC", "FILE", "DST/"]),
    ("rcp", ["SRC", "SRC/inside"]),  # into itself
    ("rcp", ["SRC", "SRC"]),  # onto itself
    ("rcp", ["--max-connections", "0", "SRC", "host:/x"]),
    ("rcp", ["SRC", "host:99999:/x"]),
    ("rcp", ["--filter-file", "/nonexistent/rules", "SRC", "NEW"]),
    ("rcp", ["--delete", "memory://x/", "NEW"]),
    ("rrm", []),
    ("rrm", ["/"]),
    ("rrm", ["--modified-before", "when-it-rains", "DST"]),
    ("rrm", ["--created-before", "-3d", "DST"]),
    ("rrm", ["--max-workers", "0", "DST"]),
    ("rrm", ["--progress-type", "loud", "DST"]),
    ("rrm", ["DST", "memory://x"]),  # local paths and URLs in one run
    ("rrm", ["memory://x/../DST"]),
    ("rrm", ["--created-before", "1d", "memory://x"]),
    ("rrm", ["memory://"]),  # the top of a storage, without --force
    ("rcmp", ["SRC"]),
    ("rcmp", ["--attrs", "colour", "SRC", "DST"]),
    ("rcmp", ["--max-workers", "x", "SRC", "DST"]),
    ("rlink", ["SRC"]),
    ("rlink", ["SRC", "NEW", "--update"]),
    ("rlink", ["--update-compare", "colour", "SRC", "NEW"]),
    ("rlink", ["--dry-run", "maybe", "SRC", "NEW"]),
    ("rcpd", []),
    ("rcpd", ["--role", "thief"]),
    ("rcpd", ["serve"]),
    ("rcpd", ["serve", "--root", "SRC", "--max-jobs", "0", "--token-file", "FILE"]),
    ("rcpd", ["serve", "--session", "--root", "SRC", "--token-file", "FILE"]),
    ("rcp-filegen", []),
    ("rcp-filegen", ["NEW", "3,x", "10", "1M"]),
    ("rcp-filegen", ["--preset", "huge", "NEW"]),
]


@pytest.fixture(scope="module")
def figure(figures: list[Figure]) -> Figure:
    return published(figures, "hostile input", "malformed CLI operands and options")


@pytest.mark.parametrize(("tool", "args"), CASES, ids=lambda v: str(v))
def test_a_malformed_invocation_is_one_line_exit_2_and_touches_nothing(
    tmp_path: Path, tool: str, args: list[str], figure: Figure
) -> None:
    sandbox = Sandbox(tmp_path)
    before = state(tmp_path)
    figure.tried += 1
    done = subprocess.run(
        [str(BIN / tool), *map(sandbox.fill, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "HOME": str(tmp_path / "home")},
    )
    problems = []
    if done.returncode != 2:
        problems.append(f"exit {done.returncode}")
    lines = done.stderr.splitlines()
    if len(lines) != 1 or not lines[0].startswith(f"{tool.split()[0]}"):
        problems.append(f"stderr {done.stderr!r}")
    if done.stdout:
        problems.append(f"stdout {done.stdout[:200]!r}")
    if state(tmp_path) != before:
        problems.append("the sandbox changed")
    if problems:
        figure.failed(
            f"{tool} {args}: {'; '.join(problems)}", crash="Traceback" in done.stderr
        )
    else:
        figure.survived += 1
    assert not problems, problems
