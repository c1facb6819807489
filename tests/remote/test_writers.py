"""A destination's writer processes (:mod:`rcp_core.remote.writers`) between real
hosts (sshd daemons in network namespaces, :mod:`support.lan`): with
``--max-processes`` the destination starts them at once, they attach data
connections of their own to the source (protocol 1.15) and write what arrives there,
and the copy is the same tree, hard links, ``--delete`` and errors included, as one
process writes. A writer that dies fails the copy, and a rerun completes it. Without
the flag a destination starts them only when it is busy and its host has a core to
spare."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import CopySettings
from rcp_core.errors import ProtocolError
from rcp_core.remote.clientconnection import _needed
from rcp_core.remote.hello import LATE_DATA, MAX_MORE_DATA
from rcp_core.remote.latedata import more_data
from rcp_core.remote.receive import Receiver
from rcp_core.remote.roleruntime import RoleRun
from rcp_core.remote.settingswire import settings_to_wire
from rcp_core.remote.sshcopy import needed_version
from rcp_core.remote.writers import host_idle, wanted, writers_for
from support.lan import Lan, lan
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

MIB = 1 << 20
TREE: Spec = {
    ".": Dir(mode=0o755, mtime_ns=1_700_000_000_000_000_000),
    "big1": File(os.urandom(9 * MIB), mode=0o640),
    "big2": File(os.urandom(3 * MIB)),
    "empty": Dir(mode=0o700),
    "links/to-big": Symlink("../big1"),
    **{f"d{d}/f{i}": os.urandom(100 + i) for d in range(8) for i in range(150)},
    **{f"d{d}/sub/g{i}": os.urandom(50) for d in range(8) for i in range(20)},
}
WROTE = re.compile(r"writer process \d+ wrote (\d+) files")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    with lan(tmp_path_factory) as three:
        yield three


PACED = ("--bwlimit", "2M")
"""The source's pace: the 12 MiB tree takes about 6 s, so the writers (a process
each, and their TLS connections) join while most of it is still to come, even when
they start late on a loaded machine (at 4 MiB/s, about 3 s, a CI run once saw the
copy end before the writers were killed). The source
paces before it sends, so the rest waits in its queue, not in the sockets' buffers,
and reaches the writers' connections too."""


def _with_hard_links(src: Path) -> None:
    """Names of one inode in several directories (their frames may reach different
    processes; the destination links them)."""
    for d in range(1, 8):
        os.link(src / "d0" / "f0", src / f"d{d}" / "also-f0")
    os.link(src / "big2", src / "d3" / "big2-again")


@pytest.mark.parametrize("direction", ["pull", "push"])
def test_writers_copy_a_tree_exactly(
    hosts: Lan, tmp_path: Path, tree_compare: TreeCompare, direction: str
) -> None:
    """Metadata, symlinks, an empty directory and hard links across directories and
    processes, as one process writes them; pulled, the master's log says the writers
    wrote files; pushed, the destination is a daemon, whose log stays on its host,
    and its writer processes are seen there while the copy runs."""
    src = make_tree(tmp_path / "src", TREE)
    _with_hard_links(src)
    dst = tmp_path / "dst"
    ends = (
        (hosts.at(hosts.source, src), str(dst))
        if direction == "pull"
        else (str(src), hosts.at(hosts.source, dst))
    )
    proc = hosts.start_rcp("-vv", "--max-processes", "3", *PACED, *ends)
    writers: set[int] = set()
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        writers.update(hosts.processes("rcp_core.remote.writerprocess", hosts.source))
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr
    assert tree_compare(src, dst) == []
    firsts = {(dst / f"d{d}" / "also-f0").stat().st_ino for d in range(1, 8)}
    assert firsts == {(dst / "d0" / "f0").stat().st_ino}
    assert (dst / "d3" / "big2-again").stat().st_ino == (dst / "big2").stat().st_ino
    if direction == "pull":
        wrote = [int(n) for n in WROTE.findall(stdout)]
        assert len(wrote) == 2, stdout
        assert sum(wrote) > 0, "the writers wrote nothing"
    else:
        assert len(writers) == 2, "the destination daemon started no writers"


