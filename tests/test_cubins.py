"""Prebuilt cubins: current with their sources, and exporting every declared kernel."""
import importlib
import json
import pkgutil
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_cubins  # noqa: E402

from foxc.driver import cubins  # noqa: E402
from foxc.driver.cubins import load_manifest, shipped_archs  # noqa: E402
from foxc.jsonfile import JsonFileError  # noqa: E402
from foxc.driver.reference.registry import registered_specs  # noqa: E402

import foxc  # noqa: E402


def import_all_foxc_modules():
    """Import every foxc module, so every kernel declared with a reference is registered."""
    for info in pkgutil.walk_packages(foxc.__path__, "foxc."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)


def test_cubins_are_current():
    problems = build_cubins.stale_entries(load_manifest())
    assert not problems, "stale cubins (run python3 tools/build_cubins.py):\n" + "\n".join(problems)


def test_required_architectures_shipped():
    assert {"sm_80", "sm_86", "sm_89", "sm_90"} <= set(shipped_archs())


def test_every_declared_kernel_is_in_its_cubin():
    import_all_foxc_modules()
    sources = load_manifest()["sources"]
    specs = registered_specs()
    assert specs
    for spec in specs:
        assert spec.module in sources, f"{spec.name}: no cubin for module {spec.module}"
        assert spec.name in sources[spec.module]["kernels"], f"{spec.name} not exported by {spec.module}"


def test_kernel_names_read_from_elf():
    image = (ROOT / "foxc/cubins/sm_90/vec/elementwise.cubin").read_bytes()
    assert build_cubins.elf_kernel_names(image) == ["axpy_f32", "copy_f32", "fill_f32", "fill_u32", "scale_f32"]


def test_check_reports_an_edited_source(tmp_path, monkeypatch):
    """A source edited without a rebuild is named by --check."""
    cuda = tmp_path / "cuda"
    shutil.copytree(ROOT / "cuda", cuda)
    monkeypatch.setattr(build_cubins, "CUDA_DIR", cuda)
    monkeypatch.setattr(build_cubins, "INCLUDE_DIR", cuda / "include")
    monkeypatch.setattr(build_cubins, "ROOT", tmp_path)
    shutil.copytree(ROOT / "foxc" / "cubins", tmp_path / "cubins")
    monkeypatch.setattr(build_cubins, "CUBIN_DIR", tmp_path / "cubins")
    manifest = load_manifest()
    assert build_cubins.stale_entries(manifest) == []
    src = cuda / "vec" / "elementwise.cu"
    src.write_text(src.read_text() + "\n// edited\n")
    (tmp_path / "cubins" / "sm_86" / "agent" / "state.cubin").unlink()
    (cuda / "vec" / "extra.cu").write_text("extern \"C\" __global__ void k() {}\n")
    problems = "\n".join(build_cubins.stale_entries(manifest))
    assert "cuda/vec/elementwise.cu: source changed" in problems
    assert "sm_86/agent/state.cubin: missing" in problems
    assert "cuda/vec/extra.cu: no cubin built" in problems


def damaged(entry: str, key: str, value):
    """The shipped manifest's text with sources[entry][key] set to `value` (deleted when None)."""
    manifest = json.loads(build_cubins.MANIFEST.read_text())
    manifest["sources"][entry].pop(key) if value is None else manifest["sources"][entry].__setitem__(key, value)
    return json.dumps(manifest)


DAMAGED = [('{"sources": {', "not valid JSON: Expecting property name enclosed in double quotes: line 1 column 14 "
            "(char 13)"),
           ("{}", "no 'nvcc_version'"),
           (damaged("agent/act", "sha256", None), "no 'sources.agent/act.sha256'"),
           (damaged("agent/act", "headers", []), "sources.agent/act.headers is a list of 0, not an object"),
           (damaged("vec/elementwise", "signatures", {"fill_f32": [["x"]]}),
            "sources.vec/elementwise.signatures.fill_f32[0] is a list of 1, not of type tuple[str, str]")]


