"""A copy that cannot write some of its entries, wherever it runs, even as root.

The destination already holds the source's directory ``stuck``, made immutable
(``chattr +i``: not even root may create in it or change its times), and the copy
overwrites: ``stuck/new`` and ``stuck``'s metadata fail, the 20 files of ``ok`` are
copied. Needs root (``chattr``) and a filesystem with the attribute (ext4, XFS).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.treespec import File, Spec, make_tree

OK_FILES = 20
SPEC: Spec = {
    **{f"ok/f{i}": File(b"%d" % i, 0o644) for i in range(OK_FILES)},
    "stuck/new": File(b"cannot be written"),
}


@contextmanager
def stuck_copy(
    source_parent: Path, destination_parent: Path
) -> Iterator[tuple[Path, Path]]:
    """``(src, dst)``: the tree under ``source_parent``, and its destination under
    ``destination_parent`` with ``stuck`` immutable (mutable again on exit)."""
    src = make_tree(source_parent / "tree", SPEC)
    dst = destination_parent / "copy"
    (dst / "stuck").mkdir(parents=True)
    subprocess.run(["chattr", "+i", str(dst / "stuck")], check=True)
    try:
        yield src, dst
    finally:
        subprocess.run(["chattr", "-i", str(dst / "stuck")], check=True)


def copied_the_rest(dst: Path) -> bool:
    """Whether every file of ``ok`` arrived whole."""
    return all(
        (dst / "ok" / f"f{i}").read_bytes() == b"%d" % i for i in range(OK_FILES)
    )
