"""The ``rcp-shard`` command: a sharded copy that any scheduler runs (a Slurm job array,
a loop of ``ssh`` commands, ...), in three steps on the engine's planner
(:mod:`rcp_core.tools.shards.planner`):

- ``rcp-shard plan SRC --manifest PLAN --shards N``: walk SRC once, cut it into at
  most N balanced shards, write the manifest; print the shards (``--count``: only
  their number, what sizes a job array; ``--json``: the plan's summary as JSON);
- ``rcp-shard copy --manifest PLAN [--shard I] DST``: copy shard I into DST (the copy
  of SRC itself), its index from ``$SLURM_ARRAY_TASK_ID`` when ``--shard`` is not
  given; every shard at once, from as many hosts as see the storage;
- ``rcp-shard finalize --manifest PLAN DST``: once every shard is copied, give the
  directories the shards share their sources' metadata, then verify if asked.

Each step calls what the Airflow operators' hook calls
(:mod:`rcp_provider.hooks.workerstorage`): ``plan_shards`` and ``write_manifest``,
``copy_shard`` and ``finalize`` (:mod:`rcp_core.tools.shards.planner`), with the
plan's source as :func:`~rcp_provider.hooks.workerstorage.plan_source` gives it;
a URL (a store's tree, a service's ``rcp://``) is planned, copied and finalized
through its port (:func:`rcp_provider.ports.tree`), as there. ``finalize --verify`` is ``rcp
--verify``'s comparison (:class:`rcp_provider.cli.verify.Verification`) of the
plan's root with DST.

Invariants: every refusal (exit 2: a bad flag, a missing or invalid manifest, no
shard index, an index the plan does not have, a setting a shard cannot honour) comes
before anything is written; ``plan`` writes only the manifest, whole or not at all
(and nothing when it is stopped); a ``copy`` writes only its shard's units and the
shared parent directories, so shards run concurrently on one destination.

Exit status: the tools' table (:class:`rcp_provider.cli.common.Exit`): 0 done, 1 some
entries failed (``copy``: the partial summary is still reported; ``finalize``: a
directory's metadata could not be set), 2 bad input (one line on stderr, nothing
touched), 3 ``finalize --verify`` found differences, 4 the only errors were sources
that vanished, 5 a service failed; 128 + the signal that stopped it (130 SIGINT, 143
SIGTERM, 129 SIGHUP). ``plan`` prints its result on stdout; ``copy`` and ``finalize``
print logs and the summary there and progress on stderr.

Over 400 lines because the three steps are one command: their parsers, the flags they
share and the runs that report alike belong together.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rcp_core.backends import routing
from rcp_core.errors import RemoteError, UsageError, VerificationError
from rcp_core.run.summary import human_bytes
from rcp_core.tools.shards.planner import (
    ShardPlan,
    copy_shard,
    finalize,
    plan_shards,
    read_manifest,
    write_manifest,
)
from rcp_provider.cli.common import (
    Exit,
    OneLineErrorParser,
    add_output_options,
    configure_logging,
    in_worker,
    interrupted,
    logging_restored,
    progress_renderer,
    remote_failure,
    run_and_report,
    usage_error,
)
from rcp_provider.cli.settings import add_settings_options, settings_from_args
from rcp_provider.hooks.workerstorage import plan_source
from rcp_provider.ports import tree

PROG = "rcp-shard"
SHARD_ENV = "SLURM_ARRAY_TASK_ID"
"""Where ``copy`` finds its shard's index when ``--shard`` is not given."""
COPY_OPTIONS = (
    "existing",
    "overwrite_compare",
    "preserve",
    "skip_specials",
    "resume",
    "fail_early",
    "max_workers",
    "max_processes",
    "max_open_files",
    "ops_throttle",
    "retries",
    "retry_delay",
)
"""The copy's options a shard honours: all of ``rcp``'s but those whose meaning
depends on the whole tree (filters, ``--delete``, ``-L``, dry runs), which
:func:`~rcp_core.tools.shards.copier.copy_shard` refuses."""
FINALIZE_OPTIONS = ("preserve", "max_workers", "retries", "retry_delay")
"""What ``finalize`` takes of the copy's options: what the directories keep (as the
copies'), and how the verification runs."""

