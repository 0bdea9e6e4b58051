"""The integrated trainer: one training step over the dataset, simulator, agent, replay and learner."""
