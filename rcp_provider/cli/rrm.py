"""The ``rrm`` command: remove trees in parallel.

Each operand is routed as ``rcp`` routes it (:func:`rcp_provider.ports.remove`):
local paths (also ``file:///path``) are removed through descriptors
(:mod:`rcp_core.tools.remove.rmtree`, the fast path); URLs (``memory://``,
``s3://bucket/key``, any fsspec store, a site backend's scheme, an ``rcpd serve``
service's ``rcp://host:port/path``) through their backend ports
(:mod:`rcp_core.tools.remove.portremove`), with the same rules, words and summary.
A ``[user@]host[:port]:/path`` is removed through an ``rcpd serve --session`` that
``rrm`` starts on that host over SSH (as ``rcmp`` does: ``--ssh``, ``--rcpd-path``,
``--remote-timeout``; one session per such operand, confined to the operand's parent
directory, since a service never removes its own root, and only the operand is
removed), through its port like a service's URL: the same refusals, and a filesystem
mounted inside the tree is kept unless ``--cross-devices``. Local paths are removed in
a run of their own: beside URLs or ``host:/path`` operands they are refused (those two
may share a run: both go through ports), as is a URL or ``host:/path`` whose path has
an empty, ``.`` or ``..`` component. The launch options are refused without a
``host:/path`` operand.

Exit status (the tools' table, :class:`rcp_provider.cli.common.Exit`): 0 when
everything selected was removed, 1 when an entry could not be (the rest was; a partial
summary is still printed with ``--summary``), 2 for bad input or an option the storage
cannot honour (one line on stderr, nothing touched), 5 a host's session that could not
be started or a service that failed, 128 + the signal that stopped it (130 SIGINT, 143
SIGTERM, 129 SIGHUP). Logs and the summary go to stdout, progress to stderr.

Age options take a time (``2026-11-01``, ``2026-11-01T12:00``, an offset allowed; a
time without one is local) or an age (``90s``, ``15m``, ``12h``, ``30d``, ``2w``: that
long before now).
"""

from __future__ import annotations

import argparse
import contextlib
import posixpath
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rcp_core.backends import routing
from rcp_core.backends.operands import parse_operand
from rcp_core.errors import RemoteError, UsageError
from rcp_core.tools.remove.removal import RemoveSettings
from rcp_provider.cli import remote
from rcp_provider.cli.common import (
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    logging_restored,
    progress_renderer,
    remote_failure,
    run_and_report,
    usage_error,
    walk_options,
)
from rcp_provider.options import parse_time
from rcp_provider.ports import remove

if TYPE_CHECKING:
    from rcp_core.backends.port import Port
    from rcp_core.run.monitor import Observer
    from rcp_core.run.summary import Summary


def _time_option(text: str) -> float:
    """:func:`parse_time` for argparse, which shows only an ``ArgumentTypeError``'s
    own words."""
    try:
        return parse_time(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rrm",
        description="Remove files and trees in parallel.",
        examples=[
            ("rrm /scratch/run-41", "remove a tree, as rm -rf"),
            ("rrm --dry-run /scratch/old", "list what would go"),
            (
                "rrm --modified-before 30d /scratch/tmp",
                "only what is older than 30 days",
            ),
            ("rrm --exclude '*.keep' /scratch/run", "keep what matches"),
            ("rrm host:/srv/old", "on another host (rcpd there, over SSH)"),
            ("rrm s3://bucket/prefix", "an object store's prefix"),
        ],
    )
    parser.add_argument("paths", nargs="+", metavar="PATH")
    select = parser.add_argument_group("what goes")
    select.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="GLOB",
        help="remove only entries matching GLOB (a directory goes only once "
        "nothing stays beneath it); repeatable",
    )
    select.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="keep entries matching GLOB (and the directories holding them); "
        "excludes win; repeatable",
    )
    select.add_argument(
        "--modified-before",
        type=_time_option,
        metavar="TIME",
        help="only entries modified before TIME (or older than an age: 30d)",
    )
    select.add_argument(
        "--created-before",
        type=_time_option,
        metavar="TIME",
        help="only entries born before TIME; an unknown birth time keeps the entry",
    )
    run = parser.add_argument_group("how")
    run.add_argument(
        "--dry-run", action="store_true", help="list what would go; remove nothing"
    )
    run.add_argument(
        "--fail-early", action="store_true", help="stop at the first error"
    )
    run.add_argument("--max-workers", type=int, help="directories emptied at once")
    run.add_argument(
        "--force", action="store_true", help="allow / and mount points as operands"
    )
    run.add_argument(
        "-f",
        "--missing-ok",
        action="store_true",
        help="a PATH that does not exist is no error",
    )
    run.add_argument(
        "--cross-devices",
        action="store_true",
        help="also empty filesystems mounted inside the trees (kept by default)",
    )
    remote.add_launch_options(
        parser.add_argument_group("operands on another host ([user@]host[:port]:/path)")
    )
    add_output_options(parser)
    return parser


def _remove(
    args: argparse.Namespace,
    settings: RemoveSettings,
    on_progress: Observer | None,
    cancel: threading.Event,
) -> Summary:
    """Remove ``args.paths``; each ``host:/path`` through a session of its own on
    that host, confined to the operand's parent, ended when the removal is."""
    with contextlib.ExitStack() as sessions:

        def host_port(given: routing.Operand) -> Port:
            where = parse_operand(given.text)
            assert where is not None  # a HOST operand is one
            parent = posixpath.dirname(where.path.rstrip("/")) or "/"
            return remote.port(given.text, args, sessions, root=parent)

        return remove(
            args.paths,
            settings,
            on_progress=on_progress,
            cancel=cancel,
            host_port=host_port,
        )


@logging_restored
def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        configure_logging(args.verbose, args.quiet)
        storages = {routing.operand(path).storage for path in args.paths}
        remote.refuse_unused(parser, args, storages)
        settings = RemoveSettings(
            modified_before=args.modified_before,
            created_before=args.created_before,
            force=args.force,
            missing_ok=args.missing_ok,
            **walk_options(args),
        )
    except UsageError as exc:
        return usage_error("rrm", exc)
    renderer = progress_renderer(args)
    try:
        return run_and_report(
            "rrm", args, lambda cancel: _remove(args, settings, renderer, cancel)
        )
    except RemoteError as exc:  # a host's session could not be started
        return remote_failure("rrm", exc)


if __name__ == "__main__":
    sys.exit(main())
