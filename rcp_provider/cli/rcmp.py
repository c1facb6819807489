"""The ``rcmp`` command: compare two trees by metadata, and by content with
``--checksum`` (:func:`rcp_core.verify.compare`).

Output on stdout, one JSON object per line: each difference as it is found
(``{"path", "kind", "detail"}``), then the summary as the last line
(``{"summary": {...}}``: ``same``, entries, files and bytes hashed, counts by kind;
the differences themselves are the lines before it). ``--summary-json PATH`` also
writes the summary, with the first differences, to a file.

Exit status: 0 the trees are the same, 1 they differ, 2 bad input or an entry that
could not be compared (an ``error`` difference), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from rcp_core.comparison import Comparison, Difference, DiffKind
from rcp_core.errors import UsageError
from rcp_core.settings import CompareAttr
from rcp_core.verify import compare
from rcp_provider.cli.common import OneLineErrorParser, in_worker


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcmp",
        description="Compare the tree SRC with DST (its copy): metadata, and contents "
        "with --checksum.",
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
    return parser


class _Lines:
    """Prints each difference as a JSON line; called one difference at a time."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lock = threading.Lock()

    def __call__(self, difference: Difference) -> None:
        with self.lock:
            self.out.write(json.dumps(difference.as_dict()) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        attrs = CompareAttr.parse(args.attrs)
        for path in (args.src, args.dst):
            if not Path(path).exists() and not Path(path).is_symlink():
                raise UsageError(f"{path}: no such file or directory")
        lines = _Lines(sys.stdout)
        result: Comparison = in_worker(
            lambda cancel: compare(
                args.src,
                args.dst,
                checksum=args.checksum,
                attrs=attrs,
                max_workers=args.max_workers,
                cancel=cancel,
                on_difference=lines,
            ),
            "rcmp-main",
        )
    except UsageError as exc:
        print(f"rcmp: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rcmp: interrupted", file=sys.stderr)
        return 130
    summary = result.as_dict()
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n")
    del summary["differences"]
    print(json.dumps({"summary": summary}), flush=True)
    if result.counts.get(DiffKind.ERROR, 0):
        return 2
    return 0 if result.same else 1


if __name__ == "__main__":
    sys.exit(main())
