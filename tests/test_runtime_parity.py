"""The two backends offer the same public members, and exactly those of the contract (foxc/driver/api.py).

Members are read from the classes, not from instances, so the CUDA backend is checked without a GPU:
methods, properties and class attributes by `dir`, instance attributes from `self.name = ...`
assignments in the class's (and its bases') source.
"""
import ast
import inspect
import textwrap
from typing import Protocol

import pytest

pytest.importorskip("cuda.bindings")

from foxc.driver import api  # noqa: E402
from foxc.driver.cuda_runtime import (Capture, CudaRuntime, DeviceArray, Event, Graph, Kernel,  # noqa: E402
                                      LaunchPlan, MappedArray, Stream)
from foxc.driver.reference import memory as ref_memory, runtime as ref  # noqa: E402

PAIRS = [  # (contract, CUDA class, reference class)
    (api.Runtime, CudaRuntime, ref.ReferenceRuntime),
    (api.Stream, Stream, ref.RefStream),
    (api.Event, Event, ref.RefEvent),
    (api.DeviceArray, DeviceArray, ref_memory.RefDeviceArray),
    (api.MappedArray, MappedArray, ref_memory.RefMappedArray),
    (api.Kernel, Kernel, ref.RefKernel),
    (api.LaunchPlan, LaunchPlan, ref.RefLaunchPlan),
    (api.Graph, Graph, ref.RefGraph),
    (api.Capture, Capture, ref.RefCapture),
]
# Deliberately one backend's: CUDA's context (its CUdevice, for device attributes such as the memory
# clock in foxc.bench.data) and the reference's simulated address space (tests resolve addresses in it).
BACKEND_ONLY = {CudaRuntime: {"ctx"}, ref.ReferenceRuntime: {"space"}}
DUNDERS = {"__enter__", "__exit__"}


def members(cls) -> set[str]:
    """Public methods, properties and attributes of an implementation class, including instance attributes."""
    found = {n for n in dir(cls) if not n.startswith("_")} | {n for n in DUNDERS if hasattr(cls, n)}
    for klass in cls.__mro__[:-1]:
        tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        found |= {node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id == "self" and not node.attr.startswith("_")}
    return found


def contract(proto) -> set[str]:
    """The members a protocol (and the protocols it extends) lists."""
    found = set()
    for klass in proto.__mro__:
        if klass in (Protocol, object) or not getattr(klass, "_is_protocol", False):
            continue
        found |= {n for n in vars(klass) if not n.startswith("_") or n in DUNDERS}
        found |= set(vars(klass).get("__annotations__", {}))
    return found


def differences(proto, cuda_cls, ref_cls) -> list[str]:
    want = contract(proto)
    have = {c: members(c) - BACKEND_ONLY.get(c, set()) for c in (cuda_cls, ref_cls)}
    problems = [f"{c.__name__} lacks {sorted(want - have[c])}" for c in have if want - have[c]]
    problems += [f"{c.__name__} offers {sorted(have[c] - want)}, which api.{proto.__name__} does not list"
                 for c in have if have[c] - want]
    return problems


@pytest.mark.parametrize("proto, cuda_cls, ref_cls", PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_backends_match_the_contract(proto, cuda_cls, ref_cls):
    assert not differences(proto, cuda_cls, ref_cls)


def test_backend_only_members_exist():
    for cls, names in BACKEND_ONLY.items():
        assert names <= members(cls), cls.__name__


def test_the_check_catches_a_member_one_backend_lacks():
    class Contract(Protocol):
        name: str
        def launch(self, stream) -> None: ...

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

    assert differences(Contract, Full, Full) == []
    assert differences(Contract, Full, NoAttribute) == ["NoAttribute lacks ['name']"]
    assert differences(Contract, Extra, Full) == [
        "Extra offers ['extra', 'more'], which api.Contract does not list"]
