"""The ``rcp`` scheme's path class for universal_pathlib (its
``universal_pathlib.implementations`` entry point ``rcp``).

``UPath("rcp://...")`` and Airflow's ``ObjectStoragePath("rcp://...")`` look the
scheme's class up there; without one they fall back to a generic class and warn
that the filesystem "may not be tested". :class:`RcpPath` is that class, declared:
a path on the fsspec filesystem ``rcp`` (:mod:`rcp_provider.fsspec`), which has
real directories, so UPath's generic behaviour is the right one; its tests are
tests/provider/fs/test_rcp.py and tests/provider/fs/test_path.py.
"""

from __future__ import annotations

import fsspec
from upath import UPath

# UPath reads a scheme's path rules (its flavour) from the fsspec class registered for
# it, and warns that it guesses them when none is: register it as this class is found.
fsspec.get_filesystem_class("rcp")


class RcpPath(UPath):
    """A path on the ``rcp`` filesystem (the worker's storage or a service's).

    Invariant: its text names its place: a service's path (``host`` in its storage
    options) reads ``rcp://host:port/path``, never the ``rcp:///path`` of a worker's
    path (UPath's own text drops the host the filesystem keeps as an option).
    """

    __slots__ = ()

    def __str__(self) -> str:
        host = self.storage_options.get("host")
        if not host:
            return super().__str__()
        port = self.storage_options.get("port")
        authority = f"{host}:{port}" if port else str(host)
        return f"rcp://{authority}{self.path}"