DESCRIPTION = """\
A copy too big for one machine, run by any scheduler: plan SRC into shards once,
copy every shard at once (a Slurm job array, or any hosts that see the storage at
the same paths), then finalize the directories the shards share."""
EPILOG = """\
examples:
  rcp-shard plan /lustre/in --manifest /lustre/plan.json --shards 64
  N=$(rcp-shard plan /lustre/in --manifest /lustre/plan.json --shards 64 --count)
  sbatch --array=0-$((N-1)) copy.sh    # copy.sh: rcp-shard copy ... (no --shard)
  rcp-shard copy --manifest /lustre/plan.json --shard 3 /lustre/out
  rcp-shard finalize --manifest /lustre/plan.json --verify metadata /lustre/out

exit status: 0 done, 1 some entries failed, 2 bad input (nothing touched),
3 finalize --verify found differences, 4 the only errors were vanished sources,
5 a service failed, 128 + the signal that stopped it (130 SIGINT, 143 SIGTERM).
A whole Slurm workflow: docs/sharding.md in the project's source."""
PLAN_EPILOG = """\
examples:
  rcp-shard plan /lustre/in --manifest /lustre/plan.json --shards 64
  N=$(rcp-shard plan /lustre/in --manifest /lustre/plan.json --shards 64 --count)
  rcp-shard plan s3://bucket/in --manifest /shared/plan.json --shards 16 --json

The plan may hold fewer shards than asked (never more than its units: a small tree):
size a job array by what it prints, --array=0-$((N-1)). Warnings (a directory it
cannot read: one unit, whose copy reports the error) go to stderr."""
COPY_EPILOG = """\
examples:
  rcp-shard copy --manifest /lustre/plan.json --shard 3 /lustre/out
  rcp-shard copy --manifest /lustre/plan.json /lustre/out   # in a Slurm array task
  rcp-shard copy -o --manifest /lustre/plan.json /lustre/out   # a shard run again

A shard run again needs -o (or --update, --ignore-existing): its units exist by then."""
FINALIZE_EPILOG = """\
examples:
  rcp-shard finalize --manifest /lustre/plan.json /lustre/out
  rcp-shard finalize --manifest /lustre/plan.json --verify checksum /lustre/out

Run it once every shard's copy succeeded; give -p as the copies had it."""


