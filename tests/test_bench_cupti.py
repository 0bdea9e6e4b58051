"""The CUPTI binding without a GPU: the interval arithmetic, the record parser on buffers built here
(through a stand-in walker and, where a libcupti is installed, CUPTI's own), and the library search."""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

import pytest

from foxc.bench import cupti
from foxc.bench.cupti import CuptiError, busy_fraction, kernel_summary, walk

RECORD = 216  # sizeof(CUpti_ActivityKernel10), CUDA 13
# offsetof in CUpti_ActivityKernel5..10, written out here so that a changed offset in the module fails
HEADER_OFFSETS = {"kind": 0, "start": 16, "end": 24, "correlationId": 92, "name": 104, "graphId": 156}


@pytest.mark.parametrize("intervals, span, busy", [
    ([(0, 10), (20, 30)], (0, 40), 20 / 40),                   # a gap between, idle at the end
    ([(0, 10), (5, 15), (12, 20)], (0, 20), 1.0),              # a chain of overlaps
    ([(0, 100), (10, 20), (30, 40)], (0, 200), 100 / 200),     # nested inside one
    ([(30, 40), (0, 100), (150, 160)], (0, 200), 110 / 200),   # unsorted, nested, then a gap
    ([(0, 10), (10, 20)], (0, 20), 1.0),                       # touching [start, end)
    ([(-50, 10), (190, 300)], (0, 200), 20 / 200),             # clipped to the span
    ([(250, 300), (5, 5)], (0, 200), 0.0),                     # outside, and empty
    ([], (0, 10), 0.0),
])
def test_busy_fraction_is_the_union_over_the_span(intervals, span, busy):
    assert busy_fraction(intervals, span) == pytest.approx(busy)


def test_busy_fraction_refuses_an_empty_span():
    with pytest.raises(ValueError):
        busy_fraction([(0, 1)], (5, 5))


def test_kernel_summary_counts_and_sums_per_name_largest_first():
    K = cupti.KernelRecord
    rows = kernel_summary([K("scan", 0, 50, 1, 0), K("gemm", 50, 80, 2, 0), K("gemm", 90, 130, 3, 0),
                           K("fill", 130, 131, 4, 0)])
    assert rows == [{"name": "gemm", "count": 2, "total_ns": 70}, {"name": "scan", "count": 1, "total_ns": 50},
                    {"name": "fill", "count": 1, "total_ns": 1}]


class Buffer:
    """Activity records laid out as CUPTI writes them, with the names' strings kept alive."""

    def __init__(self, records):
        self.raw = ctypes.create_string_buffer(RECORD * len(records) + 8)
        self.base = -(-ctypes.addressof(self.raw) // 8) * 8
        self.names = []
        for i, (kind, start, end, name, corr, graph) in enumerate(records):
            at = self.base + i * RECORD
            ctypes.c_uint32.from_address(at + HEADER_OFFSETS["kind"]).value = kind
            ctypes.c_uint64.from_address(at + HEADER_OFFSETS["start"]).value = start
            ctypes.c_uint64.from_address(at + HEADER_OFFSETS["end"]).value = end
            ctypes.c_uint32.from_address(at + HEADER_OFFSETS["correlationId"]).value = corr
            ctypes.c_uint32.from_address(at + HEADER_OFFSETS["graphId"]).value = graph
            if name is not None:
                self.names.append(ctypes.create_string_buffer(name))
                ctypes.c_void_p.from_address(at + HEADER_OFFSETS["name"]).value = ctypes.addressof(self.names[-1])
        self.size = RECORD * len(records)

    def next_record(self, buffer, size, previous):
        """A stand-in for cuptiActivityGetNextRecord over fixed-size records."""
        at = buffer if previous is None else previous + RECORD
        return at if at < buffer + size else None


RECORDS = [(cupti.KIND_CONCURRENT_KERNEL, 1_000, 1_500, b"encoder_scan_fwd", 7, 3),
           (cupti.KIND_CONCURRENT_KERNEL, 1_600, 1_650, b"gemm_tile_32x32", 8, 3),
           (2, 0, 0, None, 0, 0),  # a memset record: skipped
           (cupti.KIND_KERNEL, 1_700, 1_900, b"adamw_update", 9, 0)]


def test_offsets_match_the_installed_cupti_header(tmp_path):
    headers = sorted(glob.glob("/usr/local/cuda*/include/cupti_activity.h")
                     + glob.glob("/usr/local/cuda*/extras/CUPTI/include/cupti_activity.h"))
    if not headers or not shutil.which("cc"):
        pytest.skip("no cupti_activity.h or no C compiler here")
    include = os.path.dirname(headers[-1])
    fields = "".join(f'printf("%zu ", offsetof(CUpti_ActivityKernel10, {f}));' for f in HEADER_OFFSETS)
    src = tmp_path / "offsets.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <cupti_activity.h>\n"
                   f'int main(void) {{ {fields} printf("%zu", sizeof(CUpti_ActivityKernel10)); return 0; }}\n')
    cuda_include = os.path.join(os.path.dirname(include), "targets", "x86_64-linux", "include")
    subprocess.run(["cc", f"-I{include}", f"-I{cuda_include}", str(src), "-o", str(tmp_path / "offsets")], check=True)
    *offsets, size = map(int, subprocess.run([str(tmp_path / "offsets")], capture_output=True, text=True,
                                             check=True).stdout.split())
    assert dict(zip(HEADER_OFFSETS, offsets)) == HEADER_OFFSETS and size == RECORD
    assert (cupti.OFF_KIND, cupti.OFF_START, cupti.OFF_END, cupti.OFF_CORRELATION, cupti.OFF_NAME,
            cupti.OFF_GRAPH_ID) == tuple(HEADER_OFFSETS.values())


