"""Entries no one may change or remove, root included, for tests of what a tool does
when one entry fails: ``chattr +i`` (on a filesystem that has the flag: ext4, XFS;
not tmpfs), taken off again when the block ends, so the test's directory can go."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """``path`` immutable for the block."""
    subprocess.run(["chattr", "+i", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
