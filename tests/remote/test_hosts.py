"""Remote copies between separate hosts: network namespaces on a private bridge
(:mod:`support.lan`), every byte between hosts on a veth link a test can count, cap
or pull."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rcp_core
from support.lan import Lan, lan
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

pytestmark = pytest.mark.privileged

MIB = 1 << 20
TREE: Spec = {
    ".": Dir(mode=0o755, mtime_ns=1_700_000_000_000_000_000),
    "big": File(os.urandom(8 * MIB), mode=0o640),
    "d/link": Symlink("../big"),
    **{f"d/f{i}": os.urandom(100) for i in range(300)},
}


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lan]:
    with lan(tmp_path_factory) as three:
        yield three


def test_between_two_remote_hosts_data_bypasses_the_master(
    hosts: Lan, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    before = hosts.master.traffic()
    result = hosts.rcp(
        "--summary",
        hosts.at(hosts.source, src),
        hosts.at(hosts.destination, tmp_path / "dst"),
    )
    assert result.returncode == 0, result.stderr
    assert tree_compare(src, tmp_path / "dst") == []
    # Control, TLS and SSH only: far less than the 8 MiB that went from h2 to h3.
    assert hosts.master.traffic() - before < MIB
    assert "source:      cpu user" in result.stdout
    assert "destination: cpu user" in result.stdout


def test_rcmp_hashes_each_tree_on_its_own_host(hosts: Lan, tmp_path: Path) -> None:
    """``rcmp --checksum host:/a host:/b`` from a third host: each side is listed and
    hashed where it is (an ``rcpd serve --session`` per host), so the 8 MiB of
    contents never cross the master's link, and one flipped byte is still found."""
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    rcp_core.copy([str(src)], str(dst))
    operands = (hosts.at(hosts.source, src), hosts.at(hosts.destination, dst))
    before = hosts.master.traffic()
    same = hosts.rcmp("--checksum", *operands)
    assert same.returncode == 0, same.stderr
    summary = json.loads(same.stdout.splitlines()[-1])["summary"]
    assert summary["same"] is True
    assert summary["files_hashed"] == 301
    assert hosts.master.traffic() - before < MIB
    big = dst / "big"
    mtime = big.stat().st_mtime_ns
    with open(big, "r+b") as f:
        f.seek(5 * MIB)
        byte = f.read(1)
        f.seek(5 * MIB)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(big, ns=(mtime, mtime))
    differ = hosts.rcmp("--checksum", *operands)
    assert differ.returncode == 3, differ.stderr
    found = [json.loads(line) for line in differ.stdout.splitlines()[:-1]]
    assert [(d["path"], d["kind"]) for d in found] == [("big", "content")]


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_a_tree_crosses_a_capped_link_exactly(
    hosts: Lan, tmp_path: Path, tree_compare: TreeCompare, direction: str
) -> None:
    src = make_tree(tmp_path / "src", TREE)
    dst = tmp_path / "dst"
    hosts.source.limit("200mbit")
    try:
        if direction == "push":
            result = hosts.rcp(str(src), hosts.at(hosts.source, dst))
        else:
            result = hosts.rcp(hosts.at(hosts.source, src), str(dst))
    finally:
        hosts.source.limit("10gbit")
    assert result.returncode == 0, result.stderr
    assert tree_compare(src, dst) == []


@pytest.mark.parametrize("direction", ["push", "pull"])
def test_bwlimit_holds_across_hosts_whichever_host_sends(
    hosts: Lan, tmp_path: Path, direction: str
) -> None:
    """8 MiB under ``--bwlimit 2M``: the source (a daemon on h2 for a pull, this
    host for a push) sends one second's burst, then 2 MiB/s over its four
    connections together: at least three seconds, and the bytes on h2's link are the
    file's (nothing is sent twice)."""
    src = make_tree(tmp_path / "src", {"big": File(os.urandom(8 * MIB))})
    dst = tmp_path / "dst"
    before = hosts.source.traffic()
    started = time.monotonic()
    if direction == "push":
        result = hosts.rcp("--bwlimit", "2M", str(src), hosts.at(hosts.source, dst))
    else:
        result = hosts.rcp("--bwlimit", "2M", hosts.at(hosts.source, src), str(dst))
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert (dst / "big").read_bytes() == (src / "big").read_bytes()
    assert 2.9 <= elapsed < 30
    assert 8 * MIB <= hosts.source.traffic() - before < 9 * MIB


def test_every_listener_takes_a_port_of_the_ranges_and_says_where(
    hosts: Lan, tmp_path: Path
) -> None:
    """``--port-ranges`` holds for the daemons' listeners (h2's source, h3's
    destination's control) and for this host's own source; ``--bind-ip`` is where
    h3's destination reaches it; ``-v`` says each, and without ``-v`` nothing."""
    src = make_tree(tmp_path / "src", {"f": b"x"})
    pulled = hosts.rcp(
        "-v",
        "--port-ranges",
        "41000-41009",
        hosts.at(hosts.source, src),
        str(tmp_path / "pulled"),
    )
    assert pulled.returncode == 0, pulled.stderr
    port = re.search(
        rf"rcpd \(source\) on {hosts.source.address} listens on "
        rf"{hosts.source.address}:(\d+)\n",
        pulled.stdout,
    )
    assert port is not None, pulled.stdout
    assert 41000 <= int(port[1]) <= 41009
    assert f"connects to {hosts.source.address}:{port[1]} from" in pulled.stdout
    pushed = hosts.rcp(
        "-v",
        "--port-ranges",
        "41010:41019",
        "--bind-ip",
        hosts.master.address,
        str(src),
        hosts.at(hosts.destination, tmp_path / "pushed"),
    )
    assert pushed.returncode == 0, pushed.stderr
    here = re.search(
        rf"the source here listens on {hosts.master.address}:(\d+)\n", pushed.stdout
    )
    assert here is not None, pushed.stdout
    assert 41010 <= int(here[1]) <= 41019
    assert (tmp_path / "pushed" / "f").read_bytes() == b"x"
    quiet = hosts.rcp(str(src), hosts.at(hosts.destination, tmp_path / "quiet"))
    assert quiet.returncode == 0, quiet.stderr
    assert "listens on" not in quiet.stdout + quiet.stderr


