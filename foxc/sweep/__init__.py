"""Hyperparameter sweeps: `python -m foxc.sweep` (foxc.sweep.cli).

- axes:   what --grid and --range name, their values, the points they make
- point:  one run (a point with one seed): train, evaluate on held-out rows, its row
- report: sweep.csv/.parquet, the ranking (mean ± standard error over seeds), report.md, sweep.json
"""
