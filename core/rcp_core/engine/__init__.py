"""The copy engine: a tree walked over open directory descriptors, each entry
copied with the local copy's rules, helper processes for the other cores; and the
generic engine that copies between any two backend ports with the same rules.

A run is :mod:`rcp_core.engine.copyrun` (``rcp_core.copy``); a copy with a store
on a side is :mod:`rcp_core.engine.portcopy`. The remote roles and the tools reuse
the pieces (directory lifecycle, entries, metadata, filters). Modules:

===============  =======================================================================
``copyrun``      a copy run (``Engine``, ``copy``): storage, concurrency, helpers,
                 monitor, summary
``walk``         the copy's work items (visit, scan, batch) over open directory
                 descriptors
``tree``         the one directory lifecycle of every walk (copy, verify, ``rrm``, both
                 remote roles): ``Node``, ``Lifecycle`` (references, post-order finish,
                 incomplete subtrees folding upwards), ``joined`` (relative names);
                 ``DirNode``, the copy's node
``context``      what every work item of a copy shares: its ``Runtime``, settings,
                 filters, link map, metadata, data copier
``dirs``         destination directories: create or reuse, gitignore stacks,
                 ``--delete``, post-order finish
``entries``      copying one file, symlink, hard link or special file
``destination``  one destination directory of this host: each entry's plan (create,
                 replace, keep, ...) and putting it in place; the local copy's and
                 the remote destination's one set of rules
``existing``     what to do with a destination entry that already exists
``links``        hard-link map of files and symlinks (leader copies, followers link)
``metadata``     owner, mode, xattrs/ACLs, times, in that order
``methods``      the data path: reflink -> ``copy_file_range`` -> sparse -> read/write
``chunks``       a large file split into chunks copied (or hashed) by several workers
``temporaries``  the temporary names replacements (and ``--partial``'s partials) are
                 written under, and sweeping a killed run's
``partials``     resuming a large file from a cut-off run's partial: the prefix
                 verified against the source by BLAKE3 blocks
``filters``      include/exclude globs, filter files, ``.gitignore`` stacks
``removeentry``  removing one destination entry in place, fd-relative (replacements,
                 ``--delete``)
``portcopy``     the generic engine: a tree copied between two backend ports
                 (``copy_tree``), and its operations on one entry
``portexisting`` the generic engine's decision on a file or symlink its destination
                 holds (a store's recorded checksum before any request)
``portpages``    a directory's listing in the generic walks: unsafe names refused, a
                 directory a page at a time with the destination's beside it
``portranges``   a large file copied by several ranges at once (a store to this host)
``portremovals`` non-directories of a directory removed a batch in a request (S3's
                 ``DeleteObjects``), for ``rrm`` and ``--delete``
``portwalk``     the generic engine's walk: one directory at a time, post-order
                 finish, filters, ``--delete`` pruning
``posixport``    this host's files as a backend port (the generic engine's side of a
                 local tree)
``helpers``      helper processes that copy directories' file batches on the other cores
===============  =======================================================================
"""
