"""Which storage each operand names, and which engine copies between them.

An operand names one kind of :class:`Storage`:

- ``local``: a path of this host, also spelled ``file:///path`` or ``rcp:///path``
  (URLs of this host's files: the same directories, so the same engine);
- ``host:``: ``[user@]host[:port]:/path``, a host reached over SSH
  (:mod:`rcp_core.backends.operands`);
- ``rcpd serve``: ``rcp://host[:port]/path``, a copy service on a host;
- ``URL store``: any other ``scheme://`` URL, an fsspec filesystem.

What is a URL is :func:`rcp_core.backends.operands.split_url`'s to say, for routing
and for the ``host:`` operands alike (a URL is never a host).

The pair of storages picks the :class:`Engine`, the one implementation that drives
that pair (:func:`route`):

- local to local: :attr:`Engine.LOCAL`, the fd-relative engine with its helper
  processes and adaptive concurrency;
- a host beside local paths or a host, a service beside local paths or a service:
  :attr:`Engine.REMOTE`,
  the two roles (:mod:`rcp_core.remote.roles`) each running on its own host, the
  data flowing between them;
- a URL store on either side (with local paths, a service, or a store):
  :attr:`Engine.STORE`, the generic engine over fsspec;
- a ``host:`` operand beside a URL (a service's or a store's) is refused: no engine
  reaches both (the store engine cannot start ``rcpd`` over SSH, the roles cannot
  open a URL).

Invariants: a route is decided from the operands' spelling alone, before anything is
opened or started; an engine of :data:`ONE_SOURCE` is never given several sources
(:func:`refuse_route`, before any of them is opened); the local paths of a route are
the operands with their ``file://``/``rcp://`` prefix removed (and a trailing ``/``
kept: it asks for a copy *into* the destination).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from rcp_core.backends.operands import parse_operand, split_url
from rcp_core.errors import UsageError

_LOCAL_SCHEMES = ("file", "local")
"""fsspec's names of this host's filesystem."""


class Storage(enum.Enum):
    """A kind of storage an operand names; the value is how users call it."""

    LOCAL = "local"
    HOST = "host:"
    SERVICE = "rcpd serve"
    STORE = "URL store"


class Engine(enum.Enum):
    """The implementation that copies between a pair of storages."""

    LOCAL = "local"
    REMOTE = "remote"
    STORE = "store"


@dataclass(frozen=True, slots=True)
class Operand:
    """One operand as given, and what it names.

    :param text: as given.
    :param storage: its kind of storage.
    :param path: for :attr:`Storage.LOCAL`, the local path (a URL's prefix removed);
        otherwise ``text``.
    """

    text: str
    storage: Storage
    path: str


def operand(text: str) -> Operand:
    """What ``text`` names.

    :raises UsageError: a ``host:`` operand with a bad port, a local URL without a
        path.
    """
    url = split_url(text)
    if url is None:
        if parse_operand(text) is not None:
            return Operand(text, Storage.HOST, text)
        return Operand(text, Storage.LOCAL, text)
    scheme, rest = url
    if scheme in _LOCAL_SCHEMES or (scheme == "rcp" and rest.startswith("/")):
        if not rest:
            raise UsageError(f"{text!r}: names no path")
        return Operand(text, Storage.LOCAL, rest)
    if scheme == "rcp":
        return Operand(text, Storage.SERVICE, text)
    return Operand(text, Storage.STORE, text)


@dataclass(frozen=True, slots=True)
class Route:
    """The operands of one copy and the engine that copies them."""

    sources: tuple[Operand, ...]
    destination: Operand
    engine: Engine

    @property
    def storages(self) -> frozenset[Storage]:
        """The kinds of storage the operands name."""
        return frozenset(o.storage for o in (*self.sources, self.destination))

    @property
    def paths(self) -> list[str]:
        """Every operand as the engine takes it (local URLs as paths)."""
        return [o.path for o in (*self.sources, self.destination)]


def route(paths: Sequence[str]) -> Route:
    """The route of ``SRC... DST``.

    :raises UsageError: fewer than two operands, sources of different kinds of storage
        (or on different services or hosts), or a pair no engine copies between.
    """
    if len(paths) < 2:
        raise UsageError("give a source and a destination")
    *sources, destination = (operand(p) for p in paths)
    kinds = {s.storage for s in sources}
    if len(kinds) > 1:
        raise UsageError(
            "the sources are on different kinds of storage ("
            + ", ".join(sorted(k.value for k in kinds))
            + "): copy from each in a run of its own"
        )
    pair = (sources[0].storage, destination.storage)
    return Route(tuple(sources), destination, _engine(pair))


def _engine(pair: tuple[Storage, Storage]) -> Engine:
    source, destination = pair
    if Storage.HOST in pair:
        other = destination if source is Storage.HOST else source
        if other in (Storage.HOST, Storage.LOCAL):
            return Engine.REMOTE
        raise UsageError(
            f"rcp does not copy between a host:/path operand and a {other.value} "
            "operand (the store engine cannot start rcpd over SSH, the remote roles "
            "cannot open a URL): copy through a local path, or name the host's "
            "service as rcp://host"
        )
    if Storage.STORE in pair:
        return Engine.STORE
    if Storage.SERVICE in pair:
        return Engine.REMOTE
    return Engine.LOCAL


ONE_SOURCE: dict[Engine, str] = {Engine.STORE: "a copy to or from a URL"}
"""Engines that copy one source per run (the store engine copies one tree between
two places), each with how a refusal names such a copy."""


def refuse_route(route: Route) -> None:
    """Refuse what ``route``'s operands alone ask of its engine: several sources for
    an engine of :data:`ONE_SOURCE`. Decided from the operands' spelling, so a
    front-end calls it as soon as it has routed them, before anything is opened.

    :raises UsageError: naming the kind of copy and how many sources were given.
    """
    copy = ONE_SOURCE.get(route.engine)
    if copy is not None and len(route.sources) > 1:
        raise UsageError(
            f"{copy} takes one source and a destination "
            f"({len(route.sources)} sources given): copy each in a run of its own"
        )
