"""Large files split over several connections (protocol 1.16).

A source sends a large file's pieces over the connections of one destination
process, each connection taking the next piece when it is ready; the destination
writes the parts as they come into one file, which appears under its name only after
the last part ended, and is removed (or left as a partial) when a part is cut off.
Both roles run here over real TLS connections (:mod:`support.roles`); the
destination's handling of parts is also driven frame by frame.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rcp_core import CopySettings
from rcp_core.engine.tree import DIR_FLAGS
from rcp_core.errors import ProtocolError
from rcp_core.remote.latedata import late_group
from rcp_core.remote.meta import meta_of
from rcp_core.remote.receive import Receiver
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.sendlarge import FRAME_DATA, SPLIT_PART, Outgoing, split_count
from support.roles import remote_copy

MIB = 1 << 20
F = FRAME_DATA


def test_parts_take_the_files_data_in_order_once_holes_skipped(
    tmp_path: Path,
) -> None:
    """Pieces of at most one frame, in file order, from the kept prefix on, each
    handed out once however many parts ask; a hole is never sent."""
    path = tmp_path / "holey"
    with path.open("wb") as f:
        f.write(b"a" * (F + 10))
        f.seek(10 * F)
        f.write(b"b" * 100)
    fd = os.open(path, os.O_RDONLY)
    st = os.fstat(fd)
    try:
        file = Outgoing((fd, st, {}), {}, "holey", None, kept=5)
        file.cut_into(3)
        pieces = list(iter(file.take, None))
    finally:
        os.close(fd)
    block = st.st_blksize  # SEEK_DATA finds data by whole blocks
    assert pieces == [(5, F), (F + 5, block - 5), (10 * F, 100)]
    assert file.take() is None


def test_a_file_is_split_only_into_parts_worth_a_connection() -> None:
    assert split_count(2 * SPLIT_PART - 1, 4) == 1
    assert split_count(2 * SPLIT_PART, 4) == 2
    assert split_count(1 << 30, 4) == 4
    assert split_count(1 << 30, 1) == 1
    assert split_count(1 << 40, 200) == 64


def _digest(path: Path) -> str:
    h = hashlib.blake2b()
    with path.open("rb") as f:
        while chunk := f.read(8 * MIB):
            h.update(chunk)
    return h.hexdigest()


def test_split_files_arrive_exactly_with_their_holes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """192 MiB of data over 3 connections arrives in 3 parts; a 256 MiB sparse
    file's data lands where it was (one piece across a frame boundary) and its
    holes stay holes."""
    src = tmp_path / "src"
    src.mkdir()
    big = src / "big"
    with big.open("wb") as f:
        for _ in range(24):
            f.write(os.urandom(8 * MIB))
    sparse = src / "sparse"
    pieces = {0: b"head", 100 * MIB + 3: b"x" * 5000, 3 * F - 7: b"across" * 10}
    with sparse.open("wb") as f:
        for offset, data in pieces.items():
            f.seek(offset)
            f.write(data)
        f.truncate(256 * MIB)
    (src / "small").write_bytes(b"s")
    dst = tmp_path / "dst"
    caplog.set_level(logging.DEBUG, logger="rcp_core")
    sent, written, errors = remote_copy(src, dst, connections=3)
    assert errors == []
    assert "dst/big arrives in 3 parts" in caplog.text
    assert "dst/sparse arrives in 3 parts" in caplog.text
    assert _digest(dst / "big") == _digest(big)
    assert _digest(dst / "sparse") == _digest(sparse)
    assert (dst / "sparse").stat().st_size == 256 * MIB
    assert (dst / "sparse").stat().st_blocks * 512 < 4 * MIB
    for counts in (sent, written):
        assert counts["copied.files"] == 3
        assert counts["copied.bytes"] == 192 * MIB + 256 * MIB + 1
    assert sorted(os.listdir(dst)) == ["big", "small", "sparse"]


# -- the destination, frame by frame ---------------------------------------------


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    settings = CopySettings()
    fd = os.open(tmp_path, DIR_FLAGS)
    got = Receiver(settings, fd, 0o022, RoleRun(settings, str(tmp_path), source=False))
    try:
        yield got
    finally:
        got.close()  # closes fd


def _meta(tmp_path: Path, size: int) -> dict[str, Any]:
    probe = tmp_path.parent / "probe"
    probe.write_bytes(b"")
    meta = meta_of(os.lstat(probe))
    meta["size"] = size
    return meta


def _first(
    meta: dict[str, Any], part: Any, offset: int, **extra: Any
) -> dict[str, Any]:
    return {
        "dir": 0,
        "name": "x",
        "offset": offset,
        "first": True,
        "meta": meta,
        "part": part,
        **extra,
    }


def _more(offset: int, **extra: Any) -> dict[str, Any]:
    return {"dir": 0, "name": "x", "offset": offset, "first": False, **extra}


def test_parts_are_written_as_they_come_and_the_file_appears_after_the_last(
    tmp_path: Path, receiver: Receiver
) -> None:
    data = os.urandom(3 * F)
    meta = _meta(tmp_path, len(data))
    view = memoryview(data)
    one = receiver.chunk(_first(meta, [1, 2], F), view[F : 2 * F], None)
    zero = receiver.chunk(_first(meta, [0, 2], 0), view[:F], None)
    assert zero is not None
    assert one is not None
    assert zero.file is one.file
    assert receiver.chunk(_more(2 * F), view[2 * F :], zero) is zero
    assert receiver.chunk(_more(len(data), last=True), view[:0], zero) is None
    assert stat.S_IMODE((tmp_path / "x").stat().st_mode) == 0o600  # unfinished
    assert receiver.chunk(_more(len(data), last=True), view[:0], one) is None
    assert (tmp_path / "x").read_bytes() == data
    assert (tmp_path / "x").stat().st_mode == meta["mode"]
    assert receiver.counts()["copied.files"] == 1


@pytest.mark.parametrize(
    "part", [[2, 2], [-1, 2], [0, 1], [0, 65], [True, 2], [0], "0/2", None]
)
def test_malformed_parts_are_protocol_errors(
    tmp_path: Path, receiver: Receiver, part: Any
) -> None:
    header = _first(_meta(tmp_path, 3 * F), part, 0)
    if part is None:
        header["part"] = [0, 2]
        receiver.chunk(header, memoryview(b""), None)
        with pytest.raises(ProtocolError, match="part 0 sent twice"):
            receiver.chunk(header, memoryview(b""), None)
        return
    with pytest.raises(ProtocolError, match="bad part"):
        receiver.chunk(header, memoryview(b""), None)


def test_parts_that_disagree_on_the_file_are_protocol_errors(
    tmp_path: Path, receiver: Receiver
) -> None:
    receiver.chunk(_first(_meta(tmp_path, 3 * F), [0, 2], 0), memoryview(b""), None)
    for header in (
        _first(_meta(tmp_path, 4 * F), [1, 2], F),
        _first(_meta(tmp_path, 3 * F), [1, 3], F),
        _first(_meta(tmp_path, 3 * F), [1, 2], F, kept=F),
    ):
        with pytest.raises(ProtocolError):
            receiver.chunk(header, memoryview(b""), None)


def test_a_part_cut_off_removes_the_file_once_the_other_parts_ended(
    tmp_path: Path, receiver: Receiver
) -> None:
    data = os.urandom(2 * F)
    meta = _meta(tmp_path, len(data))
    zero = receiver.chunk(_first(meta, [0, 2], 0), memoryview(data)[:F], None)
    one = receiver.chunk(_first(meta, [1, 2], F), memoryview(data)[F:], None)
    assert zero is not None
    assert one is not None
    receiver.cut(zero)
    assert len(os.listdir(tmp_path)) == 1  # still written by the other part
    receiver.chunk(_more(len(data), last=True), memoryview(b""), one)
    assert os.listdir(tmp_path) == []


def test_the_source_giving_up_on_one_part_fails_the_whole_file(
    tmp_path: Path, receiver: Receiver
) -> None:
    meta = _meta(tmp_path, 2 * F)
    zero = receiver.chunk(_first(meta, [0, 2], 0), memoryview(bytes(F)), None)
    one = receiver.chunk(_first(meta, [1, 2], F), memoryview(bytes(F)), None)
    receiver.chunk(_more(0, last=True, failed="EIO"), memoryview(b""), one)
    receiver.chunk(_more(2 * F, last=True), memoryview(b""), zero)
    assert os.listdir(tmp_path) == []
    assert receiver.counts().get("copied.files", 0) == 0


def test_parts_that_never_come_are_removed_at_the_end(
    tmp_path: Path, receiver: Receiver
) -> None:
    meta = _meta(tmp_path, 2 * F)
    zero = receiver.chunk(_first(meta, [0, 2], 0), memoryview(bytes(F)), None)
    receiver.chunk(_more(2 * F, last=True), memoryview(b""), zero)
    assert len(os.listdir(tmp_path)) == 1
    receiver.close()
    assert os.listdir(tmp_path) == []


def test_a_late_connection_names_its_writer_process() -> None:
    assert late_group({"channel": "data"}) is None
    assert late_group({"channel": "data", "group": 3}) == 3
    for bad in (0, -1, 257, True, "1"):
        with pytest.raises(ProtocolError, match="bad group"):
            late_group({"channel": "data", "group": bad})


def test_the_files_behind_a_large_one_go_on_other_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight 16 MiB files of one directory (one batch): the sender that meets the
    first hands the rest back, so the others are sent on other connections at the
    same time, not one after another on the first, even when the walk ended before
    the rest was handed back (the hand-back is held until then: the other senders
    used to end at the walk's end). The first large send is held until another
    connection has begun one (bounded): on a loaded machine the first could
    otherwise finish before the others took the rest."""
    from rcp_core.remote import send, sendbatch, sendwork

    carriers: set[int] = set()
    guard = threading.Lock()
    another, walked = threading.Event(), threading.Event()
    real = sendbatch.send_large
    real_end, real_hand_back = sendwork.Work.end, send.Sender._hand_back

    def end(work: sendwork.Work) -> None:
        real_end(work)
        walked.set()

    def hand_back(sender: send.Sender, batch: Any) -> None:
        walked.wait(timeout=60)
        time.sleep(0.2)  # the other senders see the end first
        real_hand_back(sender, batch)

    def spied(conn: Any, *args: Any) -> None:
        with guard:
            first = not carriers
            carriers.add(id(conn))
            if len(carriers) > 1:
                another.set()
        if first:
            another.wait(timeout=60)
        real(conn, *args)

    monkeypatch.setattr(sendbatch, "send_large", spied)
    monkeypatch.setattr(sendwork.Work, "end", end)
    monkeypatch.setattr(send.Sender, "_hand_back", hand_back)
    src = tmp_path / "src"
    src.mkdir()
    for i in range(8):
        (src / f"f{i}").write_bytes(os.urandom(16 * MIB))
    dst = tmp_path / "dst"
    sent, _, errors = remote_copy(src, dst, connections=3)
    assert errors == []
    assert sent["copied.files"] == 8
    assert len(carriers) >= 2, carriers
    for i in range(8):
        assert (dst / f"f{i}").read_bytes() == (src / f"f{i}").read_bytes()
