"""Kernel activity records from CUPTI through ctypes (cuda-python binds no CUPTI): the GPU's own start and end
of every kernel.

    with KernelActivity() as trace:            # CuptiError when no libcupti loads
        t0 = trace.timestamp(); ...launches...; stream.synchronize(); t1 = trace.timestamp()
    busy_fraction([(k.start, k.end) for k in trace.kernels], (t0, t1))

Records are read at the offsets CUpti_ActivityKernel5 through 10 share (CUDA 11.0 to 13.x; checked with
offsetof against CUDA 13.0's cupti_activity.h), and every record is checked, so a library with another
layout fails loudly instead of giving a figure. Timestamps are ns on CUPTI's clock, that of `timestamp()`.
"""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import glob
import os
import sys
from typing import NamedTuple

import numpy as np

KIND_KERNEL, KIND_CONCURRENT_KERNEL = 3, 10  # CUpti_ActivityKind
SUCCESS, ERROR_MAX_LIMIT_REACHED = 0, 12  # CUptiResult: the second ends a buffer walk
FLUSH_FORCED = 1  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: hand over buffers not yet full too
MIN_API_VERSION = 13  # CUDA 11.0: the first CUPTI whose kernel record (Kernel5) has these offsets
OFF_KIND, OFF_START, OFF_END, OFF_CORRELATION, OFF_NAME, OFF_GRAPH_ID = 0, 16, 24, 92, 104, 156
RECORD_ALIGN = 8  # ACTIVITY_RECORD_ALIGNMENT
BUFFER_BYTES = 8 << 20  # ~38k kernel records of 216 bytes
MAX_NAME = 4096
TOP_KERNELS = 12

_P, _VP, _SIZE = ctypes.POINTER, ctypes.c_void_p, ctypes.c_size_t
_REQUEST = ctypes.CFUNCTYPE(None, _P(_VP), _P(_SIZE), _P(_SIZE))  # CUpti_BuffersCallbackRequestFunc
_COMPLETE = ctypes.CFUNCTYPE(None, _VP, ctypes.c_uint32, _VP, _SIZE, _SIZE)  # CUpti_BuffersCallbackCompleteFunc


class CuptiError(RuntimeError):
    """No usable libcupti (the message names every place tried), a CUPTI call failed, or the records cannot be
    trusted: the figures they would give are not measured."""


class KernelRecord(NamedTuple):
    name: str
    start: int  # ns; start == end == 0 when CUPTI could not time the kernel
    end: int
    correlation: int
    graph_id: int


def busy_fraction(intervals, span) -> float:
    """The length of the union of the [start, end) intervals inside span = (lo, hi), over hi - lo."""
    lo, hi = span
    if hi <= lo:
        raise ValueError(f"empty span {span}")
    iv = np.asarray(list(intervals), dtype=np.int64).reshape(-1, 2)
    s, e = np.clip(iv[:, 0], lo, hi), np.clip(iv[:, 1], lo, hi)
    s, e = s[e > s], e[e > s]
    if not len(s):
        return 0.0
    order = np.argsort(s, kind="stable")
    s, reach = s[order], np.maximum.accumulate(e[order])
    first = np.concatenate(([True], s[1:] > reach[:-1]))  # an interval that starts after all before it ended
    last = np.concatenate((first[1:], [True]))
    return float((reach[last] - s[first]).sum()) / (hi - lo)


def kernel_summary(records) -> list[dict]:
    """Per kernel name: launches and summed time (ns), the largest total first."""
    by_name: dict[str, list[int]] = {}
    for r in records:
        acc = by_name.setdefault(r.name, [0, 0])
        acc[0] += 1
        acc[1] += r.end - r.start
    return sorted(({"name": n, "count": c, "total_ns": t} for n, (c, t) in by_name.items()),
                  key=lambda r: (-r["total_ns"], r["name"]))


