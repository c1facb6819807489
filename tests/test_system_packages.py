"""Every program the tests start comes from a package `make test` installs.

The list is tests/support/commands.py (its guard fails a test that starts anything
else); the packages are the Makefile's ``SYSTEM_PACKAGES``. A program whose package is
neither there nor essential to Debian would pass here only on a machine that happened
to have it, and fail on a fresh one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import commands

REPO = Path(__file__).resolve().parents[1]


def _make_test_packages() -> set[str]:
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "system-packages"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def _package_of(path: str) -> str:
    """The Debian package that installed ``path`` (``dpkg -S``; a merged ``/usr``
    records some files under ``/bin`` or ``/sbin``)."""
    real = os.path.realpath(path)
    candidates = [real, path]
    if real.startswith(("/usr/bin/", "/usr/sbin/")):
        candidates.append(real.removeprefix("/usr"))
    for candidate in candidates:
        found = subprocess.run(
            ["dpkg", "-S", candidate], capture_output=True, text=True, check=False
        )
        if found.returncode == 0:
            return found.stdout.split(":", 1)[0].strip()
    raise AssertionError(f"{path}: no Debian package owns it (dpkg -S)")


def _essential(package: str) -> bool:
    field = subprocess.run(
        ["dpkg-query", "-W", "-f=${Essential}", package],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return field.strip() == "yes"


def test_make_test_installs_the_package_of_every_program_the_tests_start() -> None:
    if shutil.which("dpkg") is None:
        pytest.fail("this check needs dpkg: the tests run on Debian", pytrace=False)
    packages = _make_test_packages()
    problems = []
    for command in sorted(commands.COMMANDS):
        path = shutil.which(command)
        if path is None:
            problems.append(f"{command}: not installed (run `make system` as root)")
            continue
        package = _package_of(path)
        if package not in packages and not _essential(package):
            problems.append(
                f"{command}: from {package}, which the Makefile's SYSTEM_PACKAGES "
                "does not name and Debian does not mark essential"
            )
    assert not problems, "\n".join(problems)


def test_the_guard_refuses_a_program_the_list_does_not_name(tmp_path: Path) -> None:
    """In this very process (the guard is installed by conftest)."""
    with pytest.raises(commands.UnlistedCommandError, match="'dpkg-deb'"):
        subprocess.run(["dpkg-deb", "--version"], check=False)
    with pytest.raises(commands.UnlistedCommandError, match="'dpkg-deb'"):
        subprocess.run(["ip", "netns", "exec", "none", "dpkg-deb"], check=False)
    with pytest.raises(commands.UnlistedCommandError, match="'dpkg-deb'"):
        subprocess.run(["env", "A=1", "dpkg-deb", "--version"], check=False)


def test_the_guard_lets_listed_and_project_programs_start(tmp_path: Path) -> None:
    assert subprocess.run(["true"], check=False).returncode == 0
    stand_in = tmp_path / "rsync"
    stand_in.write_text("#!/bin/sh\nexit 3\n")
    stand_in.chmod(0o755)
    assert subprocess.run([str(stand_in)], check=False).returncode == 3
    python = subprocess.run([sys.executable, "-c", "pass"], check=False)
    assert python.returncode == 0
