"""``--itemize-changes`` and ``--log-file`` on the engines that honour them: every
change recorded once, after it happened, in rsync's letters and as JSON lines, from
helper processes too; a URL store's by URL. (Each flag's effect on local operands and
its refusal between hosts: ``test_rcp_options.py``.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import fsspec
import pytest

from rcp_provider.cli.rcp import main
from support.nobody import RCP


def rcp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RCP, *args], capture_output=True, text=True, timeout=120, check=False
    )


def _records(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_helper_processes_changes_are_recorded_once_each(tmp_path: Path) -> None:
    """Files copied by helper processes travel to the caller's record: one line
    and one JSON record per file, whichever process copied it."""
    src = tmp_path / "src"
    for d in range(8):
        (src / f"d{d}").mkdir(parents=True)
        for i in range(100):
            (src / f"d{d}" / f"f{i}").write_bytes(os.urandom(64))
    log = tmp_path / "log.jsonl"
    done = rcp(
        "-i",
        "--log-file",
        str(log),
        "--max-processes",
        "3",
        "-vv",
        str(src),
        str(tmp_path / "dst"),
    )
    assert done.returncode == 0, done.stderr
    batches = re.search(r"helper batches (\d+)", done.stdout)
    assert batches is not None
    assert int(batches[1]) > 0, "helper processes copied files"
    files = sorted(f"dst/d{d}/f{i}" for d in range(8) for i in range(100))
    itemized = sorted(
        line.split(" ", 1)[1]
        for line in done.stdout.splitlines()
        if line.startswith(">f+++++++++ ")
    )
    assert itemized == files
    records = _records(log)
    assert sorted(r["path"] for r in records if r["kind"] == "file") == files
    assert {(r["action"], r["bytes"]) for r in records if r["kind"] == "file"} == {
        ("create", 64)
    }
    assert all(r["method"] for r in records if r["kind"] == "file")


def test_a_store_copy_records_its_changes_by_url(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store engine records what it wrote and what --delete removed, by URL."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a").write_bytes(b"alpha\n")
    (src / "sub" / "b").write_bytes(b"beta\n")
    log = tmp_path / "log.jsonl"
    url = "memory://records/dst"
    fsspec.filesystem("memory").mkdir("/records")
    try:
        assert main(["-i", "--log-file", str(log), str(src), url]) == 0
        first = capsys.readouterr().out.splitlines()
        assert ">f+++++++++ memory:///records/dst/a" in first
        assert ">f+++++++++ memory:///records/dst/sub/b" in first
        (src / "a").write_bytes(b"alpha, longer\n")
        fsspec.filesystem("memory").pipe("/records/dst/stale", b"not in the source")
        assert (
            main(["-i", "-o", "--delete", "--log-file", str(log), str(src), url]) == 0
        )
        second = capsys.readouterr().out.splitlines()
        assert sorted(line for line in second if line[:1] in ">*") == [
            "*deleting   memory:///records/dst/stale",
            # memory:// keeps no mtimes: only the size is said to differ.
            ">f.s....... memory:///records/dst/a",
        ]
        records = _records(log)
        assert [
            (r["action"], r["bytes"]) for r in records if r["path"].endswith("/a")
        ] == [
            ("create", 6),
            ("replace", 14),
        ]
        assert {r["action"] for r in records if r["path"].endswith("/stale")} == {
            "remove"
        }
    finally:
        fsspec.filesystem("memory").rm("/records", recursive=True)


def test_a_dry_run_records_nothing_and_says_so(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    done = rcp("-i", "--dry-run", "brief", str(src), str(tmp_path / "dst"))
    assert done.returncode == 2
    assert "a dry run changes nothing" in done.stderr
    assert not (tmp_path / "dst").exists()


def test_a_log_file_that_cannot_be_opened_is_a_usage_error(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    done = rcp(
        "--log-file", str(tmp_path / "no" / "log"), str(src), str(tmp_path / "dst")
    )
    assert done.returncode == 2
    assert "cannot open --log-file" in done.stderr
    assert not (tmp_path / "dst").exists()


def test_the_log_file_is_appended_to(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    log = tmp_path / "log.jsonl"
    log.write_text('{"earlier": true}\n')
    assert rcp("--log-file", str(log), str(src), str(tmp_path / "dst")).returncode == 0
    records = _records(log)
    assert records[0] == {"earlier": True}
    assert {r.get("path") for r in records[1:]} == {"dst", "dst/a"}
