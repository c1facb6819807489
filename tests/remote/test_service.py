"""``rcpd serve`` in this process: real TLS on loopback, real copies, real refusals."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rcp_core import CopySettings, ExistingPolicy
from rcp_core.errors import (
    AuthenticationError,
    ConnectionLostError,
    RemoteError,
    UsageError,
)
from rcp_core.remote import tls
from rcp_core.remote.handshake import dial
from rcp_core.remote.hello import Role
from rcp_core.remote.roles import SOFTWARE
from rcp_core.remote.service import ServiceConfig
from rcp_core.remote.wire import FrameKind
from support.services import TOKEN, Served, start
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, Symlink, make_tree

TIMEOUT = 10.0
T0 = 1_600_000_000 * 10**9


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    yield from start(tmp_path)


TREE: Spec = {
    ".": Dir(0o755, T0),
    "a": Dir(0o750, T0 + 1),
    "a/one": File(b"1" * 5000, 0o644, T0 + 2),
    "a/link": Symlink("one"),
    "b": Dir(0o700, T0 + 3),
    **{f"b/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(50)},
}


def test_a_job_copies_a_tree_exactly(served: Served, tree_compare: TreeCompare) -> None:
    src = make_tree(served.data / "tree", TREE)
    with served.client() as client:
        job = client.submit([str(src)], str(served.backup / "tree"))
        assert job["state"] in ("queued", "running")
        done = client.wait(job["job"], TIMEOUT)
    assert done["state"] == "succeeded", done
    assert done["error"] is None
    assert done["summary"]["copied"]["files"] == 51
    assert done["summary"]["copied"]["symlinks"] == 1
    assert tree_compare(src, served.backup / "tree") == []


def test_status_and_the_job_list_show_each_job(served: Served) -> None:
    src = make_tree(served.data / "tree", TREE)
    with served.client() as client:
        first = client.submit([str(src)], f"{served.backup}/")
        client.wait(first["job"], TIMEOUT)
        second = client.submit(
            [str(src / "a"), str(src / "b")],
            f"{served.backup}/tree/",
            CopySettings(existing=ExistingPolicy.IGNORE_EXISTING),
        )
        client.wait(second["job"], TIMEOUT)
        assert client.status(first["job"])["state"] == "succeeded"
        listed = {job["job"]: job["state"] for job in client.jobs()}
    assert listed == {first["job"]: "succeeded", second["job"]: "succeeded"}


def test_a_submit_key_is_shown_and_a_repeated_key_is_the_same_job(
    served: Served,
) -> None:
    """What lets a retried Airflow task find the job its first try started."""
    src = make_tree(served.data / "tree", TREE)
    with served.client() as client:
        job = client.submit(
            [str(src)], f"{served.backup}/", key="airflow:a-task-instance:1"
        )
        again = client.submit(
            [str(src)], f"{served.backup}/", key="airflow:a-task-instance:1"
        )
        client.wait(job["job"], TIMEOUT)
        listed = {j["key"]: j["job"] for j in client.jobs()}
    assert again["job"] == job["job"]
    assert listed == {"airflow:a-task-instance:1": job["job"]}


@pytest.mark.parametrize(
    ("source", "destination", "settings", "why"),
    [
        ("outside/secret", "backup/x", None, "outside this service's roots"),
        ("data/tree", "outside/x", None, "outside this service's roots"),
        ("data/../outside/secret", "backup/x", None, "'..'"),
        ("data/escape/secret", "backup/x", None, "symlink or not a directory"),
        ("data/tree", "data/escape/x", None, "symlink or not a directory"),
        ("data/escape/", "backup/x", None, "does not follow a symlink"),
        ("data/tree", "backup", None, "is a root"),
        ("data/tree", "backup/x", CopySettings(dereference=True), "dereference"),
    ],
)
def test_requests_beyond_the_roots_are_refused_and_touch_nothing(
    served: Served,
    tmp_path: Path,
    source: str,
    destination: str,
    settings: CopySettings | None,
    why: str,
) -> None:
    make_tree(served.data / "tree", TREE)
    before = sorted(os.listdir(served.outside)), sorted(os.listdir(served.backup))
    with served.client() as client:
        with pytest.raises(UsageError, match=why):
            client.submit(
                [f"{tmp_path}/{source}"], f"{tmp_path}/{destination}", settings
            )
        assert client.jobs() == []  # nothing queued; the connection still serves
    assert (sorted(os.listdir(served.outside)), sorted(os.listdir(served.backup))) == (
        before
    )


def test_a_failed_job_says_why_in_the_clients_own_paths(served: Served) -> None:
    src = make_tree(served.data / "tree", TREE)
    (served.backup / "tree").mkdir()
    with served.client() as client:
        job = client.submit([str(src)], str(served.backup / "tree"))
        done = client.wait(job["job"], TIMEOUT)
    assert done["state"] == "failed"
    assert done["error"] == (
        f"destination '{served.backup}/tree' exists "
        "(use --overwrite, --update or --ignore-existing)"
    )


def test_an_unknown_job_is_refused(served: Served) -> None:
    with served.client() as client, pytest.raises(UsageError, match="no job"):
        client.status("1-deadbeef")


@pytest.mark.parametrize("token", ["wrong", None])
def test_a_client_without_the_token_is_refused(
    served: Served, token: str | None
) -> None:
    with (
        served.client(token=token) as client,
        pytest.raises(RemoteError, match="authentication failed"),
    ):
        client.jobs()


def test_a_service_with_another_certificate_is_refused(served: Served) -> None:
    impostor = tls.Identity.ephemeral("impostor").fingerprint
    with (
        served.client(fingerprint=impostor) as client,
        pytest.raises(AuthenticationError, match="not the pinned"),
    ):
        client.jobs()


def test_clients_admitted_by_certificate(tmp_path: Path) -> None:
    admitted, stranger = tls.Identity.ephemeral("admitted"), tls.Identity.ephemeral()
    for served in start(tmp_path, token=None, client_certs=[admitted.cert_pem]):
        with served.client(token=None, identity=admitted) as client:
            assert client.jobs() == []
        for identity in (stranger, None):
            with (
                served.client(token=None, identity=identity) as client,
                pytest.raises((AuthenticationError, ConnectionLostError)),
            ):
                client.jobs()


def test_a_service_must_authenticate_its_clients(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="must authenticate"):
        ServiceConfig(roots=[str(tmp_path)], identity=tls.Identity.ephemeral())


def test_an_idle_connection_is_closed_and_the_client_reconnects(
    tmp_path: Path,
) -> None:
    for served in start(tmp_path, idle=0.3):
        with served.client() as client:
            assert client.jobs() == []
            assert client._conn is not None
            first = client._conn
            time.sleep(0.8)  # past the service's idle bound
            assert client.jobs() == []
            assert client._conn is not first


def test_clients_beyond_the_bound_are_turned_away(tmp_path: Path) -> None:
    for served in start(tmp_path, max_clients=1):
        with served.client() as first:
            assert first.jobs() == []
            with (
                served.client() as second,
                pytest.raises((ConnectionLostError, AuthenticationError)),
            ):
                second.jobs()


def test_a_frame_out_of_place_ends_the_connection(served: Served) -> None:
    host, port = served.service.address
    conn = dial(
        (host, port),
        role=Role.CLIENT,
        software=SOFTWARE,
        timeout=TIMEOUT,
        pin=served.identity.fingerprint,
        token=TOKEN,
    )
    conn.send(FrameKind.FILES, {"dir": 0})
    with pytest.raises(RemoteError, match="FILES"):
        conn.read()
    conn.close()
