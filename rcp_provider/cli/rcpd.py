"""``rcpd``: rcp's remote copy daemon.

Two ways to run it:

- ``rcpd --role source|destination``: one role of one copy, started by ``rcp`` over
  SSH; it speaks to its master on stdin/stdout (:mod:`rcp_core.remote.daemon`) and its
  own messages go to stderr, which SSH passes back (not for direct use);
- ``rcpd serve --listen ADDR --root DIR [--root DIR...]``: a long-running service
  that runs copy jobs and file requests beneath its roots for authenticated clients
  (:mod:`rcp_core.remote.service`), the shape an Airflow connection points at. Once
  listening it prints one JSON line on stdout: its address and its certificate's
  fingerprint, which clients pin. SIGTERM, SIGINT or SIGHUP stop it: running jobs are
  cancelled (their finished files stay, no half-written file does);
- ``rcpd serve --session --root PATH``: the same service for one SSH session, started
  by ``rcmp`` to compare a ``host:/path`` tree where it is. It reads its clients'
  token as one JSON line on stdin (never on a command line), makes a fresh identity,
  listens on the address the SSH client reached (any free port), and stops when stdin
  closes: it lives exactly as long as the SSH session.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from rcp_core.errors import RcpError, UsageError
from rcp_core.remote import SERVICE_PORT
from rcp_core.remote.daemon import read_line, serve, ssh_addresses
from rcp_core.remote.hello import Role
from rcp_core.remote.listening import endpoint, family, port_ranges
from rcp_core.remote.sdnotify import Watchdog, notify, watchdog_interval
from rcp_core.run.runtime import STOP_SIGNALS
from rcp_provider.cli.common import OneLineErrorParser, interrupted

if TYPE_CHECKING:
    from rcp_core.remote.service import Service

TOKEN_ENV = "RCPD_TOKEN"
MIN_SESSION_TOKEN = 32
"""The shortest secret a session accepts (``rcmp`` sends 43 characters, 256 bits)."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="rcpd: %(message)s"
    )
    # Where connections go is its master's to tell (rcp -v), not a daemon's log.
    logging.getLogger("rcp_core.network").setLevel(logging.WARNING)
    try:
        if argv[:1] == ["serve"]:
            return run_service(service_parser().parse_args(argv[1:]))
        args = role_parser().parse_args(argv)
        return serve(
            Role(args.role), args.bind, args.timeout, port_ranges(args.port_ranges)
        )
    except UsageError as exc:
        print(f"rcpd: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except (RcpError, OSError, ValueError) as exc:
        print(f"rcpd: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt as exc:  # a role's master stops it by closing its link
        return interrupted("rcpd", None, exc)


def role_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcpd",
        description="rcp's remote copy daemon: a role started by rcp over SSH, or "
        "`rcpd serve` for a long-running service",
    )
    parser.add_argument(
        "--role",
        required=True,
        choices=["source", "destination"],
        help="the side of the copy this daemon is (rcp starts it over SSH)",
    )
    parser.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    add_port_ranges(parser, "its listener")
    parser.add_argument(
        "--timeout", type=float, default=15.0, help="seconds for each setup step"
    )
    return parser


def add_port_ranges(parser: argparse.ArgumentParser, whose: str) -> None:
    """``--port-ranges``: the ports ``whose`` may take (a firewall's)."""
    parser.add_argument(
        "--port-ranges",
        metavar="RANGES",
        help=f"ports {whose} may listen on, e.g. 40000-40099,41000:41009 "
        "(default: any free port)",
    )


def service_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="rcpd serve",
        description="run copy jobs, and serve files, beneath --root directories for "
        "authenticated clients (the Airflow hook, RcpFileSystem)",
        examples=[
            (
                "rcpd serve --root /srv/data --token-file /etc/rcp/token",
                "on 127.0.0.1:7450; prints its certificate's fingerprint",
            ),
            (
                "rcpd serve --listen 0.0.0.0:7450 --root /a --root /b --token-file T",
                "for other hosts, two roots",
            ),
        ],
    )
    parser.add_argument(
        "--listen",
        help=f"address and port (default 127.0.0.1:{SERVICE_PORT}; with --session "
        "the address the SSH client reached, any free port; [::] for IPv6)",
    )
    parser.add_argument(
        "--root",
        action="append",
        required=True,
        help="a directory the service serves (repeat for several; with --session "
        "a file's directory is served)",
    )
    parser.add_argument(
        "--session",
        action="store_true",
        help="serve one SSH session: the token is read from stdin, the identity is "
        "fresh, and the service stops when stdin closes",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help=f"a file holding the clients' shared secret (or ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--client-cert",
        action="append",
        type=Path,
        default=[],
        help="a PEM certificate of a client admitted by mutual TLS (repeatable)",
    )
    parser.add_argument(
        "--identity",
        type=Path,
        default=Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local/state"))
        / "rcpd",
        help="directory of the service's key and certificate, made on first start "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--max-jobs", type=int, default=2, help="jobs copying at once (default 2)"
    )
    parser.add_argument(
        "--max-client-jobs",
        type=int,
        default=100,
        metavar="N",
        help="jobs one client may hold queued or running (default 100); the next "
        "job to start is always the one of the client with the fewest running",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="keep the jobs in a database here (made if missing): finished jobs "
        "survive a restart, queued and running ones run again or fail as each "
        "job's on_restart says (default: jobs live in memory)",
    )
    parser.add_argument(
        "--http-listen",
        metavar="ADDR:PORT",
        help="serve Prometheus metrics (/metrics) and a status page (/) there, "
        "with the service's TLS and token (default: no HTTP port)",
    )
    parser.add_argument(
        "--keep-jobs",
        type=int,
        default=1000,
        metavar="N",
        help="finished jobs remembered (default 1000)",
    )
    parser.add_argument(
        "--keep-days",
        type=float,
        default=30.0,
        metavar="DAYS",
        help="days a finished job is remembered (default 30)",
    )
    add_port_ranges(parser, "the listeners of copies between hosts (send jobs)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=15.0,
        help="seconds for a handshake and for each frame (default 15)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="close a client connection idle this long (default 300)",
    )
    parser.add_argument(
        "--no-encryption",
        action="store_true",
        help="plain TCP (the token still required), for trusted networks only",
    )
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="log lines on stderr as text, or one JSON object a line (time, level, "
        "logger, message) for journald and log shippers (default text)",
    )
    return parser


