"""The reference backend: the runtime API on numpy, and the registry of numpy kernels."""
from .registry import LaunchInfo, RefMem, reference, reference_for

__all__ = ["LaunchInfo", "RefMem", "reference", "reference_for"]
