"""The run runtime: what every run stands on, whatever it does.

A local copy and its helper processes, a comparison, a removal, each role of a
copy between hosts and the store engine all run under one ``Runtime``, on one
work pool, watched by one monitor, and end with one summary. Nothing here
imports the copy engine or the site layer (the site layer imports this). Modules:

============  ==========================================================================
``runtime``   the one run runtime of every run (copy, helper, remote role, ``rrm``,
              comparison, store copy): classification through ``rcp_classify_error``,
              retries of transient errors, fail-early, the stop, the throttle
``pool``      worker threads over a depth-first work stack, with a limit that can change
``monitor``   the run's monitor thread: adapts concurrency, reports progress, watches
              for cancel
``tuning``    concurrency bounds and the adaptive (Vegas-like) controller
              (docs/tuning.md)
``throttle``  the token bucket of ``--ops-throttle``
``summary``   per-worker tallies merged into the run's immutable summary
``progress``  progress snapshots and their renderers (text, bar)
``budget``    the bytes the process holds in transfer buffers at once (a store's parts)
``records``   what a run records: its deduplicated errors, and its changes
              (``--itemize-changes`` lines, ``--log-file`` JSON lines)
============  ==========================================================================
"""
