"""Benchmarks and the demo: run from the repository (``python -m benchmarks.demo``); not shipped."""
