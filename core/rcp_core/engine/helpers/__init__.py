"""Helper processes: the other cores, for trees where one Python process
saturates one (the caller keeps the walk; helpers copy file batches). Modules:

============  ==========================================================================
``team``      the helpers of one run (``Team``): started, given the caller's limit,
              finished
``caller``    the caller's side of one helper: spawns it, feeds it batches, applies
              what comes back
``feeding``   how far ahead a helper is sent work, and the work of the directories
              it owns
``process``   a helper process (``python -m rcp_core.engine.helpers.process FD``)
``channel``   the messages between caller and helper, and the socket that carries them
``spawn``     a helper process's life at both ends: started with its setup, and its
              ``main`` (also a destination's writer processes')
``ondemand``  a run's helpers (``Crew``), built and imported only when first needed
============  ==========================================================================
"""
