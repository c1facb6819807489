"""The tools' exit-status table (``rcp_provider.cli.common.Exit``, the README's "Exit
statuses") holds for real runs: each status from the situation it names. (128 + N,
a signal's, is the reliability suite's: tests/reliability/test_signals.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rcp_provider.cli.common import Exit

RCP = str(Path(sys.executable).with_name("rcp"))
RCMP = str(Path(sys.executable).with_name("rcmp"))
README = Path(__file__).resolve().parents[3] / "README.md"


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=120, check=False
    )


def tree(root: Path, files: int = 20) -> Path:
    (root / "d").mkdir(parents=True)
    for i in range(files):
        (root / "d" / f"f{i:03}").write_bytes(b"%d" % i)
    return root


def test_the_readme_carries_the_table() -> None:
    table = README.read_text().partition("### Exit statuses")[2].partition("\n### ")[0]
    for status in Exit:
        assert f"\n| {status.value} | " in table, status


def test_success_usage_and_failed_entries(tmp_path: Path) -> None:
    src = tree(tmp_path / "src")
    assert run(RCP, str(src), str(tmp_path / "dst")).returncode == Exit.OK
    again = run(RCP, str(src), str(tmp_path / "dst"))  # exists, no policy
    assert again.returncode == Exit.USAGE, again.stderr
    assert run(RCP, "--no-such-flag", str(src), str(tmp_path / "x")).returncode == 2
    # An immutable destination file (chattr +i): that entry fails, the rest copies.
    dst = tmp_path / "blocked"
    assert run(RCP, str(src), str(dst)).returncode == Exit.OK
    (src / "d" / "f000").write_bytes(b"changed")
    locked = dst / "d" / "f000"
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    try:
        failed = run(
            RCP, "-o", "--summary-json", str(tmp_path / "s.json"), str(src), str(dst)
        )
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert failed.returncode == Exit.FAILED, failed.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert (summary["errors"], summary["vanished"]) == (1, 0)
    assert summary["unchanged"]["files"] == 19


def test_verification_differences(tmp_path: Path) -> None:
    src = tree(tmp_path / "src")
    dst = tmp_path / "dst"
    assert run(RCP, str(src), str(dst)).returncode == Exit.OK
    # Same size and mtime (what -o trusts), other bytes: only a checksum sees it.
    target = dst / "d" / "f007"
    st = target.stat()
    target.write_bytes(b"X")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert run(RCMP, str(src), str(dst)).returncode == Exit.OK
    assert run(RCMP, "--checksum", str(src), str(dst)).returncode == Exit.DIFFERENT
    verified = run(RCP, "-o", "--verify", "checksum", str(src), str(dst))
    assert verified.returncode == Exit.DIFFERENT, verified.stderr


def test_sources_that_vanish_during_the_run(tmp_path: Path) -> None:
    """Files the walk listed, removed before the (throttled) copy reached them: the
    run's only errors, counted as vanished; exit 4; the rest copied."""
    src = tree(tmp_path / "src", files=200)
    out = tmp_path / "s.json"
    proc = subprocess.Popen(
        [
            RCP,
            "--ops-throttle",
            "40",
            "--summary-json",
            str(out),
            str(src),
            str(tmp_path / "dst"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "dst" / "d").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    gone = [src / "d" / f"f{i:03}" for i in range(150, 200)]
    for path in gone:
        path.unlink()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == Exit.VANISHED, err
    summary = json.loads(out.read_text())
    assert summary["errors"] == summary["vanished"] > 0
    assert summary["copied"]["files"] + summary["vanished"] == 200


def test_a_host_that_cannot_be_reached(tmp_path: Path) -> None:
    """The SSH login fails (a command that is not ssh at all): a remote failure."""
    src = tree(tmp_path / "src")
    done = run(RCP, "--ssh", "false", str(src), f"nohost:{tmp_path / 'dst'}")
    assert done.returncode == Exit.REMOTE, done.stderr
    assert not (tmp_path / "dst").exists()
    rrm = str(Path(sys.executable).with_name("rrm"))
    removal = run(rrm, "--ssh", "false", f"nohost:{src}")
    assert removal.returncode == Exit.REMOTE, removal.stderr
    assert (src / "d" / "f000").exists()
