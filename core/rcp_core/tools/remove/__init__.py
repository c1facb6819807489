"""Removing trees in parallel (``rrm``, ``RcpFileSystem.rm``), on the post-order walk
that ``rchm`` shares. Modules:

==============  ========================================================================
``treewalk``    what every walk that acts on a tree in place shares (removal, ``rchm``):
                settings, the run, filters, the post-order lifecycle, errors, its end
``localwalk``   this host's trees walked through descriptors, in parallel, post-order
``removal``     what every removal shares: settings, selection and age rules, dry-run
                words, the post-order removal of emptied directories
``rmtree``      this host's trees removed through descriptors: ``rrm``'s fast path
``portremove``  trees removed through backend ports (URL stores, services, sites)
``birth``       birth times through ``statx`` (``rrm --created-before``)
==============  ========================================================================
"""
