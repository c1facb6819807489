"""The benchmark harness and its emulated storage (run modules with `python -m`)."""