def replay_timeline(records, per_replay: int) -> list[dict]:
    """Each kernel of a replayed graph (`name#i`, the i-th of that name in start order; `per_replay` records a
    replay) with the medians over replays of its start and end (µs after the replay's first start) and of its
    duration, in start order: what runs beside what, and what waits."""
    if per_replay <= 0 or not records or len(records) % per_replay:
        raise ValueError(f"{len(records)} kernel records are not whole replays of {per_replay}")
    ordered = sorted(records, key=lambda r: r.start)
    spans: dict[str, list[tuple[float, float]]] = {}
    for i in range(0, len(ordered), per_replay):
        replay, seen = ordered[i:i + per_replay], {}
        t0 = replay[0].start
        for r in replay:
            key = f"{r.name}#{seen.setdefault(r.name, 0)}"
            seen[r.name] += 1
            spans.setdefault(key, []).append(((r.start - t0) / 1e3, (r.end - t0) / 1e3))
    rows = []
    for key, se in spans.items():
        s, e = np.asarray(se).T
        rows.append({"kernel": key, "start_us": round(float(np.median(s)), 1), "end_us": round(float(np.median(e)), 1),
                     "us": round(float(np.median(e - s)), 1)})
    return sorted(rows, key=lambda r: (r["start_us"], r["kernel"]))


TIMELINE_COLUMNS = ["start_us", "end_us", "us", "kernel"]


def trace_graph(replay, synchronize, steps: int, warmup: int = 10) -> dict:
    """`replay()` `warmup` times then `steps` times under a KernelActivity, `synchronize()` after each group:
    gpu_busy (the union of the timed kernels' intervals over the host's span, widened by any clock skew),
    kernel_ms and traced_ms per replay, the TOP_KERNELS, the timeline, the records a replay (the graph's kernel
    nodes and any node the driver runs as a kernel); {"busy_unmeasured": reason} when CUPTI cannot give them
    exactly (no libcupti, a failed call, dropped, untimed or missing records)."""
    try:
        with KernelActivity() as trace:
            for _ in range(warmup):  # CUPTI sets itself up on the first
                replay()
            synchronize()
            t0 = trace.timestamp()
            for _ in range(steps):
                replay()
            synchronize()
            t1 = trace.timestamp()
        replayed = warmup + steps
        if trace.dropped or trace.untimed or not trace.kernels or len(trace.kernels) % replayed:
            raise CuptiError(f"CUPTI gave {len(trace.kernels)} kernel records for {replayed} replays, "
                             f"{trace.dropped} dropped, {trace.untimed} untimed")
    except CuptiError as e:
        return {"busy_unmeasured": str(e)}
    per_replay = len(trace.kernels) // replayed
    # the warm-up replays ran to completion before t0: they are the earliest records
    timed = sorted(trace.kernels, key=lambda k: k.start)[warmup * per_replay:]
    span = (min(t0, timed[0].start), max(t1, max(k.end for k in timed)))
    kernel_ns = sum(k.end - k.start for k in timed)
    top = [{"name": r["name"], "per_step": r["count"] / steps, "ms_per_step": round(r["total_ns"] / steps / 1e6, 4),
            "share": round(r["total_ns"] / kernel_ns, 3)} for r in kernel_summary(timed)[:TOP_KERNELS]]
    return {"gpu_busy": round(busy_fraction([(k.start, k.end) for k in timed], span), 3),
            "timeline": replay_timeline(timed, per_replay), "kernel_ms": round(kernel_ns / steps / 1e6, 4),
            "traced_ms": round((span[1] - span[0]) / steps / 1e6, 4), "top_kernels": top, "cupti": trace.cupti.path,
            "kernels_traced": per_replay}


