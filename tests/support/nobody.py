"""Running the rcp CLI as an unprivileged user, for tests that root would pass trivially.

Root reads unreadable files and may mknod devices; to test those failures as root, the
CLI runs as ``nobody`` (setpriv, no supplementary groups) on a world-writable directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

NOBODY = 65534
RCP_MAIN = "from rcp_provider.cli.rcp import main; raise SystemExit(main())"
RCP = [sys.executable, "-c", RCP_MAIN]
"""The rcp CLI of this interpreter, as a command prefix."""


@contextmanager
def world_dir() -> Iterator[Path]:
    """A fresh ``0777`` directory under /tmp that ``nobody`` can reach; removed after."""
    path = Path(tempfile.mkdtemp(prefix="rcp-nobody-", dir="/tmp"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def give_to_nobody(root: Path, unreadable: list[str]) -> None:
    """chown everything under ``root`` to nobody, then ``chmod 000`` the named ones."""
    os.chown(root, NOBODY, NOBODY)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), NOBODY, NOBODY, follow_symlinks=False)
    for rel in unreadable:
        os.chmod(root / rel, 0)


def rcp_as_nobody(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the rcp CLI as nobody:nogroup, in one process.

    One process: nobody cannot start helper processes here, because the venv's
    interpreter links into root's private home (the run would go on without them, with
    a warning these tests would have to tell apart from the errors they count).
    """
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={NOBODY}",
            f"--regid={NOBODY}",
            "--clear-groups",
            *RCP,
            "--max-processes",
            "1",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
