"""Trees to and from any backend port: the store engine's front.

A copy with a URL store on a side (``memory://``, an object store whose fsspec
package is installed, any fsspec filesystem but this host's files and ``rcpd
serve`` services, a site's own backend) is the generic engine's
(:func:`rcp_core.engine.portcopy.copy_ports`, whose docstring says its rules)
between two backend ports (:class:`rcp_core.backends.port.Port`: the fsspec port
:class:`rcp_provider.fsspec.storetree.Place`, this host's
:class:`rcp_core.engine.posixport.PosixPort`, whatever ``rcp_backend_for``
answers). This module adds what a front-end owns, ``rcp``'s operand rules, checked
through the ports alone (so every backend gets the same rules) before anything is
written:

- the source is copied to exactly ``destination``, or into it under its own name
  when ``into`` (a trailing ``/``);
- a missing source, an existing destination under ``ExistingPolicy.ERROR``, a
  missing parent directory on a storage with directories (not an object store's
  prefix) and a destination inside its source are
  :class:`~rcp_core.errors.UsageError`; so are settings the pair cannot honour
  (:func:`rcp_core.backends.capabilities.refuse`), refused first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rcp_core.backends.capabilities import Capability, refuse
from rcp_core.backends.port import Port
from rcp_core.backends.routing import Engine
from rcp_core.engine.portcopy import copy_ports
from rcp_core.errors import UsageError
from rcp_core.run.progress import Progress
from rcp_core.run.summary import Summary
from rcp_core.settings import CopySettings, ExistingPolicy


def copy_tree(
    source: Port,
    destination: Port,
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
    source: Port, destination: Port, into: bool, settings: CopySettings
) -> Port:
    """Where the source goes, checked by ``rcp``'s operand rules."""
    if source.stat("") is None:
        raise UsageError(f"{source.describe('')}: the source does not exist")
    target = destination.at(source.name) if into else destination
    path = target.describe("")
    parent = target.parent()
    if target.backend.has(Capability.DIRECTORIES) and parent is not None:
        above = parent.stat("")
        if above is None or not above.is_dir:
            raise UsageError(f"{path}: its parent directory does not exist")
    if settings.existing is ExistingPolicy.ERROR and target.stat("") is not None:
        raise UsageError(f"{path} exists (choose a policy that allows changing it)")
    if source.holds(target):
        raise UsageError(f"{path} is inside its source {source.describe('')}")
    return target
