"""fsspec glue: the ``rcp`` filesystem, and copies to and from any other fsspec store.

=====================  ==============================================================
``base``               what the two forms of the ``rcp`` filesystem share: the protocol,
                       engine settings from storage options, ``copy``/``put``/``get``'s
                       arguments settled as fsspec settles them
``local``              ``RcpFileSystem``, protocol ``rcp``: this host's trees, copying
                       with the engine (an ``rcp://host/...`` URL makes the service form)
``service``            ``RcpServiceFileSystem``: the ``rcp`` filesystem on an ``rcpd
                       serve`` service
``plan``               fsspec's transfer plan: the pairs a copy, put or get transfers
``storage_options``    the ``rcp`` filesystem's storage options, coerced from strings
``storecopy``          trees to and from any fsspec store: the store engine's
                       operations on one entry, and its run
``storewalk``          the store engine's walk: one directory at a time, post-order
                       finish, filters, ``--delete`` pruning
``storetree``          a tree on an fsspec filesystem as the store engine lists it
``storecompare``       two trees compared wherever fsspec reaches them (``rcmp``)
``storehash``          a store comparison's contents: digests where the data is
=====================  ==============================================================

Named after the library it glues to: imports are absolute, so ``import fsspec`` is the
library everywhere (only a process started with ``rcp_provider/`` itself first on its
path would see this package instead).
"""