def run_service(args: argparse.Namespace) -> int:
    # Imported here: the SSH-launched roles do not need the service's modules.
    from rcp_core.backends.operands import parse_address
    from rcp_core.remote import tls
    from rcp_core.remote.service import Service, ServiceConfig

    if args.log_format == "json":
        for handler in logging.getLogger().handlers:
            handler.setFormatter(JsonLines())
    if args.max_jobs < 1 or args.max_client_jobs < 1:
        raise UsageError("--max-jobs and --max-client-jobs must be at least 1")
    if args.session and args.state_dir:
        raise UsageError("--session serves one SSH session: no --state-dir")
    if args.session and (args.token_file or args.client_cert):
        raise UsageError(
            "--session reads its token from stdin: no --token-file or --client-cert"
        )
    host, port = parse_address(
        args.listen or _default_listen(args.session), SERVICE_PORT
    )
    name = f"rcpd {socket.gethostname()}"
    identity: tls.Identity | None = None
    if args.session:
        token: str | None = _session_token(args.timeout)
        roots = [_served_directory(root) for root in args.root]
        if not args.no_encryption:
            identity = tls.Identity.ephemeral(name)
    else:
        token, roots = _token(args.token_file), args.root
        if not args.no_encryption:
            identity = tls.Identity.stored(args.identity, name)
    config = ServiceConfig(
        roots=roots,
        identity=identity,
        token=token,
        client_certs=[path.read_text() for path in args.client_cert],
        encrypt=not args.no_encryption,
        max_running=args.max_jobs,
        timeout=args.timeout,
        idle=args.idle_timeout,
        ports=port_ranges(args.port_ranges),
        state_dir=None if args.state_dir is None else str(args.state_dir),
        keep_jobs=args.keep_jobs,
        keep_days=args.keep_days,
        http=None if args.http_listen is None else parse_address(args.http_listen, 0),
        max_client_jobs=args.max_client_jobs,
        name=name,
    )
    if args.no_encryption:
        logging.getLogger("rcp_core").warning(
            "--no-encryption: requests and tokens travel in plain text"
        )
    listener = socket.create_server((host, port), family=family(host))
    service = Service(config, listener)
    announce = {
        "listening": endpoint(*service.address),
        "fingerprint": identity.fingerprint if identity else None,
        "roots": service.roots.paths,
    }
    if service.http is not None:
        announce["http"] = endpoint(*service.http.address)

    def stop(signum: int, frame: FrameType | None) -> None:
        notify("STOPPING=1")
        threading.Thread(target=service.close, daemon=True).start()

    # Before the announcement: whoever reads it may stop the service at once.
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    print(json.dumps(announce), flush=True)
    notify("READY=1")
    interval = watchdog_interval()
    if interval is not None:  # a stuck job table stops the pings
        Watchdog(interval, lambda: service.jobs.jobs() is not None).start()
    if args.session:
        threading.Thread(target=_close_at_eof, args=(service,), daemon=True).start()
    service.serve_forever()
    return 0


class JsonLines(logging.Formatter):
    """A log record as one JSON object: ``time`` (UTC, ISO 8601), ``level``,
    ``logger``, ``message`` and, with a traceback, ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def _default_listen(session: bool) -> str:
    """Loopback on the service port; for a session, the address the SSH client
    reached (any port), so the service is not exposed on other interfaces."""
    if not session:
        return f"127.0.0.1:{SERVICE_PORT}"
    _, ours = ssh_addresses()
    if ours is None:
        return "0.0.0.0:0"
    return f"[{ours}]:0" if ":" in ours else f"{ours}:0"


def _session_token(timeout: float) -> str:
    """The token on the setup line (``{"token": "..."}``), within ``timeout``."""
    try:
        setup = json.loads(read_line(sys.stdin, timeout, "the SSH client"))
    except ValueError as exc:
        raise UsageError("the setup line is not JSON") from exc
    token = setup.get("token") if isinstance(setup, dict) else None
    if not isinstance(token, str) or len(token) < MIN_SESSION_TOKEN:
        raise UsageError(
            f"the setup line needs a token of at least {MIN_SESSION_TOKEN} characters"
        )
    return token


def _served_directory(root: str) -> str:
    """A session's root: the operand itself when it is a directory, else (a file,
    a symlink to one) the directory that holds it."""
    if os.path.isdir(root):
        return root
    return os.path.dirname(os.path.normpath(root)) or "/"


def _close_at_eof(service: Service) -> None:
    """Stop ``service`` when stdin closes: the SSH session that started it ended."""
    while os.read(0, 4096):
        pass
    service.close()


def _token(path: Path | None) -> str | None:
    """The shared secret from its file (first line) or the environment."""
    if path is not None:
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise UsageError(f"--token-file {path}: {exc.strerror}") from exc
        if not token:
            raise UsageError(f"--token-file {path} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


if __name__ == "__main__":
    sys.exit(main())
