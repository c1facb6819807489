"""The ``rchm`` command as a user runs it (the installed script): changes and their
summary, dry runs, exit codes (0, 1 with the rest changed, 2 for bad input with
nothing touched, 130 on Ctrl-C), help and operands."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_provider.cli.rchm import build_parser
from support.immutable import immutable as chattr_i
from support.nobody import NOBODY
from support.treespec import Dir, File, Symlink, make_tree

RCHM = str(Path(sys.executable).with_name("rchm"))
FILES = 60
DIRS = 4  # the root, d0, d1, d2


def rchm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RCHM, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "outside", {"target": File(b"t", 0o644)})


@pytest.fixture
def tree(tmp_path: Path, outside: Path) -> Path:
    spec = {
        ".": Dir(0o755),
        **{f"d{d}/f{f}": File(b"x", 0o644) for d in range(3) for f in range(20)},
        "d0/link": Symlink(str(outside / "target")),
    }
    return make_tree(tmp_path / "tree", spec)


def modes(root: Path) -> dict[str, tuple[int, int, int]]:
    """Each entry's (mode, uid, gid), by ``lstat``."""
    return {
        str(p.relative_to(root)): (
            p.lstat().st_mode,
            p.lstat().st_uid,
            p.lstat().st_gid,
        )
        for p in [root, *root.rglob("*")]
    }


def test_changes_and_reports(tree: Path, outside: Path, tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    done = rchm(
        "--mode",
        "f:640 d:750",
        "--owner",
        "nobody",
        "--group",
        str(NOBODY),
        "--summary",
        "--summary-json",
        str(out),
        str(tree),
    )
    assert done.returncode == 0, done.stderr
    assert "changed:   files 60  dirs 4  symlinks 1  specials 0" in done.stdout
    summary = json.loads(out.read_text())
    assert summary["changed"] == {"files": 60, "dirs": 4, "symlinks": 1, "specials": 0}
    assert summary["entries"] == FILES + DIRS + 1
    assert summary["errors"] == 0
    for rel, (mode, uid, gid) in modes(tree).items():
        assert (uid, gid) == (NOBODY, NOBODY), rel
        if stat.S_ISDIR(mode):
            assert stat.S_IMODE(mode) == 0o750, rel
        elif not stat.S_ISLNK(mode):
            assert stat.S_IMODE(mode) == 0o640, rel
    target = (outside / "target").stat()  # behind the symlink: untouched
    assert (stat.S_IMODE(target.st_mode), target.st_uid) == (0o644, 0)
    again = rchm("--mode", "f:640 d:750", "--summary", str(tree))
    assert "changed:   files 0  dirs 0  symlinks 0" in again.stdout
    assert "unchanged: files 60  dirs 4  symlinks 1" in again.stdout


def test_a_dry_run_lists_what_would_change_and_changes_nothing(tree: Path) -> None:
    (tree / "d1" / "f0").chmod(0o600)  # already as asked: not listed
    before = modes(tree)
    done = rchm("--dry-run", "--mode", "f:600", str(tree))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == FILES - 1
    assert all(line.startswith("would change '") for line in lines)
    assert all(line.endswith(": mode 0644 -> 0600") for line in lines)
    assert modes(tree) == before


def test_filters_choose_what_changes(tree: Path) -> None:
    done = rchm("--mode", "u+x", "--include", "/d1/**", "--exclude", "f1?", str(tree))
    assert done.returncode == 0, done.stderr
    changed = {
        rel
        for rel, (mode, _, _) in modes(tree).items()
        if stat.S_ISREG(mode) and mode & stat.S_IXUSR
    }
    assert changed == {f"d1/f{f}" for f in range(10)}  # f10 to f19 excluded
    assert stat.S_IMODE((tree / "d1").stat().st_mode) == 0o755  # entered only


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["X"], "nothing to change"),
        (["--mode", "u+q", "X"], "--mode: invalid mode 'u+q'"),
        (["--mode", "l:755", "X"], "symlinks have no mode"),
        (["--owner", "no-such-user-here", "X"], "unknown user"),
        (["--group", "no-such-group-here", "X"], "unknown group"),
        (["--mode", "755", "s3://bucket/key"], "local paths only"),
        (["--mode", "755", "host:/srv"], "local paths only"),
        (["--mode", "755", "X", "MISSING"], "no such file"),
        (["--mode", "755", "/"], "refusing to change /"),
        (["--max-workers", "0", "--mode", "755", "X"], "max_workers"),
        (["--mode", "755"], "required: PATH"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_nothing_touched(
    tree: Path, args: list[str], message: str
) -> None:
    before = modes(tree)
    where = {"X": str(tree), "MISSING": str(tree / "nope")}
    done = rchm(*(where.get(arg, arg) for arg in args))
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith("rchm: error: ")
    assert message in done.stderr
    assert modes(tree) == before


def test_a_file_url_is_a_local_path(tree: Path) -> None:
    done = rchm("--mode", "700", f"file://{tree / 'd2' / 'f3'}")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tree / "d2" / "f3").stat().st_mode) == 0o700


