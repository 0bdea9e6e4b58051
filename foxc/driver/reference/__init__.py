"""The reference backend: the runtime on numpy (runtime.py), its simulated address space (memory.py) and the
registry of numpy kernels (registry.py)."""