def parse_kernel(address: int) -> KernelRecord | None:
    """The kernel record at `address` (its name copied while CUPTI's string is valid); None for another kind."""
    if ctypes.c_uint32.from_address(address + OFF_KIND).value not in (KIND_KERNEL, KIND_CONCURRENT_KERNEL):
        return None
    start = ctypes.c_uint64.from_address(address + OFF_START).value
    end = ctypes.c_uint64.from_address(address + OFF_END).value
    name_ptr = ctypes.c_void_p.from_address(address + OFF_NAME).value
    raw = ctypes.string_at(name_ptr) if name_ptr else b""
    name = raw.decode("ascii", "replace")
    if not raw or len(raw) > MAX_NAME or not name.isprintable() or end < start:
        raise CuptiError(f"a kernel record does not read as CUpti_ActivityKernel5-10 (start {start}, end {end}, "
                         f"name {raw[:64]!r}): this libcupti's layout differs from the offsets in {__name__}")
    return KernelRecord(name, start, end, ctypes.c_uint32.from_address(address + OFF_CORRELATION).value,
                        ctypes.c_uint32.from_address(address + OFF_GRAPH_ID).value)


def walk(buffer: int, valid_size: int, next_record) -> list[KernelRecord]:
    """The kernel records of one completed buffer; `next_record(buffer, size, previous or None)` gives the next
    record's address, None at the end (cuptiActivityGetNextRecord, or a test's stand-in)."""
    out, address = [], None
    while (address := next_record(buffer, valid_size, address)) is not None:
        if (rec := parse_kernel(address)) is not None:
            out.append(rec)
    return out


def library_candidates() -> list[str]:
    """Where libcupti may be, in the order tried: FOXC_CUPTI alone when set, else the toolkits' directories,
    the `nvidia` pip packages on sys.path, then the linker's search."""
    if os.environ.get("FOXC_CUPTI"):
        return [os.environ["FOXC_CUPTI"]]
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *sorted(glob.glob("/usr/local/cuda*"))[::-1]]
    dirs = [os.path.join(r, sub) for r in roots if r for sub in ("extras/CUPTI/lib64", "lib64", "lib")]
    dirs += [d for p in sys.path if p for d in sorted(glob.glob(os.path.join(p, "nvidia", "*", "lib")))]
    files = {}  # one name per real file, the first seen
    for f in (f for d in dirs for f in sorted(glob.glob(os.path.join(d, "libcupti.so*")))[::-1]):
        files.setdefault(os.path.realpath(f), f)
    found = ctypes.util.find_library("cupti")
    return list(files.values()) + ([found] if found else [])


