"""The benchmark harness's tests see the same optional peers on every machine.

``rclone`` and ``b3sum`` are peers of the benchmark only: ``make bench`` installs them
(the Makefile's ``BENCH_PACKAGES``), ``make test`` does not, so CI lacks them and a
developer's machine may have them. The harness probes every peer when it builds its
tools (``rclone version``, ``b3sum --version``), and the command guard
(``tests/support/commands.py``) refuses to start either from a test: with them
installed, every test that builds the tools failed; without them, their command lines
were never run at all.

So every test here finds, first on its ``PATH``, a stand-in for each (:data:`PEERS`),
whatever the machine has: its version line, and for ``b3sum`` the one command line the
harness runs (``b3sum --num-threads 1 FILE...``), answered with a content hash per
file in b3sum's format (SHA-256: the harness only compares the two lists); anything
else fails loudly. A test of a peer that is not installed sets a ``PATH`` without it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

PEERS: Mapping[str, str] = {
    "rclone": "rclone v0.0.0-stand-in",
    "b3sum": "b3sum 0.0.0-stand-in",
}
"""Each stand-in's name and the first line of its version."""

_SCRIPTS = {
    "rclone": f"""#!/bin/sh
# rclone's stand-in in the harness tests (tests/benchmarks/conftest.py).
if [ "$#" -eq 1 ] && [ "$1" = version ]; then
  printf '%s\\n' '{PEERS["rclone"]}' '- os/version: stand-in'
  exit 0
fi
echo "rclone stand-in: only 'rclone version' is answered, not: $*" >&2
exit 2
""",
    "b3sum": f"""#!/bin/sh
# b3sum's stand-in in the harness tests (tests/benchmarks/conftest.py).
if [ "$#" -eq 1 ] && [ "$1" = --version ]; then
  echo '{PEERS["b3sum"]}'
  exit 0
fi
if [ "$1" != --num-threads ] || [ "$2" != 1 ]; then
  echo "b3sum stand-in: the harness hashes with --num-threads 1, not: $*" >&2
  exit 2
fi
shift 2
exec sha256sum -- "$@"
""",
}


@pytest.fixture(scope="session")
def _stand_in_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the stand-ins (a temporary one: the guard lets them run)."""
    bin_dir = tmp_path_factory.mktemp("optional-peers")
    for name, script in _SCRIPTS.items():
        path = bin_dir / name
        path.write_text(script)
        path.chmod(0o755)
    return bin_dir


@pytest.fixture(autouse=True)
def optional_peers(
    _stand_in_bin: Path, monkeypatch: pytest.MonkeyPatch
) -> Mapping[str, str]:
    """The stand-ins first on ``PATH`` for the test; their version lines."""
    path = os.environ.get("PATH", os.defpath)
    monkeypatch.setenv("PATH", f"{_stand_in_bin}{os.pathsep}{path}")
    return PEERS
