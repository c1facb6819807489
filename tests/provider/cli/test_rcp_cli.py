"""The rcp command line: exit codes, one-line errors, summary and progress streams."""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import json
import logging
import os
import struct
import subprocess
import termios
from pathlib import Path

import fsspec
import pytest

from rcp_core import CopySettings, UsageError
from rcp_core.backends.capabilities import NOT_HONOURED
from rcp_core.backends.routing import Engine
from rcp_core.engine.portcopy import copy_tree
from rcp_provider.cli.rcp import main
from rcp_provider.fsspec.storetree import port_of_url
from support.nobody import RCP


def rcp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*RCP, *args], capture_output=True, text=True, cwd=cwd, timeout=120, check=False
    )


@pytest.fixture
def src(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "d").mkdir(parents=True)
    for i in range(50):
        (root / "d" / f"f{i}").write_bytes(os.urandom(100))
    (root / "big").write_bytes(os.urandom(3 << 20))
    return root


def test_copy_summary_and_json(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = rcp(
        "--summary", "--summary-json", str(out), str(src), str(tmp_path / "dst")
    )
    assert result.returncode == 0, result.stderr
    assert "copied:" in result.stdout
    assert "files 51" in result.stdout
    data = json.loads(out.read_text())
    assert data["copied"]["files"] == 51
    assert data["copied"]["dirs"] == 2
    assert data["copied"]["bytes"] == 50 * 100 + (3 << 20)
    assert data["errors"] == 0
    assert sum(data["methods"].values()) == 51
    assert data["peak_rss_bytes"] > 0


@pytest.mark.parametrize("command", ["rcp", "rrm", "rlink"])
def test_a_run_in_this_process_leaves_the_logger_as_it_found_it(
    command: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``main`` logs to its run's stdout; a process that goes on after it (a test
    suite, a program calling it) gets the ``rcp_core`` logger back. Before, the
    logger kept a handler on that stdout, closed after the run: every later record
    (a service job's ``job ... succeeded``) was a "Logging error", and reached no
    other handler."""
    main = importlib.import_module(f"rcp_provider.cli.{command}").main
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["-v", "/nonexistent-src", str(tmp_path / "dst")]) == 2
    stdout.close()
    logging.getLogger("rcp_core.remote.jobtable").warning("after the run")
    assert "Logging error" not in capsys.readouterr().err
    assert [r.getMessage() for r in caplog.records] == ["after the run"]


def test_progress_goes_to_stderr_as_text(src: Path, tmp_path: Path) -> None:
    result = rcp("--progress", "--progress-type", "text", str(src), str(tmp_path / "d"))
    assert result.returncode == 0
    assert "====" in result.stderr  # the final block is always printed
    assert "copied:" in result.stderr
    assert "====" not in result.stdout
    assert "\r" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--overwrite", "--ignore-existing"],
        ["--update", "--ignore-existing"],
        ["--preserve", "colour"],
        ["--overwrite-compare", "size,weight"],
        ["--dry-run", "loud"],
        ["--max-workers", "zero"],
        ["--max-processes", "0"],
    ],
)
def test_bad_flags_one_line_exit_2(src: Path, tmp_path: Path, args: list[str]) -> None:
    result = rcp(*args, str(src), str(tmp_path / "dst"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("rcp: error:")
    assert not (tmp_path / "dst").exists()


def test_existing_destination_exit_2(src: Path, tmp_path: Path) -> None:
    (tmp_path / "dst").mkdir()
    result = rcp(str(src), str(tmp_path / "dst"))
    assert result.returncode == 2
    assert "exists" in result.stderr
    assert os.listdir(tmp_path / "dst") == []


def test_dry_run_lists_and_changes_nothing(src: Path, tmp_path: Path) -> None:
    result = rcp("--dry-run", "brief", str(src), str(tmp_path / "dst"))
    assert result.returncode == 0
    assert "would copy file 'src/big'" in result.stdout
    assert "would create dir 'src/d'" in result.stdout
    assert not (tmp_path / "dst").exists()


def test_progress_bar_on_a_terminal(src: Path, tmp_path: Path) -> None:
    """On a TTY, --progress draws a live bar (tqdm) on stderr instead of text blocks."""
    controller, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        proc = subprocess.run(
            [*RCP, "--progress", str(src), str(tmp_path / "dst")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            timeout=120,
            check=False,
        )
        os.close(terminal)
        terminal = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the terminal side is closed and drained
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert proc.returncode == 0
    text = drawn.decode(errors="replace")
    assert "entries" in text
    assert "====" not in text  # not the text-block renderer
    assert "\r" in text  # a bar redraws in place


def test_a_local_url_is_copied_by_the_local_engine(src: Path, tmp_path: Path) -> None:
    """``file:///p`` and ``rcp:///p`` name this host's files: the local engine copies
    them, with every feature (here ``--delete``, which the store engine refuses)."""
    for scheme in ("file://", "rcp://"):
        dst = tmp_path / f"dst-{scheme[:-3]}"
        dst.mkdir()
        (dst / "extra").write_bytes(b"not in the source\n")
        done = rcp("-o", "--delete", f"{src}/", f"{scheme}{dst}")
        assert done.returncode == 0, done.stderr
        assert not (dst / "extra").exists()
        assert (dst / "big").read_bytes() == (src / "big").read_bytes()
    unknown = rcp(str(src), "nosuch://bucket/x")
    assert unknown.returncode == 2
    assert unknown.stderr == (
        "rcp: error: no backend for nosuch://: "
        "install its fsspec package or a site plugin\n"
    )


STORE_REFUSALS: dict[str, tuple[str, ...]] = {
    "--dereference": ("-L",),
    "--overwrite-compare beyond size,mtime,checksum": (
        "-o",
        "--overwrite-compare",
        "size,mode",
    ),
    "--max-processes": ("--max-processes", "1"),
    "--max-open-files": ("--max-open-files", "20"),
    "--preserve mode,times": ("--preserve", "mode,times"),
    "--partial": ("--partial",),
    "--one-file-system": ("-x",),
    "--files-from": ("--files-from", "/dev/null"),
    "--chmod": ("--chmod", "F600"),
    "--chown": ("--chown", "root"),
    "--numeric-ids (a store keeps owners by number)": ("--numeric-ids",),
}
"""Each refusal of a copy to ``memory://`` (the store engine's and the pair's), by
the flag the message names, and arguments that ask for it."""


def test_every_store_refusal_is_checked(src: Path) -> None:
    """Each has a case above but ``--link-dest``, ``rlink``'s own (refused here
    through the API)."""
    assert set(NOT_HONOURED[Engine.STORE]) - set(STORE_REFUSALS) == {"--link-dest"}
    settings = CopySettings(link_dest=str(src))
    with pytest.raises(UsageError, match=r"to memory://: --link-dest$"):
        copy_tree(port_of_url(str(src)), port_of_url("memory://linked"), settings)


@pytest.mark.parametrize("flag", STORE_REFUSALS)
def test_what_the_store_engine_cannot_do_is_refused(
    src: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2, one line naming the flag and the pair, nothing written."""
    memory = fsspec.filesystem("memory")
    args = [a.format(src=src) for a in STORE_REFUSALS[flag]]
    assert main([*args, str(src), "memory://refused"]) == 2
    line, end = capsys.readouterr().err.split("\n")
    said, _, flags = line.partition(": not supported from local to memory://: ")
    assert (said, end) == ("rcp: error", "")
    assert flag in flags.split(", ")
    assert not memory.exists("/refused")


def test_several_sources_to_a_url_are_refused_before_it_is_opened(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store engine's one source is refused from the operands alone: before
    ``--verify`` lists the destination to record what ``-u`` may keep (opening a
    URL fsspec has no filesystem for would fail first, with another message)."""
    other = tmp_path / "other"
    other.mkdir()
    args = ["--verify", "metadata", "-u", str(src), str(other), "nosuch://dst/"]
    assert main(args) == 2
    assert capsys.readouterr().err.splitlines() == [
        "rcp: error: a copy to or from a URL takes one source and a destination "
        "(2 sources given): copy each in a run of its own"
    ]


@pytest.mark.parametrize(
    ("source", "destination"),
    [
        ("alice@localhost:2222:/data/src", "memory://rcp-test/dst"),
        ("localhost:/data/src", "s3://bucket/dst"),
        ("alice@[::1]:/data/src", "memory://rcp-test/dst"),
        ("rcp://localhost/data/src", "alice@localhost:/data/dst"),
    ],
)
def test_a_host_operand_beside_a_url_is_refused_up_front(
    src: Path, tmp_path: Path, source: str, destination: str
) -> None:
    """Exit 2, one line naming both kinds of operand, before anything starts: no
    SSH (even for ``--verify``), nothing written where the host operand, read as a
    relative path, would lead (it exists here)."""
    host = destination if source.startswith("rcp:") else source
    (tmp_path / "work" / os.path.dirname(host)).mkdir(parents=True)
    (tmp_path / "work" / host).mkdir()
    started = tmp_path / "ssh-started"
    result = rcp(
        "--verify",
        "checksum",
        "--ssh",
        f"sh -c 'touch {started}'",
        source,
        destination,
        cwd=tmp_path / "work",
    )
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    other = "rcpd serve" if host == destination else "URL store"
    assert lines == [
        f"rcp: error: rcp does not copy between a host:/path operand and a {other} "
        "operand (the store engine cannot start rcpd over SSH, the remote roles "
        "cannot open a URL): copy through a local path, or name the host's service "
        "as rcp://host"
    ]
    assert not started.exists()
    written = [p for p in (tmp_path / "work").rglob("*") if not p.is_dir()]
    assert written == []


# -- --verify: what the copy was asked to copy, on every kind of operand ---------------


def verified_block(summary_json: Path) -> dict[str, object]:
    block = json.loads(summary_json.read_text())["verified"]
    assert set(block) == {
        "mode",
        "same",
        "entries",
        "files_hashed",
        "bytes_hashed",
        "differences",
    }
    return block  # type: ignore[no-any-return]


def same_size_other_bytes(path: Path) -> None:
    """Change ``path``'s contents, keeping its size and mtime (what ``-o`` trusts)."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize(
    "flags",
    [["--exclude", "*.log"], ["--include", "/d/**"], ["--gitignore"]],
    ids=["exclude", "include", "gitignore"],
)
def test_verify_checks_a_filtered_copy_by_what_it_copied(
    src: Path, tmp_path: Path, flags: list[str]
) -> None:
    """Before: every entry the filters left out was ``missing`` and the run failed."""
    (src / "top.log").write_bytes(b"log")
    (src / "d" / "x.log").write_bytes(b"log")
    (src / ".gitignore").write_text("*.log\n")
    os.mkfifo(src / "fifo")
    out = tmp_path / "summary.json"
    dst = tmp_path / "dst"
    done = rcp(
        *flags, "--verify", "checksum", "--summary-json", str(out), str(src), str(dst)
    )
    assert done.returncode == 0, done.stderr + done.stdout
    verified = verified_block(out)
    assert verified["same"] is True
    copied = [p for p in dst.rglob("*") if p.is_file()]
    assert verified["files_hashed"] == len(copied) > 0


def test_verify_prints_each_difference_as_rcmp_does(src: Path, tmp_path: Path) -> None:
    """One JSON line per difference on stdout, in rcmp's format, and one line on
    stderr (before: a Python list of dicts in the message)."""
    dst = tmp_path / "dst"
    assert rcp("--exclude", "*.log", str(src), str(dst)).returncode == 0
    same_size_other_bytes(dst / "d" / "f3")
    (src / "d" / "skipped.log").write_bytes(b"left out")
    done = rcp("-o", "--exclude", "*.log", "--verify", "checksum", str(src), str(dst))
    assert done.returncode == 3  # differences (the exit-status table)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines == [{"path": "d/f3", "kind": "content", "detail": "content differs"}]
    assert done.stderr == "rcp: the copy differs from its source: 1 content\n"


def test_verify_leaves_alone_what_ignore_existing_kept(
    src: Path, tmp_path: Path
) -> None:
    dst = tmp_path / "dst"
    (dst / "d").mkdir(parents=True)
    (dst / "d" / "f3").write_bytes(b"mine, not the source's")
    out = tmp_path / "summary.json"
    done = rcp(
        "--ignore-existing",
        "--verify",
        "checksum",
        "--summary-json",
        str(out),
        str(src),
        str(dst),
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert (dst / "d" / "f3").read_bytes() == b"mine, not the source's"
    assert verified_block(out)["files_hashed"] == 50  # 51 files, one kept


@pytest.mark.parametrize("target", ["memory", "file"])
def test_verify_with_a_url_operand(src: Path, tmp_path: Path, target: str) -> None:
    """Before: the URL path returned before verifying, and said nothing. The store
    copy follows a symlink and skips a FIFO (``--skip-specials``), the local engine
    (``file://``) keeps the symlink: both are what it copied, no difference."""
    os.mkfifo(src / "fifo")
    (src / "link").symlink_to("big")
    dst = "memory://verified-dst" if target == "memory" else f"file://{tmp_path}/dst"
    out = tmp_path / "summary.json"
    done = rcp(
        "--skip-specials",
        "--verify",
        "checksum",
        "--summary-json",
        str(out),
        str(src),
        dst,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    verified = verified_block(out)
    assert verified["same"] is True
    assert verified["files_hashed"] == (52 if target == "memory" else 51)
    if target == "file":
        same_size_other_bytes(tmp_path / "dst" / "d" / "f3")
        again = rcp("-o", "--skip-specials", "--verify", "checksum", str(src), dst)
        assert again.returncode == 3
        [line] = again.stdout.splitlines()
        assert json.loads(line)["path"] == "d/f3"
        assert json.loads(line)["kind"] == "content"


def test_an_ssh_option_beside_a_service_is_refused(
    src: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-connections`` and ``--remote-timeout`` shape a copy with an ``rcpd
    serve`` service too; ``--no-encryption``, ``--ssh`` and ``--rcpd-path`` do not
    (a service's encryption is its URL's storage options): refused before anything
    is reached."""
    for flag in (["--no-encryption"], ["--ssh", "ssh -p 2"], ["--rcpd-path", "x"]):
        assert main([*flag, str(src), "rcp://service.invalid/x"]) == 2
        assert capsys.readouterr().err == (
            f"rcp: error: {flag[0]}: only for operands on another host (host:/path)\n"
        )


def test_files_from_standard_input_and_a_verification_of_what_it_selected(
    src: Path, tmp_path: Path
) -> None:
    """``find -print0 | rcp --files-from - --from0 SRC DST``: the listed files
    only, and ``--verify`` compares exactly what the list selected."""
    listed = b"d/f1\0d/f7\0big\0"
    done = subprocess.run(
        [
            *RCP,
            "--files-from",
            "-",
            "--from0",
            "--verify",
            "checksum",
            "--summary-json",
            str(tmp_path / "s.json"),
            str(src),
            str(tmp_path / "dst"),
        ],
        input=listed,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    copied = sorted(
        str(p.relative_to(tmp_path / "dst")) for p in (tmp_path / "dst").rglob("*")
    )
    assert copied == ["big", "d", "d/f1", "d/f7"]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["verified"]["same"] is True
    assert summary["verified"]["entries"] >= 3