def _manifest(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--manifest", required=True, metavar="PLAN", help=help)


def _command(
    commands: argparse._SubParsersAction[OneLineErrorParser],
    name: str,
    help: str,
    epilog: str,
) -> argparse.ArgumentParser:
    return commands.add_parser(
        name,
        help=help,
        description=help,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="{plan,copy,finalize}"
    )

    plan = _command(
        commands,
        "plan",
        "walk SRC once and write its plan: at most N balanced shards",
        PLAN_EPILOG,
    )
    plan.add_argument(
        "src", metavar="SRC", help="the tree to copy: a path, or a URL (s3://...)"
    )
    _manifest(
        plan,
        "where the plan is written (replaced if it exists); every "
        "copying host must read it at this path",
    )
    plan.add_argument(
        "--shards",
        required=True,
        type=int,
        metavar="N",
        help="at most this many shards (1 to 1024)",
    )
    shown = plan.add_mutually_exclusive_group()
    shown.add_argument(
        "--count",
        action="store_true",
        help="print only the number of shards (N=$(...); sbatch --array=0-$((N-1)))",
    )
    shown.add_argument(
        "--json",
        action="store_true",
        help='print the plan as one JSON object: "count", "root", "manifest", '
        'and "shards": each one\'s "index", "units", "files", "bytes", "weight" '
        'and "share" (of the total weight)',
    )

    copy = _command(
        commands,
        "copy",
        "copy one shard of a plan into DST (the copy of the plan's SRC)",
        COPY_EPILOG,
    )
    copy.add_argument("dst", metavar="DST", help="the copy of SRC (a path or a URL)")
    _manifest(copy, "the plan written by rcp-shard plan")
    copy.add_argument(
        "--shard",
        type=int,
        metavar="I",
        help=f"the shard to copy, 0 to N-1 (default: ${SHARD_ENV}, the index of a "
        "Slurm array task; without either, refused)",
    )
    add_settings_options(copy, COPY_OPTIONS)
    add_output_options(copy)
    copy.set_defaults(dry_run=None)  # what progress_renderer asks: a shard has none

    done = _command(
        commands,
        "finalize",
        "after every shard: the shared directories' metadata, then a verification",
        FINALIZE_EPILOG,
    )
    done.add_argument("dst", metavar="DST", help="the destination the shards went to")
    _manifest(done, "the plan the shards came from")
    groups = add_settings_options(done, FINALIZE_OPTIONS)
    groups["running"].add_argument(
        "--verify",
        choices=["none", "metadata", "checksum"],
        default="none",
        help="then compare DST with SRC by what the copies kept (metadata), and by "
        "content (checksum); a difference fails the run",
    )
    add_output_options(done, progress=False)
    return parser


def _read(manifest: str) -> ShardPlan:
    """The plan in ``manifest``.

    :raises UsageError: it cannot be read, or is no valid manifest.
    """
    try:
        return read_manifest(manifest)
    except OSError as exc:
        raise UsageError(f"shard manifest {manifest!r}: {exc.strerror}") from exc


def _shard_index(given: int | None) -> int:
    """``--shard``, else ``$SLURM_ARRAY_TASK_ID`` (its range is the plan's to check).

    :raises UsageError: neither is set, or the variable is no number.
    """
    if given is not None:
        return given
    text = os.environ.get(SHARD_ENV)
    if text is None:
        raise UsageError(
            f"which shard? give --shard I, or run in a job array (${SHARD_ENV})"
        )
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"${SHARD_ENV} is {text!r}, not a shard index") from None


def _plan(args: argparse.Namespace) -> int:
    manifest = os.path.abspath(args.manifest)

    def work(cancel: threading.Event) -> ShardPlan:
        plan = plan_shards(tree(args.src), args.shards, cancel=cancel)
        write_manifest(plan, manifest)
        return plan

    try:
        if not os.path.isdir(os.path.dirname(manifest)):
            raise UsageError(f"the manifest's directory {manifest!r} does not exist")
        plan = in_worker(work, f"{PROG}-plan")
    except UsageError as exc:
        return usage_error(PROG, exc)
    except RemoteError as exc:  # a service's tree could not be listed
        return remote_failure(PROG, exc)
    except OSError as exc:  # the manifest could not be written: nothing was
        return usage_error(PROG, UsageError(f"{manifest}: {exc.strerror or exc}"))
    except KeyboardInterrupt as exc:
        return interrupted(PROG, None, exc)
    total = sum(shard.weight for shard in plan.shards) or 1
    if args.count:
        print(len(plan.shards))
    elif args.json:
        print(json.dumps(_plan_json(plan, manifest, total), sort_keys=True))
    else:
        files = sum(shard.files for shard in plan.shards)
        size = sum(shard.bytes for shard in plan.shards)
        print(
            f"{manifest}: {len(plan.shards)} shard(s) of {plan.root}, "
            f"{files} entries, {human_bytes(size)}"
        )
        for shard in plan.shards:
            print(
                f"shard {shard.index}: {len(shard.units)} unit(s), {shard.files} "
                f"entries, {human_bytes(shard.bytes)} "
                f"({100 * shard.weight / total:.1f}% of the weight)"
            )
    return Exit.OK


