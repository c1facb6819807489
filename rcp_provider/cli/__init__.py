"""Command-line entry points: thin argparse glue over ``rcp_core``.

==============  =====================================================================
``rcp``         ``rcp``: parallel copy with rcp's operand rules and flags
``remote``      ``rcp`` and ``rcmp`` with a ``[user@]host[:port]:/path`` operand
``stores``      ``rcp`` with a URL operand: a copy to or from an fsspec store
``verify``      ``rcp --verify``: each source compared with its copy, on every operand
``rcpd``        ``rcpd``: one role of a copy between hosts, or the ``rcpd serve`` service
``rrm``         ``rrm``: remove trees in parallel
``rchm``        ``rchm``: change modes, owners and groups of trees in parallel
``rcmp``        ``rcmp``: compare two trees, by metadata or by content
``rlink``       ``rlink``: snapshots that share unchanged files through hard links
``filegen``     ``rcp-filegen``: generate realistic trees to copy (benchmarks, the demo)
``shard``       ``rcp-shard``: a sharded copy any scheduler runs (plan, copy a shard,
                finalize)
``common``      what every tool shares: one-line usage errors, ``--version``, logging,
                output options, the exit statuses' table
``settings``    the copy flags, made from the one table of options (``rcp_core.schema``)
``config``      ``rcp``'s site and user defaults (TOML, per mount), ``--show-config``
``tools``       every command by the function that builds its parser (help, completion)
``completion``  bash and zsh completion scripts made from the tools' parsers
``manpages``    manual pages made from the tools' parsers
``launch``      the console scripts: each command's module imported with the garbage
                collector paused, then its ``main``; how a stop signal ends a run
==============  =====================================================================

The console scripts (``pyproject.toml``) run the ``main`` of each command's module,
through ``launch``; none of these is a library of the operators.
"""
