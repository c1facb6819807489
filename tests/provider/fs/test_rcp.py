"""ObjectStoragePath over the ``rcp`` scheme: Airflow finds our filesystem through the
provider's ``filesystems`` module, and its copies run the engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.airflow import connection_env
from support.services import TOKEN, RcpdServe
from support.treecmp import TreeCompare
from support.treespec import Dir, File, Spec, make_tree

T0 = 1_620_000_000_000_000_000
TREE: Spec = {
    ".": Dir(0o755, T0),
    "a": Dir(0o750, T0 + 1),
    "a/one": File(b"1" * 5000, 0o640, T0 + 2),
    **{f"b/f{i}": File(b"%d" % i, 0o600, T0 + i) for i in range(30)},
}


def test_copy_between_rcp_paths_runs_the_engine_and_keeps_metadata(
    tmp_path: Path, tree_compare: TreeCompare
) -> None:
    from airflow.sdk import ObjectStoragePath

    from rcp_provider.fsspec.local import RcpFileSystem

    src = make_tree(tmp_path / "src", TREE)
    source = ObjectStoragePath(f"rcp://{src}")
    assert isinstance(source.fs, RcpFileSystem)
    source.copy(ObjectStoragePath(f"rcp://{tmp_path}/dst"), recursive=True)
    assert tree_compare(src, tmp_path / "dst") == []  # modes and times too


@pytest.mark.parametrize("direction", ["rcp->file", "file->rcp"])
def test_copy_between_rcp_and_file_paths_copies_the_tree(
    tmp_path: Path, direction: str, tree_compare: TreeCompare
) -> None:
    from airflow.sdk import ObjectStoragePath

    src = make_tree(tmp_path / "src", TREE)
    first, second = direction.split("->")
    ObjectStoragePath(f"{first}://{src}").copy(
        ObjectStoragePath(f"{second}://{tmp_path}/dst"), recursive=True
    )
    assert tree_compare(src, tmp_path / "dst", mode=False, times=False) == []


def test_a_connection_gives_its_max_workers_or_its_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rcp_provider.fs.rcp import get_fs
    from rcp_provider.fsspec.service import RcpServiceFileSystem

    monkeypatch.setenv(*connection_env("local_rcp", extra={"max_workers": 3}))
    assert get_fs("local_rcp").settings.max_workers == 3
    monkeypatch.setenv(
        *connection_env(
            "svc",
            host="h",
            port=1,
            password="t",
            extra={"fingerprint": "ab" * 32, "timeout": 5},
        )
    )
    fs = get_fs("svc", {"max_workers": 2})
    assert isinstance(fs, RcpServiceFileSystem)
    assert (fs.host, fs.port, fs.timeout, fs.client.token) == ("h", 1, 5.0, "t")
    assert fs.settings.max_workers == 2


@pytest.fixture
def service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Path]]:
    """A real ``rcpd serve`` with one root, named by the connection ``svc``."""
    root = tmp_path / "served"
    root.mkdir()
    (tmp_path / "token").write_text(TOKEN)
    rcpd = RcpdServe(["--root", str(root), "--token-file", str(tmp_path / "token")])
    try:
        host, port = rcpd.address
        extra = {"fingerprint": rcpd.announce["fingerprint"]}
        conn = connection_env("svc", host=host, port=port, password=TOKEN, extra=extra)
        monkeypatch.setenv(*conn)
        yield "svc", root
    finally:
        assert rcpd.stop() == 0, rcpd.stderr


def test_object_storage_paths_on_a_service_copy_there_and_to_files(
    tmp_path: Path, service: tuple[str, Path], tree_compare: TreeCompare
) -> None:
    """``rcp://`` paths with a service's connection: a copy between two of them is
    the service's own job (modes and times kept), and one to ``file://`` gets it."""
    from airflow.sdk import ObjectStoragePath

    conn_id, root = service
    src = make_tree(root / "src", TREE)
    source = ObjectStoragePath(f"rcp://{src}", conn_id=conn_id)
    assert source.is_dir()
    assert sorted(p.name for p in source.iterdir()) == ["a", "b"]
    source.copy(ObjectStoragePath(f"rcp://{root}/dst", conn_id=conn_id), recursive=True)
    assert tree_compare(src, root / "dst") == []
    source.copy(ObjectStoragePath(f"file://{tmp_path}/here"), recursive=True)
    assert tree_compare(src, tmp_path / "here", mode=False, times=False) == []


def test_an_operator_never_takes_a_services_path_for_the_workers(
    tmp_path: Path, service: tuple[str, Path]
) -> None:
    """An ``rcp://`` ObjectStoragePath whose connection is a service's names that
    service's tree: an operator refuses it (the path and the connection go as the
    side's operand and connection) instead of acting on the worker's own path of
    that name, which stays untouched."""
    from airflow.sdk import ObjectStoragePath
    from airflow.sdk.exceptions import AirflowFailException

    from rcp_operators.remove import RcpRemoveOperator

    conn_id, _ = service
    local = make_tree(tmp_path / "on-the-worker", TREE)
    remove = RcpRemoveOperator(
        task_id="rm", paths=ObjectStoragePath(f"rcp://{local}", conn_id=conn_id)
    )
    with pytest.raises(AirflowFailException, match="src_conn_id, dst_conn_id or"):
        remove.execute(context={})
    assert (local / "a" / "one").read_bytes() == b"1" * 5000
