"""The tools besides the copy, on the same runtime and directory lifecycle.

Packages:

===========  ===========================================================================
``verify``   a tree compared with its copy (``rcmp``, ``--verify``)
``remove``   parallel removal of trees (``rrm``, ``RcpFileSystem.rm``), on the
             post-order walk ``chmod`` shares
``chmod``    modes and owners of trees changed in parallel (``rchm``)
``shards``   scale-out: a tree split into shards, the manifest, copying one and
             finalizing
``filegen``  test and benchmark trees (``rcp-filegen``)
===========  ===========================================================================
"""