def _plan_json(plan: ShardPlan, manifest: str, total: int) -> dict[str, Any]:
    """``plan --json``: the plan's size and each shard's weight (bytes, plus
    :data:`~rcp_core.tools.shards.manifest.FILE_COST` per entry)."""
    return {
        "manifest": manifest,
        "root": plan.root,
        "count": len(plan.shards),
        "shards": [
            {
                "index": shard.index,
                "units": len(shard.units),
                "files": shard.files,
                "bytes": shard.bytes,
                "weight": shard.weight,
                "share": shard.weight / total,
            }
            for shard in plan.shards
        ],
    }


def _copy(args: argparse.Namespace) -> int:
    try:
        configure_logging(args.verbose, args.quiet)
        index = _shard_index(args.shard)
        settings = settings_from_args(args, COPY_OPTIONS)
        plan = _read(args.manifest)
        destination = tree(args.dst)
        source = plan_source(plan.root)
    except UsageError as exc:
        return usage_error(PROG, exc)
    renderer = progress_renderer(args)
    try:
        return run_and_report(
            PROG,
            args,
            lambda cancel: copy_shard(
                plan,
                index,
                destination,
                settings,
                source=source,
                on_progress=renderer,
                cancel=cancel,
            ),
        )
    except OSError as exc:  # a shared parent directory could not be made
        print(f"{PROG}: {exc}", file=sys.stderr)
        return Exit.FAILED


def _finalize(args: argparse.Namespace) -> int:
    from rcp_provider.cli.verify import Verification, print_differences, verified

    result: dict[str, Any] = {}
    try:
        configure_logging(args.verbose, args.quiet)
        settings = settings_from_args(args, FINALIZE_OPTIONS)
        plan = _read(args.manifest)
        destination = tree(args.dst)
        result.update(src=plan.root, dst=args.dst)
        verification = None
        if args.verify != "none":
            route = routing.route([plan.root, _whole(args.dst)])
            verification = Verification(args, route, settings)
            verification.prepare()
        done = finalize(plan, destination, settings, source=plan_source(plan.root))
        result["directories"] = done
        if verification is not None:
            result["verified"] = verification.run()
    except UsageError as exc:
        return usage_error(PROG, exc)
    except VerificationError as exc:
        result["verified"] = verified(args.verify, exc.result)
        _report(args, result)
        print_differences(exc.result)
        print(f"{PROG}: {exc}", file=sys.stderr)
        return Exit.DIFFERENT
    except RemoteError as exc:  # a service's tree
        return remote_failure(PROG, exc)
    except OSError as exc:  # a directory's metadata could not be set
        print(f"{PROG}: {exc}", file=sys.stderr)
        return Exit.FAILED
    except KeyboardInterrupt as exc:
        return interrupted(PROG, None, exc)
    _report(args, result)
    return Exit.OK


def _whole(destination: str) -> str:
    """DST named as the copy of the plan's root itself: without the trailing ``/``
    that tells ``rcp`` (and its verification) "into" (a shard's DST is never a
    directory it copies into); ``/`` and a store's top (``memory://``) as they are."""
    stripped = destination.rstrip("/")
    return destination if not stripped or stripped.endswith(":") else stripped


def _report(args: argparse.Namespace, result: dict[str, Any]) -> None:
    """What ``finalize`` did, as text (``--summary``) and JSON (``--summary-json``):
    ``src``, ``dst``, ``directories`` (their metadata set) and ``verified`` (as
    ``rcp --verify``'s)."""
    if args.summary or args.verbose:
        if "directories" in result:
            print(f"finalized: metadata of {result['directories']} directories set")
        check = result.get("verified")
        if check is not None:
            print(
                f"verified:  {check['mode']}, {check['entries']} entries, "
                f"{check['files_hashed']} files hashed: "
                + ("the copy is the same" if check["same"] else "it differs"),
                flush=True,
            )
    if args.summary_json:
        text = json.dumps(result, indent=2, sort_keys=True)
        Path(args.summary_json).write_text(text + "\n")


COMMANDS = {"plan": _plan, "copy": _copy, "finalize": _finalize}


@logging_restored
def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        return usage_error(PROG, exc)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
