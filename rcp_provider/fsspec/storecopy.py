"""Trees to and from any fsspec filesystem: the store engine's front.

A copy with a URL store on a side (``memory://``, an object store whose fsspec
package is installed, any fsspec filesystem but this host's files and ``rcpd
serve`` services) is the generic engine's (:func:`rcp_core.engine.portcopy.
copy_ports`, whose docstring says its rules) between two fsspec places
(:class:`rcp_provider.fsspec.storetree.Place`, the fsspec backend port). This module
adds what a front-end owns, ``rcp``'s operand rules, checked before anything is
written:

- the source is copied to exactly ``destination``, or into it under its own name
  when ``into`` (a trailing ``/``);
- a missing source, an existing destination under ``ExistingPolicy.ERROR``, a
  missing parent directory on a filesystem with directories (not an object store's
  prefix) and a destination inside its source are
  :class:`~rcp_core.errors.UsageError`; so are settings the pair cannot honour
  (:func:`rcp_core.backends.capabilities.refuse`), refused first.
"""

from __future__ import annotations

import posixpath
import threading
from collections.abc import Callable

from rcp_core.backends.capabilities import refuse
from rcp_core.backends.routing import Engine
from rcp_core.engine.portcopy import copy_ports
from rcp_core.errors import UsageError
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Summary
from rcp_core.settings import CopySettings, ExistingPolicy
from rcp_provider.fsspec.storetree import Place


def copy_tree(
    source: Place,
    destination: Place,
    settings: CopySettings | None = None,
    *,
    into: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    progress_interval: float = 1.0,
    cancel: threading.Event | None = None,
) -> Summary:
    """Copy ``source`` to ``destination`` (into it under the source's name with
    ``into``); the summary.

    :raises UsageError: a missing source, an existing destination the policy does not
        allow, a missing parent directory, a destination inside its source, or
        settings the pair cannot honour; nothing was written.
    :raises CopyFailedError: some entries were not copied, or ``cancel`` stopped the
        copy (the partial summary).
    """
    settings = settings or CopySettings()
    refuse(settings, Engine.STORE, source.backend, destination.backend)
    return copy_ports(
        source,
        _target(source, destination, into, settings),
        settings,
        on_progress=on_progress,
        progress_interval=progress_interval,
        cancel=cancel,
    )


def _target(
    source: Place, destination: Place, into: bool, settings: CopySettings
) -> Place:
    """Where the source goes, checked by ``rcp``'s operand rules."""
    if not source.fs.exists(source.path):
        raise UsageError(f"{source.path}: the source does not exist")
    path = destination.path
    if into:
        path = posixpath.join(path, posixpath.basename(source.path.rstrip("/")))
    target = Place(destination.fs, path)
    parent = posixpath.dirname(path.rstrip("/"))
    if target.has_directories and parent and not destination.fs.isdir(parent):
        raise UsageError(f"{path}: its parent directory does not exist")
    if settings.existing is ExistingPolicy.ERROR and target.fs.exists(path):
        raise UsageError(f"{path} exists (choose a policy that allows changing it)")
    if type(source.fs) is type(target.fs) and (
        path == source.path or path.startswith(source.path.rstrip("/") + "/")
    ):
        raise UsageError(f"{path} is inside its source {source.path}")
    return target
