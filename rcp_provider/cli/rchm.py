"""The ``rchm`` command: change the modes, owners and groups of trees in parallel
(:mod:`rcp_core.tools.chmod.changetree`, on the walk of ``rrm``'s fast path), as the
Rust ``rchm`` does: ``--mode``, ``--owner`` and ``--group`` take a bare value or
``f:``/``d:``/``l:`` sections per type of entry (:mod:`rcp_core.tools.chmod.rules`),
modes are ``chmod``'s (:mod:`rcp_core.tools.chmod.modes`).

Local paths only (also ``file:///path``): a URL or a ``[user@]host:/path`` operand is
refused for now, as bad input. Symlinks are never followed: their own owner and group
change (``chown -h``), never their mode. A directory changes after its contents, so
``--mode 000`` still walks the whole tree. Only entries that differ from what is asked
are changed (counted ``changed``, the others ``unchanged``); ``--dry-run`` logs each
entry that would change, and changes nothing.

Exit status: 0 when every selected entry is as asked, 1 when an entry could not be
changed (the others were; a partial summary is still printed with ``--summary``), 2
for bad input (one line on stderr, nothing touched: an unknown user or group, a mode
that is not one, a missing path, a URL), 128 + the signal that stopped it (130 on
Ctrl-C). Logs, dry-run lines and the summary go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rcp_core.backends import routing
from rcp_core.errors import UsageError
from rcp_core.run.monitor import Observer
from rcp_core.run.progress import TextProgress
from rcp_core.tools.chmod.changetree import ChangeProgress, ChmodSettings, change
from rcp_core.tools.chmod.rules import Rules
from rcp_provider.cli.common import (
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    logging_restored,
    progress_renderer,
    run_and_report,
    usage_error,
    walk_options,
)

EPILOG = """\
As chmod -R and chown -hR, but in parallel: directories change after their
contents, symlinks are never followed (their own owner and group change, not
their mode), and only entries that differ are changed.

MODE is chmod's: octal (755, 0644; up to four digits keep a directory's set-ID
bits, as chmod does) or symbolic clauses joined by commas, [ugoa]*[-+=][rwxXst]*
(u+rwX,g-w,o=  a+r  +x  g=u): X is execute for directories and for entries
with an execute bit already; a clause without ugoa is a, whatever the umask.
USER and GROUP are names or numeric ids. Each of --mode, --owner and --group
takes one value for every type, or f: (files, and FIFOs, devices, sockets),
d: (directories) and l: (symlinks; not for --mode) sections, separated by
spaces, that override it for one type. A MODE that starts with - goes after
an equals sign: --mode=-w.

examples:
  rchm --mode g+rwX /data                      # the group may read, write, enter
  rchm --mode 'f:644 d:755' --owner www /srv   # files 644, directories 755
  rchm --group data --mode 'f:g+rw d:g+rwxs' --progress --summary /data
  rchm --mode go-rwx --dry-run ~/secrets       # list what would change
  rchm --owner 0 --include '*.conf' /etc/app   # only the .conf files
"""

CHANGES = (
    ("--mode", "MODE", "chmod's mode (755, u+rwX,g-w,o=), or per type: 'f:644 d:755'"),
    ("--owner", "USER", "the owner, a name or a uid, or per type: 'alice l:root'"),
    ("--group", "GROUP", "the group, a name or a gid, or per type: 'd:data'"),
)
FILTERS = (
    ("--include", "change only entries this matches (relative to PATH; repeatable)"),
    ("--exclude", "leave entries this matches as they are, and do not enter them"),
)
SWITCHES = (
    ("--dry-run", "list what would change; change nothing"),
    ("--fail-early", "stop at the first error"),
    (
        "--cross-devices",
        "also change filesystems mounted inside the trees (left alone by default)",
    ),
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rchm",
        description="Change the modes, owners and groups of trees in parallel.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="a local file or tree to change"
    )
    what = parser.add_argument_group("what changes (at least one)")
    for flag, metavar, meaning in CHANGES:
        what.add_argument(flag, metavar=metavar, help=meaning)
    select = parser.add_argument_group("which entries")
    for flag, meaning in FILTERS:
        select.add_argument(
            flag, action="append", default=[], metavar="GLOB", help=meaning
        )
    how = parser.add_argument_group("how")
    for flag, meaning in SWITCHES:
        how.add_argument(flag, action="store_true", help=meaning)
    how.add_argument(
        "--max-workers",
        type=int,
        metavar="N",
        help="directories worked on at once (default: adapts)",
    )
    add_output_options(parser)
    return parser


def _local(paths: Sequence[str]) -> list[str]:
    """The operands as local paths (a ``file://`` URL's path).

    :raises UsageError: a URL or a ``host:/path``: not supported yet.
    """
    operands = [routing.operand(path) for path in paths]
    for operand in operands:
        if operand.storage is not routing.Storage.LOCAL:
            raise UsageError(
                f"{operand.text}: rchm changes local paths only; URLs and "
                "host:/path operands are not supported yet"
            )
    return [operand.path for operand in operands]


def _renderer(args: argparse.Namespace) -> Observer | None:
    """The progress the options ask for; text in a change's words."""
    shown = progress_renderer(args)
    if isinstance(shown, TextProgress):
        return ChangeProgress(sys.stderr, shown.interval)
    return shown


@logging_restored
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        configure_logging(args.verbose, args.quiet)
        paths = _local(args.paths)
        settings = ChmodSettings(
            rules=Rules.parse(args.mode, args.owner, args.group), **walk_options(args)
        )
    except UsageError as exc:
        return usage_error("rchm", exc)
    renderer = _renderer(args)
    return run_and_report(
        "rchm",
        args,
        lambda cancel: change(paths, settings, on_progress=renderer, cancel=cancel),
    )


if __name__ == "__main__":
    sys.exit(main())
