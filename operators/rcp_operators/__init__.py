"""rcp_operators: thin Airflow operators over :mod:`rcp_provider`'s hook."""