def test_a_killed_source_daemon_fails_the_copy_and_leaves_no_partial_file(
    hosts: Lan, tmp_path: Path
) -> None:
    """SIGKILL the remote source while a large file streams (32 MiB over 16 Mbit/s
    take about 16 s, so the kill lands mid-file on any machine): a clear error in
    bounded time, the cut-off file removed, no daemon left behind."""
    src = make_tree(tmp_path / "src", {"big": File(os.urandom(32 * MIB))})
    dst = tmp_path / "dst"
    hosts.source.limit("16mbit")
    try:
        proc = hosts.start_rcp(hosts.at(hosts.source, src), str(dst))
        deadline = time.monotonic() + 30
        while not ((dst / "big").exists() and (dst / "big").stat().st_size > 0):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the copy did not start"
            time.sleep(0.05)
        killed = time.monotonic()
        # The daemon on the source's host only: another run's rcpd is not ours to kill.
        daemons = hosts.processes("rcpd --role source", hosts.source)
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):  # a wrapper gone with it
                os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - killed
    finally:
        hosts.source.limit("10gbit")
    assert daemons, "no source daemon was running"
    assert proc.returncode == 5, err  # a remote failure (the exit-status table)
    assert "closed control before the copy ended" in err, err
    assert elapsed < 30, elapsed
    assert not (dst / "big").exists()
    assert hosts.processes("rcpd --role") == [], "a daemon outlived the copy"


def test_a_remote_destination_reports_progress_while_it_copies(
    hosts: Lan, tmp_path: Path
) -> None:
    """The destination daemon's counts reach the master's progress lines before the
    copy ends: 16 MiB over a 40 Mbit/s link take at least 3 s on any machine, and
    the destination reports every second."""
    src = make_tree(
        tmp_path / "src", {f"f{i}": os.urandom(MIB // 4) for i in range(64)}
    )
    hosts.source.limit("40mbit")
    try:
        result = hosts.rcp(
            "--progress",
            "--progress-type",
            "text",
            "--progress-interval",
            "0.5",
            hosts.at(hosts.source, src),
            hosts.at(hosts.destination, tmp_path / "dst"),
        )
    finally:
        hosts.source.limit("10gbit")
    assert result.returncode == 0, result.stderr
    files = [int(n) for n in re.findall(r"copied: +files (\d+)", result.stderr)]
    assert files[-1] == 64, result.stderr
    assert any(0 < n < 64 for n in files[:-1]), result.stderr


def test_a_pulled_cable_fails_the_copy_within_its_bound(
    hosts: Lan, tmp_path: Path
) -> None:
    """The link goes down mid-file: a clear error within the configured bounds, no
    partial file under its final name, no daemon left behind."""
    src = make_tree(tmp_path / "src", {"big": File(os.urandom(32 * MIB))})
    hosts.source.limit("16mbit")  # 32 MiB take about 16 s
    try:
        proc = hosts.start_rcp(
            "--remote-timeout", "5", hosts.at(hosts.source, src), str(tmp_path / "dst")
        )
        dst = tmp_path / "dst"
        deadline = time.monotonic() + 30
        while not (dst.is_dir() and any(dst.iterdir())):  # data is flowing
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the copy did not start"
            time.sleep(0.05)
        pulled = time.monotonic()
        hosts.source.link(up=False)
        _, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - pulled
    finally:
        hosts.source.link(up=True)
        hosts.source.limit("10gbit")
    assert proc.returncode == 5, err  # a remote failure (the exit-status table)
    assert "no data from the peer for 5.0 s" in err, err
    assert elapsed < 30, elapsed
    assert not (tmp_path / "dst" / "big").exists()
    assert hosts.processes("rcpd --role source") == [], "an rcpd outlived its master"


def test_the_leftover_check_sees_this_lans_daemons_only(hosts: Lan) -> None:
    """What the no-daemon-left checks above rest on: a process whose command line
    reads like a daemon's is found on the host whose namespace it runs in, and one
    outside this LAN (another test run's) is not."""
    stand_in = [sys.executable, "-c", "import time; time.sleep(60)"]
    stand_in += ["rcpd", "--role", "source"]
    ours = subprocess.Popen(hosts.source.enter(stand_in))
    theirs = subprocess.Popen(stand_in)
    try:
        deadline = time.monotonic() + 10
        for proc in (ours, theirs):  # both exec'd (nsenter's own command line
            # names the stand-in's before it enters the namespace): pgrep -f sees each
            cmdline = Path(f"/proc/{proc.pid}/cmdline")
            while not cmdline.read_bytes().startswith(sys.executable.encode()):
                assert time.monotonic() < deadline, "the stand-in did not start"
                time.sleep(0.05)
        assert hosts.processes("rcpd --role") == [ours.pid]
        assert hosts.processes("rcpd --role source", hosts.source) == [ours.pid]
        assert hosts.processes("rcpd --role", hosts.master, hosts.destination) == []
    finally:
        for proc in (ours, theirs):
            proc.kill()
            proc.wait()
    assert hosts.processes("rcpd --role") == []
