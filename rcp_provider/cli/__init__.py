"""Command-line entry points: thin argparse glue over ``rcp_core``."""
