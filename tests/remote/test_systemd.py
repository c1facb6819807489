"""``rcpd serve`` as a systemd unit: the shipped unit file verifies clean with
``systemd-analyze verify``; the service speaks systemd's notification protocol to a
real ``$NOTIFY_SOCKET`` (READY=1 once listening, WATCHDOG=1 every half
``WatchdogSec``, STOPPING=1 on SIGTERM); ``--log-format json`` logs a JSON object a
line. (No systemd runs as this machine's init: the protocol is tested against its
socket, the unit against systemd's own checker.)"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.services import TOKEN, RcpdServe

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "contrib" / "systemd" / "rcpd.service"
RCPD = str(Path(sys.executable).with_name("rcpd"))


def test_the_unit_file_verifies_clean(tmp_path: Path) -> None:
    """As installed: ExecStart names this environment's rcpd (verify checks that
    the program exists)."""
    unit = tmp_path / "rcpd.service"
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/rcpd", RCPD))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr
    text = UNIT.read_text()
    for setting in (
        "Type=notify",
        "WatchdogSec=",
        "ProtectSystem=strict",
        "--log-format json",
    ):
        assert setting in text


def test_ready_watchdog_and_stopping_reach_the_notify_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "token").write_text(TOKEN)
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.settimeout(10)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        monkeypatch.setenv("WATCHDOG_USEC", "400000")  # a ping every 0.2 s
        rcpd = RcpdServe(
            [
                "--root", str(tmp_path / "data"),
                "--token-file", str(tmp_path / "token"),
                "--log-format", "json",
            ]
        )  # fmt: skip
        try:
            assert sock.recv(256) == b"READY=1"  # after the announcement was read
            started = time.monotonic()
            assert [sock.recv(256) for _ in range(3)] == [b"WATCHDOG=1"] * 3
            assert time.monotonic() - started < 3
            (tmp_path / "data" / "a").mkdir()
            with rcpd.client() as client:
                job = client.submit(
                    [str(tmp_path / "data" / "a")], str(tmp_path / "data" / "b")
                )
                assert client.wait(job["job"], 30)["state"] == "succeeded"
        finally:
            assert rcpd.stop() == 0, rcpd.stderr
        messages = []
        sock.settimeout(0.5)
        while True:
            try:
                messages.append(sock.recv(256))
            except TimeoutError:
                break
    assert b"STOPPING=1" in messages
    lines = [json.loads(line) for line in rcpd.stderr.splitlines()]
    [ended] = [line for line in lines if line["message"].endswith("succeeded")]
    assert ended["level"] == "info"
    assert ended["logger"] == "rcp_core"
    assert ended["time"].endswith("Z")
