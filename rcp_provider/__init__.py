"""rcp_provider: the Airflow provider, fsspec filesystem and command-line glue for rcp.

Importing this package never imports Airflow: the command line and the engine work
without it.
"""
