"""universal_pathlib's class for ``rcp://`` (rcp_provider/fs/path.py): found through
its entry point, with no warning that the scheme is untested (warnings are errors
here), and its paths keep the service their URL names."""

from __future__ import annotations

from pathlib import Path

from upath import UPath
from upath.registry import get_upath_class

from rcp_provider.fs.path import RcpPath


def test_the_rcp_scheme_has_its_own_path_class() -> None:
    assert get_upath_class("rcp") is RcpPath
    assert type(UPath("rcp:///tmp/x")) is RcpPath


def test_a_path_keeps_its_service_through_parents_and_joins() -> None:
    path = UPath("rcp://store.example:7001/data/a/b")
    assert path.storage_options == {"host": "store.example", "port": 7001}
    assert path.parent.storage_options == path.storage_options
    assert (path.parent / "c").path == "/data/a/c"
    # Its text names the service too (UPath's own drops the host: rcp:///data/a/b).
    assert str(path) == "rcp://store.example:7001/data/a/b"
    assert str(path.parent / "c") == "rcp://store.example:7001/data/a/c"
    assert str(UPath("rcp:///tmp/x")) == "rcp:///tmp/x"


def test_a_local_tree_is_read_through_the_path(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"hello")
    path = UPath(f"rcp://{tmp_path}/f")
    assert path.read_bytes() == b"hello"
    assert sorted(p.name for p in UPath(f"rcp://{tmp_path}").iterdir()) == ["f"]
