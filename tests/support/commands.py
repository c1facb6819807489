"""The one list of external programs the tests start, and the guard that keeps it true.

A test that needs a program the machine does not have fails on a fresh machine, where
it passed on one that had the program by accident (``rsync``, which only ``make bench``
installed, was such a case). So:

- :data:`COMMANDS` names every program the tests start, or that the code they drive
  starts from the test process (``ssh``, ``ip``, ``mount``, ...);
- :func:`install_guard` (installed by ``conftest.py`` before any test) refuses to start
  any other program: an audit hook sees every ``subprocess``, ``os.exec*``,
  ``os.posix_spawn`` and ``os.system`` call of the test process and raises
  :class:`UnlistedCommandError` for a program not listed here, so the test fails at the
  call, naming the program and this file;
- ``tests/test_system_packages.py`` checks that each listed program comes from a Debian
  package (``dpkg -S``) that ``make test`` installs (the Makefile's
  ``SYSTEM_PACKAGES``) or that every Debian system has (``Essential: yes``).

Exempt are programs of the project itself: those under the repository (the built
``latencyfs``), the virtual environment (``python``, ``rcp``, ``rcpd``, ...) and the
temporary directories tests make stand-ins in. ``ip netns exec NS PROGRAM`` and
``env PROGRAM`` are checked for the program they start; a shell command line given to
``sh -c`` is not parsed, so a test should start programs directly.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COMMANDS = frozenset(
    {
        # coreutils, findutils, dash, util-linux, mount, libc-bin: on every Debian
        # system
        "cat",
        "chmod",  # the oracle of rchm's modes (tests/core/test_chmod.py)
        "env",
        "cp",
        "ls",
        "rm",
        "sh",
        "sha256sum",
        "touch",
        "true",
        "uname",  # platform.processor(), which the Azure SDK's user agent asks
        "xargs",
        "dpkg",
        "dpkg-query",
        "losetup",
        "mount",
        "umount",
        "unshare",
        "nsenter",
        "setpriv",
        "findmnt",
        "lsblk",
        "ldconfig",
        # the system packages `make test` installs
        "chattr",
        "filefrag",
        "mkfs.ext4",
        "mkfs.xfs",
        "xfs_info",
        "xfs_io",
        "getfacl",
        "setfacl",
        "fusermount3",
        "git",
        "make",
        "file",
        "pgrep",
        "pkill",
        "ip",
        "tc",
        "ssh",
        "ssh-keygen",
        "sshd",
        "rsync",
        "time",
        # nodejs: azurite, the Azure Blob emulator (benchmarks/objectstores.py)
        "node",
        # matplotlib (the benchmark harness's plots) lists the fonts once per user
        "fc-list",
        # the Celery broker of the distributed run (tests/operators/test_celery.py)
        "redis-server",
        # Chromium and its WebDriver: the browser tests (test_connection_form.py)
        "chromium",
        "chromedriver",
        # the shells the tools' completion scripts are for (test_completion.py)
        "bash",
        "zsh",
        # the manual pages' renderer (test_manpages.py)
        "groff",
        # the server that scrapes rcpd serve's metrics (test_prometheus.py)
        "prometheus",
        # systemd's checker of rcpd serve's unit file (test_systemd.py)
        "systemd-analyze",
    }
)
"""Every external program the tests start (see the module docstring)."""

_WRAPPERS = {"env": 1}
"""Programs that start the program named by their argument at this index."""


class UnlistedCommandError(RuntimeError):
    """A test started a program that :data:`COMMANDS` does not name."""


def _exempt_roots() -> tuple[str, ...]:
    repo = Path(__file__).resolve().parents[2]
    roots = {str(repo), sys.prefix, os.path.realpath(tempfile.gettempdir())}
    return tuple(os.path.realpath(root) + os.sep for root in roots)


_EXEMPT = _exempt_roots()


def started(argv: Sequence[str]) -> list[str]:
    """The programs ``argv`` starts: its own, and that of a wrapper it names."""
    if not argv:
        return []
    programs = [argv[0]]
    name = os.path.basename(argv[0])
    if name == "ip" and list(argv[1:3]) == ["netns", "exec"] and len(argv) > 4:
        programs += started(argv[4:])
    elif name in _WRAPPERS and len(argv) > _WRAPPERS[name]:
        rest = [a for a in argv[_WRAPPERS[name] :] if "=" not in a]
        programs += started(rest)
    return programs


def unlisted(program: str, path: str | None = None) -> str | None:
    """``program``'s name if it is neither listed nor the project's own; else None."""
    resolved = program if "/" in program else shutil.which(program, path=path)
    if resolved is not None:
        real = os.path.realpath(resolved)
        if real.startswith(_EXEMPT) or os.path.abspath(resolved).startswith(_EXEMPT):
            return None
    name = os.path.basename(program)
    return None if name in COMMANDS else name


def _argv(raw: Any) -> list[str]:
    if isinstance(raw, (str, bytes, os.PathLike)):
        return [os.fsdecode(raw)]
    return [os.fsdecode(a) for a in raw or ()]


def _check(argv: list[str], env: Any) -> None:
    path = None
    if isinstance(env, dict):
        value = env.get("PATH", env.get(b"PATH"))
        path = os.fsdecode(value) if value is not None else None
    for program in started(argv):
        name = unlisted(program, path)
        if name is not None:
            raise UnlistedCommandError(
                f"a test started {name!r}, which tests/support/commands.py does not "
                "list: add it there and its Debian package to the Makefile's "
                "SYSTEM_PACKAGES"
            )


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "subprocess.Popen":
        executable, argv, _cwd, env = args
        listed = _argv(argv)
        if executable is not None and listed:
            listed[0] = os.fsdecode(executable)
        _check(listed or _argv(executable), env)
    elif event in ("os.exec", "os.posix_spawn"):
        path, argv, env = args
        listed = _argv(argv) or [""]
        listed[0] = os.fsdecode(path)
        _check(listed, env)
    elif event == "os.system":
        _check(shlex.split(os.fsdecode(args[0]))[:1], None)


def install_guard() -> None:
    """Refuse, for the rest of this process, to start programs not listed here."""
    sys.addaudithook(_audit)
