"""The benchmark harness of issue 3: ``python -m benchmarks.harness [--quick|--full]``.

It copies generated filesets and the Linux source tree with rcp and its peers (cp,
rsync, rclone, a parallel cp, shutil, fsspec, Airflow's ObjectStoragePath) on ext4,
XFS with reflink, tmpfs and a latency FUSE filesystem, and between two hosts (network
namespaces) with rcp against rsync over ssh and rsync's daemon; it verifies every
copy, and writes ``report.md``, ``results.json`` and PNG plots.

Modules, one concept each, in the order data flows:

- :mod:`.plan` what to measure (profiles ``quick`` and ``full``, cells, restriction);
- :mod:`.filesets` and :mod:`.filesystems` where (generation; mounts as context managers;
  :mod:`.hosts` the two hosts of the remote cells);
- :mod:`.tools` and :mod:`.airflow_env` with what (command lines, versions, skips);
- :mod:`.trial`, :mod:`.cache`, :mod:`.measure`, :mod:`.verify`, :mod:`.extents` one
  measured, verified run;
- :mod:`.runner` the whole run; :mod:`.results` its JSON record; :mod:`.machine`;
- :mod:`.stats`, :mod:`.aggregate`, :mod:`.targets`, :mod:`.remote`, :mod:`.report`
  (with :mod:`.markdown`), :mod:`.plots` what the record means.
"""
