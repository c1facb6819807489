"""Manual pages for every tool, made from their parsers (:mod:`rcp_provider.cli.tools`),
as ``--help`` and shell completion are: name, synopsis, description, every flag by its
group, the examples, and the exit statuses' table (:class:`rcp_provider.cli.common.Exit`).

``python -m rcp_provider.cli.manpages DIR`` writes ``DIR/<command>.1`` for each
command (``rcpd serve``: ``rcpd-serve.1``); ``man -l DIR/rcp.1`` reads one, and a
directory on ``MANPATH`` (``/usr/local/share/man/man1``) makes ``man rcp`` find it.

Invariant: every text from a parser is escaped for roff (a backslash, a leading dot
or quote, a hyphen in a flag), so no help text can become a roff request.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

from rcp_provider.cli.common import DISTRIBUTION, EXAMPLES, Exit
from rcp_provider.cli.tools import PARSERS, parser

EXIT_MEANINGS = {
    Exit.OK: "everything asked was done",
    Exit.FAILED: "some entries failed; the rest was done",
    Exit.USAGE: "bad operands or flags: nothing was touched",
    Exit.DIFFERENT: "a verification found differences",
    Exit.VANISHED: "the only errors were sources that vanished during the run",
    Exit.REMOTE: "a host, daemon or service could not be reached, or failed",
}


def escape(text: str) -> str:
    """``text`` as roff prose: backslashes doubled as ``\\e``, every line safe to
    begin with a dot or a quote."""
    lines = text.replace("\\", "\\e").split("\n")
    return "\n".join(f"\\&{line}" if line[:1] in (".", "'") else line for line in lines)


def _flag(text: str) -> str:
    """A flag in bold, its hyphens the minus sign ``man`` searches for."""
    return "\\fB" + escape(text).replace("-", "\\-") + "\\fR"


def page(command: str) -> str:
    """The manual page of ``command`` (a key of :data:`PARSERS`)."""
    built = parser(command)
    title = command.replace(" ", "-")
    usage = built.format_usage().removeprefix("usage: ").strip()
    epilog = built.epilog or ""
    prose, _, examples = epilog.partition(EXAMPLES)
    if epilog.startswith(EXAMPLES):
        prose, examples = "", epilog.removeprefix(EXAMPLES)
    out = [
        f'.TH {title.upper()} 1 "" "{DISTRIBUTION} {version(DISTRIBUTION)}" '
        '"User Commands"',
        ".SH NAME",
        f"{escape(title)} \\- {escape((built.description or '').split('. ')[0])}",
        ".SH SYNOPSIS",
        escape(" ".join(usage.split())),
        ".SH DESCRIPTION",
        escape(built.description or ""),
    ]
    if prose.strip():
        out += [".PP", ".nf", escape(prose.strip()), ".fi"]
    out.append(".SH OPTIONS")
    for group in built._action_groups:
        actions = [a for a in group._group_actions if a.option_strings]
        if not actions:
            continue
        out.append(f".SS {escape(str(group.title).capitalize())}")
        for action in actions:
            out += [".TP", _spelling(action), escape(action.help or "")]
    subs = [a for a in built._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subs:
        out.append(".SH COMMANDS")
        for name, sub in action.choices.items():
            out += [".TP", _flag(name), escape(sub.description or "")]
    if examples.strip():
        out += [".SH EXAMPLES", ".nf", escape(examples.rstrip()), ".fi"]
    out.append(".SH EXIT STATUS")
    for status, meaning in EXIT_MEANINGS.items():
        out += [".TP", f"\\fB{status.value}\\fR", meaning]
    out += [
        ".TP",
        "\\fB128 + N\\fR",
        "stopped by signal N: 130 SIGINT, 143 SIGTERM, 129 SIGHUP",
        ".SH SEE ALSO",
        ", ".join(
            f"\\fB{other.replace(' ', '-')}\\fR(1)"
            for other in sorted(PARSERS)
            if other != command
        ),
    ]
    return "\n".join(out) + "\n"


def _spelling(action: argparse.Action) -> str:
    """How a flag is written, with its value's name: ``--max-workers N``."""
    value = ""
    if action.nargs != 0:
        metavar = action.metavar or action.dest.upper()
        if action.choices and not action.metavar:
            metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
        value = f" \\fI{escape(str(metavar))}\\fR"
    return ", ".join(_flag(name) + value for name in action.option_strings)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m rcp_provider.cli.manpages DIR", file=sys.stderr)
        return Exit.USAGE
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    for command in sorted(PARSERS):
        (out / f"{command.replace(' ', '-')}.1").write_text(page(command))
    return Exit.OK


if __name__ == "__main__":
    sys.exit(main())
