"""Scale-out: a tree split into balanced shards, each copied anywhere, then the
shared directories finalized. Modules:

============  ==========================================================================
``planner``   ``plan_shards``: the source walked once and cut into balanced shards; also
              the tool's one import (it re-exports the copier's and the manifest's
              functions)
``manifest``  a shard plan as a value, and its JSON manifest
``copier``    copying one shard, then finalizing the shared parent directories
============  ==========================================================================
"""
