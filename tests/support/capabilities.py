"""What each kind of storage supports through ``rcp``: one table, feature x backend.

:data:`TABLE` is the one place the conformance suite (``tests/conformance``) learns
what to expect of a backend. Its cells are the engine's own
(:func:`rcp_core.backends.features.cell`), derived from what each storage declares
and what its engine honours: the suite checks the declarations against real copies.
Each backend of the suite is one kind of storage (:data:`STORAGE_OF`); ``file://`` is
this host's files, as ``local`` is.

A pair of backends supports a feature as the weaker of its two cells
(:func:`pair_support`: refused before no before yes). Where today's code breaks what
the table says is :mod:`support.defects`, the worklist beside it. A site adds a
column of its own with :class:`SiteBackend`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rcp_core.backends.capabilities import DECLARED, Backend, Capability, store_backend
from rcp_core.backends.features import Cell, Feature, Support, cell
from rcp_core.backends.routing import Storage

BACKENDS = ("local", "host", "serve", "file", "memory", "s3", "gcs", "azure")
"""The built-in backends, by :attr:`support.backends.Backend.name`."""
URL_KINDS = frozenset({"serve", "file", "memory", "s3", "gcs", "azure"})
"""Backends whose operands are URLs."""

STORAGE_OF: dict[str, tuple[Storage, Backend]] = {
    "local": (Storage.LOCAL, DECLARED[Storage.LOCAL]),
    "file": (Storage.LOCAL, DECLARED[Storage.LOCAL]),
    "host": (Storage.HOST, DECLARED[Storage.HOST]),
    "serve": (Storage.SERVICE, DECLARED[Storage.SERVICE]),
    "memory": (Storage.STORE, store_backend("memory://", directories=True)),
    "s3": (Storage.STORE, store_backend("s3://", False, times=True, metadata=True)),
    "gcs": (Storage.STORE, store_backend("gs://", False, times=True, metadata=True)),
    "azure": (Storage.STORE, store_backend("az://", False, times=True, metadata=True)),
}
"""Each built-in backend of the suite as the engine sees it."""

TABLE: dict[Feature, dict[str, Cell]] = {
    feature: {
        name: cell(feature, storage, backend)
        for name, (storage, backend) in STORAGE_OF.items()
    }
    for feature in Feature
}
"""What each backend supports through ``rcp``: the engine's cells."""

TIME_PRECISION_NS: dict[str, int] = {
    name: backend.time_precision_ns
    for name, (_, backend) in STORAGE_OF.items()
    if backend.has(Capability.MTIMES) and backend.time_precision_ns
}
"""How close a kept mtime is, by backend (those whose MTIME cell is yes)."""


def pair_support(
    feature: Feature,
    source: str,
    destination: str,
    table: Mapping[Feature, Mapping[str, Cell]] | None = None,
) -> Support:
    """How the pair supports ``feature``: the weaker of its two cells."""
    row = (table or FULL_TABLE)[feature]
    cells = {row[source].support, row[destination].support}
    if Support.REFUSED in cells:
        return Support.REFUSED
    if Support.NO in cells:
        return Support.NO
    return Support.YES


def refused_pair(source: str, destination: str) -> str | None:
    """Why ``rcp`` refuses to copy from ``source`` to ``destination`` at all, or
    ``None``: a ``host:/path`` operand beside a store's or a service's URL (the store
    engine cannot reach a host over ssh, the remote roles cannot open a URL)."""
    beside = REMOTE_URLS
    if (source == "host" and destination in beside) or (
        destination == "host" and source in beside
    ):
        return "a host:/path operand beside a store's or a service's URL"
    return None


@dataclass(frozen=True)
class SiteBackend:
    """A site's own kind of storage, for the suite to run against.

    :param name: its name in test ids (not one of :data:`BACKENDS`).
    :param cells: its column of :data:`TABLE`: a :class:`Cell` for every
        :class:`Feature`.
    :param make: ``make(request, base)`` -> its :class:`support.backends.Backend`
        (``request`` a module-scoped ``pytest.FixtureRequest`` for the fixtures it
        needs, ``base`` a fresh local directory).
    :param url: whether ``rcp`` sees its operands as URLs.
    :param precision_ns: how close a kept mtime is (its MTIME cell is yes).
    :param posix: whether its trees are this host's directories, which can hold
        symlinks, hard links, FIFOs and xattrs to copy (the backend builds them).
    """

    name: str
    cells: Mapping[Feature, Cell]
    make: Callable[..., Any]
    url: bool = True
    precision_ns: int | None = None
    posix: bool = False


SITE_VARIABLE = "RCP_CONFORMANCE_BACKENDS"
"""``module:attribute`` of :class:`SiteBackend` objects to add, comma-separated."""


def site_backends() -> tuple[SiteBackend, ...]:
    """The site backends :data:`SITE_VARIABLE` names (none by default).

    :raises ValueError: one is not a complete :class:`SiteBackend`.
    """
    found = []
    for spec in filter(None, os.environ.get(SITE_VARIABLE, "").split(",")):
        module, _, attribute = spec.strip().partition(":")
        site = getattr(importlib.import_module(module), attribute)
        if not isinstance(site, SiteBackend) or set(site.cells) != set(Feature):
            raise ValueError(f"{spec}: not a SiteBackend with a cell per Feature")
        found.append(site)
    return tuple(found)


SITES = site_backends()
ALL_BACKENDS = BACKENDS + tuple(site.name for site in SITES)
FULL_TABLE: dict[Feature, dict[str, Cell]] = {
    feature: {**row, **{site.name: site.cells[feature] for site in SITES}}
    for feature, row in TABLE.items()
}
""":data:`TABLE` with the site backends' columns."""
PRECISION_NS = {
    **TIME_PRECISION_NS,
    **{site.name: site.precision_ns for site in SITES if site.precision_ns},
}
URLS = URL_KINDS | {site.name for site in SITES if site.url}
REMOTE_URLS = URLS - {"file"}
"""URLs that name no local file: ``rcp`` refuses them beside a ``host:/path``."""
POSIX_TREES = frozenset(
    name
    for name, (_, backend) in STORAGE_OF.items()
    if backend.has(Capability.HARDLINKS)
) | {site.name for site in SITES if site.posix}
"""Backends whose trees can hold symlinks, hard links, FIFOs and xattrs."""


def accepted_pairs() -> list[tuple[str, str]]:
    """Every (source, destination) ``rcp`` copies between today."""
    return [
        (source, destination)
        for source in ALL_BACKENDS
        for destination in ALL_BACKENDS
        if refused_pair(source, destination) is None
    ]


def refused_pairs() -> list[tuple[str, str]]:
    """Every (source, destination) ``rcp`` refuses to copy between."""
    return [
        (source, destination)
        for source in ALL_BACKENDS
        for destination in ALL_BACKENDS
        if refused_pair(source, destination) is not None
    ]
