"""``--partial`` on this host: a large file is written under ``.rcp-partial.NAME``, a
cut-off copy leaves it, and the next run keeps only the prefix it verified against
the source (BLAKE3 per block), never trusting or writing through anything else."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rcp_core
from benchmarks.latencyfs import mounted
from rcp_core import CopySettings, ExistingPolicy
from rcp_core.engine.partials import (
    MAX_BLOCKS,
    MIN_BLOCK,
    Prefix,
    block_size,
    describe,
    verified,
)
from rcp_core.engine.temporaries import (
    PARTIAL_TRUNCATED,
    partial_name,
    partial_stands_for,
    sweep,
)
from rcp_core.errors import CopyFailedError

MIB = 1 << 20
PARTIAL = CopySettings(resume=True)
RCP = str(Path(sys.executable).with_name("rcp"))


def _plant(path: Path, data: bytes) -> Path:
    """A partial of ``path``'s name holding ``data``, as a killed run leaves it."""
    partial = path.with_name(partial_name(path.name))
    partial.write_bytes(data)
    partial.chmod(0o600)
    return partial


def _copy(src: Path, dst: Path, settings: CopySettings = PARTIAL) -> dict[str, int]:
    return dict(rcp_core.copy([str(src)], str(dst), settings).counts)


# -- names and blocks ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["f", "a.b", ".hidden", "x" * (PARTIAL_TRUNCATED - 1)])
def test_a_partial_names_the_file_it_is_of(name: str) -> None:
    assert partial_stands_for(partial_name(name)) == name


@pytest.mark.parametrize(
    "name", ["f", ".rcp-partial.", ".rcp-0123abcd.f", partial_name("y" * 300)]
)
def test_other_names_are_not_partials(name: str) -> None:
    assert partial_stands_for(name) is None


