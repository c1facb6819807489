"""The fsspec backend plugin (``rcp_provider.fsspec.plugin``), as installed: the
project's own ``rcp.backends`` entry point, loaded only by a manager that asks for
backends, answering after any site plugin."""

from __future__ import annotations

import pytest

from rcp_core import hookimpl
from rcp_core.backends.port import Port
from rcp_core.engine.posixport import PosixPort
from rcp_core.errors import UsageError
from rcp_core.site.plugins import DISABLE_ENV, plugin_manager
from rcp_provider.fsspec.plugin import plugin
from rcp_provider.fsspec.storetree import Place


class MemoryOfMyOwn:
    """A site serving ``memory://`` itself."""

    @hookimpl
    def rcp_backend_for(self, url: str) -> Port | None:
        return PosixPort("/site") if url.startswith("memory://") else None


@pytest.mark.parametrize("disabled", ["", "1"])
def test_installed_and_loaded_only_for_backends(
    monkeypatch: pytest.MonkeyPatch, disabled: str
) -> None:
    """``RCP_DISABLE_PLUGINS`` rules out tuning, not the storages rcp reaches."""
    monkeypatch.setenv(DISABLE_ENV, disabled)
    assert plugin in plugin_manager(backends=True).get_plugins()
    assert plugin not in plugin_manager().get_plugins()


def test_it_answers_for_the_protocols_fsspec_knows() -> None:
    hook = plugin_manager(backends=True).hook
    found = hook.rcp_backend_for(url="memory://bucket/key")
    assert isinstance(found, Place)
    assert (found.backend.name, found.path) == ("memory://", "/bucket/key")
    assert hook.rcp_backend_for(url="nosuch://bucket/key") is None


def test_a_known_protocol_without_its_package_is_a_usage_error() -> None:
    """Named with what fsspec says to install (ocifs is not in the dev extra)."""
    with pytest.raises(UsageError) as refused:
        plugin.rcp_backend_for(url="oci://bucket/key")
    assert str(refused.value).startswith("oci://bucket/key: its fsspec package is")
    assert "ocifs" in str(refused.value)


def test_a_site_plugin_serving_the_same_scheme_is_asked_first() -> None:
    site = MemoryOfMyOwn()
    hook = plugin_manager([site], backends=True).hook
    found = hook.rcp_backend_for(url="memory://bucket/key")
    assert isinstance(found, PosixPort)
    assert isinstance(hook.rcp_backend_for(url="s3://bucket/key"), Place)
