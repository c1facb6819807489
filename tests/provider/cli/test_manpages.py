"""Manual pages made from the tools' parsers (rcp_provider/cli/manpages.py): groff
renders each without a warning, and the page says what ``--help`` says: every flag,
the examples, and the exit statuses' table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rcp_provider.cli.common import Exit
from rcp_provider.cli.tools import PARSERS, parser


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("man1")
    subprocess.run(
        [sys.executable, "-m", "rcp_provider.cli.manpages", str(out)],
        check=True,
        timeout=120,
    )
    return out


def render(page: Path) -> tuple[str, str]:
    done = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", str(page)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"},
    )
    return done.stdout, done.stderr


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_a_page_per_command_renders_cleanly_and_says_it_all(
    pages: Path, command: str
) -> None:
    text, warnings = render(pages / f"{command.replace(' ', '-')}.1")
    assert warnings == ""
    # groff's bold is overstrike (c, backspace, c); its hyphens are typographic
    plain = re.sub(".\b", "", text).replace("\u2010", "-").replace("\u2212", "-")
    flags = [
        name for action in parser(command)._actions for name in action.option_strings
    ]
    assert flags
    missing = [flag for flag in flags if flag not in plain]
    assert missing == []
    assert "EXIT STATUS" in plain
    for status in Exit:
        assert re.search(rf"\n {{7}}{status.value} +\w", plain), status
    if command != "rcpd":  # the role rcp starts: no examples
        assert "EXAMPLES" in plain
