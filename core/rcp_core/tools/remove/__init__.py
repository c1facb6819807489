"""Removing trees in parallel (``rrm``, ``RcpFileSystem.rm``). Modules:

==============  ========================================================================
``removal``     what every removal shares: settings, selection and age rules, dry-run
                words, the post-order removal of emptied directories, the run's end
``rmtree``      this host's trees removed through descriptors: ``rrm``'s fast path
``portremove``  trees removed through backend ports (URL stores, services, sites)
``birth``       birth times through ``statx`` (``rrm --created-before``)
==============  ========================================================================
"""
