"""The ``rcmp`` command: compare two trees by metadata, and by content with
``--checksum`` (:func:`rcp_core.tools.verify.compare.compare`): two local trees
through directory descriptors, any other pair through their backend ports.

Output on stdout, one JSON object per line: each difference as it is found
(``{"path", "kind", "detail"}``), then the summary as the last line
(``{"summary": {...}}``: ``same``, entries, files and bytes hashed, counts by kind;
the differences themselves are the lines before it). ``--summary-json PATH`` also
writes the summary, with the first differences, to a file.

An operand may be on another host, and its side is then listed and (``--checksum``)
hashed on that host, so no file data crosses the network:

- ``[user@]host[:port]:/path``, as ``rcp`` takes it: ``rcmp`` starts ``rcpd serve
  --session`` there over SSH (``--ssh``, ``--rcpd-path``), confined to the path, with a
  fresh token and a certificate pinned from the SSH channel; it stops when ``rcmp``
  ends;
- ``rcp://host:port/path``, a tree on a running ``rcpd serve`` (trust it through
  fsspec's configuration, e.g. ``FSSPEC_RCP_FINGERPRINT`` and ``FSSPEC_RCP_TOKEN``).

Any other URL is read here, through the backend a site's plugin or fsspec provides
for it (:func:`rcp_provider.ports.port`).

Exit status (the tools' table, :class:`rcp_provider.cli.common.Exit`): 0 the trees
are the same, 1 an entry could not be compared (an ``error`` difference) or a store
failed, 2 bad input, 3 they differ, 5 a host or service failed; 128 + the signal that
stopped it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rcp_core.backends import routing
from rcp_core.backends.routing import Storage
from rcp_core.errors import RemoteError, UsageError
from rcp_core.settings import CompareAttr
from rcp_core.tools.verify.compare import compare
from rcp_core.tools.verify.differences import Comparison, Difference, DiffKind
from rcp_provider.cli.common import (
    Exit,
    OneLineErrorParser,
    in_worker,
    interrupted,
    remote_failure,
    usage_error,
)
from rcp_provider.cli.remote import add_launch_options, port, refuse_unused


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcmp",
        description="Compare the tree SRC with DST (its copy): metadata, and contents "
        "with --checksum. Exit status: 0 the same, 3 they differ, 1 an entry could "
        "not be compared, 2 bad input, 5 a host or service failed.",
        examples=[
            ("rcmp /data /backup/data", "size, mtime and mode of every entry"),
            ("rcmp --checksum /data /backup/data", "and every file's content"),
            ("rcmp /data host:/backup/data", "the other side listed on its host"),
        ],
    )
    parser.add_argument("src", metavar="SRC")
    parser.add_argument("dst", metavar="DST")
    parser.add_argument(
        "--checksum",
        action="store_true",
        help="also compare the contents of regular files (BLAKE3, in parallel)",
    )
    parser.add_argument(
        "--attrs",
        default="size,mtime,mode",
        help="attributes compared where they apply: size,mtime,mode,uid,gid "
        "(default size,mtime,mode)",
    )
    parser.add_argument("--max-workers", type=int, help="workers in flight")
    parser.add_argument("--summary-json", metavar="PATH", help="write the summary")
    add_launch_options(parser.add_argument_group("trees on other hosts (host:/path)"))
    return parser


class Lines:
    """Prints each difference as a JSON line; called one difference at a time."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()

    def __call__(self, difference: Difference) -> None:
        with self.lock:
            self.out.write(json.dumps(difference.as_dict()) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        src, dst = (routing.operand(p) for p in (args.src, args.dst))
        storages = {src.storage, dst.storage}
        refuse_unused(parser, args, storages)
        attrs = CompareAttr.parse(args.attrs)
        lines = Lines(sys.stdout)
        if storages != {Storage.LOCAL}:
            result = in_worker(
                lambda cancel: _compare_ports(args, attrs, cancel, lines), "rcmp-main"
            )
            return _finish(args, result)
        for path in (src.path, dst.path):
            if not Path(path).exists() and not Path(path).is_symlink():
                raise UsageError(f"{path}: no such file or directory")
        result = in_worker(
            lambda cancel: compare(
                src.path,
                dst.path,
                checksum=args.checksum,
                attrs=attrs,
                max_workers=args.max_workers,
                cancel=cancel,
                on_difference=lines,
            ),
            "rcmp-main",
        )
    except UsageError as exc:
        return usage_error("rcmp", exc)
    except RemoteError as exc:  # a host or a service failed
        return remote_failure("rcmp", exc)
    except OSError as exc:  # a store failed as a whole
        print(f"rcmp: {exc}", file=sys.stderr)
        return Exit.FAILED
    except KeyboardInterrupt as exc:
        return interrupted("rcmp", None, exc)
    return _finish(args, result)


def _compare_ports(
    args: argparse.Namespace,
    attrs: frozenset[CompareAttr],
    cancel: threading.Event,
    lines: Lines,
) -> Comparison:
    """Two trees of which one is not this host's files (a URL, ``host:/path``),
    through their backend ports.

    :raises UsageError: an operand no backend opens, or one that does not exist.
    :raises RemoteError: a host's ``rcpd`` could not be started or reached.
    """
    with contextlib.ExitStack() as sessions:
        src, dst = (port(operand, args, sessions) for operand in (args.src, args.dst))
        for side, operand in ((src, args.src), (dst, args.dst)):
            if side.stat("") is None:
                raise UsageError(f"{operand}: no such file or directory")
        return compare(
            src,
            dst,
            checksum=args.checksum,
            attrs=attrs,
            max_workers=args.max_workers,
            cancel=cancel,
            on_difference=lines,
        )


def _finish(args: argparse.Namespace, result: Comparison) -> int:
    """The summary line (and file); the exit status."""
    summary = result.as_dict()
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n")
    del summary["differences"]
    print(json.dumps({"summary": summary}), flush=True)
    if result.counts.get(DiffKind.ERROR, 0):
        return Exit.FAILED
    return Exit.OK if result.same else Exit.DIFFERENT


if __name__ == "__main__":
    sys.exit(main())
