#!/usr/bin/env python3
"""Compile every cuda/**/*.cu into foxc/cubins/sm_XY/<domain>/<name>.cubin and write the manifest.

    python3 tools/build_cubins.py            # rebuild what changed (all archs)
    python3 tools/build_cubins.py --force    # rebuild everything
    python3 tools/build_cubins.py --check    # exit 1 naming every stale or missing cubin (needs no nvcc)
    python3 tools/build_cubins.py --arch sm_100 --arch sm_90   # other architectures

The manifest (foxc/cubins/manifest.json) records, per source, the sha256 of the
source and of every header it includes, the kernel names found in the cubin, each
kernel's parameters by name and type as its source declares them (checked against its
KernelSpec when a backend loads it: foxc/driver/cubins.py) and the sha256 of each
cubin, with the nvcc version and flags. The runtime never compiles.
"""
from __future__ import annotations

import hashlib
import contextlib
import fcntl
import json
import os
import re
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CUDA_DIR = ROOT / "cuda"
INCLUDE_DIR = CUDA_DIR / "include"
CUBIN_DIR = ROOT / "foxc" / "cubins"
MANIFEST = CUBIN_DIR / "manifest.json"
STAGE = Path("/tmp/foxc-cubin-build/src")
DEFAULT_ARCHS = ["sm_80", "sm_86", "sm_89", "sm_90"]
FLAGS = ["-cubin", "-O3", "-lineinfo", "-std=c++17"]
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

sys.path.insert(0, str(ROOT))

from foxc.cli import ArgumentParser, UserError, positive_int, run  # noqa: E402 (a mistake: one line, status 2)
from foxc.driver.cubins import read_manifest  # noqa: E402 (the one reader of the manifest)

PROG = "build_cubins"


def generated_headers():
    """(path, is_current, write) for each header generated from Python: regenerated before a build."""
    from foxc.headers import all_headers
    return [(h.path, h.is_current, h.write) for h in all_headers()]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def sources() -> dict[str, Path]:
    """Module name ('lobsim/book') -> source, for every .cu outside cuda/include."""
    found = {}
    for path in sorted(CUDA_DIR.rglob("*.cu")):
        if INCLUDE_DIR in path.parents:
            continue
        found[path.relative_to(CUDA_DIR).with_suffix("").as_posix()] = path
    return found


def included_headers(source: Path) -> list[Path]:
    """Every project header `source` includes, transitively ("..." includes under the source dir or cuda/include)."""
    seen: list[Path] = []
    stack = [source]
    while stack:
        current = stack.pop()
        for name in _INCLUDE.findall(current.read_text()):
            for base in (current.parent, INCLUDE_DIR):
                candidate = (base / name).resolve()
                if candidate.is_file():
                    if candidate not in seen:
                        seen.append(candidate)
                        stack.append(candidate)
                    break
            else:
                raise UserError(f"{rel(current)}: #include \"{name}\" not found under its folder or cuda/include")
    return sorted(seen)


def elf_kernel_names(image: bytes) -> list[str]:
    """Global function symbols in a cubin (an ELF64 file): the kernels it exports."""
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise ValueError("not an ELF64 cubin")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        for off in range(sh[4], sh[4] + sh[5], sh[9]):
            st_name, st_info = struct.unpack_from("<IB", image, off)
            if st_info & 0xF == 2 and st_info >> 4 == 1:  # STT_FUNC, STB_GLOBAL
                start = strtab[4] + st_name
                names.append(image[start:image.index(b"\0", start)].decode())
    return sorted(names)


def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else out.strip().splitlines()[-1]


def header_hashes(source: Path) -> dict[str, str]:
    return {rel(h): sha256(h) for h in included_headers(source)}


