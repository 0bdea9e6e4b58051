"""The prebuilt cubins: where they live, which architecture a device loads, and the checks that bind a
`KernelSpec` to its kernel when either backend loads it.

tools/build_cubins.py stores each kernel's C signature, parsed from its source, in the manifest; `check_spec`
compares a KernelSpec with it by parameter name and type (`cuFuncGetParamInfo` sees only offsets and sizes, so
two swapped pointers or a renamed parameter would pass `verify_params`, the CUDA backend's check of the cubin).
"""
from __future__ import annotations

import functools
from pathlib import Path

from ..jsonfile import JsonFileError, read_json, shape_problem
from .errors import CudaError
from .kernel_spec import KernelSpec

CUBIN_ROOT = Path(__file__).resolve().parent.parent / "cubins"
MANIFEST = CUBIN_ROOT / "manifest.json"
# What tools/build_cubins.py (which writes it) and the loaders read of the manifest
MANIFEST_SHAPE = {"nvcc_version": str, "flags": list[str], "archs": list[str], "sources": dict[str, {
    "sha256": str, "headers": dict[str, str], "signatures": dict[str, list[tuple[str, str]]], "kernels": list[str],
    "cubins": dict[str, str]}]}


def shipped_archs() -> list[str]:
    """Architectures with a cubin folder, e.g. ['sm_80', 'sm_86', 'sm_89', 'sm_90']."""
    if not CUBIN_ROOT.is_dir():
        return []
    return sorted((p.name for p in CUBIN_ROOT.iterdir() if p.is_dir() and p.name.startswith("sm_")),
                  key=lambda a: int(a[3:]))


def pick_arch(major: int, minor: int, archs: list[str] | None = None) -> str:
    """The newest shipped arch of the device's major version not above it (sm_XY runs on X.Y and later X.*)."""
    archs = shipped_archs() if archs is None else archs
    fits = [a for a in archs if int(a[3:]) // 10 == major and int(a[3:]) % 10 <= minor]
    if not fits:
        raise CudaError(f"no prebuilt cubin fits this GPU (compute capability {major}.{minor}); foxc ships "
                        f"{', '.join(archs) or 'none'}. Rebuild with tools/build_cubins.py --arch sm_{major}{minor}")
    return max(fits, key=lambda a: int(a[3:]))


def cubin_path(arch: str, module: str) -> Path:
    return CUBIN_ROOT / arch / f"{module}.cubin"


def load_manifest() -> dict:
    if not MANIFEST.is_file():
        raise CudaError(f"{MANIFEST} is missing: run tools/build_cubins.py")
    return read_manifest(MANIFEST)


def read_manifest(path: Path) -> dict:
    """The manifest at `path`; a damaged one is a JsonFileError naming it, the field and the remedy."""
    try:
        manifest = read_json(path)
        if problem := shape_problem(manifest, MANIFEST_SHAPE):
            raise JsonFileError(path, problem)
    except JsonFileError as e:
        raise JsonFileError(path, f"{e.problem}; restore it (git checkout foxc/cubins/manifest.json), or remove it "
                                  "and build every cubin again (tools/build_cubins.py)") from None
    return manifest


def required_driver_version() -> int:
    """The CUDA version (e.g. 13000) of the nvcc that built the cubins; the driver must support it."""
    try:
        major, minor = load_manifest()["nvcc_version"].split(".")[:2]
        return int(major) * 1000 + int(minor) * 10
    except (CudaError, ValueError):
        return 13000


@functools.lru_cache(maxsize=1)
def _manifest_signatures() -> dict[str, dict]:
    return {module: entry.get("signatures") for module, entry in load_manifest().get("sources", {}).items()}


def check_spec(spec: KernelSpec) -> None:
    """ValueError when `spec`'s parameters differ, by name or type, from its kernel's C signature."""
    source = (_manifest_signatures().get(spec.module) or {}).get(spec.name)
    if source is None:
        raise ValueError(f"kernel {spec.name}: not in the manifest's cuda/{spec.module}.cu (tools/build_cubins.py)")
    declared = [[p.name, p.kind.name] for p in spec.params]
    wrong = [f"parameter {i} is {s[1]} '{s[0]}' in the source, {d[1]} '{d[0]}' in the KernelSpec"
             for i, (s, d) in enumerate(zip(source, declared)) if s != d]
    if len(source) != len(declared):
        wrong.append(f"the source has {len(source)} parameters, the KernelSpec {len(declared)}")
    if wrong:
        raise ValueError(f"kernel {spec.name} ({spec.module}): " + "; ".join(wrong))


def verify_params(spec: KernelSpec, param_info, count: int | None = None) -> None:
    """The declaration against the cubin: `param_info(i)` is parameter i's (offset, size), None past the end;
    `count` the cubin's number of parameters where the driver tells it (cuFuncGetParamCount). Nothing probes
    past the last declared parameter (compute-sanitizer reports that call): without `count`, more parameters in
    the cubin are ruled out by `check_spec`, whose source built the cubin the manifest's hash pins."""
    if count is not None and count != len(spec.params):
        raise ValueError(f"kernel {spec.name} ({spec.module}): declared with {len(spec.params)} parameters, "
                         f"but the cubin's kernel has {count}")
    for index in range(len(spec.params)):
        found = param_info(index)
        if found is None or tuple(found) != spec.layout[index]:
            raise ValueError(f"{spec.describe_param(index)} in the KernelSpec, " + (
                f"but the cubin's kernel has only {index} parameters" if found is None else
                f"but the cubin has it at offset {found[0]}, size {found[1]}"))
