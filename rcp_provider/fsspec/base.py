"""What the two forms of the ``rcp`` filesystem share: :class:`RcpBase`.

The forms are :class:`~rcp_provider.fsspec.local.RcpFileSystem` (this host's trees)
and :class:`~rcp_provider.fsspec.service.RcpServiceFileSystem` (an ``rcpd serve``
service's). Each lists :class:`RcpBase` first among its bases, before the fsspec
class it extends (``LocalFileSystem``, ``AbstractFileSystem``), so what is here is
what fsspec and its callers reach, in both forms alike.

Invariants:

- both answer to the protocol ``rcp`` with the root ``/``, and read the service of
  an ``rcp://[user@]host[:port]/path`` URL the same way
  (:func:`~rcp_provider.fsspec.storage_options.service_url_options`);
- the storage options that are engine settings
  (:data:`~rcp_provider.fsspec.storage_options.ENGINE_OPTIONS`) are taken out before
  the fsspec class sees the others, and parsed once into ``settings``, the settings
  of every copy the filesystem runs;
- ``copy``, ``put`` and ``get`` take fsspec's arguments, with fsspec's defaults, and
  settle them into one :class:`Transfer` before the form plans and carries it out
  (``_bulk``): ``on_error`` is ``"ignore"`` for a recursive copy and ``"raise"``
  otherwise (``put`` and ``get`` raise); a local path given as a string (``put``'s
  source, ``get``'s destination) is made absolute and POSIX, as fsspec's local
  filesystem makes it; a ``get`` refuses names that would land outside its
  destination (:attr:`Transfer.contained`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.implementations.local import make_path_posix

from rcp_core.settings import CopySettings
from rcp_provider.fsspec.storage_options import (
    ENGINE_OPTIONS,
    service_url_options,
    settings_from_options,
)


class Kind(enum.Enum):
    """Which of fsspec's bulk transfers."""

    COPY = "copy"
    """Within the filesystem."""
    PUT = "put"
    """Local files here."""
    GET = "get"
    """Files here to local paths."""


@dataclass(frozen=True, slots=True)
class Transfer:
    """A ``copy``, ``put`` or ``get``, its arguments settled (see the module docstring).

    :param source: ``path1``, ``put``'s ``lpath`` or ``get``'s ``rpath``.
    :param destination: ``path2``, ``put``'s ``rpath`` or ``get``'s ``lpath``.
    :param options: the call's other keyword arguments (fsspec's ``expand_path``
        takes them).
    :param on_error: fsspec's ``"raise"`` or ``"ignore"`` of missing sources (a
        copy's; ``put`` and ``get`` raise); what each does is the form's.
    :param callback: ``put``'s or ``get``'s; a copy has none.
    """

    kind: Kind
    source: str | list[str]
    destination: str | list[str]
    recursive: bool
    maxdepth: int | None
    options: dict[str, Any]
    on_error: str = "raise"
    callback: Callback = DEFAULT_CALLBACK

    @property
    def contained(self) -> bool:
        """Refuse destinations outside :attr:`destination` (``get``'s rule)."""
        return self.kind is Kind.GET

    @property
    def counted(self) -> bool:
        """A callback counts the transfer's pairs and files."""
        return self.callback is not DEFAULT_CALLBACK


class RcpBase:
    """The part of the ``rcp`` filesystem both forms share (see the module docstring).

    :param storage_options: engine settings (:data:`ENGINE_OPTIONS`); the rest go to
        the fsspec class the form extends.
    :raises UsageError: an engine setting that does not parse.
    """

    protocol = ("rcp",)
    root_marker = "/"

    def __init__(self, *args: Any, **storage_options: Any) -> None:
        engine = {
            k: storage_options.pop(k) for k in ENGINE_OPTIONS & storage_options.keys()
        }
        super().__init__(*args, **storage_options)
        self.settings: CopySettings = settings_from_options(engine)

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        return service_url_options(path)

    def copy(
        self,
        path1: str | list[str],
        path2: str | list[str],
        recursive: bool = False,
        maxdepth: int | None = None,
        on_error: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy within the filesystem, as ``AbstractFileSystem.copy`` decides.

        ``on_error`` defaults to ``"ignore"`` when ``recursive``, else ``"raise"``
        (what a missing source does under each: the form's ``_bulk``).
        """
        if on_error is None:
            on_error = "ignore" if recursive else "raise"
        self._bulk(
            Transfer(Kind.COPY, path1, path2, recursive, maxdepth, kwargs, on_error)
        )

    def put(
        self,
        lpath: str | list[str],
        rpath: str | list[str],
        recursive: bool = False,
        callback: Callback = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy local file(s) here, as ``AbstractFileSystem.put`` decides."""
        if isinstance(lpath, str):
            lpath = make_path_posix(lpath)
        self._bulk(
            Transfer(
                Kind.PUT, lpath, rpath, recursive, maxdepth, kwargs, callback=callback
            )
        )

    def get(
        self,
        rpath: str | list[str],
        lpath: str | list[str],
        recursive: bool = False,
        callback: Callback = DEFAULT_CALLBACK,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Copy file(s) from here to local, as ``AbstractFileSystem.get`` decides,
        refusing names that would land outside ``lpath``."""
        if isinstance(lpath, str):
            lpath = make_path_posix(lpath)
        self._bulk(
            Transfer(
                Kind.GET, rpath, lpath, recursive, maxdepth, kwargs, callback=callback
            )
        )

    def _bulk(self, transfer: Transfer) -> None:
        """Plan ``transfer`` as fsspec would (:mod:`rcp_provider.fsspec.plan`) and
        carry it out: the form's own."""
        raise NotImplementedError
