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
