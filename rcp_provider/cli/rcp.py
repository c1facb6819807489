"""The ``rcp`` command: parallel copy with rcp's operand rules and flags.

Exit status: 0 when everything was copied, 1 when any entry failed (a partial summary
is still printed with ``--summary``), 2 for bad input (one line on stderr, nothing
touched), 130 when interrupted. Logs and the summary go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rcp_core.backends import routing
from rcp_core.backends.routing import Engine, refuse_route
from rcp_core.errors import CopyFailedError, RemoteError, UsageError, VerificationError
from rcp_core.run.progress import BarProgress
from rcp_core.run.summary import human_bytes
from rcp_provider.cli import remote, stores
from rcp_provider.cli.common import (
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    in_worker,
    logging_restored,
    progress_renderer,
    report,
)
from rcp_provider.cli.settings import add_settings_options, settings_from_args

if TYPE_CHECKING:
    from rcp_core.remote.outcome import RoleResult
    from rcp_core.run.summary import Summary


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcp",
        description="Copy files and trees in parallel. SRC DST creates DST; "
        "SRC... DST/ copies into the directory DST.",
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
    remote.add_options(parser)
    return parser


@logging_restored
def main(argv: Sequence[str] | None = None) -> int:
    summary: Summary | None = None
    extra: dict[str, Any] = {}
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        configure_logging(args.verbose, args.quiet)
        settings = settings_from_args(args)
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
                return remote.fail(exc)
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
    except KeyboardInterrupt:
        print("rcp: interrupted", file=sys.stderr)
        return 130
    except UsageError as exc:
        print(f"rcp: error: {exc}", file=sys.stderr)
        return 2
    except CopyFailedError as exc:
        report(args, exc.summary, extra or None)
        print(f"rcp: {exc}", file=sys.stderr)
        return 1
    except VerificationError as exc:
        from rcp_provider.cli.verify import print_differences, verified

        assert summary is not None
        report(args, summary, {**extra, "verified": verified(args.verify, exc.result)})
        print_differences(exc.result)
        print(f"rcp: {exc}", file=sys.stderr)
        return 1
    except RemoteError as exc:  # a verification's session
        print(f"rcp: verification failed: {exc}", file=sys.stderr)
        return 1
    report(args, summary, extra or None)
    done = extra.get("verified")
    if done and (args.summary or args.verbose):
        print(
            f"verified:  {done['mode']}, {done['entries']} entries, "
            f"{done['files_hashed']} files hashed "
            f"({human_bytes(done['bytes_hashed'])}): the copy is the same",
            flush=True,
        )
    return 0


def _roles(
    args: argparse.Namespace, source: RoleResult, destination: RoleResult
) -> None:
    """Each role's resources, with ``--summary``."""
    if args.summary or args.verbose:
        print(remote.render_roles(source, destination), flush=True)
