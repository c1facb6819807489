"""``rcmp`` and ``rcp --verify`` as a user runs them: NDJSON lines, exit codes, and a
single flipped byte that only a checksum sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.nobody import RCP
from support.services import TOKEN, RcpdServe

RCMP = [sys.executable, "-m", "rcp_provider.cli.rcmp"]


def run(command: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    """A tree and its exact copy (``rcp``), one large file among small ones."""
    src = tmp_path / "src"
    for d in range(4):
        (src / f"d{d}").mkdir(parents=True)
        for f in range(25):
            (src / f"d{d}" / f"f{f}").write_bytes(os.urandom(200))
    (src / "big").write_bytes(os.urandom(40 << 20))  # hashed in several segments
    done = run(RCP, str(src), str(tmp_path / "dst"))
    assert done.returncode == 0, done.stderr
    return src, tmp_path / "dst"


def flip_a_byte(path: Path, offset: int) -> None:
    """Change one byte, keeping the size and the mtime: metadata cannot tell."""
    st = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def lines(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines()]


def test_same_trees_exit_0_with_the_summary_last(trees: tuple[Path, Path]) -> None:
    done = run(RCMP, "--checksum", *map(str, trees))
    assert done.returncode == 0, done.stderr
    (summary,) = lines(done.stdout)
    assert summary["summary"]["same"] is True
    assert summary["summary"]["files_hashed"] == 101


def test_one_flipped_byte_is_found_only_by_checksum(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    src, dst = trees
    flip_a_byte(dst / "big", 33 << 20)
    assert run(RCMP, str(src), str(dst)).returncode == 0  # metadata: the same
    out = tmp_path / "summary.json"
    done = run(RCMP, "--checksum", "--summary-json", str(out), str(src), str(dst))
    assert done.returncode == 3
    *differences, summary = lines(done.stdout)
    assert differences == [
        {"path": "big", "kind": "content", "detail": differences[0]["detail"]}
    ]
    assert summary["summary"]["by_kind"]["content"] == 1
    assert json.loads(out.read_text())["differences"][0]["path"] == "big"


def test_missing_extra_and_errors(trees: tuple[Path, Path]) -> None:
    src, dst = trees
    (dst / "d0" / "f0").unlink()
    (dst / "extra").write_bytes(b"x")
    done = run(RCMP, str(src), str(dst))
    assert done.returncode == 3
    kinds = sorted((d["path"], d["kind"]) for d in lines(done.stdout)[:-1])
    assert ("d0/f0", "missing") in kinds
    assert ("extra", "extra") in kinds
    assert run(RCMP, str(src), str(dst / "nope")).returncode == 2
    assert run(RCMP, "--attrs", "colour", str(src), str(dst)).returncode == 2


def test_rcp_verify_checksum_fails_a_copy_that_metadata_calls_the_same(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    """``-o`` skips files whose size and mtime match; ``--verify checksum`` then
    catches the one whose contents do not."""
    src, dst = trees
    flip_a_byte(dst / "d2" / "f7", 10)
    out = tmp_path / "summary.json"
    kept = run(RCP, "-o", "--verify", "metadata", str(src), str(dst))
    assert kept.returncode == 0, kept.stderr
    done = run(
        RCP,
        "-o",
        "--verify",
        "checksum",
        "--summary-json",
        str(out),
        str(src),
        str(dst),
    )
    assert done.returncode == 3
    assert "differs from its source" in done.stderr
    verified = json.loads(out.read_text())["verified"]
    assert verified["mode"] == "checksum"
    assert verified["same"] is False
    assert [d["path"] for d in verified["differences"]] == ["d2/f7"]
    refused = run(RCP, "--verify", "checksum", "--dry-run", "brief", str(src), str(dst))
    assert refused.returncode == 2


def test_a_tree_on_a_service_is_compared_where_it_is(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    """The copy is on an ``rcpd serve`` service: its side is listed and hashed there
    (digest requests); the answer is the same as comparing the trees here."""
    src, dst = trees
    (tmp_path / "token").write_text(TOKEN)
    rcpd = RcpdServe(["--root", str(dst), "--token-file", str(tmp_path / "token")])
    try:
        host, port = rcpd.address
        trust = {
            "FSSPEC_RCP_FINGERPRINT": rcpd.announce["fingerprint"],
            "FSSPEC_RCP_TOKEN": TOKEN,
        }
        url = f"rcp://{host}:{port}{dst}"
        same = run_env(trust, RCMP, "--checksum", str(src), url)
        assert same.returncode == 0, same.stderr
        assert lines(same.stdout)[-1]["summary"]["files_hashed"] == 101
        flip_a_byte(dst / "big", 20 << 20)
        (dst / "d1" / "f3").unlink()
        differ = run_env(trust, RCMP, "--checksum", str(src), url)
        assert differ.returncode == 3
        found = sorted((d["path"], d["kind"]) for d in lines(differ.stdout)[:-1])
        assert found == [("big", "content"), ("d1", "mtime"), ("d1/f3", "missing")]
        untrusted = run(RCMP, str(src), url)
        assert untrusted.returncode == 2
        assert "fingerprint" in untrusted.stderr
    finally:
        rcpd.stop()


def run_env(
    env: dict[str, str], command: list[str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )


def test_launch_options_without_a_remote_tree_are_refused(
    trees: tuple[Path, Path],
) -> None:
    """``--ssh`` and ``--rcpd-path`` start rcpd on another host: between two local
    trees they would change nothing, so they are an error; a launch option at its
    default (``--remote-timeout 15``) changes nothing and passes."""
    src, dst = trees
    for args in (["--ssh", "ssh -v"], ["--rcpd-path", "/opt/rcpd"]):
        done = run(RCMP, *args, str(src), str(dst))
        assert done.returncode == 2, done.stderr
        assert f"{args[0]}: only for operands on another host" in done.stderr
    same = run(RCMP, "--remote-timeout", "15", str(src), str(dst))  # the default
    assert same.returncode == 0, same.stderr
