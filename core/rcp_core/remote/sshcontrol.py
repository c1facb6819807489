"""One SSH login per host for a burst of commands: OpenSSH connection sharing.

Where the user's configuration of a host says nothing about sharing connections
(``ssh -G`` reports ``controlmaster false`` and no ``controlpath``), :func:`options`
asks for it: ``-o ControlMaster=auto -o ControlPath=DIR/%C -o ControlPersist=60``.
The first command to a host logs in and keeps the connection (a master in the
background) for :data:`PERSIST` seconds after its last session ends; every later one
within them (the next ``rcp``, ``rcmp``, ``rrm``) opens a session on it without a new
login. Two that start at once with no master there each log in (the one that cannot
bind the socket goes without). ``rcp --no-ssh-reuse`` turns this off.

Invariants:

- the user's choice is never overridden: a ``ControlMaster`` or ``ControlPath`` in
  their configuration or on ``--ssh`` leaves the command as it is;
- the sockets live in a directory of this user's alone (:func:`control_dir`):
  created ``0700``, and used only while it is a real directory (not a symlink) owned by
  this user with no permission for anyone else; otherwise nothing is shared;
- when in doubt, nothing is shared: a command that is not ``ssh``, an ``ssh -G`` that
  fails or takes longer than :data:`PROBE_TIMEOUT`, a debug log level (``ssh -v``: the
  background master would then keep the stderr pipe that rcp reads to its end), a
  socket path longer than a Unix socket takes, or one ssh would not read back as it
  is (:data:`PLAIN_PATH`).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import tempfile
from collections.abc import Sequence

log = logging.getLogger("rcp_core")

PERSIST = 60
"""Seconds a shared connection stays open after its last session."""
PROBE_TIMEOUT = 10.0
"""Seconds for ``ssh -G`` (it reads the configuration; it does not connect)."""
SUN_PATH = 108
"""Bytes of a Unix socket's path, its final NUL included (``sun_path`` on Linux)."""
SOCKET_NAME = 1 + 40 + 17
"""What ssh adds to the directory: ``/``, ``%C`` (40 hex digits), and the dot and
16 characters of the temporary name it binds first."""
PLAIN_PATH = re.compile(r"[\w./@+:-]+")
"""A directory ssh reads back unchanged in ``ControlPath=``: no blank, quote, ``%``
token or ``~``."""


def control_dir() -> str:
    """Where this user's shared connections are: ``$XDG_RUNTIME_DIR/rcp-ssh`` (a
    directory of the user's alone, by its specification), else a directory of their
    own in the temporary directory (``rcp-ssh-UID``)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "rcp-ssh")
    return os.path.join(tempfile.gettempdir(), f"rcp-ssh-{os.getuid()}")


def private_dir() -> str | None:
    """:func:`control_dir`, made ``0700`` if missing; ``None`` (with the reason
    logged at debug level) when it is not this user's alone or cannot be made."""
    path = control_dir()
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        log.debug("no SSH connection sharing: %s: %s", path, exc.strerror)
        return None
    try:
        st = os.lstat(path)
    except OSError as exc:
        log.debug("no SSH connection sharing: %s: %s", path, exc.strerror)
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        log.debug("no SSH connection sharing: %s is not private to this user", path)
        return None
    if len(os.fsencode(path)) + SOCKET_NAME >= SUN_PATH:
        log.debug("no SSH connection sharing: %s is too long for a socket", path)
        return None
    if not PLAIN_PATH.fullmatch(path):
        log.debug("no SSH connection sharing: %r is not a plain path for ssh", path)
        return None
    return path


def effective(ssh: Sequence[str], destination: Sequence[str]) -> dict[str, str]:
    """The configuration ``ssh`` would use for ``destination`` (its ``-p PORT``,
    ``--`` and ``[user@]host``), as ``ssh -G`` prints it: lower-case keyword to value
    (a keyword given several times keeps its first value). Empty when ``ssh -G``
    fails.
    """
    try:
        proc = subprocess.run(
            [*ssh, "-G", *destination],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("no SSH connection sharing: ssh -G: %s", exc)
        return {}
    if proc.returncode != 0:
        log.debug("no SSH connection sharing: ssh -G exited %d", proc.returncode)
        return {}
    return parse_config(proc.stdout)


def parse_config(text: str) -> dict[str, str]:
    """``ssh -G``'s output (``keyword value`` lines) as a mapping; the first value of
    a keyword wins, as in ssh itself."""
    config: dict[str, str] = {}
    for line in text.splitlines():
        keyword, _, value = line.strip().partition(" ")
        if keyword:
            config.setdefault(keyword.lower(), value.strip())
    return config


def user_shares(config: dict[str, str]) -> bool:
    """Whether ``config`` (:func:`effective`) has connection sharing of the user's
    own: a ``ControlMaster`` other than ``no``, or a ``ControlPath`` other than
    ``none``."""
    master = config.get("controlmaster", "false")
    path = config.get("controlpath", "none")
    return master not in ("false", "no") or path != "none"


def options(ssh: Sequence[str], destination: Sequence[str]) -> list[str]:
    """The options that make ``ssh`` share its connection to ``destination``, or
    none (see the module's invariants)."""
    if not ssh or os.path.basename(ssh[0]) != "ssh":
        return []
    config = effective(ssh, destination)
    if not config:
        return []
    if user_shares(config):
        log.debug("SSH connection sharing: the user's own configuration")
        return []
    if config.get("loglevel", "").lower().startswith("debug"):
        log.debug("no SSH connection sharing: ssh logs at debug level")
        return []
    directory = private_dir()
    if directory is None:
        return []
    log.debug("ssh shares one connection per host through %s", directory)
    return [
        "-o",
        "ControlMaster=auto",
        "-o",
        f"ControlPath={os.path.join(directory, '%C')}",
        "-o",
        f"ControlPersist={PERSIST}",
    ]


def close(ssh: Sequence[str], destination: Sequence[str]) -> None:
    """Ask the shared connection to ``destination``, if :func:`options` gives one,
    to exit (``ssh -O exit``: it ends its sessions; it needs no network): after a
    link went down under it, its TCP connection can stall the next command's session
    for seconds, where a new login would not."""
    shared = options(ssh, destination)
    if not shared:
        return
    try:
        subprocess.run(
            [*ssh, *shared, "-O", "exit", *destination],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("ssh -O exit: %s", exc)
