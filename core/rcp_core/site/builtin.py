"""The built-in plugin: the engine's defaults, registered ``trylast`` so sites override.

Starting points per storage (the controller then adapts within the bounds):

============================  =========  =========  ===============  ==========  =====
storage (either side)         initial    maximum    chunks of        processes   aside
============================  =========  =========  ===============  ==========  =====
a store (the generic engine)  16         64         never            1           0
network / parallel / FUSE     32         128        64 MiB           1           0
rotational disk               1          8          never            CPUs        CPUs
local solid state, tmpfs      1          8 x CPUs   never            CPUs        CPUs
============================  =========  =========  ===============  ==========  =====

A store's every operation is a request (tens of ms to a real one), answered in
parallel: 16 in flight at the start, as rclone's ``--transfers 16``; the controller
grows it while the latency a request holds does not rise with it (a store that
serves them all at once), and shrinks it when it does (a store, or this host's CPU,
saturated).

On shared storage each operation waits for a round trip, so many requests in flight
hide it (rcp's report: NFS 1 kB files wanted 128; our 0.5 ms latency FUSE: 32 was
fastest for 200 x 1 KiB and 100 x 1 MiB, where 16 was 4-7% slower and such short
copies end before the controller has grown the limit). On local storage the file-create
rate and the CPU bound a copy early: threads contend for the GIL and the kernel's
locks, and the benchmarks measured one worker fastest for small files on ext4 and tmpfs
(tmpfs, 10k x 1 KiB: 0.36 s with 1, 0.70 s with 4). So it starts at one and grows only
while that helps; a short copy never lives long enough for the controller to correct a
bad start. What one worker cannot do there is use the other cores: the Python work per
file (about 20 us) saturates one, so local trees are copied by one process per CPU,
each taking directories' file batches (:mod:`rcp_core.engine.helpers.caller`; ext4, 50k x 1
KiB: two ``cp -r`` on distinct directories ran 1.7x faster than one, so the kernel scales
where the processes work in different directories). Rotational disks get them too:
with the metadata cached a copy is CPU-bound there as well, and the flag is unreliable
(virtio disks on SSD-backed clouds report rotational).

A large file (8 MiB and more) is the opposite case: its copy is the kernel's work,
without the GIL, so it runs *aside* of the workers, up to one per CPU, while the
worker's place goes to the next entries (ext4, 3 x 100 MiB warm: 0.16 s with four in
flight, 0.21 s with one).
"""

from __future__ import annotations

from rcp_core.run.runtime import Kind, classify
from rcp_core.run.tuning import Concurrency
from rcp_core.site.hookspecs import hookimpl
from rcp_core.site.storage import StorageInfo, detect

MIB = 1 << 20
SHARED_CHUNK = 64 * MIB
STORE_WORKERS = 16
"""Entries in flight at the start of a copy to, from or between stores."""
STORE_WORKERS_MOST = 64
"""... and the most the controller moves it to (what a store client's connection
pool holds: ``rcp_provider.fsspec.storetree.STORE_CONNECTIONS``)."""


class BuiltinPlugin:
    """Storage detection, concurrency defaults and the errno classification."""

    @hookimpl(trylast=True)
    def rcp_detect_storage(self, path: str, fd: int) -> StorageInfo:
        return detect(fd)

    @hookimpl(trylast=True)
    def rcp_choose_concurrency(
        self, source: StorageInfo, destination: StorageInfo, cpus: int
    ) -> Concurrency:
        if source.store or destination.store:
            return Concurrency(STORE_WORKERS, 2, STORE_WORKERS_MOST)
        if source.shared or destination.shared:
            return Concurrency(32, 1, 128, chunk_size=SHARED_CHUNK)
        if source.rotational or destination.rotational:
            return Concurrency(1, 1, 8, processes=cpus, aside=cpus)
        return Concurrency(1, 1, 8 * cpus, processes=cpus, aside=cpus)

    @hookimpl(trylast=True)
    def rcp_classify_error(self, error: OSError) -> Kind:
        return classify(error)  # the errno table, whatever the storage
