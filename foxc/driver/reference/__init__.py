"""The reference backend: the runtime on numpy (runtime.py, memory.py) and the registry of numpy kernels."""
