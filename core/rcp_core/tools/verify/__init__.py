"""Verifying a copy: a source tree compared with its copy, by metadata and by
content (``rcmp``, ``rcp --verify``, the compare operator). Modules:

===============  =======================================================================
``compare``      ``compare`` and ``verify_copy``: a tree with its copy, the verdict
``scope``        what a verification compares: the copy's filters, skipped specials,
                 mirror extras, what its policy left alone
``comparerun``   one comparison's run on the ``Runtime``: errors classified by the
                 hooks, transient ones tried again per unit, the rest ``error``
                 differences; the stop; what was found
``pairwalk``     the walk of both trees at once: directory pairs, their listings
                 matched, batches
``entrypair``    one path on both sides: type, attributes, symlink target, contents (one
                 unit)
``hashing``      file contents compared by BLAKE3 per segment, large files by several
                 workers
``digests``      the one BLAKE3 hasher: a local file's, a store's stream, a service's
                 ``digest`` request
``differences``  what a comparison finds: differences, their sum, the attribute rules
===============  =======================================================================
"""
