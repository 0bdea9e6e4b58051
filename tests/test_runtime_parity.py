"""The two backends offer the same public members (the contract, foxc/driver/runtime.py, is what they share).

Members are read from the classes, not from instances, so the CUDA backend is checked without a GPU:
methods, properties and class attributes by `dir`, instance attributes from `self.name = ...`
assignments in the class's (and its bases') source.
"""
import ast
import inspect
import textwrap

import pytest

pytest.importorskip("cuda.bindings")

from foxc.driver import cuda_runtime as cuda  # noqa: E402
from foxc.driver.reference import runtime as ref  # noqa: E402

PAIRS = [(cuda.CudaRuntime, ref.ReferenceRuntime), (cuda.Stream, ref.RefStream), (cuda.Event, ref.RefEvent),
         (cuda.DeviceArray, ref.RefDeviceArray), (cuda.MappedArray, ref.RefMappedArray), (cuda.Kernel, ref.RefKernel),
         (cuda.LaunchPlan, ref.RefLaunchPlan), (cuda.Graph, ref.RefGraph), (cuda.Capture, ref.RefCapture)]
# Deliberately one backend's: CUDA's context (its CUdevice, for device attributes such as the memory
# clock in foxc.bench.data) and the reference's simulated address space (tests resolve addresses in it).
BACKEND_ONLY = {cuda.CudaRuntime: {"ctx"}, ref.ReferenceRuntime: {"space"}}
DUNDERS = {"__enter__", "__exit__"}


def members(cls, backend_only: bool = False) -> set[str]:
    """Public methods, properties and attributes of an implementation class, including instance attributes
    (those of BACKEND_ONLY only when asked for)."""
    found = {n for n in dir(cls) if not n.startswith("_")} | {n for n in DUNDERS if hasattr(cls, n)}
    for klass in cls.__mro__[:-1]:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        found |= {node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id == "self" and not node.attr.startswith("_")}
    return found if backend_only else found - BACKEND_ONLY.get(cls, set())


def differences(a, b) -> list[str]:
    have = {a: members(a), b: members(b)}
    return [f"{c.__name__} lacks {sorted(have[o] - have[c])}" for c, o in ((a, b), (b, a)) if have[o] - have[c]]


@pytest.mark.parametrize("cuda_cls, ref_cls", PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_backends_offer_the_same_members(cuda_cls, ref_cls):
    assert not differences(cuda_cls, ref_cls)


def test_the_contract_is_what_the_runtime_offers():
    """The members domain code uses of a runtime, on both backends."""
    assert {"backend", "reason", "device_name", "multiprocessors", "stream", "profiling", "device_array",
            "mapped_array", "side_stream", "free_bytes", "copy_dtod", "kernel", "plan", "event", "capture",
            "synchronize", "profiler_start", "profiler_stop", "close"} <= members(ref.ReferenceRuntime)


def test_backend_only_members_exist():
    for cls, names in BACKEND_ONLY.items():
        assert names <= members(cls, backend_only=True), cls.__name__


def test_the_check_catches_a_member_one_backend_lacks():
    class Full:
        def __init__(self):
            self.name = "x"

        def launch(self, stream):
            pass

    class NoAttribute:
        def launch(self, stream):
            pass

    class Extra(Full):
        def __init__(self):
            super().__init__()
            self.extra = 1

        def more(self):
            pass

    assert differences(Full, Full) == []
    assert differences(Full, NoAttribute) == ["NoAttribute lacks ['name']"]
    assert differences(Extra, Full) == ["Full lacks ['extra', 'more']"]
