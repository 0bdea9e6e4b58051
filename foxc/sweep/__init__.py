"""Runs over a grid of settings, `python -m foxc.sweep` (cli): axes (--grid, --range), point (one run), report."""
