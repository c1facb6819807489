"""Airflow's ``filesystems`` modules: the schemes ``ObjectStoragePath`` resolves through
this provider (one module per scheme, as amazon's ``fs/s3.py`` is for ``s3://``).

==============  =====================================================================
``rcp``         ``rcp://``: the worker's storage, or the ``rcpd serve`` a connection names
``path``        ``RcpPath``: universal_pathlib's class for ``rcp://`` paths
==============  =====================================================================
"""
