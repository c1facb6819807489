"""A full destination (ENOSPC) on a real 16 MiB ext4: the run stops, and leaves nothing
half-written under a final name.

ENOSPC is fatal for a run (every later entry would fail the same way): the engine stops
scheduling work, reports a partial summary, and removes the partial file it was
writing. A file being replaced is written under a temporary ``.rcp-*`` name, so the old
copy survives a replacement that does not fit.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import CopyFailedError, CopySettings, ExistingPolicy, copy
from rcp_provider.cli import rcp
from support.loopfs import SmallFs

MIB = 1024 * 1024
OLD_NS = 1_000_000_000 * 10**9
NO_SPACE = os.strerror(28)  # "No space left on device"


def files_under(root: Path) -> dict[str, Path]:
    """Every non-directory under ``root``, by relative path."""
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath, name)
            out[str(path.relative_to(root))] = path
    return out


def assert_no_partial_files(src: Path, dst: Path) -> int:
    """Every file in ``dst`` equals its source byte for byte; return how many exist."""
    present = files_under(dst)
    for rel, path in present.items():
        assert not path.name.startswith(".rcp-"), f"temporary file left: {rel}"
        assert path.read_bytes() == (src / rel).read_bytes(), f"{rel} is partial"
    return len(present)


@pytest.fixture
def big_tree(tmp_path: Path) -> Path:
    """24 MiB of 2 MiB files in two directories, plus a few small files."""
    src = tmp_path / "src"
    for d in ("a", "b"):
        (src / d).mkdir(parents=True)
        for i in range(6):
            (src / d / f"big{i}").write_bytes(os.urandom(2 * MIB))
        for i in range(5):
            (src / d / f"small{i}").write_bytes(os.urandom(3000))
    return src


def test_tree_bigger_than_filesystem(big_tree: Path, small_fs: SmallFs) -> None:
    """The run stops on ENOSPC with a partial summary; what was copied is complete,
    and the file being written when space ran out is removed."""
    dst = small_fs(16) / "dst"
    with pytest.raises(CopyFailedError) as info:
        copy(big_tree, dst)
    exc = info.value
    assert exc.stopped
    counts = exc.summary.counts
    assert counts["errors"] >= 1
    assert all(NO_SPACE in key for key, _, _ in exc.errors), exc.errors
    assert counts["copied.files"] > 0
    assert counts["copied.bytes"] >= 2 * MIB
    present = assert_no_partial_files(big_tree, dst)
    # Exactly the files counted as copied are there: nothing partial besides them.
    assert present == counts["copied.files"]
    assert present < 22


def test_failed_replacement_keeps_old_file(tmp_path: Path, small_fs: SmallFs) -> None:
    """Overwriting a 4 MiB file with a 20 MiB one that does not fit: the old file stays
    as it was (bytes, inode, mtime) and no temporary file is left beside it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "data").write_bytes(os.urandom(20 * MIB))
    dst = small_fs(16) / "dst"
    dst.mkdir()
    old = os.urandom(4 * MIB)
    (dst / "data").write_bytes(old)
    os.utime(dst / "data", ns=(OLD_NS, OLD_NS))
    before = (dst / "data").stat()
    free_before = os.statvfs(dst).f_bfree
    with pytest.raises(CopyFailedError) as info:
        copy(src, dst, CopySettings(existing=ExistingPolicy.OVERWRITE))
    assert info.value.stopped
    assert info.value.summary["errors"] == 1
    assert info.value.summary["copied.files"] == 0
    assert sorted(os.listdir(dst)) == ["data"]
    after = (dst / "data").stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        4 * MIB,
        OLD_NS,
    )
    assert (dst / "data").read_bytes() == old
    # The blocks of the abandoned temporary file were given back (within a few
    # blocks of directory and journal bookkeeping).
    assert os.statvfs(dst).f_bfree >= free_before - 16


def test_out_of_inodes(tmp_path: Path, small_fs: SmallFs) -> None:
    """Running out of inodes is ENOSPC too: the run stops instead of failing each of
    the remaining files one by one."""
    src = tmp_path / "src"
    src.mkdir()
    total = 4500  # a 16 MiB ext4 has 4096 inodes
    for i in range(total):
        (src / f"e{i}").touch()
    dst = small_fs(16) / "dst"
    with pytest.raises(CopyFailedError) as info:
        copy(src, dst)
    exc = info.value
    assert exc.stopped
    assert all(NO_SPACE in key for key, _, _ in exc.errors), exc.errors
    counts = exc.summary.counts
    assert 0 < counts["copied.files"] < total
    # Stopped: far fewer errors than the files that could not be created.
    assert counts["errors"] < total - counts["copied.files"]
    assert len(os.listdir(dst)) == counts["copied.files"]


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """``rcp.main`` points the ``rcp_core`` logger at this test's stdout; undo that."""
    logger = logging.getLogger("rcp_core")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.mark.usefixtures("restore_logging")
def test_cli_exit_status_and_partial_summary(
    big_tree: Path, small_fs: SmallFs, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rcp --summary`` on a full destination exits 1 and prints a partial summary."""
    dst = small_fs(16) / "dst"
    assert rcp.main([str(big_tree), str(dst), "--summary"]) == 1
    out, err = capsys.readouterr()
    copied = re.search(r"^copied:\s+files (\d+)", out, re.MULTILINE)
    errors = re.search(r"^errors:\s+(\d+)", out, re.MULTILINE)
    assert copied is not None, out
    assert errors is not None, out
    assert int(copied.group(1)) > 0
    assert int(errors.group(1)) >= 1
    assert NO_SPACE in out  # the deduplicated error list
    assert "rcp: copy stopped after" in err
    assert assert_no_partial_files(big_tree, dst) == int(copied.group(1))
