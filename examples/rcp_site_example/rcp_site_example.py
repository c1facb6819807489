"""An example rcp site plugin for a Lustre site whose clients may also copy to local disks.

It tunes three things, each through one hook (see ``docs/tuning.md``):

- large files written to Lustre are created with ``lfs setstripe -c N`` first, so their
  data spreads over N storage targets (``rcp_pre_create``);
- a copy from or to a spinning disk starts with one worker and never runs more than
  four, since seeks between many files in flight cost more than they hide
  (``rcp_choose_concurrency``); on other storage it returns ``None`` and the built-in
  table decides;
- ``EIO`` (and ``ESTALE``) are retried as transient, as a Lustre client sees them while it
  reconnects after an eviction or a server failover (``rcp_classify_error``).

Install it with ``pip install ./examples/rcp_site_example``: the entry point
``example = "rcp_site_example:plugin"`` in the group ``rcp`` registers the module's
:data:`plugin` in every run. For tests and per-call settings, build a
:class:`SitePlugin` with other arguments and pass it as
``rcp_core.copy(..., plugins=[SitePlugin(...)])``.

Every hook may run while others run in other threads; the plugin keeps no mutable
state, so it needs no locks.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import subprocess
from collections.abc import Iterable

import rcp_core
from rcp_core.run.runtime import Kind
from rcp_core.run.tuning import Concurrency
from rcp_core.site.storage import StorageInfo

log = logging.getLogger(__name__)

GIB = 1 << 30
LUSTRE = "lustre"
DEFAULT_TRANSIENT = frozenset({errno.EIO, errno.ESTALE})


class SitePlugin:
    """Lustre striping for large files, a cap for rotational disks, Lustre retries.

    :param lfs: the ``lfs`` tool: a name looked up on ``PATH`` once, here, or a path.
        When it is not found, files are created as usual (the directory's default
        layout).
    :param stripe_threshold: files of at least this many bytes are striped.
    :param stripe_count: the ``-c`` of ``lfs setstripe`` (``-1``: every target).
    :param rotational_max: the most workers in flight against a rotational disk.
    :param transient_errnos: errnos to retry as transient.
    :param timeout: seconds one ``lfs`` call may take before it counts as failed.
    """

    def __init__(
        self,
        *,
        lfs: str = "lfs",
        stripe_threshold: int = GIB,
        stripe_count: int = 4,
        rotational_max: int = 4,
        transient_errnos: Iterable[int] = DEFAULT_TRANSIENT,
        timeout: float = 60.0,
    ) -> None:
        if rotational_max < 1:
            raise ValueError("rotational_max must be at least 1")
        self.lfs = shutil.which(lfs)
        self.stripe_threshold = stripe_threshold
        self.stripe_count = stripe_count
        self.rotational_max = rotational_max
        self.transient_errnos = frozenset(transient_errnos)
        self.timeout = timeout

    @rcp_core.hookimpl
    def rcp_pre_create(
        self, dir_fd: int, name: str, size: int, destination: StorageInfo
    ) -> bool | None:
        """Create a large file on Lustre with ``lfs setstripe``; ``True`` if it did.

        Called in a worker thread, once per new destination file (also for the
        temporary name of a replacement), before the engine opens it. A file below the
        threshold, a destination that is not Lustre, or no ``lfs`` tool: ``None``, so
        the engine creates the file itself. If ``lfs`` fails, a warning is logged and
        the file gets the directory's default layout: striping is an optimisation,
        never a reason to fail a copy.
        """
        if (
            self.lfs is None
            or size < self.stripe_threshold
            or destination.fstype != LUSTRE
        ):
            return None
        # lfs wants a path; the engine works relative to directory descriptors. The
        # descriptor's /proc link names the directory where it is now.
        path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), name)
        command = [self.lfs, "setstripe", "-c", str(self.stripe_count), path]
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("%s: %s; default layout", " ".join(command), exc)
            return None
        if result.returncode != 0:
            log.warning(
                "%s failed (%d): %s; default layout",
                " ".join(command),
                result.returncode,
                result.stderr.strip(),
            )
            return None
        return True

    @rcp_core.hookimpl
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency | None:
        """Start at one worker and allow at most ``rotational_max`` on a spinning disk.

        Called once per source/destination pair, in the thread that starts the run,
        before any worker exists. Other storage: ``None`` (the built-in table decides).
        """
        if source.rotational or destination.rotational:
            return Concurrency(initial=1, minimum=1, maximum=self.rotational_max)
        return None

    @rcp_core.hookimpl
    def rcp_classify_error(
        self,
        error: OSError,
        source: StorageInfo | None,
        destination: StorageInfo | None,
    ) -> Kind | None:
        """``TRANSIENT`` for the configured errnos on Lustre; ``None`` otherwise.

        Called in a worker thread, each time an operation fails, with the storage of the
        job it failed in. A Lustre client sees EIO/ESTALE while an OST fails over, so a
        retry (bounded by ``--retries``) is worth it there; elsewhere the built-in
        errno table decides.
        """
        on_lustre = any(
            s is not None and s.fstype == "lustre" for s in (source, destination)
        )
        if on_lustre and error.errno in self.transient_errnos:
            return Kind.TRANSIENT
        return None


plugin = SitePlugin()
"""The instance the ``rcp`` entry point registers (default settings)."""
