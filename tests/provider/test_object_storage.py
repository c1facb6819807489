"""ObjectStoragePath over the ``rcp`` scheme: Airflow finds our filesystem through the
provider's ``filesystems`` module, and its copies run the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.airflow import connection_env
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

    from rcp_provider.filesystem import RcpFileSystem

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


def test_a_connection_gives_its_max_workers_and_a_service_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rcp_core.errors import UsageError
    from rcp_provider.fs import get_fs

    monkeypatch.setenv(*connection_env("local_rcp", extra={"max_workers": 3}))
    assert get_fs("local_rcp").settings.max_workers == 3
    monkeypatch.setenv(
        *connection_env("svc", host="h", port=1, extra={"fingerprint": "ab" * 32})
    )
    with pytest.raises(UsageError, match="service"):
        get_fs("svc")
