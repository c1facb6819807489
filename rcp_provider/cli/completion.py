"""Shell completion for every tool, made from their parsers (:mod:`rcp_provider.cli.tools`),
which the copy flags are made from the one table of options (``rcp_core.schema``): a
flag added there is completed everywhere, with nothing to keep in step by hand.

``python -m rcp_provider.cli.completion bash`` (or ``zsh``) prints the script; the
README says where to put it. What is completed: a command's flags, a subcommand
(``rcpd serve``, ``rcp-shard plan|copy|finalize``), a flag's choices
(``--progress-type bar``), and files for everything else.

Invariant: the scripts hold only names from the parsers, each quoted for the shell;
nothing a user typed is ever evaluated by them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from rcp_provider.cli.tools import PARSERS, parser

SHELLS = ("bash", "zsh")


@dataclass(frozen=True, slots=True)
class Flag:
    """One flag of a command: its spellings, whether it takes a value, its choices."""

    names: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...]
    help: str


@dataclass(frozen=True, slots=True)
class Command:
    """A command (``rcp``, ``rcpd serve``, ``rcp-shard copy``) and its flags."""

    words: tuple[str, ...]
    flags: tuple[Flag, ...]
    subcommands: tuple[str, ...]


def commands() -> list[Command]:
    """Every command and subcommand of the tools, as their parsers declare them."""
    found: list[Command] = []
    for name in sorted(PARSERS):
        found += _walk(tuple(name.split()), parser(name))
    # A registry entry of two words (``rcpd serve``) is its first word's subcommand.
    for at, command in enumerate(found):
        subs = [
            other.words[-1]
            for other in found
            if len(other.words) == 2
            and other.words[0] == command.words[0]
            and len(command.words) == 1
            and other.words[-1] not in command.subcommands
        ]
        if subs:
            found[at] = Command(
                command.words, command.flags, (*command.subcommands, *subs)
            )
    return found


def _walk(words: tuple[str, ...], built: argparse.ArgumentParser) -> list[Command]:
    flags, subs, below = [], [], []
    for action in built._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, sub_parser in action.choices.items():
                subs.append(sub)
                below += _walk((*words, sub), sub_parser)
        elif action.option_strings:
            flags.append(
                Flag(
                    tuple(action.option_strings),
                    action.nargs != 0,
                    tuple(str(c) for c in action.choices or ()),
                    (action.help or "").replace("%%", "%"),
                )
            )
    return [Command(words, tuple(flags), tuple(subs)), *below]


def bash() -> str:
    """The bash script: one function, ``complete -F`` for every tool."""
    table = commands()
    cases = []
    for command in table:
        words = " ".join(command.words)
        offered = [n for flag in command.flags for n in flag.names]
        offered += list(command.subcommands)
        valued = [n for flag in command.flags if flag.takes_value for n in flag.names]
        choices = [
            f"            {shlex.quote(name)}) "
            f"COMPREPLY=($(compgen -W {shlex.quote(' '.join(flag.choices))} "
            '-- "$cur")); return;;'
            for flag in command.flags
            if flag.choices
            for name in flag.names
        ]
        cases.append(
            f"        {shlex.quote(words)})\n"
            f"            words={shlex.quote(' '.join(offered))}\n"
            f"            subs={shlex.quote(' '.join(command.subcommands))}\n"
            f"            valued={shlex.quote(' '.join(valued))}\n"
            "            case $prev in\n"
            + "".join(line + "\n" for line in choices)
            + "            esac;;\n"
        )
    tools = sorted({command.words[0] for command in table})
    subs = {" ".join(c.words): " ".join(c.subcommands) for c in table if c.subcommands}
    sub_lines = "".join(
        f"        {shlex.quote(name)}) subs={shlex.quote(words)};;\n"
        for name, words in subs.items()
    )
    return (
        "# bash completion for the rcp tools (python -m rcp_provider.cli.completion"
        " bash)\n"
        "_rcp_tools() {\n"
        "    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
        "    local command=${COMP_WORDS[0]##*/} i word subs words valued\n"
        "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
        "        word=${COMP_WORDS[i]}\n"
        "        case $command in\n" + sub_lines + "        *) subs=;;\n"
        "        esac\n"
        '        if [[ " $subs " == *" $word "* ]]; then command="$command $word"; fi\n'
        "    done\n"
        "    case $command in\n" + "".join(cases) + "    esac\n"
        '    if [[ " $valued " == *" $prev "* ]]; then\n'
        '        COMPREPLY=($(compgen -f -- "$cur")); return\n'
        "    fi\n"
        "    if [[ $cur == -* || -n $subs ]]; then\n"
        '        COMPREPLY=($(compgen -W "$words" -- "$cur")); return\n'
        "    fi\n"
        '    COMPREPLY=($(compgen -f -- "$cur"))\n'
        "}\n"
        f"complete -o filenames -F _rcp_tools {' '.join(tools)}\n"
    )


def zsh() -> str:
    """The zsh script: ``#compdef`` for every tool, ``_arguments`` per command."""
    table = commands()
    tools = sorted({command.words[0] for command in table})
    functions = []
    for command in table:
        specs = []
        for flag in command.flags:
            text = flag.help.replace("[", "(").replace("]", ")")
            action = (
                f":value:({' '.join(flag.choices)})"
                if flag.choices
                else ":value:_files"
                if flag.takes_value
                else ""
            )
            # Several spellings: zsh's brace expansion, outside the quotes.
            names = flag.names
            spelled = f"{{{','.join(names)}}}" if len(names) > 1 else ""
            single = "" if spelled else names[0]
            specs.append(spelled + shlex.quote(f"{single}[{text}]{action}"))
        if command.subcommands:
            specs.append(shlex.quote(f"1:command:({' '.join(command.subcommands)})"))
            specs.append(shlex.quote("*::argument:->sub"))
        else:
            specs.append(shlex.quote("*:file:_files"))
        name = "_" + "_".join(w.replace("-", "_") for w in command.words)
        body = f"  _arguments -s {' '.join(specs)}"
        if command.subcommands:
            sub_name = "_" + "_".join(w.replace("-", "_") for w in command.words)
            body = (
                "  local state\n"
                f"  _arguments -s {' '.join(specs)}\n"
                "  if [[ $state == sub ]]; then\n"
                f"    {sub_name}_${{words[1]//-/_}}\n"
                "  fi"
            )
        functions.append(f"{name}() {{\n{body}\n}}\n")
    dispatch = "".join(f"  {tool}) _{tool.replace('-', '_')};;\n" for tool in tools)
    return (
        f"#compdef {' '.join(tools)}\n"
        "# zsh completion for the rcp tools (python -m rcp_provider.cli.completion"
        " zsh)\n"
        + "".join(functions)
        + "_rcp_tools() {\n  case $service in\n"
        + dispatch
        + "  esac\n}\n"
        + '_rcp_tools "$@"\n'
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in SHELLS:
        print(
            f"usage: python -m rcp_provider.cli.completion {{{','.join(SHELLS)}}}",
            file=sys.stderr,
        )
        return 2
    print(bash() if args[0] == "bash" else zsh(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
