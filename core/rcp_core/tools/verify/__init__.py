"""Verifying a copy: a source tree compared with its copy, by metadata and by
content (``rcmp``, ``rcp --verify``, the compare operator). Two local trees are
compared through directory descriptors (``compare``, ``pairwalk``), any other pair
through their backend ports (``portcompare``), both by the same rules (``scope``,
``entrypair.judge``, ``differences``) on the same run (``comparerun``). Modules:

===============  =======================================================================
``compare``      ``compare`` and ``verify_copy``: a tree with its copy, the verdict
``scope``        what a verification compares: the copy's filters, skipped specials,
                 mirror extras, what its policy left alone; names on one side only;
                 the snapshot before a copy
``comparerun``   one comparison's run on the ``Runtime``: errors classified by the
                 hooks, transient ones tried again per unit, the rest ``error``
                 differences; the stop; what was found
``pairwalk``     the walk of two local trees at once: directory pairs, their listings
                 matched, batches
``portcompare``  two trees on any backend ports, one directory at a time; digests
                 where the data is
``entrypair``    one path on both sides: the rule every comparison follows
                 (``judge``), and two local files' unit (target, contents)
``hashing``      file contents compared by BLAKE3 per segment, large files by several
                 workers
``digests``      the one BLAKE3 hasher: a local file's, a store's stream, a service's
                 ``digest`` request
``differences``  what a comparison finds: differences, their sum, the attribute rules
===============  =======================================================================
"""