def test_blocks_grow_so_a_prefix_has_at_most_a_bounded_number() -> None:
    assert block_size(1) == MIN_BLOCK
    assert block_size(MIN_BLOCK * MAX_BLOCKS) == MIN_BLOCK
    assert block_size(MIN_BLOCK * MAX_BLOCKS + 1) == 2 * MIN_BLOCK
    huge = 500 << 30
    assert -(-huge // block_size(huge)) <= MAX_BLOCKS


@pytest.mark.parametrize(
    "wire",
    [
        None,
        {"size": 0, "block": MIN_BLOCK, "digests": []},
        {"size": 5, "block": MIN_BLOCK + 1, "digests": ["00" * 32]},
        {"size": 5, "block": MIN_BLOCK // 2, "digests": ["00" * 32]},
        {"size": 5, "block": MIN_BLOCK, "digests": []},
        {"size": 5, "block": MIN_BLOCK, "digests": ["zz" * 32]},
        {"size": 5, "block": MIN_BLOCK, "digests": ["00" * 31]},
        {"size": True, "block": MIN_BLOCK, "digests": ["00" * 32]},
    ],
)
def test_a_peers_malformed_prefix_is_refused(wire: object) -> None:
    with pytest.raises(ValueError, match="prefix"):
        Prefix.from_wire(wire)


def test_the_source_confirms_blocks_up_to_the_first_that_differs(
    tmp_path: Path,
) -> None:
    data = os.urandom(40 * MIB)
    src = tmp_path / "src"
    src.write_bytes(data)
    part = tmp_path / "part"
    part.write_bytes(data[: 20 * MIB] + b"X" + data[20 * MIB + 1 : 36 * MIB])
    with open(src, "rb") as s, open(part, "rb") as p:
        prefix = describe(p.fileno())
        assert Prefix.from_wire(prefix.to_wire()).digests == prefix.digests
        assert prefix.size == 36 * MIB
        assert len(prefix.digests) == 3
        assert verified(s.fileno(), prefix, len(data)) == MIN_BLOCK
        # A source shorter than the prefix confirms no block past its end.
        assert verified(s.fileno(), prefix, 10 * MIB) == 0


# -- the local engine ---------------------------------------------------------------


def test_a_copy_resumes_from_the_partial_and_moves_only_the_rest(
    tmp_path: Path,
) -> None:
    data = os.urandom(40 * MIB + 5)
    src = tmp_path / "big"
    src.write_bytes(data)
    partial = _plant(tmp_path / "big.copy", data[: 20 * MIB])
    counts = _copy(src, tmp_path / "big.copy")
    assert (tmp_path / "big.copy").read_bytes() == data
    assert not partial.exists()
    assert counts["resumed.files"] == 1
    assert counts["resumed.bytes"] == 20 * MIB
    assert counts["moved.bytes"] == len(data) - 20 * MIB
    assert counts["copied.bytes"] == len(data)


def test_a_corrupted_block_and_all_after_it_are_copied_again(tmp_path: Path) -> None:
    data = os.urandom(40 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data)
    bad = bytearray(data[: 36 * MIB])
    bad[20 * MIB] ^= 0xFF
    _plant(tmp_path / "out", bytes(bad))
    counts = _copy(src, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == data
    assert counts["resumed.bytes"] == MIN_BLOCK


def test_a_partial_of_another_content_is_not_trusted(tmp_path: Path) -> None:
    """The source changed between the runs: nothing of the partial is kept."""
    src = tmp_path / "big"
    src.write_bytes(os.urandom(8 * MIB))
    partial = _plant(tmp_path / "out", os.urandom(4 * MIB))
    counts = _copy(src, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert counts["resumed.files"] == 0
    assert counts["moved.bytes"] == 8 * MIB
    assert not partial.exists()


def test_a_partial_longer_than_a_shrunken_source_keeps_no_more_than_the_source(
    tmp_path: Path,
) -> None:
    data = os.urandom(20 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data[: 18 * MIB])
    _plant(tmp_path / "out", data)
    counts = _copy(src, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == data[: 18 * MIB]
    assert counts["resumed.bytes"] == MIN_BLOCK


def test_a_symlink_under_the_partial_name_is_never_written_through(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    src = tmp_path / "big"
    src.write_bytes(os.urandom(2 * MIB))
    (tmp_path / partial_name("out")).symlink_to(victim)
    _copy(src, tmp_path / "out")
    assert victim.read_bytes() == b"precious"
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert not os.path.lexists(tmp_path / partial_name("out"))


def test_a_partial_with_another_name_is_not_written_through(tmp_path: Path) -> None:
    """A partial hard-linked to another file (planted by someone) is dropped: the
    other name keeps its bytes."""
    data = os.urandom(4 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data)
    other = tmp_path / "other"
    other.write_bytes(data[: 2 * MIB])
    os.link(other, tmp_path / partial_name("out"))
    counts = _copy(src, tmp_path / "out")
    assert other.read_bytes() == data[: 2 * MIB]
    assert (tmp_path / "out").read_bytes() == data
    assert counts["resumed.files"] == 0


def test_a_small_file_is_written_as_without_partial(tmp_path: Path) -> None:
    src = tmp_path / "small"
    src.write_bytes(b"x" * 1000)
    counts = _copy(src, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == b"x" * 1000
    assert counts["resumed.files"] == 0


def test_a_file_that_fails_leaves_its_partial_and_never_the_final_name(
    tmp_path: Path,
) -> None:
    """The destination directory takes no new name (immutable) after the partial was
    made: the copy fails at the rename, the complete partial stays, and a run that
    can finish keeps all of it."""
    data = os.urandom(3 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data)
    dst = tmp_path / "d"
    dst.mkdir()
    _plant(dst / "big", data[:MIB])
    subprocess.run(["chattr", "+i", str(dst)], check=True)
    try:
        with pytest.raises(CopyFailedError):
            _copy(src, dst / "big")
    finally:
        subprocess.run(["chattr", "-i", str(dst)], check=True)
    assert not (dst / "big").exists()
    assert (dst / partial_name("big")).read_bytes()[:MIB] == data[:MIB]
    counts = _copy(src, dst / "big")
    assert (dst / "big").read_bytes() == data
    assert counts["resumed.files"] == 1


def test_a_copy_killed_mid_file_resumes_on_the_next_run(tmp_path: Path) -> None:
    """SIGKILL ``rcp --partial`` while a 48 MiB file streams from a slow source
    (latencyfs, 2 ms per request): its partial stays, never the final name; the
    next run moves only what the partial lacked."""
    backing = tmp_path / "backing"
    backing.mkdir()
    data = os.urandom(48 * MIB)
    (backing / "big").write_bytes(data)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    dst = tmp_path / "out"
    partial = tmp_path / partial_name("out")
    with mounted(backing, mnt, delay_ms=2.0):
        proc = subprocess.Popen(
            [RCP, "--partial", "--max-workers", "1", str(mnt / "big"), str(dst)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while not (partial.exists() and partial.stat().st_size >= 8 * MIB):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the copy did not start"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    left = partial.stat().st_size
    assert 8 * MIB <= left < len(data)
    assert not dst.exists()
    counts = _copy(backing / "big", dst)
    assert dst.read_bytes() == data
    assert counts["resumed.bytes"] >= MIN_BLOCK // 2
    assert counts["moved.bytes"] == len(data) - counts["resumed.bytes"]


@pytest.mark.parametrize(
    "settings", [CopySettings(), PARTIAL], ids=["plain", "partial"]
)
def test_a_complete_directory_loses_the_partials_of_source_names(
    tmp_path: Path, settings: CopySettings
) -> None:
    """Once every file of a directory is in place its partials are stale (with
    ``--partial`` too); a partial of a name the source lacks is not the copy's."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "big").write_bytes(os.urandom(2 * MIB))
    dst = tmp_path / "dst"
    _copy(src, dst)
    _plant(dst / "big", b"stale")
    _plant(dst / "gone", b"of no source name")
    counts = _copy(
        src, dst, dataclasses.replace(settings, existing=ExistingPolicy.OVERWRITE)
    )
    assert sorted(os.listdir(dst)) == [partial_name("gone"), "big"]
    assert counts["removed.files"] == 1


def test_sweep_keeps_partials_only_when_told(tmp_path: Path) -> None:
    _plant(tmp_path / "big", b"part")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert sweep(fd, lambda n: n == "big", keep_partials=True) == []
        assert sweep(fd, lambda n: n == "big") == [partial_name("big")]
    finally:
        os.close(fd)
