"""foxc: a reinforcement-learning trading agent trained entirely on one GPU."""

__version__ = "0.1.0"