def test_walk_parses_kernel_records_and_skips_other_kinds():
    buf = Buffer(RECORDS)
    got = walk(buf.base, buf.size, buf.next_record)
    assert got == [cupti.KernelRecord("encoder_scan_fwd", 1_000, 1_500, 7, 3),
                   cupti.KernelRecord("gemm_tile_32x32", 1_600, 1_650, 8, 3),
                   cupti.KernelRecord("adamw_update", 1_700, 1_900, 9, 0)]


@pytest.mark.parametrize("start, end, name", [(10, 5, b"k"), (0, 5, None), (0, 5, b"\x01\x02bad")])
def test_walk_refuses_a_record_that_does_not_read_as_a_kernel(start, end, name):
    buf = Buffer([(cupti.KIND_CONCURRENT_KERNEL, start, end, name, 1, 0)])
    with pytest.raises(CuptiError, match="does not read as"):
        walk(buf.base, buf.size, buf.next_record)


def test_walk_with_cuptis_own_record_walker():
    try:
        lib = cupti.load()
    except CuptiError as e:
        pytest.skip(str(e))
    if lib.version < 130000:
        pytest.skip(f"CUPTI API {lib.version}: its kernel record is not {RECORD} bytes")
    buf = Buffer(RECORDS[:2] + RECORDS[3:])
    assert [k.name for k in walk(buf.base, buf.size, lib.next_record)] == [
        "encoder_scan_fwd", "gemm_tile_32x32", "adamw_update"]


def test_library_search_finds_pip_packages_and_names_what_it_tried(tmp_path, monkeypatch):
    lib_dir = tmp_path / "nvidia" / "cu13" / "lib"
    lib_dir.mkdir(parents=True)
    (lib_dir / "libcupti.so.13").write_bytes(b"not an ELF")
    monkeypatch.delenv("FOXC_CUPTI", raising=False)
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert str(lib_dir / "libcupti.so.13") in cupti.library_candidates()

    monkeypatch.setenv("FOXC_CUPTI", str(lib_dir / "libcupti.so.13"))
    monkeypatch.setattr(cupti, "_loaded", None)
    assert cupti.library_candidates() == [os.environ["FOXC_CUPTI"]]
    with pytest.raises(CuptiError, match="libcupti.so.13"):
        cupti.KernelActivity()


def test_replay_timeline_takes_medians_per_kernel_and_occurrence():
    """Two kernels of one name in a replay are told apart by their order; a lane's kernel that starts
    beside another keeps its own start; medians, so one slow replay moves nothing."""
    replays = []
    for i, late in enumerate((0, 0, 9_000)):
        t0 = 100_000 * i
        replays += [cupti.KernelRecord("scan", t0, t0 + 5_000, 0, 1),
                    cupti.KernelRecord("gemm", t0 + 5_000, t0 + 7_000 + late, 0, 1),
                    cupti.KernelRecord("push", t0 + 1_000, t0 + 2_000, 0, 1),
                    cupti.KernelRecord("gemm", t0 + 7_500 + late, t0 + 9_000 + late, 0, 1)]
    got = cupti.replay_timeline(replays[::-1], 4)  # any order: sorted by start
    assert got == [{"kernel": "scan#0", "start_us": 0.0, "end_us": 5.0, "us": 5.0},
                   {"kernel": "push#0", "start_us": 1.0, "end_us": 2.0, "us": 1.0},
                   {"kernel": "gemm#0", "start_us": 5.0, "end_us": 7.0, "us": 2.0},
                   {"kernel": "gemm#1", "start_us": 7.5, "end_us": 9.0, "us": 1.5}]
    with pytest.raises(ValueError, match="7 kernel records are not whole replays of 4"):
        cupti.replay_timeline(replays[:7], 4)
