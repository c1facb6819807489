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

from rcp_core import (
    CompareAttr,
    CopyFailedError,
    CopySettings,
    DryRun,
    ExistingPolicy,
    Preserve,
    Summary,
    UsageError,
    copy,
)
from rcp_core.errors import RemoteError, VerificationError
from rcp_core.progress import BarProgress
from rcp_core.summary import human_bytes
from rcp_provider.cli import remote, stores
from rcp_provider.cli.common import (
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    in_worker,
    progress_renderer,
    report,
)

if TYPE_CHECKING:
    from rcp_core.remote.master import RoleResult


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcp",
        description="Copy files and trees in parallel. SRC DST creates DST; "
        "SRC... DST/ copies into the directory DST.",
    )
    parser.add_argument("paths", nargs="+", metavar="SRC... DST")
    existing = parser.add_argument_group("existing destinations")
    existing.add_argument(
        "-o",
        "--overwrite",
        action="store_true",
        help="replace entries that differ (see --overwrite-compare)",
    )
    existing.add_argument(
        "--overwrite-compare",
        default="size,mtime",
        help="what makes files identical: size,mtime,mode,uid,gid,"
        "ctime,checksum (default size,mtime)",
    )
    existing.add_argument(
        "-u",
        "--update",
        action="store_true",
        help="replace only entries older than the source",
    )
    existing.add_argument(
        "--ignore-existing", action="store_true", help="never touch existing entries"
    )
    existing.add_argument(
        "--delete",
        action="store_true",
        help="mirror: remove destination entries absent from the source",
    )
    existing.add_argument(
        "--delete-excluded",
        action="store_true",
        help="with --delete, also remove excluded entries",
    )
    meta = parser.add_argument_group("what is copied")
    meta.add_argument(
        "-p",
        "--preserve",
        default="default",
        help="default (mode,times), all (+owner,xattrs,acls), none, "
        "or a list of mode,times,owner,xattrs,acls",
    )
    meta.add_argument(
        "-L", "--dereference", action="store_true", help="follow symlinks in the source"
    )
    meta.add_argument(
        "--skip-specials",
        action="store_true",
        help="count FIFOs, sockets and devices that cannot be "
        "recreated as skipped, not as errors",
    )
    filters = parser.add_argument_group("filters")
    filters.add_argument("--include", action="append", default=[], metavar="GLOB")
    filters.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    filters.add_argument("--filter-file", metavar="PATH")
    filters.add_argument(
        "--gitignore", action="store_true", help="honour .gitignore files in the source"
    )
    run = parser.add_argument_group("running")
    run.add_argument(
        "--dry-run",
        choices=[d.value for d in DryRun],
        help="show what would happen; change nothing",
    )
    run.add_argument(
        "-e", "--fail-early", action="store_true", help="stop at the first error"
    )
    run.add_argument(
        "--verify",
        choices=["none", "metadata", "checksum"],
        default="none",
        help="after the copy, compare it with its source by what the copy kept "
        "(metadata), and by content (checksum); a difference fails the run",
    )
    run.add_argument("--max-workers", type=int, help="worker threads")
    run.add_argument(
        "--max-processes",
        type=int,
        help="processes copying files (default: chosen for the storage; 1 = this one)",
    )
    run.add_argument(
        "--max-open-files",
        type=int,
        help="descriptor budget (default: 80%% of RLIMIT_NOFILE, max 4096)",
    )
    run.add_argument(
        "--ops-throttle",
        type=float,
        default=0.0,
        help="metadata operations per second (0 = unlimited)",
    )
    run.add_argument(
        "--retries",
        type=int,
        default=3,
        help="retries of a transiently failing operation (0 = never; default 3)",
    )
    run.add_argument(
        "--retry-delay",
        type=float,
        default=0.05,
        help="first retry backoff in seconds; doubles with jitter up to 2 s",
    )
    add_output_options(parser)
    remote.add_options(parser)
    return parser


def settings_from(args: argparse.Namespace) -> CopySettings:
    """Map parsed flags to engine settings; conflicting flags are a usage error."""
    if args.overwrite and args.ignore_existing:
        raise UsageError("--overwrite conflicts with --ignore-existing")
    if args.update and args.ignore_existing:
        raise UsageError("--update conflicts with --ignore-existing")
    existing = ExistingPolicy.ERROR
    if args.ignore_existing:
        existing = ExistingPolicy.IGNORE_EXISTING
    elif args.update:
        existing = ExistingPolicy.UPDATE
    elif args.overwrite:
        existing = ExistingPolicy.OVERWRITE
    return CopySettings(
        existing=existing,
        overwrite_compare=CompareAttr.parse(args.overwrite_compare),
        delete=args.delete,
        delete_excluded=args.delete_excluded,
        preserve=Preserve.parse(args.preserve),
        dereference=args.dereference,
        skip_specials=args.skip_specials,
        includes=args.include,
        excludes=args.exclude,
        filter_file=args.filter_file,
        gitignore=args.gitignore,
        dry_run=DryRun(args.dry_run) if args.dry_run else None,
        fail_early=args.fail_early,
        max_workers=args.max_workers,
        max_processes=args.max_processes,
        max_open_files=args.max_open_files,
        ops_throttle=args.ops_throttle,
        retries=args.retries,
        retry_delay=args.retry_delay,
    )


def main(argv: Sequence[str] | None = None) -> int:
    summary: Summary | None = None
    extra: dict[str, Any] = {}
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        configure_logging(args.verbose, args.quiet)
        settings = settings_from(args)
        remote.refuse_unused(parser, args, args.paths)
        verification = None
        if args.verify != "none":
            if settings.dry_run or len(args.paths) < 2:
                raise UsageError("--verify needs a copy to verify (not --dry-run)")
            # Imported here: hashing costs a copy without --verify no start-up.
            from rcp_provider.cli.verify import Verification

            verification = Verification(args, settings)
        if stores.names_a_store(args.paths):
            if verification is not None:
                verification.prepare()
            summary = stores.run(args.paths, settings, progress_renderer(args))
        elif remote.is_remote(args.paths):
            try:
                if verification is not None:
                    verification.prepare()
                summary, ok, source, destination = remote.run(
                    args, settings, progress_renderer(args)
                )
            except RemoteError as exc:
                return remote.fail(exc)
            extra["roles"] = remote.roles_json(source, destination)
            _roles(args, source, destination)
            from rcp_core.remote.outcome import checked

            checked(summary, failed=not ok)
        else:
            if verification is not None:
                verification.prepare()
            renderer = progress_renderer(args)
            interval = 0.2 if isinstance(renderer, BarProgress) else 1.0
            summary = in_worker(
                lambda cancel: copy(
                    args.paths[:-1],
                    args.paths[-1],
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
