"""``--partial`` between hosts (real sshd daemons in network namespaces,
:mod:`support.lan`): a copy killed mid-file leaves its partial, and the next run
sends only what the partial lacks (counted on the source host's link); a prefix that
does not match the source, by corruption or because the source changed, is never
trusted."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rcp_core import CopySettings
from rcp_core.engine.partials import MIN_BLOCK
from rcp_core.engine.temporaries import partial_name
from rcp_core.remote.clientconnection import _needed
from rcp_core.remote.hello import RESUME
from rcp_core.remote.settingswire import settings_to_wire
from rcp_core.remote.sshcopy import needed_version
from support.lan import Lan, lan

pytestmark = pytest.mark.privileged

MIB = 1 << 20
SLACK = 2 * MIB
"""Bytes on a link besides the file's: SSH, TLS, control messages."""
IN_FLIGHT = 48 * MIB
"""A split file's pieces a kill may catch between its source and its destination:
per connection (4), the 4 MiB piece being sent and up to 8 MiB in socket buffers."""
HEADERS = 1.08
"""Link bytes per byte of a long transfer: the Ethernet, IP and TCP headers of each
1448-byte segment (about 3.6%), and under load retransmissions and smaller segments:
measured 3.3% to 5.9% over 4 connections. Resending even the smallest prefix a rerun
keeps (32 MiB) would still exceed it."""


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    with lan(tmp_path_factory) as three:
        yield three


def _plant(path: Path, data: bytes) -> Path:
    partial = path.with_name(partial_name(path.name))
    partial.write_bytes(data)
    partial.chmod(0o600)
    return partial


