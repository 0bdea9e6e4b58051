"""Benchmarks: `python -m foxc.bench NAME [options]`; each prints a table, the last line a summary."""
