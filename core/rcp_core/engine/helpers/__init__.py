"""Helper processes: the other cores, for trees where one Python process
saturates one (the caller keeps the walk; helpers copy file batches). Modules:

============  ==========================================================================
``caller``    the caller's side (``Team``): spawns helpers, feeds them batches, collects
              results
``process``   a helper process (``python -m rcp_core.engine.helpers.process FD``)
``channel``   the messages between caller and helper, and the socket that carries them
``ondemand``  a run's helpers (``Crew``), built and imported only when first needed
============  ==========================================================================
"""
