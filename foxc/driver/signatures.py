"""Kernels bound by name: each `extern "C" __global__` signature, parsed from its CUDA source when
the cubins are built (tools/build_cubins.py stores it in the manifest), is checked against the
kernel's `KernelSpec` when either backend loads the kernel. `cuFuncGetParamInfo` sees only offsets
and sizes, so two swapped pointers or a renamed parameter pass it; by name and type they do not.
"""
from __future__ import annotations

import functools
import re

from .cubins import load_manifest
from .errors import CudaError
from .kernel_spec import KernelSpec

# C parameter types (qualifiers removed) -> KernelSpec kinds; every pointer is "ptr"
C_KINDS = {"int": "i32", "unsigned int": "u32", "long long": "i64", "unsigned long long": "u64", "float": "f32"}
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?'
                     r'(\w+)\s*\(([^)]*)\)')
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__)\b")


def strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", re.sub(r"//[^\n]*", "", text), flags=re.S)


_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$", re.M)


def expand_kernel_macros(text: str) -> str:
    """The text with every function-like macro that defines kernels expanded where it is invoked at
    the start of a line (the F32_KERNELS(SUFFIX, ...) pattern: parameters substituted, ## pasted)."""
    text = text.replace("\\\n", " ")
    for m in list(_DEFINE.finditer(text)):
        if "__global__" not in m.group(3):
            continue
        params = [p.strip() for p in m.group(2).split(",")]
        for call in re.finditer(rf"^\s*{m.group(1)}\(([^)]*)\)", text, re.M):
            body = m.group(3)
            for name, value in zip(params, (a.strip() for a in call.group(1).split(","))):
                body = re.sub(rf"\b{name}\b", value, body)
            text += "\n" + re.sub(r"\s*##\s*", "", body)
    return _DEFINE.sub("", text)


def parse_signatures(source_text: str, label: str = "source") -> dict[str, list[list[str]]]:
    """{kernel: [[parameter name, kind], ...]} for every extern "C" __global__ kernel in a .cu file."""
    found = {}
    for m in _KERNEL.finditer(expand_kernel_macros(strip_comments(source_text))):
        params = []
        for raw in filter(None, (" ".join(p.split()) for p in m.group(2).split(","))):
            decl = " ".join(_QUALIFIERS.sub(" ", raw).split())
            name = re.search(r"(\w+)$", decl)
            ctype = decl[:name.start()].strip() if name else ""
            kind = "ptr" if "*" in ctype else C_KINDS.get(ctype)
            if name is None or kind is None:
                raise ValueError(f"{label}: kernel {m.group(1)}: parameter '{raw}' has a type foxc cannot bind "
                                 f"(pointers and {', '.join(C_KINDS)})")
            params.append([name.group(1), kind])
        found[m.group(1)] = params
    return found


@functools.lru_cache(maxsize=1)
def _manifest_signatures() -> dict[str, dict]:
    return {module: entry.get("signatures") for module, entry in load_manifest().get("sources", {}).items()}


def check_spec(spec: KernelSpec) -> None:
    """Refuse a KernelSpec whose parameters differ, by name or type, from its kernel's C signature."""
    signatures = _manifest_signatures().get(spec.module)
    if signatures is None:
        raise CudaError(f"kernel {spec.name}: the manifest has no signatures for cuda/{spec.module}.cu "
                        "(rebuild with tools/build_cubins.py)")
    source = signatures.get(spec.name)
    if source is None:
        raise CudaError(f"kernel {spec.name}: no such kernel in cuda/{spec.module}.cu")
    declared = [[p.name, p.kind.name] for p in spec.params]
    if declared == source:
        return
    wrong = [f"parameter {i} is {s[1]} '{s[0]}' in the source, {d[1]} '{d[0]}' in the KernelSpec"
             for i, (s, d) in enumerate(zip(source, declared)) if s != d]
    if len(source) != len(declared):
        wrong.append(f"the source has {len(source)} parameters, the KernelSpec {len(declared)}")
    raise CudaError(f"kernel {spec.name} ({spec.module}): " + "; ".join(wrong))
