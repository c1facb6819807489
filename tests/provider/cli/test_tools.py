"""What every installed tool shares: ``--version`` names the tool and the
distribution's version, and exits 0 without doing anything else."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

DIST = distribution("airflow-provider-rcp")
TOOLS = sorted(ep.name for ep in DIST.entry_points if ep.group == "console_scripts")


def test_the_tools_are_the_projects_scripts() -> None:
    assert {"rcp", "rcpd", "rrm", "rcmp", "rlink", "rcp-filegen"} <= set(TOOLS)


@pytest.mark.parametrize("tool", TOOLS)
def test_version_names_the_tool_and_the_distributions_version(tool: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).with_name(tool)), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tool} {DIST.version}\n"
    assert done.stderr == ""


def test_a_reader_that_leaves_ends_a_tool_quietly(tmp_path: Path) -> None:
    """``rcp --summary ... | head -1``: the summary's later lines meet a closed
    pipe; the tool ends with 141 (128 + SIGPIPE) and no traceback."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x")
    rcp = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("rcp")),
            "--summary",
            str(src),
            str(tmp_path / "dst"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert rcp.stdout is not None
    rcp.stdout.close()  # the reader is gone before the summary
    _, err = rcp.communicate(timeout=60)
    assert rcp.returncode == 141
    assert b"Traceback" not in err, err
