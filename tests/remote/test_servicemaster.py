"""Copies between this host and ``rcpd serve`` services, and between two services.

Two services in this process (real TLS on loopback, roots ``data`` and ``backup``
each); the caller holds a client of each and never touches file data.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import CopySettings
from rcp_core.errors import UsageError
from rcp_core.remote.servicemaster import service_copy
from support.services import Served, start
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

MIB = 1 << 20
T0 = 1_600_000_000 * 10**9
TREE: Spec = {
    ".": Dir(0o750, T0),
    "big": File(os.urandom(3 * MIB), 0o640, T0),
    "d/link": Symlink("../big"),
    **{f"d/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(100)},
}


@pytest.fixture
def one(tmp_path: Path) -> Iterator[Served]:
    yield from start(tmp_path / "one")


@pytest.fixture
def two(tmp_path: Path) -> Iterator[Served]:
    yield from start(tmp_path / "two")


def test_a_tree_comes_from_a_service(
    one: Served, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(one.data / "tree", TREE)
    with one.client() as client:
        sent, written = service_copy(
            [str(src)], str(tmp_path / "here"), source_service=client
        )
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert tree_compare(src, tmp_path / "here") == []
    assert written.counts["copied.files"] == sent.counts["copied.files"] == 101


def test_a_tree_goes_to_a_service(
    two: Served, tmp_path: Path, tree_compare: TreeCompare
) -> None:
    src = make_tree(tmp_path / "here", TREE)
    with two.client() as client:
        sent, written = service_copy(
            [str(src)], str(two.backup / "there"), destination_service=client
        )
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert tree_compare(src, two.backup / "there") == []
    assert written.counts["copied.files"] == 101


def test_a_tree_goes_from_one_service_to_another(
    one: Served, two: Served, tree_compare: TreeCompare
) -> None:
    src = make_tree(one.data / "tree", TREE)
    other = make_tree(one.data / "other", {"x": b"x"})
    with one.client() as source, two.client() as target:
        sent, written = service_copy(
            [str(src), str(other)],
            f"{two.backup}/",
            source_service=source,
            destination_service=target,
        )
        kinds = sorted(job["kind"] for job in target.jobs())
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert tree_compare(src, two.backup / "tree") == []
    assert (two.backup / "other" / "x").read_bytes() == b"x"
    assert kinds == ["receive"]


@pytest.mark.parametrize("direction", ["from", "to"])
def test_bwlimit_paces_what_a_source_sends_service_or_here(
    one: Served, tmp_path: Path, tree_compare: TreeCompare, direction: str
) -> None:
    """3 MiB and a little under ``bwlimit`` 1 MiB/s: one second's burst, then at
    least two at the rate, whether the service sends (its job paces itself) or this
    host does; the copy is whole."""
    if direction == "from":
        src, dst = make_tree(one.data / "tree", TREE), tmp_path / "here"
    else:
        src, dst = make_tree(tmp_path / "tree", TREE), one.backup / "there"
    with one.client() as client:
        started = time.monotonic()
        sent, written = service_copy(
            [str(src)],
            str(dst),
            source_service=client if direction == "from" else None,
            destination_service=client if direction == "to" else None,
            bwlimit=MIB,
        )
        elapsed = time.monotonic() - started
    assert sent.ok, sent.errors
    assert written.ok, written.errors
    assert tree_compare(src, dst) == []
    assert elapsed >= 1.9


def test_a_mirror_through_a_service_applies_filters_and_delete(
    two: Served, tmp_path: Path
) -> None:
    src = make_tree(tmp_path / "here", {"a.py": b"a", "b.tmp": b"b"})
    make_tree(two.backup / "there", {"old.py": b"o", "keep.tmp": b"k"})
    settings = CopySettings(delete=True, excludes=("*.tmp",))
    with two.client() as client:
        _, written = service_copy(
            [str(src)], str(two.backup / "there"), settings, destination_service=client
        )
    assert written.ok, written.errors
    assert sorted(os.listdir(two.backup / "there")) == ["a.py", "keep.tmp"]


@pytest.mark.parametrize("side", ["source", "destination"])
def test_a_path_outside_a_service_is_refused_before_anything_moves(
    one: Served, tmp_path: Path, side: str
) -> None:
    make_tree(tmp_path / "here", {"a": b"a"})
    with one.client() as client:
        if side == "source":
            sources, target = [str(one.outside / "secret")], str(tmp_path / "x")
            services = {"source_service": client}
        else:
            sources, target = [str(tmp_path / "here")], str(one.outside / "x")
            services = {"destination_service": client}
        with pytest.raises(UsageError, match="outside"):
            service_copy(sources, target, **services)
    assert sorted(os.listdir(one.outside)) == ["secret"]
    assert not (tmp_path / "x").exists()


def test_a_service_is_needed_on_one_side(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs a source or destination service"):
        service_copy([str(tmp_path)], str(tmp_path / "x"))


def test_a_send_job_admits_only_the_destination_it_was_told(
    one: Served, tmp_path: Path
) -> None:
    """Another certificate at the service's port fails the handshake; the real
    destination is not disturbed."""
    from rcp_core.errors import AuthenticationError, ConnectionLostError
    from rcp_core.remote import tls
    from rcp_core.remote.handshake import dial
    from rcp_core.remote.hello import Role
    from rcp_core.remote.roles import SOFTWARE, run_destination

    src = make_tree(one.data / "tree", {"f": b"data"})
    real, impostor = tls.Identity.ephemeral("real"), tls.Identity.ephemeral("other")
    with one.client() as client:
        job, port = client.send(
            [(str(src), "tree")], CopySettings(), peer_cert=real.cert_pem, connections=1
        )
        address = (one.service.address[0], port)
        with pytest.raises((AuthenticationError, ConnectionLostError)):
            dial(
                address,
                role=Role.DESTINATION,
                software=SOFTWARE,
                timeout=5,
                pin=one.identity.fingerprint,
                identity=impostor,
            ).send_control("attach", channel="control")
        _, errors = run_destination(
            address,
            one.identity.fingerprint,
            real,
            str(tmp_path / "tree"),
            CopySettings(),
            connections=1,
            timeout=5,
        )
        assert errors == []
        assert client.wait(job["job"], 10)["state"] == "succeeded"
    assert (tmp_path / "tree" / "f").read_bytes() == b"data"


def test_a_receive_job_refuses_a_source_with_another_fingerprint(
    two: Served, tmp_path: Path
) -> None:
    import contextlib
    import socket
    import threading

    from rcp_core.errors import RemoteError
    from rcp_core.remote import tls
    from rcp_core.remote.roles import run_source

    make_tree(tmp_path / "here", {"f": b"data"})
    source_id = tls.Identity.ephemeral("source")
    listener = socket.create_server(("127.0.0.1", 0))
    cert = None
    with two.client() as client:
        cert = client.certificate()
        job = client.receive(
            str(two.backup / "x"),
            CopySettings(),
            into=False,
            source=listener.getsockname()[:2],
            pin=tls.Identity.ephemeral("someone else").fingerprint,
            connections=1,
        )
        ctx = tls.server_context(source_id, cert)

        def serve() -> None:
            with contextlib.suppress(RemoteError, OSError):  # refused: expected
                run_source(
                    listener,
                    ctx,
                    [(str(tmp_path / "here"), "x")],
                    CopySettings(),
                    connections=1,
                    timeout=3,
                )

        serving = threading.Thread(target=serve, daemon=True)
        serving.start()
        done = client.wait(job["job"], 20)
        serving.join(10)
    listener.close()
    assert done["state"] == "failed"
    assert "fingerprint" in done["error"] or "pinned" in done["error"], done["error"]
    assert not (two.backup / "x").exists()


def test_a_receive_is_refused_by_the_operand_rules_before_it_starts(
    two: Served,
) -> None:
    """A missing ``DST/``, and an existing copy without a policy, are refused when
    the service gets the request: no job, nothing written. Names that are not one
    safe component break the protocol (the service drops the connection)."""
    from rcp_core.errors import RemoteError
    from rcp_core.remote.client import ServiceClient

    (two.backup / "has").mkdir()
    (two.backup / "has" / "x").write_bytes(b"mine")

    def receive(client: ServiceClient, destination: Path, names: object) -> None:
        client.receive(
            f"{destination}/",
            CopySettings(),
            into=True,
            source=("127.0.0.1", 9),
            pin="0" * 64,
            connections=1,
            names=names,  # type: ignore[arg-type]  # what a hostile client sends
        )

    with two.client() as client:
        with pytest.raises(UsageError, match="'missing' does not exist"):
            receive(client, two.backup / "missing", ["x"])
        with pytest.raises(UsageError, match=f"'{two.backup}/has/x' exists"):
            receive(client, two.backup / "has", ["x"])
        assert client.jobs() == []
    for bad in (["../x"], ["a/b"], [""], [7]):
        with two.client() as client, pytest.raises(RemoteError, match="gave up"):
            receive(client, two.backup / "has", bad)
    assert (two.backup / "has" / "x").read_bytes() == b"mine"