def _summary(path: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(path.read_text())
    return summary


def _pull(hosts: Lan, src: Path, dst: Path) -> dict[str, int]:
    """``rcp --partial`` of ``src`` on h2 to ``dst`` here; its ``resumed`` counts."""
    summary = dst.with_name("summary.json")
    result = hosts.rcp(
        "--partial",
        "--summary-json",
        str(summary),
        hosts.at(hosts.source, src),
        str(dst),
    )
    assert result.returncode == 0, result.stderr
    resumed: dict[str, int] = _summary(summary)["resumed"]
    return resumed


@pytest.mark.parametrize("direction", ["pull", "push"])
def test_a_copy_killed_mid_file_resumes_and_sends_only_the_rest(
    hosts: Lan, tmp_path: Path, direction: str
) -> None:
    """32 MiB over a 16 Mbit/s link (about 16 s): the master is killed once 6 MiB
    arrived (for a push the destination daemon on h3 then ends too); the partial
    stays and the final name never appears; uncapped, the rerun sends the rest."""
    data = os.urandom(32 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data)
    dst = tmp_path / "out"
    partial = tmp_path / partial_name("out")
    far = hosts.source if direction == "pull" else hosts.destination
    if direction == "pull":
        operands = (hosts.at(hosts.source, src), str(dst))
    else:
        operands = (str(src), hosts.at(hosts.destination, dst))
    far.limit("16mbit")
    try:
        proc = hosts.start_rcp("--partial", *operands)
        deadline = time.monotonic() + 60
        while not (partial.exists() and partial.stat().st_size >= 6 * MIB):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the copy did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 30
        while hosts.processes("rcpd --role"):
            assert time.monotonic() < deadline, "a daemon outlived its master"
            time.sleep(0.1)
    finally:
        far.limit("10gbit")
    left = partial.stat().st_size
    assert 6 * MIB <= left < len(data)
    assert not dst.exists()
    before = far.traffic()
    summary = tmp_path / "summary.json"
    result = hosts.rcp("--partial", "--summary-json", str(summary), *operands)
    assert result.returncode == 0, result.stderr
    assert dst.read_bytes() == data
    assert not partial.exists()
    resumed = _summary(summary)["resumed"]
    assert resumed == {"files": 1, "bytes": left}
    assert far.traffic() - before < (len(data) - left) * HEADERS + SLACK


def test_a_split_copy_killed_midway_keeps_nearly_all_it_wrote(
    hosts: Lan, tmp_path: Path
) -> None:
    """256 MiB over a 400 Mbit/s link travels in 4 parts (protocol 1.16), each of the
    4 connections taking the file's next 4 MiB when it is ready, so the partial a
    kill leaves is a prefix but for the pieces in flight: the rerun keeps it up to its
    first incomplete 16 MiB block and sends only the rest, split again. In flight
    are at most a piece being sent and what the sockets' buffers hold per connection
    (a few MiB each): :data:`IN_FLIGHT` with the block."""
    data = os.urandom(256 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data)
    dst = tmp_path / "out"
    partial = tmp_path / partial_name("out")
    operands = (hosts.at(hosts.source, src), str(dst))
    hosts.source.limit("400mbit")
    try:
        proc = hosts.start_rcp("-vv", "--partial", *operands)
        deadline = time.monotonic() + 60
        while not (partial.exists() and partial.stat().st_size >= 96 * MIB):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the copy did not start"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        deadline = time.monotonic() + 30
        while hosts.processes("rcpd --role"):
            assert time.monotonic() < deadline, "a daemon outlived its master"
            time.sleep(0.1)
    finally:
        hosts.source.limit("10gbit")
    assert "out arrives in 4 parts" in out + err, (out, err)
    left = partial.stat().st_size
    assert 96 * MIB <= left < len(data)
    before = hosts.source.traffic()
    resumed = _pull(hosts, src, dst)
    assert dst.read_bytes() == data
    assert resumed["files"] == 1
    assert left - IN_FLIGHT - MIN_BLOCK <= resumed["bytes"] <= left
    sent = hosts.source.traffic() - before
    missing = len(data) - resumed["bytes"]
    assert sent < missing * HEADERS + SLACK, f"{sent / missing:.4f} link bytes a byte"


def test_a_corrupted_prefix_is_kept_only_up_to_its_first_bad_block(
    hosts: Lan, tmp_path: Path
) -> None:
    """A partial of 24 MiB whose byte at 20 MiB is wrong (a torn write): its first
    16 MiB block is kept, the rest crosses again."""
    data = os.urandom(40 * MIB)
    src = tmp_path / "big"
    src.write_bytes(data)
    bad = bytearray(data[: 24 * MIB])
    bad[20 * MIB] ^= 0x01
    _plant(tmp_path / "out", bytes(bad))
    before = hosts.source.traffic()
    resumed = _pull(hosts, src, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == data
    assert resumed == {"files": 1, "bytes": MIN_BLOCK}
    sent = hosts.source.traffic() - before
    resent = len(data) - MIN_BLOCK
    assert resent <= sent < resent * HEADERS + SLACK, f"{sent / resent:.4f} a byte"


def test_a_source_changed_since_the_partial_is_copied_whole(
    hosts: Lan, tmp_path: Path
) -> None:
    """The partial is of the file as it was; the source was rewritten since: nothing
    of the partial is kept, and the copy is of the source as it is."""
    src = tmp_path / "big"
    src.write_bytes(os.urandom(12 * MIB))
    _plant(tmp_path / "out", os.urandom(6 * MIB))
    resumed = _pull(hosts, src, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == src.read_bytes()
    assert resumed == {"files": 0, "bytes": 0}
    assert not (tmp_path / partial_name("out")).exists()


def test_a_partial_deep_in_a_tree_resumes_into_the_existing_copy(
    hosts: Lan, tmp_path: Path
) -> None:
    """A rerun of a tree copy (``--overwrite``) into a push destination: the daemon on
    h3 describes the partial of ``d/big`` when ``d`` is announced."""
    data = os.urandom(20 * MIB)
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "big").write_bytes(data)
    (src / "small").write_bytes(b"s")
    dst = tmp_path / "dst"
    (dst / "d").mkdir(parents=True)
    _plant(dst / "d" / "big", data[: 12 * MIB])
    summary = tmp_path / "summary.json"
    result = hosts.rcp(
        "--partial",
        "--overwrite",
        "--summary-json",
        str(summary),
        f"{src}/",
        hosts.at(hosts.destination, dst),
    )
    assert result.returncode == 0, result.stderr
    assert (dst / "d" / "big").read_bytes() == data
    assert (dst / "small").read_bytes() == b"s"
    assert sorted(os.listdir(dst / "d")) == ["big"]
    assert _summary(summary)["resumed"] == {"files": 1, "bytes": 12 * MIB}


def test_partial_needs_daemons_and_services_of_protocol_1_14() -> None:
    """An older daemon would ignore it (and remove what a cut-off copy wrote)."""
    settings = CopySettings(resume=True)
    assert needed_version(settings) == RESUME
    assert _needed("send", {"settings": settings_to_wire(settings)}) == (
        RESUME,
        "--partial",
    )
    assert _needed("send", {"settings": settings_to_wire(CopySettings())})[0] < RESUME
