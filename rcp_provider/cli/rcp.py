"""The ``rcp`` command: parallel copy with rcp's operand rules and flags.

Exit status: the tools' table (:class:`rcp_provider.cli.common.Exit`): 0 copied, 1 some
entries failed (a partial summary is still printed with ``--summary``), 2 bad input
(one line on stderr, nothing touched), 3 ``--verify`` found differences, 4 the only
errors were sources that vanished during the copy, 5 a host or service failed; 128 +
the signal that stopped it (130 SIGINT, 143 SIGTERM, 129 SIGHUP; the partial summary
printed as for a failure). Logs and the summary go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rcp_core import CopySettings
from rcp_core.backends import routing
from rcp_core.backends.routing import Engine, refuse_route
from rcp_core.errors import CopyFailedError, RemoteError, UsageError, VerificationError
from rcp_core.run.progress import BarProgress
from rcp_core.run.summary import human_bytes
from rcp_core.schema import Front, offered
from rcp_provider.cli import config, remote, stores
from rcp_provider.cli.common import (
    Exit,
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    failed,
    in_worker,
    interrupted,
    logging_restored,
    progress_renderer,
    remote_failure,
    report,
    signals_after,
    usage_error,
)
from rcp_provider.cli.launch import Interrupted
from rcp_provider.cli.settings import (
    add_settings_options,
    given_values,
    settings_from_args,
)

if TYPE_CHECKING:
    from rcp_core.remote.outcome import RoleResult
    from rcp_core.run.summary import Summary


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcp",
        description="Copy files and trees in parallel. SRC DST creates DST; "
        "SRC... DST/ copies into the directory DST (a slash after SRC changes "
        "nothing: DST is the copy's own name). For rsync users: a copy is always "
        "recursive and keeps links, modes and times (rsync -a without owners; "
        "-p all adds owners, xattrs and ACLs, as -aAX), an existing DST is refused "
        "unless -o, -u or --ignore-existing says what to do with it, and "
        "--delete, --include/--exclude, --files-from, -x, -n, -i, --log-file, "
        "--chmod, --chown, --numeric-ids, --partial and --bwlimit are rsync's. "
        "Exit status: 0 done, 1 some "
        "entries failed, 2 bad input (nothing touched), 3 --verify found "
        "differences, 4 only vanished sources failed, 5 a host or service failed, "
        "128+N a signal (README: Exit statuses).",
        examples=[
            ("rcp /data/in /backup/in", "copy a tree (refused if the copy exists)"),
            ("rcp -o /data/in /backup/in", "again: replace what differs by size/mtime"),
            ("rcp --delete SRC DST", "mirror, as rsync -a --delete"),
            ("rcp A B C /backup/", "several sources into a directory"),
            ("rcp --exclude '*.tmp' SRC DST", "filters, as rsync's"),
            ("rcp -n -o SRC DST", "what a rerun would change (rsync -n)"),
            ("rcp --dry-run explain -o SRC DST", "say what would change, and why"),
            (
                "rcp -i --log-file log.jsonl SRC DST",
                "itemize changes, log them as JSON",
            ),
            ("rcp --files-from list -o SRC DST", "only the paths listed (rsync's)"),
            ("rcp --verify checksum SRC DST", "copy, then compare by content"),
            ("rcp SRC host:/srv/DST", "to another host over SSH (rcpd there)"),
            ("rcp /data/in s3://bucket/in", "to an object store"),
            (
                "rcp --progress --summary SRC DST",
                "progress on stderr, summary at the end",
            ),
        ],
    )
    parser.add_argument("paths", nargs="+", metavar="SRC... DST")
    groups = add_settings_options(parser)
    groups["running"].add_argument(
        "--verify",
        choices=["none", "metadata", "checksum"],
        default="none",
        help="after the copy, compare it with its source by what the copy kept "
        "(metadata), and by content (checksum); a difference fails the run",
    )
    add_output_options(parser)
    parser.add_argument(
        "--show-config",
        action="store_true",
        help="print every copy option's effective value for these operands and "
        "where it came from (the default, a config file's section, the command "
        "line), and copy nothing",
    )
    remote.add_options(parser)
    return parser


@logging_restored
def main(argv: Sequence[str] | None = None) -> int:
    with contextlib.ExitStack() as cleanup:
        return _run(argv, cleanup)


def _stdin_list(cleanup: contextlib.ExitStack) -> str:
    """``--files-from -``: standard input kept in a file for the run (every worker
    process reads the list), removed when the run ends."""
    # Imported here: a copy without a list costs its start-up nothing.
    import shutil
    import tempfile

    kept = cleanup.enter_context(
        tempfile.NamedTemporaryFile(prefix="rcp-files-from-")  # noqa: SIM115 - the run's
    )
    shutil.copyfileobj(sys.stdin.buffer, kept)
    kept.flush()
    return kept.name


def _run(argv: Sequence[str] | None, cleanup: contextlib.ExitStack) -> int:
    """The run of :func:`main`; ``cleanup`` ends with it (``--files-from -``)."""
    summary: Summary | None = None
    extra: dict[str, Any] = {}
    args: argparse.Namespace | None = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        configure_logging(args.verbose, args.quiet)
        if args.files_from == "-":
            args.files_from = _stdin_list(cleanup)
        from_files, sources = config.effective(config.load(config.paths()), args.paths)
        settings = settings_from_args(args, defaults=from_files)
        if args.show_config:
            show_config(settings, sources, given_values(args))
            return Exit.OK
        route = routing.route(args.paths)
        refuse_route(route)
        remote.refuse_unused(parser, args, route.storages, remote.SERVICE_OPTIONS)
        verification = None
        if args.verify != "none":
            if settings.dry_run:
                raise UsageError("--verify needs a copy to verify (not --dry-run)")
            # Imported here: hashing costs a copy without --verify no start-up.
            from rcp_provider.cli.verify import Verification

            verification = Verification(args, route, settings)
            verification.prepare()
        renderer = progress_renderer(args)
        if route.engine is Engine.STORE:
            summary = stores.run(route, settings, renderer)
        elif route.engine is Engine.REMOTE:
            try:
                summary, ok, source, destination = remote.run(
                    args, route, settings, renderer
                )
            except RemoteError as exc:
                return remote_failure("rcp", exc)
            extra["roles"] = remote.roles_json(source, destination)
            _roles(args, source, destination)
            from rcp_core.remote.outcome import checked

            checked(summary, failed=not ok)
        else:
            # Imported here: a remote copy starts its SSH logins without the local
            # engine (which its destination imports while they run).
            from rcp_core.engine.copyrun import copy

            interval = 0.2 if isinstance(renderer, BarProgress) else 1.0
            summary = in_worker(
                lambda cancel: copy(
                    route.paths[:-1],
                    route.paths[-1],
                    settings,
                    on_progress=renderer,
                    progress_interval=interval,
                    cancel=cancel,
                ),
                "rcp-main",
            )
        if verification is not None:
            extra["verified"] = verification.run()
    except KeyboardInterrupt as exc:  # the summary, where the copy had ended
        return interrupted("rcp", args, Interrupted.of(exc, summary), extra or None)
    except UsageError as exc:
        return usage_error("rcp", exc)
    except CopyFailedError as exc:
        assert args is not None  # a copy ran
        report(args, exc.summary, extra or None)
        print(f"rcp: {exc}", file=sys.stderr)
        return failed(exc.summary)
    except VerificationError as exc:
        from rcp_provider.cli.verify import print_differences, verified

        assert summary is not None
        assert args is not None
        report(args, summary, {**extra, "verified": verified(args.verify, exc.result)})
        print_differences(exc.result)
        print(f"rcp: {exc}", file=sys.stderr)
        return Exit.DIFFERENT
    except RemoteError as exc:  # a verification's session
        return remote_failure("rcp", f"verification failed: {exc}")
    with signals_after():
        report(args, summary, extra or None)
        done = extra.get("verified")
        if done and (args.summary or args.verbose):
            print(
                f"verified:  {done['mode']}, {done['entries']} entries, "
                f"{done['files_hashed']} files hashed "
                f"({human_bytes(done['bytes_hashed'])}): the copy is the same",
                flush=True,
            )
    return Exit.OK


def show_config(
    settings: CopySettings, sources: dict[str, str], given: dict[str, Any]
) -> None:
    """Each command-line option's effective value (its wire form: what a config
    file writes) and where it came from."""
    for option in offered(Front.CLI):
        value = json.dumps(option.kind.wire(getattr(settings, option.name)))
        source = (
            "command line"
            if option.name in given
            else sources.get(option.name, "default")
        )
        print(f"{option.name} = {value}  # {source}", flush=True)


def _roles(
    args: argparse.Namespace, source: RoleResult, destination: RoleResult
) -> None:
    """Each role's resources, with ``--summary``."""
    if args.summary or args.verbose:
        print(remote.render_roles(source, destination), flush=True)
