"""The ``rlink`` command: snapshots that share unchanged files through hard links.

``rlink SRC DST`` makes DST a tree of hard links to SRC's files (directories and
symlinks are made anew, with SRC's metadata). ``rlink SRC DST --update NEWDIR`` makes
DST look like NEWDIR, where each file identical in SRC (same relative path, equal
under ``--update-compare``) is a hard link to SRC's and every other file is copied
from NEWDIR: daily snapshots that cost only what changed (``rsync --link-dest``).

It is the copy engine (:func:`rcp_core.copy`) with a link-dest tree
(:attr:`rcp_core.CopySettings.link_dest`), so the walk is parallel and the copy's rules
hold: DST is refused if it exists, unless ``--delete`` mirrors into it; filters and
dry runs work as for ``rcp``; a file that cannot be linked (another filesystem, the
inode's link limit) is copied. Every operand is a tree of this host (a path, or a
``file://`` URL): a hard link cannot reach another host or a store, so ``host:``,
``rcp://`` and store URLs are refused, naming the operand. Exit status as ``rcp``'s:
0, 1 (some entries failed), 2 (bad input, nothing touched), 128 + the signal that
stopped it (130 SIGINT, 143 SIGTERM, 129 SIGHUP).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rcp_core import CompareAttr, CopySettings, ExistingPolicy, UsageError, copy
from rcp_core.backends.routing import Storage, operand
from rcp_provider.cli.common import (
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    logging_restored,
    progress_renderer,
    run_and_report,
    usage_error,
)
from rcp_provider.cli.settings import add_settings_options, settings_from_args

COPY_OPTIONS = ("includes", "excludes", "dry_run", "fail_early", "max_workers")
"""The copy's options ``rlink`` offers, as ``rcp`` spells them."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rlink",
        description="Hard-link a tree (SRC -> DST), or snapshot NEWDIR into DST "
        "sharing SRC's unchanged files (--update NEWDIR).",
        examples=[
            ("rlink /snap/mon /snap/tue", "a hard-linked copy of a tree"),
            (
                "rlink --update /data /snap/mon /snap/tue",
                "snapshot /data, linking what is unchanged since /snap/mon",
            ),
        ],
    )
    parser.add_argument("src", metavar="SRC")
    parser.add_argument("dst", metavar="DST")
    parser.add_argument(
        "--update",
        metavar="NEWDIR",
        help="make DST look like NEWDIR, linking files unchanged since SRC",
    )
    parser.add_argument(
        "--update-compare",
        default="size,mtime,mode",
        help="what makes a file unchanged: size,mtime,mode,uid,gid "
        "(default size,mtime,mode; a link shares the metadata too)",
    )
    parser.add_argument(
        "--delete",
        action="store_true",
        help="DST may exist: make it exactly the new tree (remove what it lacks)",
    )
    add_settings_options(parser, COPY_OPTIONS)
    add_output_options(parser)
    return parser


def local_operands(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with its operands as the paths of this host they name (a
    ``file://`` prefix removed); ``args`` itself is left as parsed.

    :raises UsageError: an operand names another host, a service or a store.
    """
    paths = {
        name: _local(value)
        for name in ("src", "dst", "update")
        if (value := getattr(args, name)) is not None
    }
    return argparse.Namespace(**{**vars(args), **paths})


def settings_from(args: argparse.Namespace) -> CopySettings:
    """The copy's settings for these flags (operands already :func:`local_operands`).

    :raises UsageError: SRC not a directory, or a bad comparison.
    """
    if not os.path.isdir(args.src):
        raise UsageError(f"{args.src}: not a directory")
    return settings_from_args(
        args,
        COPY_OPTIONS,
        existing=ExistingPolicy.OVERWRITE if args.delete else ExistingPolicy.ERROR,
        delete=args.delete,
        link_dest=os.path.abspath(args.src),
        link_compare=CompareAttr.parse(args.update_compare),
    )


def _local(text: str) -> str:
    """The path of this host that the operand ``text`` names.

    :raises UsageError: it names another host, a service or a store.
    """
    named = operand(text)
    if named.storage is not Storage.LOCAL:
        raise UsageError(
            f"{text}: rlink links trees of this host's filesystem, not a "
            f"{named.storage.value} (a hard link cannot reach it)"
        )
    return named.path


@logging_restored
def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = local_operands(build_parser().parse_args(argv))
        configure_logging(args.verbose, args.quiet)
        settings = settings_from(args)
    except UsageError as exc:
        return usage_error("rlink", exc)
    source = args.update or args.src
    renderer = progress_renderer(args)
    return run_and_report(
        "rlink",
        args,
        lambda cancel: copy(
            source, args.dst, settings, on_progress=renderer, cancel=cancel
        ),
    )


if __name__ == "__main__":
    sys.exit(main())