# C parameter types (qualifiers removed) -> KernelSpec kinds; every pointer is "ptr"
C_KINDS = {"int": "i32", "unsigned int": "u32", "long long": "i64", "unsigned long long": "u64", "float": "f32"}
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?'
                     r'(\w+)\s*\(([^)]*)\)')
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__)\b")
_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\(([^)]*)\)(.*)$", re.M)
_OBJECT_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)(?!\()[ \t]+(.*)$", re.M)


def strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", re.sub(r"//[^\n]*", "", text), flags=re.S)


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


def parameter_macros(text: str) -> dict[str, str]:
    """Object-like macros that stand for part of a parameter list (their body declares a pointer), e.g.
    a simulator's parameters shared by two kernels: {name: body}."""
    text = strip_comments(text).replace("\\\n", " ")
    return {m.group(1): " ".join(m.group(2).split()) for m in _OBJECT_DEFINE.finditer(text)
            if "*" in m.group(2) and "," in m.group(2)}


def parse_signatures(source_text: str, label: str = "source", macros: dict[str, str] | None = None
                     ) -> dict[str, list[list[str]]]:
    """{kernel: [[parameter name, kind], ...]} for every extern "C" __global__ kernel in a .cu file: what
    foxc.driver.cubins.check_spec binds each KernelSpec to, by name and type. A parameter-list macro
    (`parameter_macros` of the file and of `macros`, its headers') is expanded in place."""
    found = {}
    macros = {**(macros or {}), **parameter_macros(source_text)}
    for m in _KERNEL.finditer(expand_kernel_macros(strip_comments(source_text))):
        params = []
        plist = m.group(2)
        for _ in range(len(macros)):  # a list may name another list: expand until none is left
            for name, body in macros.items():
                plist = re.sub(rf"\b{name}\b", body, plist)
        for raw in filter(None, (" ".join(p.split()) for p in plist.split(","))):
            decl = " ".join(_QUALIFIERS.sub(" ", raw).split())
            name = re.search(r"(\w+)$", decl)
            ctype = decl[:name.start()].strip() if name else ""
            kind = "ptr" if "*" in ctype else C_KINDS.get(ctype)
            if name is None or kind is None:
                raise UserError(f"{label}: kernel {m.group(1)}: parameter '{raw}' has a type foxc cannot bind "
                                 f"(pointers and {', '.join(C_KINDS)})")
            params.append([name.group(1), kind])
        found[m.group(1)] = params
    return found


def kernel_signatures(source: Path) -> dict:
    macros = {}
    for header in included_headers(source):
        macros.update(parameter_macros(header.read_text()))
    return parse_signatures(source.read_text(), rel(source), macros)


def load_manifest() -> dict:
    """The manifest ({} when there is none); a damaged one is refused naming it, the field and the remedy."""
    return read_manifest(MANIFEST) if MANIFEST.is_file() else {}


def stale_entries(manifest: dict, archs: list[str] | None = None) -> list[str]:
    """A line per problem: source changed, header changed, cubin missing or altered, entry orphaned."""
    problems = []
    entries = manifest.get("sources", {})
    archs = archs or manifest.get("archs", DEFAULT_ARCHS)
    for path, is_current, _ in generated_headers():
        if not is_current():
            problems.append(f"{rel(path)}: out of date with the Python that generates it")
    for module, path in sources().items():
        entry = entries.get(module)
        if entry is None:
            problems.append(f"{rel(path)}: no cubin built (missing from the manifest)")
            continue
        if entry["sha256"] != sha256(path):
            problems.append(f"{rel(path)}: source changed since its cubins were built")
        if entry["headers"] != header_hashes(path):
            problems.append(f"{rel(path)}: an included header changed since its cubins were built")
        if entry.get("signatures") != kernel_signatures(path):
            problems.append(f"{rel(path)}: the manifest's kernel signatures are not the source's")
        elif set(entry["signatures"]) != set(entry["kernels"]):
            problems.append(f"{rel(path)}: kernels in the cubin and in the source differ "
                            f"({sorted(set(entry['signatures']) ^ set(entry['kernels']))})")
        for arch in archs:
            cubin = CUBIN_DIR / arch / f"{module}.cubin"
            if not cubin.is_file():
                problems.append(f"{rel(cubin)}: missing")
            elif entry["cubins"].get(arch) != sha256(cubin):
                problems.append(f"{rel(cubin)}: does not match the manifest")
    for module in sorted(set(entries) - set(sources())):
        problems.append(f"manifest entry '{module}': its source cuda/{module}.cu no longer exists")
    return problems


@contextlib.contextmanager
def staged_sources():
    """cuda/ copied to a fixed path with fixed mtimes: -lineinfo records the compile directory and the
    sources' mtimes, and fixing both keeps the cubins' bytes independent of the checkout. The lock
    serialises concurrent builds."""
    STAGE.parent.mkdir(parents=True, exist_ok=True)
    with open(STAGE.parent / "foxc-cubin-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(STAGE, ignore_errors=True)
        shutil.copytree(CUDA_DIR, STAGE / "cuda")
        for staged in (STAGE / "cuda").rglob("*"):
            os.utime(staged, (0, 0))  # the line table records source mtimes, which a git checkout does not keep
        try:
            yield
        finally:
            shutil.rmtree(STAGE, ignore_errors=True)


def compile_one(nvcc: str, source: Path, module: str, arch: str) -> tuple[str, bytes]:
    """Compile a staged copy of `source` (call inside `staged_sources()`)."""
    out = CUBIN_DIR / arch / f"{module}.cubin"
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [nvcc, *FLAGS, f"-arch={arch}", "-I", "cuda/include", "-o", str(out.resolve()),
           (Path("cuda") / source.relative_to(CUDA_DIR)).as_posix()]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=STAGE)
    if done.returncode != 0:
        raise SystemExit(f"nvcc failed on {rel(source)} for {arch}:\n{done.stderr}")
    return arch, out.read_bytes()


def build(archs: list[str], force: bool, jobs: int) -> int:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise UserError("nvcc not found on PATH: install the CUDA toolkit (13.0) to build cubins")
    for path, _, write in generated_headers():
        if write():
            print(f"regenerated {rel(path)}")
    old = load_manifest()
    version = nvcc_version(nvcc)
    same_tool = old.get("nvcc_version") == version and old.get("flags") == FLAGS
    entries = {}
    work = []
    for module, path in sources().items():
        prev = old.get("sources", {}).get(module)
        entry = {"source": rel(path), "sha256": sha256(path), "headers": header_hashes(path),
                 "signatures": kernel_signatures(path)}
        fresh = (not force and same_tool and prev is not None and prev["sha256"] == entry["sha256"]
                 and prev["headers"] == entry["headers"])
        entry["cubins"] = {}
        entry["kernels"] = prev.get("kernels", []) if prev else []
        for arch in archs:
            cubin = CUBIN_DIR / arch / f"{module}.cubin"
            if fresh and cubin.is_file() and prev["cubins"].get(arch) == sha256(cubin):
                entry["cubins"][arch] = prev["cubins"][arch]
            else:
                work.append((path, module, arch))
        entries[module] = entry
    with staged_sources(), ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda w: (w[1], *compile_one(nvcc, *w)), work))
    for module, arch, image in results:
        entries[module]["cubins"][arch] = hashlib.sha256(image).hexdigest()
        entries[module]["kernels"] = elf_kernel_names(image)
        print(f"built {arch}/{module}.cubin  ({len(image):,} B, {len(entries[module]['kernels'])} kernels)")
    for module in set(old.get("sources", {})) - set(entries):  # a removed source takes its cubins along
        for arch_dir in CUBIN_DIR.glob("sm_*"):
            (arch_dir / f"{module}.cubin").unlink(missing_ok=True)
    manifest = {"nvcc_version": version, "flags": FLAGS, "archs": archs, "sources": entries}
    MANIFEST.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"{len(work)} cubins built, {sum(len(e['cubins']) for e in entries.values()) - len(work)} current; "
          f"manifest: {rel(MANIFEST)}")
    return 0


def main(argv=None) -> int:
    ap = ArgumentParser(prog=PROG, description="Build foxc's cubins with nvcc, or check that they are current.")
    ap.add_argument("--check", action="store_true", help="exit 1 naming every stale or missing cubin")
    ap.add_argument("--force", action="store_true", help="rebuild every cubin")
    ap.add_argument("--arch", action="append", help=f"target architecture (repeatable; default {' '.join(DEFAULT_ARCHS)})")
    ap.add_argument("--jobs", type=positive_int, default=2, help="parallel nvcc processes (default 2)")
    args = ap.parse_args(argv)
    return run(PROG, lambda: _main(args))


def _main(args) -> int:
    archs = args.arch or load_manifest().get("archs") or DEFAULT_ARCHS
    if args.check:
        problems = stale_entries(load_manifest(), archs)
        for line in problems:
            print(f"stale: {line}", file=sys.stderr)
        if problems:
            print(f"{len(problems)} problem(s): run python3 tools/build_cubins.py", file=sys.stderr)
            return 1
        print(f"cubins current: {len(sources())} sources x {len(archs)} architectures")
        return 0
    return build(archs, args.force, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
