"""fsspec glue: the ``rcp`` filesystem, and copies to and from any other fsspec store.

=====================  ==============================================================
``base``               what the two forms of the ``rcp`` filesystem share: the protocol,
                       engine settings from storage options, ``copy``/``put``/``get``'s
                       arguments settled as fsspec settles them
``local``              ``RcpFileSystem``, protocol ``rcp``: this host's trees, copying
                       with the engine (an ``rcp://host/...`` URL makes the service form)
``service``            ``RcpServiceFileSystem``: the ``rcp`` filesystem on an ``rcpd
                       serve`` service
``servicefile``        ``RcpServiceFile``: a file on a service, read by ranges or
                       written whole
``servicetransfers``   the service form's ``copy``, ``put`` and ``get``: its jobs, or
                       the data between this process and the service directly
``plan``               fsspec's transfer plan: the pairs a copy, put or get transfers
``plugin``             the fsspec backend: every protocol fsspec knows, as a backend
                       plugin (``rcp_backend_for``)
``storage_options``    the ``rcp`` filesystem's storage options, coerced from strings
``storetree``          a tree on an fsspec filesystem: the fsspec backend port
``storeinfo``          a store's info (a listing's or ``info``'s) as a port's entry:
                       kind, size, times, kept metadata, recorded MD5
``azureblobs``         Azure blob calls through adlfs's client: a local file in one
                       Put Blob with its metadata, a marker's blob
``s3session``          the aiobotocore session of rcp's S3 clients: timestamps parsed fast
``s3stream``           an S3 object read in one GET, its user metadata with it
``s3upload``           an S3 object uploaded by rcp: one PUT, or parts in parallel under
                       the process's transfer budget, aborted on failure
``storelisting``       a store's level as its pages name it: GCS and Azure whole, S3 a
                       page at a time (a prefix's empty segment kept)
``storeremoval``       what removing a store directory removes, decided before anything
                       goes
``objectmeta``         the POSIX metadata kept in an object's user metadata on S3, GCS
                       and Azure (rclone's keys), and a small object put with it
``markers``            directory markers (``DIR/``) on S3, GCS and Azure, made, read
                       and removed through each client's own call
``storelinks``         symlinks on S3, GCS and Azure as rclone's link objects
                       (``NAME.rclonelink``: the target's bytes), read and written
``serviceport``        a tree on an ``rcpd serve`` service as a backend port: listings
                       and digests asked of the service, where the data is
=====================  ==============================================================

Named after the library it glues to: imports are absolute, so ``import fsspec`` is the
library everywhere (only a process started with ``rcp_provider/`` itself first on its
path would see this package instead).
"""
