"""``rcp-filegen``: argparse glue over :mod:`rcp_core.tools.filegen`.

Exit status: 0 on success; 2 for bad input (one ``rcp-filegen: error: ...`` line on
stderr, and nothing written); 1 when the filesystem refuses (an ``OSError``, same line).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rcp_core.errors import UsageError
from rcp_core.run.summary import human_bytes
from rcp_core.tools.filegen import (
    PRESETS,
    GenStats,
    generate_preset,
    generate_tree,
    parse_dir_width,
    parse_size,
)
from rcp_provider.cli.common import OneLineErrorParser, interrupted

PROG = "rcp-filegen"
USAGE = f"""\
{PROG} [options] ROOT DIRWIDTH NUMFILES FILESIZE
       {PROG} [options] --preset NAME [--scale FLOAT] ROOT"""
DESCRIPTION = """\
Generate a tree of random-content files under ROOT (created; its parent must exist;
an existing ROOT must be empty). DIRWIDTH is a comma list: "3,2" makes dir0..dir2,
each holding dir0..dir1. NUMFILES files file0.. of FILESIZE bytes (suffixes K, M, G, T
are binary: 1K = 1024) go into every leaf directory, or every directory with --all-dirs.
"""
EPILOG = (
    "presets at scale 1 (dirs x files per dir):\n"
    + "".join(f"  {name:<6} {text}\n" for name, text in PRESETS.items())
    + (
        "--scale multiplies the files per directory of a uniform preset (at least one),\n"
        "and the number of small files and the size of the large ones of mixed.\n"
        "\n"
        "examples:\n"
        "  rcp-filegen /tmp/t 10,10 100 1M      # 100 dirs of 100 files of 1 MiB\n"
        "  rcp-filegen --preset mixed /tmp/m    # small and large files, links\n"
    )
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog=PROG,
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("root", metavar="ROOT", type=Path, help="the tree to create")
    parser.add_argument(
        "tree",
        metavar="DIRWIDTH NUMFILES FILESIZE",
        nargs="*",
        help='e.g. "3,2 10 1K"',
    )
    placement = parser.add_mutually_exclusive_group()
    placement.add_argument(
        "--leaf-files",
        dest="leaf_only",
        action="store_const",
        const=True,
        help="put the files in the leaf directories only (default)",
    )
    placement.add_argument(
        "--all-dirs",
        dest="leaf_only",
        action="store_const",
        const=False,
        help="put the files in every directory, ROOT included",
    )
    parser.add_argument(
        "--preset",
        metavar="NAME",
        help="generate a benchmark fileset instead (see below)",
    )
    parser.add_argument(
        "--scale",
        type=float,
        metavar="FLOAT",
        help="with --preset: grow or shrink it (default 1; see below)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="writer threads (default: the number of CPUs)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="make the content (and the mixed layout) reproducible",
    )
    parser.add_argument("--summary", action="store_true", help="print what was created")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rcp-filegen`` on ``argv`` (default ``sys.argv[1:]``); return the status."""
    try:
        args = build_parser().parse_intermixed_args(argv)
        stats = _generate(args)
    except UsageError as exc:
        return _fail(exc, 2)
    except OSError as exc:
        return _fail(exc, 1)
    except KeyboardInterrupt as exc:
        return interrupted("rcp-filegen", None, exc)
    if args.summary:
        print(_render(args.root, stats))
    return 0


def _generate(args: argparse.Namespace) -> GenStats:
    root: Path = args.root
    tree: list[str] = args.tree
    leaf_only: bool | None = args.leaf_only
    if args.preset is not None:
        if tree:
            raise UsageError("--preset takes only ROOT, not DIRWIDTH NUMFILES FILESIZE")
        if leaf_only is not None:
            raise UsageError("--leaf-files and --all-dirs do not apply to --preset")
        scale = 1.0 if args.scale is None else args.scale
        return generate_preset(
            root, args.preset, scale=scale, workers=args.workers, seed=args.seed
        )
    if args.scale is not None:
        raise UsageError("--scale applies to --preset only")
    if len(tree) != 3:
        raise UsageError(
            "expected ROOT DIRWIDTH NUMFILES FILESIZE, or --preset NAME ROOT"
        )
    width, count, size = tree
    try:
        files = int(count)
    except ValueError:
        raise UsageError(f"bad NUMFILES {count!r}: expected a whole number") from None
    return generate_tree(
        root,
        parse_dir_width(width),
        files,
        parse_size(size),
        leaf_only=leaf_only is not False,
        workers=args.workers,
        seed=args.seed,
    )


def _fail(exc: Exception, status: int) -> int:
    print(f"{PROG}: error: {exc}", file=sys.stderr)
    return status


def _render(root: Path, stats: GenStats) -> str:
    """One ``label: value`` per line, stable for scripts to parse."""
    rows = [
        ("root", str(root)),
        ("dirs", str(stats.dirs)),
        ("files", str(stats.files)),
        ("symlinks", str(stats.symlinks)),
        ("hardlinks", str(stats.hardlinks)),
        ("specials", str(stats.specials)),
        ("bytes", f"{stats.bytes} ({human_bytes(stats.bytes)})"),
        ("seconds", f"{stats.seconds:.2f}"),
    ]
    return "\n".join(f"{label + ':':<11}{value}" for label, value in rows)
