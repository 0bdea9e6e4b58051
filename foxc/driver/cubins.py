"""Where the prebuilt cubins live and which architecture a device loads."""
from __future__ import annotations

import json
from pathlib import Path

from .errors import CudaError

CUBIN_ROOT = Path(__file__).resolve().parent.parent / "cubins"
MANIFEST = CUBIN_ROOT / "manifest.json"


def shipped_archs() -> list[str]:
    """Architectures with a cubin folder, e.g. ['sm_80', 'sm_86', 'sm_89', 'sm_90']."""
    if not CUBIN_ROOT.is_dir():
        return []
    return sorted((p.name for p in CUBIN_ROOT.iterdir() if p.is_dir() and p.name.startswith("sm_")),
                  key=lambda a: int(a[3:]))


def pick_arch(major: int, minor: int, archs: list[str] | None = None) -> str:
    """The best shipped cubin for compute capability major.minor.

    A cubin for sm_XY runs on devices of the same major version with minor >= Y,
    so the newest shipped arch of that major not above the device is chosen.
    """
    archs = shipped_archs() if archs is None else archs
    fits = [a for a in archs if int(a[3:]) // 10 == major and int(a[3:]) % 10 <= minor]
    if not fits:
        raise CudaError(
            f"no prebuilt cubin fits this GPU (compute capability {major}.{minor}); "
            f"foxc ships {', '.join(archs) or 'none'}. Rebuild with tools/build_cubins.py --arch sm_{major}{minor}")
    return max(fits, key=lambda a: int(a[3:]))


def load_manifest() -> dict:
    if not MANIFEST.is_file():
        raise CudaError(f"{MANIFEST} is missing: run tools/build_cubins.py")
    return json.loads(MANIFEST.read_text())


def cubin_path(arch: str, module: str) -> Path:
    return CUBIN_ROOT / arch / f"{module}.cubin"


def required_driver_version() -> int:
    """The CUDA version (e.g. 13000) of the nvcc that built the cubins; the driver must support it."""
    try:
        major, minor = load_manifest()["nvcc_version"].split(".")[:2]
        return int(major) * 1000 + int(minor) * 10
    except (CudaError, KeyError, ValueError):
        return 13000
