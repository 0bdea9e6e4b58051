import numpy as np
import pytest

from foxc.driver import DevPtr, KernelSpec, f32, i32, i64, ptr, u32
from foxc.driver.kernel_spec import convert_args, pack_slot, PTR, F32
from foxc.driver.cubins import verify_params

SPEC = KernelSpec("k", "m/k", (ptr("x"), i32("a"), i64("b"), f32("c"), u32("d"), ptr("y")))


def test_layout_follows_natural_alignment():
    assert SPEC.layout == ((0, 8), (8, 4), (16, 8), (24, 4), (28, 4), (32, 8))


def test_verify_accepts_matching_cubin_layout():
    verify_params(SPEC, lambda i: SPEC.layout[i] if i < len(SPEC.layout) else None)


def test_verify_names_kernel_and_parameter_on_size_mismatch():
    wrong = dict(enumerate(SPEC.layout))
    wrong[2] = (16, 4)
    with pytest.raises(ValueError, match=r"k parameter 2 'b' i64 .*but the cubin has it at offset 16, size 4"):
        verify_params(SPEC, lambda i: wrong.get(i))


def test_verify_rejects_fewer_and_more_parameters():
    with pytest.raises(ValueError, match="only 3 parameters"):
        verify_params(SPEC, lambda i: SPEC.layout[i] if i < 3 else None)
    with pytest.raises(ValueError, match="but the cubin's kernel has 7"):
        verify_params(SPEC, lambda i: SPEC.layout[i] if i < len(SPEC.layout) else (40, 8) if i == 6 else None,
                      count=7)


class _Buf:
    def __init__(self, addr):
        self.ptr = DevPtr(addr, self)


def test_convert_args_types():
    vals = convert_args(SPEC, (_Buf(0x1000), 3, 2**40, 1.5, 7, DevPtr(0x2000)))
    assert vals[0].addr == 0x1000 and vals[5].addr == 0x2000
    assert vals[1].dtype == np.int32 and vals[2].dtype == np.int64
    assert vals[3].dtype == np.float32 and vals[4].dtype == np.uint32


@pytest.mark.parametrize("index,value,error,message", [
    (0, 0x1000, TypeError, r"k parameter 0 'x' ptr .*: int is no DevPtr"),
    (1, True, TypeError, "parameter 1 'a' i32 .*: bool True"),
    (1, 2**31, ValueError, "out of range"),
    (4, -1, ValueError, "out of range"),
    (1, 1.5, TypeError, "float 1.5"),
    (3, "x", TypeError, "parameter 3 'c' f32 .*: str 'x'"),
])
def test_convert_args_refuses(index, value, error, message):
    args = [_Buf(0x1000), 3, 4, 1.0, 7, DevPtr(8)]
    args[index] = value
    with pytest.raises(error, match=message):
        convert_args(SPEC, args)


def test_wrong_argument_count():
    with pytest.raises(TypeError, match=r"takes 6 arguments \(x, a, b, c, d, y\), got 1"):
        convert_args(SPEC, (1,))


def test_pack_slot_little_endian():
    assert pack_slot(PTR, DevPtr(0x0102030405060708)) == bytes.fromhex("0807060504030201")
    assert pack_slot(F32, np.float32(1.0)) == bytes.fromhex("0000803f00000000")


# ---- kernels bound by name ---------------------------------------------------------------------------

def _all_specs():
    """Every KernelSpec foxc declares: each is registered with its numpy reference."""
    import importlib
    import pkgutil

    import foxc
    from foxc.driver.reference.registry import registered_specs
    for info in pkgutil.walk_packages(foxc.__path__, "foxc."):
        if ".bench" not in info.name and not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    return {spec.name: spec for spec in registered_specs()}


def test_every_kernel_spec_matches_its_source_signature_by_name_and_type():
    from foxc.driver.cubins import load_manifest
    from foxc.driver.cubins import check_spec
    specs = _all_specs()
    for spec in specs.values():
        check_spec(spec)
    built = {k for e in load_manifest()["sources"].values() for k in e["kernels"]}
    assert built == set(specs), f"kernels without a KernelSpec: {sorted(built - set(specs))}"


def test_swapped_pointers_fail_at_load_with_their_names(ref_rt):
    from dataclasses import replace

    from foxc.nn.optim import ADAMW_ALL
    params = list(ADAMW_ALL.params)
    i, j = next((i, j) for i in range(len(params)) for j in range(i + 1, len(params))
                if params[i].kind.name == params[j].kind.name == "ptr")
    params[i], params[j] = params[j], params[i]
    swapped = replace(ADAMW_ALL, params=tuple(params))
    with pytest.raises(ValueError, match=rf"parameter {i} is ptr '{params[j].name}' in the source, "
                                        rf"ptr '{params[i].name}' in the KernelSpec"):
        ref_rt.kernel(swapped)


def test_a_parameter_count_from_the_driver_replaces_the_probe():
    probed = []

    def info(i):
        probed.append(i)
        return SPEC.layout[i] if i < len(SPEC.layout) else None
    verify_params(SPEC, info, count=len(SPEC.layout))
    assert probed == list(range(len(SPEC.layout)))  # nothing asked past the last parameter
    with pytest.raises(ValueError, match=f"declared with {len(SPEC.layout)} parameters, but the cubin's kernel has 9"):
        verify_params(SPEC, info, count=9)


def test_convert_args_by_name_binds_each_value_to_its_parameter():
    x, y = _Buf(0x1000), DevPtr(0x2000)
    positional = convert_args(SPEC, (x, 3, 2**40, 1.5, 7, y))
    named = convert_args(SPEC, dict(y=y, d=7, c=1.5, b=2**40, a=3, x=x))  # any order
    assert [int(v) if isinstance(v, DevPtr) else v for v in named] == \
        [int(v) if isinstance(v, DevPtr) else v for v in positional]
    assert int(named[0]) == 0x1000 and int(named[5]) == 0x2000
    with pytest.raises(TypeError, match=r"k: unknown \['z'\], missing \['d'\]"):
        convert_args(SPEC, dict(x=x, a=3, b=1, c=1.0, z=7, y=y))
    with pytest.raises(TypeError, match="parameter 5 'y' ptr .*: int is no DevPtr"):
        convert_args(SPEC, dict(x=x, a=3, b=1, c=1.0, d=7, y=5))  # a swapped-in int is still refused
