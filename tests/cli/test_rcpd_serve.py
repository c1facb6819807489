"""``rcpd serve`` as a process: announce line, stored identity, jobs, clean stop."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rcp_core.remote.client import ServiceClient

RCPD = [sys.executable, "-m", "rcp_provider.cli.rcpd"]
TOKEN = "a-token-for-this-test"
TIMEOUT = 30.0


class Running:
    """An ``rcpd serve`` process and what it announced."""

    def __init__(self, args: list[str]) -> None:
        self.stderr = ""
        self.proc = subprocess.Popen(
            [*RCPD, "serve", "--listen", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.stop()
            raise AssertionError(f"rcpd serve did not start: {self.stderr}")
        self.announce: dict[str, Any] = json.loads(line)
        host, _, port = self.announce["listening"].rpartition(":")
        self.address = (host, int(port))

    def client(self) -> ServiceClient:
        return ServiceClient(
            *self.address,
            fingerprint=self.announce["fingerprint"],
            token=TOKEN,
            timeout=TIMEOUT,
        )

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        _, self.stderr = self.proc.communicate(timeout=TIMEOUT)
        return self.proc.returncode


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    found = {n: tmp_path / n for n in ("data", "backup", "identity", "token")}
    found["data"].mkdir()
    found["backup"].mkdir()
    found["token"].write_text(TOKEN + "\n")
    return found


def serve(paths: dict[str, Path]) -> Running:
    return Running(
        [
            "--root",
            str(paths["data"]),
            "--root",
            str(paths["backup"]),
            "--token-file",
            str(paths["token"]),
            "--identity",
            str(paths["identity"]),
        ]
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
