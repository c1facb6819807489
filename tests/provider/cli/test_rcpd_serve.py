"""``rcpd serve`` as a process: announce line, stored identity, jobs, clean stop; a
session for one SSH client (``--session``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from rcp_core.errors import RemoteError, UsageError
from rcp_core.remote.client import ServiceClient
from support.services import RCPD, RcpdServe

TOKEN = "a-token-for-this-test"
TIMEOUT = 30.0


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    found = {n: tmp_path / n for n in ("data", "backup", "identity", "token")}
    found["data"].mkdir()
    found["backup"].mkdir()
    found["token"].write_text(TOKEN + "\n")
    return found


def serve(paths: dict[str, Path]) -> RcpdServe:
    return RcpdServe(
        [
            "--root",
            str(paths["data"]),
            "--root",
            str(paths["backup"]),
            "--token-file",
            str(paths["token"]),
            "--identity",
            str(paths["identity"]),
        ],
        token=TOKEN,
    )


def test_a_service_copies_for_its_clients_and_stops_on_sigterm(
    paths: dict[str, Path],
) -> None:
    (paths["data"] / "tree").mkdir()
    (paths["data"] / "tree" / "f").write_bytes(b"x" * 10_000)
    running = serve(paths)
    try:
        assert sorted(running.announce["roots"]) == [
            str(paths["backup"]),
            str(paths["data"]),
        ]
        with running.client() as client:
            job = client.submit([str(paths["data"] / "tree")], f"{paths['backup']}/")
            done = client.wait(job["job"], TIMEOUT)
        assert done["state"] == "succeeded", done
        assert (paths["backup"] / "tree" / "f").read_bytes() == b"x" * 10_000
    finally:
        assert running.stop() == 0, running.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_every_stop_signal_stops_the_service_cleanly(
    paths: dict[str, Path], signum: signal.Signals
) -> None:
    """SIGINT and SIGHUP stop it as SIGTERM does: its jobs cancelled, exit 0."""
    running = serve(paths)
    running.proc.send_signal(signum)
    assert running.proc.wait(timeout=TIMEOUT) == 0
    assert running.stop() == 0, running.stderr


def test_the_identity_is_kept_so_clients_pins_hold(paths: dict[str, Path]) -> None:
    first = serve(paths)
    fingerprint = first.announce["fingerprint"]
    assert first.stop() == 0
    assert (paths["identity"] / "key.pem").stat().st_mode & 0o077 == 0
    second = serve(paths)
    try:
        assert second.announce["fingerprint"] == fingerprint
        with second.client() as client:
            assert client.jobs() == []
    finally:
        second.stop()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "must authenticate its clients"),
        (["--token-file", "/nonexistent/token"], "--token-file"),
        (["--max-jobs", "0", "--token-file", "TOKEN"], "--max-jobs"),
        (["--token-file", "TOKEN", "--listen", "host:99999"], "out of range"),
    ],
)
def test_bad_service_options_are_one_line_usage_errors(
    paths: dict[str, Path], args: list[str], message: str
) -> None:
    args = [a.replace("TOKEN", str(paths["token"])) for a in args]
    result = subprocess.run(
        [*RCPD, "serve", "--root", str(paths["data"]), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(paths["identity"])},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("rcpd: error: ")
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


SESSION_TOKEN = "s" * 43


def start_session(root: Path, identity: Path) -> subprocess.Popen[str]:
    """``rcpd serve --session`` as sshd would run it: ``SSH_CONNECTION`` set, the
    setup channel on stdin and stdout."""
    return subprocess.Popen(
        [*RCPD, "serve", "--session", "--root", str(root), "--identity", str(identity)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SSH_CONNECTION": "127.0.0.1 40000 127.0.0.1 22"},
    )


def test_a_session_serves_its_token_holder_until_stdin_closes(
    paths: dict[str, Path],
) -> None:
    """The token comes on stdin, the identity is fresh (nothing stored), the
    service listens on the address SSH reached, confined to the operand's tree (a
    file's directory), and it ends with its stdin."""
    (paths["data"] / "tree").mkdir()
    (paths["data"] / "tree" / "f").write_bytes(b"x" * 100)
    proc = start_session(paths["data"] / "tree" / "f", paths["identity"])
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(json.dumps({"token": SESSION_TOKEN}) + "\n")
    proc.stdin.flush()
    announce = json.loads(proc.stdout.readline())
    host, _, port = announce["listening"].rpartition(":")
    assert host == "127.0.0.1"
    assert announce["roots"] == [str(paths["data"] / "tree")]
    assert not paths["identity"].exists()

    def client(token: str) -> ServiceClient:
        return ServiceClient(
            host,
            int(port),
            fingerprint=announce["fingerprint"],
            token=token,
            timeout=TIMEOUT,
        )

    with client(SESSION_TOKEN) as trusted:
        assert trusted.stat(str(paths["data"] / "tree" / "f")).stat.st_size == 100
        with pytest.raises(UsageError, match="outside this service's roots"):
            trusted.stat(str(paths["data"]))
    with (
        client("t" * 43) as stranger,
        pytest.raises(RemoteError, match="authentication failed"),
    ):
        stranger.stat(str(paths["data"] / "tree" / "f"))
    proc.stdin.close()
    assert proc.wait(TIMEOUT) == 0
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ('{"token": "short"}\n', "at least 32 characters"),
        ("a token\n", "not JSON"),
        ("", "closed the setup channel"),
    ],
)
def test_a_session_without_a_good_token_never_listens(
    paths: dict[str, Path], setup: str, message: str
) -> None:
    proc = start_session(paths["data"], paths["identity"])
    out, err = proc.communicate(setup, timeout=TIMEOUT)
    assert proc.returncode != 0
    assert out == ""
    assert message in err
