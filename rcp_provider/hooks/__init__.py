"""Airflow hooks: where a task's trees live and how work starts there.

=================  ==================================================================
``rcp``            ``RcpHook``: a connection of type ``rcp``, the one place that
                   starts work
``endpoint``       an ``rcpd serve`` service's address and trust, read from a
                   connection
``objectstorage``  URLs and ``ObjectStoragePath`` operands on the filesystems Airflow
                   attaches for its store connections (``aws``, ``wasb``, ...)
``workerstorage``  ``RcpHook``'s work on the worker's own storage: shard plans,
                   shards, removal, comparison, verification
=================  ==================================================================
"""
