"""rcp_provider.assets: the ``rcp`` scheme of Airflow's assets.

==========  ===================================================================
``rcp``     ``rcp://host:port/path`` assets: made, normalised, named for
            OpenLineage (the provider info's ``asset-uris``)
==========  ===================================================================
"""