@pytest.fixture
def immutable(ext4_tmp_path: Path) -> Iterator[Path]:
    """A tree whose ``d1/f5`` cannot be changed (``chattr +i``)."""
    root = make_tree(
        ext4_tmp_path / "tree",
        {f"d{d}/f{f}": File(b"x", 0o644) for d in range(3) for f in range(20)},
    )
    with chattr_i(root / "d1" / "f5"):
        yield root


def test_an_entry_that_fails_is_exit_1_and_the_rest_changes(immutable: Path) -> None:
    done = rchm("--mode", "600", "--summary", str(immutable))
    assert done.returncode == 1
    assert "rchm: change finished with 1 error(s)" in done.stderr
    assert "changed:   files 59  dirs 4" in done.stdout  # the partial summary
    assert "errors:    1" in done.stdout
    still = [
        rel
        for rel, (mode, _, _) in modes(immutable).items()
        if stat.S_IMODE(mode) != 0o600
    ]
    assert still == ["d1/f5"]


WIDE = 150
DELAY_MS = 10.0
"""Through the latency FUSE a change of one file takes a few round trips of this,
so one worker takes seconds over the tree: long enough to interrupt midway."""


def test_ctrl_c_stops_it_exit_130_and_leaves_the_rest(tmp_path: Path) -> None:
    from benchmarks.latencyfs import mounted

    backing, mnt = tmp_path / "backing", tmp_path / "mnt"
    mnt.mkdir()
    make_tree(backing / "t", {f"f{f:03}": File(b"x", 0o644) for f in range(WIDE)})
    with mounted(backing, mnt, delay_ms=DELAY_MS) as live:
        proc = subprocess.Popen(
            [RCHM, "--max-workers", "1", "--mode", "600", str(live / "t")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            started = time.monotonic()
            while not any(
                stat.S_IMODE(p.stat().st_mode) == 0o600
                for p in (backing / "t").iterdir()
            ):
                assert proc.poll() is None, "rchm ended before it was interrupted"
                assert time.monotonic() - started < 30, "nothing changed in 30 s"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            ended: tuple[str, str] | None = None
            with contextlib.suppress(subprocess.TimeoutExpired):
                ended = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    assert ended is not None, "still running 10 s after Ctrl-C"
    assert proc.returncode == 130, ended
    assert "interrupted" in ended[1]
    left = [
        p.name
        for p in (backing / "t").iterdir()
        if stat.S_IMODE(p.stat().st_mode) != 0o600
    ]
    assert left, "every file changed: not stopped midway"
    assert stat.S_IMODE((backing / "t").stat().st_mode) != 0o600  # dirs go last


def test_help_gives_examples_and_says_what_each_option_does() -> None:
    done = rchm("--help")
    assert done.returncode == 0
    assert "examples:" in done.stdout
    assert "rchm --mode g+rwX /data" in done.stdout
    parser = build_parser()
    own = {"what changes (at least one)", "which entries", "how"}
    silent = [
        action.dest
        for group in parser._action_groups  # argparse has no public one
        if group.title in own
        for action in group._group_actions
        if not action.help
    ]
    assert silent == []


def test_version_names_the_tool() -> None:
    done = rchm("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("rchm ")


def test_as_a_module_too(tree: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rcp_provider.cli.rchm", "--mode", "700", str(tree)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(tree.stat().st_mode) == 0o700