@pytest.mark.parametrize("argv", [["--check"], []], ids=["check", "build"])
@pytest.mark.parametrize("text, problem", DAMAGED, ids=["torn", "empty", "no-key", "type", "signature"])
def test_a_damaged_manifest_is_one_line_naming_it(tmp_path, monkeypatch, capsys, argv, text, problem):
    """A manifest cut short, or JSON without a key the tool reads or with one of another type, ended the tool
    (--check, or a build, which reads it first) in a traceback; the runtime's loader reads it the same way."""
    manifest = tmp_path / "manifest.json"
    manifest.write_text(text)
    monkeypatch.setattr(build_cubins, "MANIFEST", manifest)
    assert build_cubins.main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"build_cubins: error: {manifest}: {problem}; restore it (git checkout foxc/cubins/manifest.json), "
                   "or remove it and build every cubin again (tools/build_cubins.py)\n")
    monkeypatch.setattr(cubins, "MANIFEST", manifest)
    with pytest.raises(JsonFileError, match=re.escape(f"{manifest}: {problem}; restore it")):
        cubins.load_manifest()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_output_is_deterministic(tmp_path):
    src = ROOT / "cuda" / "agent" / "state.cu"
    build_cubins.CUBIN_DIR, saved = tmp_path / "cubins", build_cubins.CUBIN_DIR
    try:
        with build_cubins.staged_sources():
            _, image = build_cubins.compile_one(shutil.which("nvcc"), src, "agent/state", "sm_90")
    finally:
        build_cubins.CUBIN_DIR = saved
    assert image == (ROOT / "foxc/cubins/sm_90/agent/state.cubin").read_bytes()


# ---- kernel signatures, as the manifest records them ---------------------------------------------------

@pytest.mark.parametrize("text, error", [
    ('extern "C" __global__ void k(float* a, double b) {}', "parameter 'double b'"),
    ('extern "C" __global__ void k(struct S s) {}', "parameter 'struct S s'"),
])
def test_unbindable_parameter_types_are_named(text, error):
    with pytest.raises(ValueError, match=error):
        build_cubins.parse_signatures(text)


def test_signatures_of_macro_generated_and_launch_bounded_kernels():
    text = ('#define K(SUFFIX, N) \\\nextern "C" __global__ void __launch_bounds__(T<N, 2>::X, 4) \\\n'
            'f##SUFFIX(const float* __restrict__ a, long long n) {}\nK(_x, 8)\nK(_y, 16)\n'
            '// extern "C" __global__ void commented(int a) {}\n'
            'extern "C" __global__ void g(unsigned int s, int* __restrict__ c, float t) {}\n')
    assert build_cubins.parse_signatures(text) == {
        "f_x": [["a", "ptr"], ["n", "i64"]], "f_y": [["a", "ptr"], ["n", "i64"]],
        "g": [["s", "u32"], ["c", "ptr"], ["t", "f32"]]}


def test_parameter_list_macros_expand_from_the_file_and_its_headers():
    """Kernels that share a parameter list write it once as a macro (lobsim_step and backtest_step, the
    fused scans); the manifest records the expanded parameters, so a spec still binds by name and type."""
    header = '#define ARRAYS const float* __restrict__ a, \\\n    int* __restrict__ b\n#define SCALE (2 * 3)\n'
    text = ('#define MORE float* c, int n\n'
            'extern "C" __global__ void k(ARRAYS, MORE, float t) {}\n'
            'extern "C" __global__ void k2(ARRAYS) {}\n')
    assert build_cubins.parameter_macros(header) == {"ARRAYS": "const float* __restrict__ a, int* __restrict__ b"}
    assert build_cubins.parse_signatures(text, macros=build_cubins.parameter_macros(header)) == {
        "k": [["a", "ptr"], ["b", "ptr"], ["c", "ptr"], ["n", "i32"], ["t", "f32"]],
        "k2": [["a", "ptr"], ["b", "ptr"]]}
    bridge = build_cubins.kernel_signatures(ROOT / "cuda/trainer/bridge.cu")["backtest_step"]
    assert bridge[:3] == [["snaps", "ptr"], ["cursor", "ptr"], ["episode_end", "ptr"]] and bridge[-1] == ["mask", "ptr"]