class _Cupti:
    """libcupti, loaded once per process: its calls, its one pair of buffer callbacks, and the buffers lent to it
    (kept alive here until CUPTI hands them back)."""

    def __init__(self, path: str):
        self.path, self.lib = path, ctypes.CDLL(path)
        for fn, args in (("cuptiGetVersion", [_P(ctypes.c_uint32)]), ("cuptiGetTimestamp", [_P(ctypes.c_uint64)]),
                         ("cuptiGetResultString", [ctypes.c_int, _P(ctypes.c_char_p)]),
                         ("cuptiActivityEnable", [ctypes.c_int]), ("cuptiActivityDisable", [ctypes.c_int]),
                         ("cuptiActivityFlushAll", [ctypes.c_uint32]), ("cuptiActivityGetNextRecord", [_VP, _SIZE, _P(_VP)]),
                         ("cuptiActivityRegisterCallbacks", [_REQUEST, _COMPLETE]),
                         ("cuptiActivityGetNumDroppedRecords", [_VP, ctypes.c_uint32, _P(_SIZE)])):
            getattr(self.lib, fn).argtypes, getattr(self.lib, fn).restype = args, ctypes.c_int  # CUptiResult
        version = ctypes.c_uint32()
        self.check(self.lib.cuptiGetVersion(ctypes.byref(version)), "cuptiGetVersion")
        if version.value < MIN_API_VERSION:
            raise CuptiError(f"{path}: CUPTI API version {version.value} < {MIN_API_VERSION} (CUDA 11.0)")
        self.version, self.buffers, self.sink = version.value, {}, None
        self._callbacks = (_REQUEST(self._requested), _COMPLETE(self._completed))  # C keeps pointers to these
        self.check(self.lib.cuptiActivityRegisterCallbacks(*self._callbacks), "cuptiActivityRegisterCallbacks")
        # every buffer back while Python can still run the callbacks, not from libcupti's own exit
        atexit.register(self.lib.cuptiActivityFlushAll, FLUSH_FORCED)

    def check(self, result: int, call: str):
        if result != SUCCESS:
            text = ctypes.c_char_p()
            self.lib.cuptiGetResultString(result, ctypes.byref(text))
            raise CuptiError(f"{call} failed: {(text.value or b'?').decode()} ({result}) [{self.path}]")

    def next_record(self, buffer: int, size: int, previous: int | None) -> int | None:
        record = ctypes.c_void_p(previous)
        result = self.lib.cuptiActivityGetNextRecord(buffer, size, ctypes.byref(record))
        if result == ERROR_MAX_LIMIT_REACHED:
            return None
        self.check(result, "cuptiActivityGetNextRecord")
        return record.value

    def _requested(self, buffer, size, max_records):
        raw = ctypes.create_string_buffer(BUFFER_BYTES + RECORD_ALIGN)
        aligned = -(-ctypes.addressof(raw) // RECORD_ALIGN) * RECORD_ALIGN
        self.buffers[aligned] = raw
        buffer[0], size[0], max_records[0] = aligned, BUFFER_BYTES, 0  # 0: as many records as fit

    def _completed(self, context, stream_id, buffer, size, valid_size):
        sink = self.sink
        try:  # an exception cannot cross back into C: the sink keeps it for __exit__ to raise
            if sink is not None:
                sink.kernels += walk(buffer, valid_size, self.next_record)
                dropped = ctypes.c_size_t()
                self.check(self.lib.cuptiActivityGetNumDroppedRecords(context, stream_id, ctypes.byref(dropped)),
                           "cuptiActivityGetNumDroppedRecords")
                sink.dropped += dropped.value
        except Exception as e:
            sink.error = sink.error or e
        finally:
            self.buffers.pop(buffer, None)


_loaded: _Cupti | None = None


def load() -> _Cupti:
    """The process's libcupti, loaded on first use from the first candidate that loads."""
    global _loaded
    if _loaded is None:
        tried = []
        for path in library_candidates():
            try:
                _loaded = _Cupti(path)
                break
            except (OSError, CuptiError) as e:
                tried.append(f"{path}: {e}")
        else:
            raise CuptiError("no usable libcupti (FOXC_CUPTI=path names one); tried: " + ("; ".join(tried) or
                             "none found in the CUDA toolkits, the nvidia pip packages or the linker's path"))
    return _loaded


class KernelActivity:
    """A kernel record for every kernel run between enter and exit (CONCURRENT_KERNEL: kernels stay concurrent);
    synchronize before leaving: exit flushes CUPTI's buffers into `kernels`. `dropped`: records CUPTI lost."""

    def __init__(self):
        self.cupti = load()
        self.kernels: list[KernelRecord] = []
        self.dropped, self.error = 0, None

    def timestamp(self) -> int:
        """Now, in ns on the clock of the records."""
        t = ctypes.c_uint64()
        self.cupti.check(self.cupti.lib.cuptiGetTimestamp(ctypes.byref(t)), "cuptiGetTimestamp")
        return t.value

    @property
    def untimed(self) -> int:
        return sum(1 for k in self.kernels if k.start == k.end == 0)

    def __enter__(self):
        if self.cupti.sink is not None:
            raise CuptiError("a KernelActivity is already open")
        self.cupti.check(self.cupti.lib.cuptiActivityEnable(KIND_CONCURRENT_KERNEL), "cuptiActivityEnable")
        self.cupti.sink = self
        return self

    def __exit__(self, *exc):
        try:
            self.cupti.check(self.cupti.lib.cuptiActivityFlushAll(FLUSH_FORCED), "cuptiActivityFlushAll")
            self.cupti.check(self.cupti.lib.cuptiActivityDisable(KIND_CONCURRENT_KERNEL), "cuptiActivityDisable")
        finally:
            self.cupti.sink = None
        if self.error is not None and exc[0] is None:
            raise self.error
        return False
