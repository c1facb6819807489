"""Command-line entry points: thin argparse glue over ``rcp_core``.

=============  =====================================================================
``rcp``        ``rcp``: parallel copy with rcp's operand rules and flags
``remote``     ``rcp`` and ``rcmp`` with a ``[user@]host[:port]:/path`` operand
``stores``     ``rcp`` with a URL operand: a copy to or from an fsspec store
``verify``     ``rcp --verify``: each source compared with its copy, on every operand
``rcpd``       ``rcpd``: one role of a copy between hosts, or the ``rcpd serve`` service
``rrm``        ``rrm``: remove trees in parallel
``rcmp``       ``rcmp``: compare two trees, by metadata or by content
``rlink``      ``rlink``: snapshots that share unchanged files through hard links
``filegen``    ``rcp-filegen``: generate realistic trees to copy (benchmarks, the demo)
``common``     what every tool shares: one-line usage errors, logging, output options
``settings``   the copy flags, made from the one table of options (``rcp_core.schema``)
``launch``     the console scripts: each command's module imported with the garbage
               collector paused, then its ``main``
=============  =====================================================================

The console scripts (``pyproject.toml``) run the ``main`` of each command's module,
through ``launch``; none of these is a library of the operators.
"""
