"""The fsspec backend: every protocol fsspec knows, as a backend plugin.

Installed through the ``rcp.backends`` entry-point group (pyproject.toml), the
group :func:`rcp_core.site.plugins.plugin_manager` loads only for a copy with a URL
store operand; the ``rcp_backend_for`` hook's first user, answering as a site's
backend plugin would. It answers ``trylast``: a site's plugin serving a scheme
fsspec also knows (``s3://`` through its own client, say) is asked first.

- fsspec not installed (it is the ``fsspec`` extra), or a protocol it does not
  know: ``None``, so the copy says that no backend serves it; the module imports
  fsspec only when asked, so loading the plugin never fails;
- a protocol it knows whose package is missing, or a URL it cannot open:
  :class:`~rcp_core.errors.UsageError` naming the URL and what fsspec said;
- otherwise the backend port the URL names
  (:func:`~rcp_provider.fsspec.storetree.port_of_url`: a filesystem instance, no
  request made).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcp_core.backends.operands import split_url
from rcp_core.site.hookspecs import hookimpl

if TYPE_CHECKING:
    from rcp_core.backends.port import Port


class FsspecBackends:
    """Answers ``rcp_backend_for`` with fsspec's filesystems."""

    @hookimpl(trylast=True)
    def rcp_backend_for(self, url: str) -> Port | None:
        try:
            import fsspec
        except ImportError:
            return None
        found = split_url(url)
        if found is None or found[0] not in fsspec.available_protocols():
            return None
        from rcp_provider.fsspec.storetree import port_of_url

        return port_of_url(url)


plugin = FsspecBackends()
"""The instance the entry point names (a class would be registered unbound)."""
