"""The ``rcp`` scheme of Airflow's assets (rcp_provider/assets/rcp.py), through
Airflow's own ``Asset`` (the provider info's ``asset-uris`` handler normalises each
URI), and the destination asset a copy task declares by default."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest
from airflow.sdk import Asset, ObjectStoragePath

from rcp_core.errors import UsageError
from rcp_operators.copy import RcpCopyOperator
from rcp_operators.shards import RcpFinalizeOperator
from rcp_provider.assets.rcp import (
    convert_asset_to_openlineage,
    create_asset,
    sanitize_uri,
)
from rcp_provider.lineage import dataset_name


@pytest.mark.parametrize(
    ("given", "uri"),
    [
        ("rcp://Store.Example/data/", "rcp://store.example:7450/data"),
        ("rcp://store.example:7001/data/./a/../b", "rcp://store.example:7001/data/b"),
        ("rcp://[::1]:7001//data", "rcp://[::1]:7001/data"),
    ],
)
def test_two_spellings_of_one_tree_are_one_asset(given: str, uri: str) -> None:
    assert Asset(given).uri == Asset(uri).uri == uri


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("rcp:///data", "names its service"),
        ("rcp://h", "absolute path"),
        ("rcp://alice:secret@h/data", "credentials"),
    ],
)
def test_an_uri_without_a_service_or_path_or_with_credentials_is_refused(
    given: str, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        sanitize_uri(urlsplit(given))


def test_an_asset_and_the_lineage_of_its_tree_name_one_dataset() -> None:
    asset = create_asset(host="store.example", path="/data/out")
    assert asset.uri == "rcp://store.example:7450/data/out"
    dataset = convert_asset_to_openlineage(asset, None)
    named = dataset_name("rcp://store.example/data/out", None)
    assert (dataset.namespace, dataset.name) == named


def _outlets(**kwargs: object) -> list[str]:
    task = RcpCopyOperator(task_id="copy", src="/in", **kwargs)  # type: ignore[arg-type]
    return [outlet.uri for outlet in task.outlets]


def test_a_copy_declares_its_destination_as_its_outlet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _outlets(dst="/data/out/") == ["file:///data/out"]
    assert _outlets(dst="out") == [f"file://{tmp_path}/out"]
    assert _outlets(dst="h2:/srv/x") == ["file://h2/srv/x"]
    assert _outlets(dst="s3://bkt/p/", dst_conn_id="aws_default") == ["s3://bkt/p"]
    assert _outlets(dst=ObjectStoragePath("s3://aws_default@bkt/p")) == ["s3://bkt/p"]
    assert _outlets(dst="s3://key:secret@bkt/p") == ["s3://bkt/p"]  # no credentials
    assert _outlets(dst="rcp://u:token@store.example/d") == [
        "rcp://store.example:7450/d"
    ]
    # A URL naming the worker's own path is that path's asset (rcp:/// was "rcp:/p",
    # which the scheme's handler refused: the DAG failed to parse).
    assert _outlets(dst="rcp:///data/out") == ["file:///data/out"]
    assert _outlets(dst="file:///data/out/") == ["file:///data/out"]
    assert _outlets(dst="file://localhost/data/out") == ["file:///data/out"]


def test_a_destination_unknown_at_parse_time_has_no_outlet_unless_asked() -> None:
    assert _outlets(dst="{{ params.dst }}") == []
    assert _outlets(dst="/data/out", dst_conn_id="svc") == []
    assert _outlets(dst="/data/out", dst_asset=False) == []
    mine = Asset("rcp://store.example/data/out")
    assert _outlets(dst="/data/out", outlets=[mine]) == [mine.uri]
    with pytest.raises(UsageError, match="templated or on a connection"):
        _outlets(dst="{{ params.dst }}", dst_asset=True)
    with pytest.raises(UsageError, match="give one of them"):
        _outlets(dst="/data/out", dst_asset=True, outlets=[mine])


def test_a_shard_copy_declares_no_outlet_and_the_finalize_does() -> None:
    """A shard's success is not the whole destination: only the finalize, which
    runs after every shard, declares it (a consumer is not scheduled on a part)."""
    shard = RcpCopyOperator(task_id="s", dst="/data/out", manifest="/m.json", shard=0)
    assert shard.outlets == []
    with pytest.raises(UsageError, match="not the whole destination"):
        RcpCopyOperator(
            task_id="s", dst="/data/out", manifest="/m.json", shard=0, dst_asset=True
        )
    finalize = RcpFinalizeOperator(task_id="f", manifest="/m.json", dst="/data/out/")
    assert [outlet.uri for outlet in finalize.outlets] == ["file:///data/out"]
    off = RcpFinalizeOperator(
        task_id="f", manifest="/m.json", dst="/data/out", dst_asset=False
    )
    assert off.outlets == []
