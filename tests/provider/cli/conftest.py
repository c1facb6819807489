"""The command-line tests' shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import sitefs


@pytest.fixture
def storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The ``sitefs`` storage ``store`` (empty), its plugin installed."""
    site = tmp_path / "site-packages"
    info = site / "rcp_test_sitefs-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: rcp-test-sitefs\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        "[rcp.backends]\nsitefs = support.sitefs:plugin\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(sitefs.ROOT_ENV, str(tmp_path / "sitefs"))
    monkeypatch.setattr(sitefs.plugin, "asked", [])
    store = tmp_path / "sitefs" / "store"
    store.mkdir(parents=True)
    return store