def test_writers_keep_what_delete_and_overwrite_decide(
    hosts: Lan, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """An existing destination: what the source does not have goes (``--delete``),
    what changed is replaced, wherever its frame was written."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    make_tree(dst, {"d1/f3": b"old", "d2/extra": b"gone", "stale/x": b"gone"})
    result = hosts.rcp(
        "--max-processes",
        "3",
        *PACED,
        "-o",
        "--delete",
        hosts.at(hosts.source, src),
        str(dst),
    )
    assert result.returncode == 0, result.stderr
    assert tree_compare(src, dst) == []


@pytest.mark.parametrize("processes", ["1", "3"])
def test_an_entry_a_writer_cannot_write_is_an_error_of_the_copy(
    hosts: Lan, tmp_path: Path, processes: str
) -> None:
    """An immutable destination directory: each of its entries fails wherever it is
    written, and is counted and named as one process counts and names it; the rest
    is copied."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    locked = dst / "d5"
    locked.mkdir(parents=True)
    summary = tmp_path / "summary.json"
    subprocess.run(["chattr", "+i", str(locked)], check=True)
    try:
        result = hosts.rcp(
            "--max-processes",
            processes,
            *PACED,
            "-o",
            "--summary-json",
            str(summary),
            hosts.at(hosts.source, src),
            str(dst),
        )
    finally:
        subprocess.run(["chattr", "-i", str(locked)], check=True)
    assert result.returncode == 1, result.stderr
    assert "write 'dst/d5/f" in result.stdout
    # 150 files and the directory sub, then the directory's own metadata.
    assert json.loads(summary.read_text())["errors"] == 152
    assert (dst / "d4" / "f7").read_bytes() == (src / "d4" / "f7").read_bytes()


def test_a_killed_writer_fails_the_copy_and_a_rerun_completes_it(
    hosts: Lan, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    """SIGKILL a writer while files arrive at the source's pace: the copy fails in
    bounded time, naming the writer; nothing of it is left running; a rerun with
    ``-o`` copies the tree exactly."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    proc = hosts.start_rcp(
        "--max-processes", "2", *PACED, hosts.at(hosts.source, src), str(dst)
    )
    deadline = time.monotonic() + 30
    writers: list[int] = []
    while not writers or not any(dst.glob("d*/f*")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no writer started"
        time.sleep(0.05)
        writers = hosts.processes("rcp_core.remote.writerprocess", hosts.master)
    time.sleep(1.0)  # it took its connections, and files
    for pid in writers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    _, err = proc.communicate(timeout=60)
    elapsed = time.monotonic() - killed
    assert proc.returncode != 0, err
    assert "writer process" in err, err
    assert elapsed < 30, elapsed
    assert hosts.processes("rcp_core.remote.writerprocess") == []
    assert hosts.processes("rcpd --role") == [], "a daemon outlived the copy"
    result = hosts.rcp("-o", hosts.at(hosts.source, src), str(dst))
    assert result.returncode == 0, result.stderr
    assert tree_compare(src, dst) == []


def test_more_data_connections_are_bounded_and_need_protocol_1_15() -> None:
    assert more_data({"more": 4}) == 4
    assert more_data({}) == 0
    for bad in (-1, MAX_MORE_DATA + 1, True, "4", 1.5):
        with pytest.raises(ProtocolError):
            more_data({"more": bad})
    asked = CopySettings(max_processes=2)
    assert needed_version(asked) == LATE_DATA
    assert _needed("receive", {"settings": settings_to_wire(asked)}) == (
        LATE_DATA,
        "--max-processes",
    )


def test_writers_start_only_for_a_busy_destination_on_a_host_with_a_spare_core() -> (
    None
):
    """Half a second's window: the destination's CPU-seconds, the host's idle ones."""
    assert wanted(0.5, busy=0.45, idle=0.9)  # busy, and a core idle: they pay
    assert not wanted(0.5, busy=0.45, idle=0.1)  # the host's cores are taken
    assert not wanted(0.5, busy=0.1, idle=1.0)  # paced by the link or the source
    assert wanted(0.5, busy=0.45, idle=None)  # not known: busy decides


def test_the_hosts_idle_time_grows_with_the_wall_clock() -> None:
    before = host_idle()
    time.sleep(0.3)
    after = host_idle()
    assert before is not None
    assert after is not None
    assert 0 <= after - before <= 0.3 * (os.cpu_count() or 1) + 0.1


def test_writers_never_ask_for_more_connections_than_a_source_takes(
    tmp_path: Path,
) -> None:
    """Any process count (a host of many CPUs, or ``--max-processes``) is cut to what
    ``MAX_MORE_DATA`` late connections allow; one process asks for none."""
    settings = CopySettings(max_processes=1000)
    runtime = RoleRun(settings, str(tmp_path), source=False)
    receiver = Receiver(settings, os.open(tmp_path, os.O_RDONLY), 0o022, runtime, 4)
    try:
        writers = writers_for(
            receiver, {"settings": settings, "connections": 4}, time.time
        )
        assert writers is not None
        assert writers.more == MAX_MORE_DATA
        alone = CopySettings(max_processes=1)
        assert (
            writers_for(receiver, {"settings": alone, "connections": 4}, time.time)
            is None
        )
    finally:
        receiver.close()


def test_a_writer_takes_the_parts_of_a_large_file_on_its_own_connections(
    hosts: Lan, tmp_path: Path
) -> None:
    """Large files that reach a writer process are split over its connections (their
    ``attach`` names it, protocol 1.16), never over the destination's: each file
    arrives in parts, whichever process writes it, and arrives whole. Paced so that
    the third file waits for a sender (each of the first two takes two of the
    destination's four connections for about 1.3 s) until the writer attached."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"big{i}").write_bytes(os.urandom(130 * MIB))
    dst = tmp_path / "dst"
    result = hosts.rcp(
        "-vv",
        "--max-processes",
        "2",
        "--bwlimit",
        "100M",
        hosts.at(hosts.source, src),
        str(dst),
    )
    assert result.returncode == 0, result.stderr
    for i in range(3):
        assert (dst / f"big{i}").read_bytes() == (src / f"big{i}").read_bytes()
    # The writers' lines reach the master's log too.
    split = re.findall(r"dst/(big\d) arrives in 2 parts", result.stdout)
    assert sorted(split) == [f"big{i}" for i in range(3)], result.stdout
    wrote = [int(n) for n in WROTE.findall(result.stdout)]
    assert len(wrote) == 1, result.stdout
    assert wrote[0] > 0, result.stdout
