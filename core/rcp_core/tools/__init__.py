"""The tools besides the copy, on the same runtime and directory lifecycle.

Packages:

===========  ===========================================================================
``verify``   a tree compared with its copy (``rcmp``, ``--verify``)
``remove``   parallel removal of trees (``rrm``, ``RcpFileSystem.rm``)
``shards``   scale-out: a tree split into shards, the manifest, copying one and
             finalizing
``filegen``  test and benchmark trees (``rcp-filegen``)
===========  ===========================================================================
"""
