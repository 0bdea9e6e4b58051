"""The agent's per-step device logic: acting (sampling, gate, stop-loss), rewards, step statistics, controllers."""
