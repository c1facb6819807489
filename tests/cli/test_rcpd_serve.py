"""``rcpd serve`` as a process: announce line, stored identity, jobs, clean stop."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

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
