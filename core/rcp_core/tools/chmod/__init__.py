"""Modes and owners of trees changed in parallel (``rchm``), on the walk ``rrm``'s fast
path walks (:mod:`rcp_core.tools.remove.localwalk`). Modules:

==============  ========================================================================
``modes``       ``chmod``'s octal and symbolic modes: parsed once, applied to any mode
``rules``       what changes by type of entry (``f:``/``d:``/``l:``), names resolved
                once, and the one decision of what changes in an entry
``changetree``  this host's trees changed through descriptors, directories after their
                contents; the summary and progress in a change's words
==============  ========================================================================
"""
