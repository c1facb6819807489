"""Every tool's every flag says what it does (``--help`` reads as a manual), and the
tools' registry (:mod:`rcp_provider.cli.tools`) names every console script."""

from __future__ import annotations

import argparse
from importlib.metadata import distribution

import pytest

from rcp_provider.cli.tools import PARSERS, parser

SCRIPTS = {
    ep.name
    for ep in distribution("airflow-provider-rcp").entry_points
    if ep.group == "console_scripts"
}


def test_every_console_script_is_in_the_registry() -> None:
    assert {command.split()[0] for command in PARSERS} == SCRIPTS


def _parsers(root: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``root`` and its subcommands' parsers."""
    found = [root]
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_every_flag_has_help_text(command: str) -> None:
    silent = [
        f"{each.prog} {'/'.join(action.option_strings)}"
        for each in _parsers(parser(command))
        for action in each._actions
        if action.option_strings
        and not (action.help or "").strip()
        and action.help != argparse.SUPPRESS
    ]
    assert silent == [], "flags without help text"


@pytest.mark.parametrize("command", sorted(set(PARSERS) - {"rcpd"}))
def test_every_command_shows_examples(command: str) -> None:
    """``--help`` ends with examples of the command itself (``rcpd`` alone is the
    role ``rcp`` starts over SSH: nobody types it)."""
    text = parser(command).format_help()
    examples = text.partition("\nexamples:\n")[2].splitlines()
    assert examples, f"{command}: no examples"
    assert any(line.startswith(f"  {command} ") for line in examples), examples
