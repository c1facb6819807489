"""rcp_provider: the Airflow provider, fsspec filesystem and command-line glue for rcp.

Laid out as Airflow's own providers are (``hooks``, ``triggers``, ``fs``), with the
fsspec glue and the command line in packages of their own; each package's docstring
lists its modules. Imports go ``rcp_operators -> rcp_provider -> rcp_core``.

=====================  ==============================================================
``hooks``              ``RcpHook`` (connection type ``rcp``): where trees live, and
                       the one place that starts work
``triggers``           ``RcpJobTrigger``: a deferred task waiting for a service's job
``fs``                 the ``rcp://`` scheme of Airflow's ``ObjectStoragePath``
``assets``             the ``rcp://`` scheme of Airflow's assets
``fsspec``             the fsspec filesystem ``rcp``, and copies to and from any store
``cli``                the command-line tools (``rcp``, ``rcpd``, ``rrm``, ``rcmp``, ...)
``options``            arguments written as text (operators', ``rrm``'s) -> engine values
``progress``           a copy's progress as throttled lines of a task log (operators,
                       and the trigger while a task is deferred)
``lineage``            trees as OpenLineage datasets and Airflow assets; the hook's
                       lineage
``ports``              operands as backend ports (paths, services, URL stores, sites),
                       and ``rrm``'s operands routed to the removal that reaches them
``get_provider_info``  what Airflow learns about the provider (its entry point)
=====================  ==============================================================

Importing this package never imports Airflow: the command line and the engine work
without it.
"""
