"""The snapshot record: numpy dtype and C struct agree."""
import shutil
import subprocess

import numpy as np
import pytest

from foxc.data import record


def test_layout_is_packed_and_aligned():
    dt = record.SNAPSHOT_DTYPE
    assert dt.itemsize == 400 and dt.itemsize % 8 == 0
    assert dt.fields["bid_px"][1] % 8 == 0 and dt.fields["ts_ns"][1] == 0
    assert dt["bid_px"].shape == (record.LEVELS,)


def test_header_is_current():
    assert record.header_is_current(), "run python -m foxc.data.record --write"


def test_empty_snapshots():
    s = record.empty_snapshots(3)
    assert np.all(s["bid_px"] == record.PRICE_UNDEF) and np.all(s["ask_sz"] == 0)


@pytest.mark.parametrize("compiler", ["nvcc", "g++"])
def test_c_struct_offsets_agree(tmp_path, compiler):
    """The header's static_asserts (sizeof and every offsetof) hold under a real compiler."""
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    src = tmp_path / ("check.cu" if compiler == "nvcc" else "check.cpp")
    src.write_text('#include "foxc/snapshot.h"\nint main() { return sizeof(FoxcSnapshot) == 400 ? 0 : 1; }\n')
    cmd = [compiler, "-std=c++17", "-I", str(record.HEADER_PATH.parents[1]), "-o", str(tmp_path / "check"), str(src)]
    if compiler == "nvcc":
        cmd[1:1] = ["-arch=sm_80"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert subprocess.run([str(tmp_path / "check")]).returncode == 0
