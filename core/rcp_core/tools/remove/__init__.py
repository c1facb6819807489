"""Removing trees in parallel (``rrm``, ``RcpFileSystem.rm``). Modules:

==========  ============================================================================
``rmtree``  parallel removal of trees: the engine behind ``rrm``
``birth``   birth times through ``statx`` (``rrm --created-before``)
==========  ============================================================================
"""
