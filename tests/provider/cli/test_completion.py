"""Shell completion made from the tools' parsers (rcp_provider/cli/completion.py),
run in the real shells: bash completes flags, subcommands, a flag's choices and
files; zsh loads the script and defines a function for every command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rcp_provider.cli.completion import commands
from rcp_provider.cli.tools import PARSERS

SCRIPT = [sys.executable, "-m", "rcp_provider.cli.completion"]


def script(shell: str, tmp_path: Path) -> Path:
    out = tmp_path / f"completion.{shell}"
    done = subprocess.run(
        [*SCRIPT, shell], capture_output=True, text=True, timeout=60, check=True
    )
    out.write_text(done.stdout)
    return out


def complete(bash_script: Path, line: list[str], cwd: Path) -> list[str]:
    """What bash offers for the last word of ``line``."""
    words = " ".join(f"'{word}'" for word in line)
    program = (
        f"source {bash_script}; COMP_WORDS=({words}); "
        "COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _rcp_tools; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=cwd,
    )
    return sorted(line for line in done.stdout.splitlines() if line)


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        (
            ["rcp", "--progress"],
            ["--progress", "--progress-interval", "--progress-type"],
        ),
        (["rcp", "--progress-type", ""], ["auto", "bar", "text"]),
        (["rcp", "--verify", "c"], ["checksum"]),
        (["rcp-shard", "co"], ["copy"]),
        (["rcp-shard", "copy", "--mani"], ["--manifest"]),
        (["rcpd", "se"], ["serve"]),
        (["rcpd", "serve", "--ro"], ["--root"]),
        (["rchm", "--mo"], ["--mode"]),
        (["rrm", "--modified"], ["--modified-before"]),
        (["rcp", "sr"], ["src"]),  # a file
        (["rcp", "--summary-json", "sr"], ["src"]),  # a flag's value: a file
    ],
)
def test_bash_completes_what_the_parsers_declare(
    tmp_path: Path, line: list[str], offered: list[str]
) -> None:
    (tmp_path / "src").mkdir()
    assert complete(script("bash", tmp_path), line, tmp_path) == offered


def test_every_tool_and_subcommand_is_completed() -> None:
    words = {command.words for command in commands()}
    assert {tuple(name.split()) for name in PARSERS} <= words
    assert {("rcp-shard", sub) for sub in ("plan", "copy", "finalize")} <= words


def test_zsh_loads_the_script_with_a_function_per_command(tmp_path: Path) -> None:
    path = script("zsh", tmp_path)
    assert path.read_text().startswith("#compdef ")
    functions = sorted(
        "_" + "_".join(w.replace("-", "_") for w in command.words)
        for command in commands()
    )
    program = (
        f"autoload -U compinit && compinit -u -d {tmp_path / 'zcompdump'}; "
        f"source {path}; whence -w {' '.join(functions)}"
    )
    done = subprocess.run(
        ["zsh", "-f", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == [f"{f}: function" for f in functions]


def test_an_unknown_shell_is_a_usage_error() -> None:
    done = subprocess.run(
        [*SCRIPT, "fish"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert "bash,zsh" in done.stderr
