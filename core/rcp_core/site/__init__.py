"""The site layer: the hooks through which a site tunes the engine for its
storage, the plugin manager, the built-in plugin, storage detection, and what
each run is given from them (docs/tuning.md). Modules:

=============  =========================================================================
``hookspecs``  the hooks through which a site tunes the engine for its storage
``plugins``    building a run's plugin manager, and the engine's view of it
``builtin``    the built-in plugin: the engine's defaults, registered ``trylast`` so
               sites override
``storage``    what kind of storage a path lives on: filesystem type and disk kind
``capacity``   what a run may use, decided once: the descriptor budget, each job's
               storage and the concurrency the plugins choose for it
=============  =========================================================================
"""
