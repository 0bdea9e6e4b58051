"""GPU prioritized experience replay: n-step rings, sum-tree, stratified sampling (DESIGN.md §7)."""
from .buffer import INPUTS, SAMPLED, STATE_NAMES, ReplayBuffer
from .layout import N_STEP_MAX

__all__ = ["INPUTS", "N_STEP_MAX", "ReplayBuffer", "SAMPLED", "STATE_NAMES"]
