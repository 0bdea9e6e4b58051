"""Streaming readers: any chunk size gives the records and report of the file read whole, and holds only a chunk."""
import gc
import re
import tracemalloc

import numpy as np
import pytest

from data_files import FIXTURES, dbn_bytes, write_lobster
from foxc.data.market import MarketData
from foxc.data.parquet import write_parquet
from foxc.data.record import PRICE_UNDEF
from foxc.data.source import load
from foxc.data.stream import FileStream
from foxc.data.synthetic import generate
from foxc.data.validate import DataError, ValidationConfig, apply

WHOLE = 1 << 30  # rows per chunk: as large as the reader's own batches allow


def troubled(n: int, seed: int) -> np.ndarray:
    """Synthetic snapshots with every kind of skipped row, time going back and jumping ahead,
    often enough that chunks of a few rows cut through them."""
    rec = generate(n, seed=seed)
    rng = np.random.default_rng(seed)
    for i in rng.choice(np.arange(1, n), n // 10, replace=False):
        kind = rng.integers(0, 6)
        if kind == 0:
            rec["ask_px"][i] = PRICE_UNDEF  # one-sided
        elif kind == 1:
            rec["bid_px"][i, 0] = rec["ask_px"][i, 0]  # locked
        elif kind == 2:
            rec["ts_ns"][i] = rec["ts_ns"][i - 1] - rng.integers(1, 10**6)  # back in time
        elif kind == 3:
            rec["ts_ns"][i] += rng.integers(1, 10**7)  # ahead: the next rows may be late
        elif kind == 4:
            rec["bid_px"][i, [3, 4]] = rec["bid_px"][i, [4, 3]]  # unsorted
        else:
            rec["bid_px"][i] = PRICE_UNDEF  # empty book
            rec["ask_px"][i] = PRICE_UNDEF
    return rec


def lobster_day(rec: np.ndarray) -> np.ndarray:
    rec = rec.copy()
    rec["ts_ns"] = rec["ts_ns"] - rec["ts_ns"] % (86400 * 10**9) + 34200 * 10**9 + np.arange(len(rec)) * 1_000_000
    rec["ts_ns"][::17] -= 3_000_000  # late rows: counted, not kept
    return rec


def write_files(folder):
    """One file of each format and layout the readers stream differently, all with troubled rows."""
    zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
    paths = {}
    for rows_per_group in (7, 1000):
        paths[f"parquet/{rows_per_group}"] = folder / f"groups{rows_per_group}.parquet"
        write_parquet(paths[f"parquet/{rows_per_group}"], troubled(500, rows_per_group), row_group_rows=rows_per_group)
    rec = troubled(600, 3)
    paths["dbn"] = folder / "plain.dbn"
    paths["dbn"].write_bytes(dbn_bytes(rec, version=2))
    paths["dbn/ts_out"] = folder / "ts_out.dbn"
    paths["dbn/ts_out"].write_bytes(dbn_bytes(rec, version=3, ts_out=True))
    raw = dbn_bytes(rec, version=3)
    paths["dbn.zst/frames"] = folder / "frames.dbn.zst"  # frames of 5,000 bytes: records cut across frames
    paths["dbn.zst/frames"].write_bytes(b"".join(zstandard.ZstdCompressor().compress(raw[i:i + 5000])
                                                 for i in range(0, len(raw), 5000)))
    paths["dbn/mixed"] = FIXTURES / "mixed.v3.ts_out.dbn"
    for name in ("mbp10.v1.dbn", "mbp10.v3.dbn.zst"):
        paths[f"fixture/{name}"] = FIXTURES / name
    for message in (True, False):
        sub = folder / f"lobster{int(message)}"
        sub.mkdir()
        paths[f"lobster/{'messages' if message else 'none'}"] = write_lobster(sub, lobster_day(troubled(700, 4)), 5,
                                                                              message=message)
    return paths


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("streams"))


def read(path, rows):
    stream = FileStream(path, rows=rows)
    chunks = list(stream)
    assert all(0 < len(c) <= rows for c in chunks)
    return np.concatenate(chunks), stream.summary(), len(chunks)


def read_whole_file(path):
    """The file read whole and validated in one piece, as the readers did before they streamed."""
    from foxc.data.chunks import read_whole
    from foxc.data.market import finish
    from foxc.data.stream import reader, source_kind
    rec, bad, meta = read_whole(reader(source_kind(path)), path)
    kept, skipped = apply(rec, bad, ValidationConfig())
    return finish(kept.copy()), len(rec), skipped, meta


@pytest.mark.parametrize("rows", [1, 7, 64])
@pytest.mark.parametrize("name", ["parquet/7", "parquet/1000", "dbn", "dbn/ts_out", "dbn.zst/frames", "dbn/mixed",
                                  "fixture/mbp10.v1.dbn", "fixture/mbp10.v3.dbn.zst", "lobster/messages",
                                  "lobster/none"])
def test_any_chunk_size_reads_the_whole_files_rows_and_counts(files, name, rows):
    whole, rows_read, skipped, meta = read_whole_file(files[name])
    got, summary, chunks = read(files[name], rows)
    assert got.tobytes() == whole.tobytes()
    assert (summary.rows_read, summary.rows, summary.skipped) == (rows_read, len(whole), skipped)
    assert (summary.notes, summary.instrument, summary.instrument_id) == (meta["notes"], meta["instrument"],
                                                                           meta["instrument_id"])
    assert summary == read(files[name], WHOLE)[1]
    assert chunks >= len(got) // rows
    if not name.startswith("fixture") and name != "dbn/mixed":
        skipped = {k: v for k, v in summary.skipped.items() if v}
        timed = name != "lobster/none"  # rows numbered in order: none late
        assert summary.rows < summary.rows_read and len(skipped) >= 3, skipped
        assert ("non_monotonic_ts" in skipped) == timed, skipped


def test_time_order_and_prev_ts_carry_across_a_chunk_boundary(tmp_path):
    rec = generate(20, seed=1)
    assert rec["ts_ns"][10] - rec["ts_ns"][6] > 3
    rec["ts_ns"][7] = rec["ts_ns"][10] - 1  # the last row of the first chunk of 8 jumps ahead...
    rec["ts_ns"][8:10] = rec["ts_ns"][6] + 1  # ...so the first two of the next chunk are late
    write_parquet(tmp_path / "x.parquet", rec)
    got, summary, chunks = read(tmp_path / "x.parquet", 8)
    assert chunks == 3 and summary.skipped["non_monotonic_ts"] == 2 and summary.rows == 18
    assert got["prev_ts_ns"][8] == rec["ts_ns"][7]  # the first kept row after the boundary: row 10
    assert got["ts_ns"][8] == rec["ts_ns"][10]
    assert got["prev_ts_ns"][0] == got["ts_ns"][0]


def test_load_is_the_streams_joined(files):
    data = load(files["parquet/7"])
    got, summary, _ = read(files["parquet/7"], 7)
    assert data.records.tobytes() == got.tobytes()
    assert data.report.files[summary.path]["rows_kept"] == summary.rows == len(data.records)


@pytest.mark.parametrize("name", ["parquet/7", "dbn", "dbn.zst/frames", "lobster/messages"])
def test_a_stream_holds_a_chunk_not_the_file(tmp_path, name):
    """tracemalloc sees every numpy array and bytes object: with chunks of 256 rows the stream's peak
    stays within a bound set by the chunk (and the 1 MiB DBN read-ahead), far below the file's records."""
    rows, n = 256, 30_000
    rec = troubled(n, 9)
    if name.startswith("parquet"):
        path = tmp_path / "big.parquet"
        write_parquet(path, rec, row_group_rows=1000)
    elif name == "dbn":
        path = tmp_path / "big.dbn"
        path.write_bytes(dbn_bytes(rec))
    elif name == "dbn.zst/frames":
        zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
        raw = dbn_bytes(rec)
        path = tmp_path / "big.dbn.zst"
        path.write_bytes(b"".join(zstandard.ZstdCompressor().compress(raw[i:i + 50_000])
                                  for i in range(0, len(raw), 50_000)))
    else:
        path = write_lobster(tmp_path, lobster_day(rec), 10)

    def peak(read):
        gc.collect()  # earlier tests' garbage freed (its finalizers run) before the window, not inside it
        tracemalloc.start()
        try:
            return read(), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    def stream():
        seen = 0
        for chunk in FileStream(path, rows=rows):
            assert len(chunk) <= rows
            seen += len(chunk)
        return seen

    kept, streamed = peak(stream)
    whole, whole_peak = peak(lambda: read_whole_file(path)[0])
    assert kept == len(whole) > n // 2
    bound = 16 * rows * rec.itemsize + (3 << 20 if name.startswith("dbn") else 1 << 20)
    assert streamed < bound < n * rec.itemsize < whole_peak, (streamed, bound, whole_peak)


def test_a_zstd_file_cut_inside_a_frame_is_refused(tmp_path):
    zstandard = pytest.importorskip("zstandard", reason="foxc's zstd dependency")
    raw = dbn_bytes(generate(300, seed=2))
    frames = [zstandard.ZstdCompressor().compress(raw[i:i + 368 * 50]) for i in range(0, len(raw), 368 * 50)]
    path = tmp_path / "cut.dbn.zst"
    path.write_bytes(b"".join(frames)[:-len(frames[-1]) // 2])  # the last frame half there
    with pytest.raises(DataError, match="truncated zstd stream \\(the file ends inside a frame\\)"):
        load(path)
    path.write_bytes(b"".join(frames[:-1]))  # whole frames but a record cut: DBN's own check
    with pytest.raises(DataError, match="partial record"):
        load(path)


ALLOC = "Unable to allocate 6.25 MiB for an array with shape (16384,) and data type |V400"


class NumpyWithout:
    """numpy, but its function `name` cannot have the memory it asks for (monkeypatched over a module's `np`)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, name):
        if name == self._name:
            def refused(*args, **kwargs):
                raise MemoryError(ALLOC)
            return refused
        return getattr(np, name)
CACHE_HINT = "; data files are held in memory whole: prepare a cache of them (python -m foxc.data prepare {} --out " \
             "CACHE), whose rows a run reads from disk a shard at a time (--data CACHE)"


@pytest.fixture
def two_days(tmp_path):
    """Two files of 300 rows: the second is the one whose rows memory cannot take."""
    for day, name in enumerate(("a.parquet", "b.parquet")):
        rec = generate(300, seed=day)
        rec["ts_ns"] += day * 86400 * 10**9
        write_parquet(tmp_path / name, rec)
    return tmp_path


def out_of_memory_reading(monkeypatch, name: str):
    """The reader of file `name` runs out of memory at its first chunk (numpy's MemoryError), as a file larger
    than memory does once the rows before it are held."""
    from foxc.data import stream
    real = stream.reader

    def reader(kind):
        def read(path, meta, rows):
            if path.name == name:
                raise MemoryError(ALLOC)
            yield from real(kind)(path, meta, rows)
        return read
    monkeypatch.setattr(stream, "reader", reader)


def test_rows_larger_than_memory_are_one_line_of_the_command(two_days, monkeypatch, capsys):
    """A MemoryError reading a file or joining the files is the host's, said once by foxc.cli.run (never 'cannot
    read (MemoryError: …)' naming the file, nor a traceback)."""
    from foxc.data import source
    from foxc.data.__main__ import main as data_main
    out_of_memory_reading(monkeypatch, "b.parquet")
    with pytest.raises(MemoryError, match=ALLOC):
        load(two_days)
    assert data_main(["inspect", str(two_days)]) == 2
    assert capsys.readouterr().err == f"foxc.data inspect: error: {ALLOC}\n"
    monkeypatch.undo()
    monkeypatch.setattr(source, "np", NumpyWithout("empty"))  # the one array of every row cannot be had
    with pytest.raises(MemoryError, match=ALLOC):
        load(two_days)


def test_load_frees_each_chunk_once_it_is_joined(two_days, monkeypatch):
    """The rows were held twice while joined (a file's chunks until all of them were copied): each chunk goes once
    it is copied, so when a file is joined (its segments counted) only the chunk just copied and the chunks of the
    files not joined yet are alive."""
    import weakref

    from foxc.data import source, stream
    chunks, alive, parts = [], [], stream.FileSummary.parts

    class Watched(FileStream):
        def __iter__(self):
            for chunk in super().__iter__():
                chunks.append(weakref.ref(chunk))
                yield chunk
    monkeypatch.setattr(source, "FileStream", lambda *args, **kw: Watched(*args, rows=50, **kw))
    monkeypatch.setattr(stream.FileSummary, "parts",
                        lambda s: alive.append(sum(c() is not None for c in chunks)) or parts(s))
    assert load(two_days).n_rows == 600 and len(chunks) == 12
    assert alive[-2:] == [1 + 6, 1], alive  # the join's (the last); before: [12, 6]


def test_prepare_out_of_memory_leaves_no_cache_and_is_one_line(two_days, monkeypatch, capsys):
    """Out of memory reading a file or labelling its rows, with one worker or several: nothing is left behind, and
    the command says it in one line (foxc.cli.run)."""
    from contextlib import nullcontext

    from foxc.data import prepare as preparing
    from foxc.data.__main__ import main as data_main
    out_of_memory_reading(monkeypatch, "b.parquet")
    for workers in (1, 2):
        monkeypatch.setattr(preparing, "process_pool", lambda workers, jobs: nullcontext())  # several, run here
        with pytest.raises(MemoryError, match=ALLOC):
            preparing.prepare(two_days, two_days / "cache", workers=workers)
        assert sorted(p.name for p in two_days.iterdir()) == ["a.parquet", "b.parquet"]
    monkeypatch.undo()
    real = preparing.compute_labels

    def labels(window, tick, cfg):  # the second shard's label block is what memory cannot take
        if window["segment"][0] == 1:
            raise MemoryError(ALLOC)
        return real(window, tick, cfg)
    monkeypatch.setattr(preparing, "compute_labels", labels)
    assert data_main(["prepare", str(two_days), "--out", str(two_days / "cache"), "--workers", "1"]) == 2
    assert capsys.readouterr().err == f"foxc.data prepare: error: {ALLOC}\n"
    assert sorted(p.name for p in two_days.iterdir()) == ["a.parquet", "b.parquet"]


def test_labels_larger_than_memory_are_refused_by_train_and_inspect(two_days, monkeypatch, capsys):
    """The rows fit, their label planes (84 bytes a snapshot at three horizons) do not: one line, not a traceback."""
    from foxc import train
    from foxc.data import __main__ as data_cli
    from foxc.data import labels

    def no_room(*args, **kwargs):
        raise MemoryError(ALLOC)
    monkeypatch.setattr(labels, "compute_labels", no_room)
    monkeypatch.setattr(data_cli, "compute_labels", no_room)
    need = "600 snapshots take 0.24 MB of records (400 bytes each){} and 0.05 MB of label planes (84 bytes each)"
    assert data_cli.main(["inspect", str(two_days)]) == 2
    assert capsys.readouterr().err == f"foxc.data inspect: error: {ALLOC}\n"  # foxc.cli.run's one line
    assert train.main(["--backend", "reference", "--data", str(two_days), "--out", str(two_days / "run")]) == 2
    err = capsys.readouterr().err
    trained = ("432 snapshots take 0.17 MB of records (400 bytes each) and 0.04 MB of label planes (84 bytes each)"
               )  # the 600 less the held-out tail (60) and the validation rows (108): the rows it labels
    assert err == (f"foxc.train: error: --data {two_days}: out of memory: {trained}"
                   + CACHE_HINT.format(two_days) + "\n")
    assert not (two_days / "run").exists()
    monkeypatch.undo()
    from foxc.trainer import heldout

    monkeypatch.setattr(heldout, "np", NumpyWithout("ascontiguousarray"))  # the held-out cut's copy of the records
    assert train.main(["--backend", "reference", "--data", str(two_days), "--eval-every", "10", "--out",
                       str(two_days / "run")]) == 2
    assert capsys.readouterr().err == (f"foxc.train: error: --data {two_days}: out of memory: "
                                       + need.format(", as much again for the held-out cut's copy,")
                                       + CACHE_HINT.format(two_days) + "\n")


def test_labels_of_synthetic_rows_or_a_fold_larger_than_memory_are_refused_naming_the_remedy(tmp_path, monkeypatch,
                                                                                              capsys):
    """Synthetic rows whose label planes do not fit (foxc.train), or a walk-forward fold's training window
    (foxc/trainer/fold.py): a MemoryError traceback, before (the fold's in its record, the run exiting 1)."""
    from foxc import train, walkforward
    from foxc.data import labels
    from foxc.trainer import fold

    def no_room(*args, **kwargs):
        raise MemoryError(ALLOC)
    monkeypatch.setattr(labels, "compute_labels", no_room)
    monkeypatch.setattr(fold, "compute_labels", no_room)
    need = "{:,} snapshots take {} of records (400 bytes each) and {} of label planes (84 bytes each)"
    assert train.main(["--backend", "reference", "--synthetic-rows", "20000", "--eval-rows", "2000", "--out",
                       str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == ("foxc.train: error: --synthetic-rows 20,000: out of memory: "
                                       + need.format(18_000, "7.20 MB", "1.51 MB") + "; give fewer rows\n")
    assert not (tmp_path / "run").exists()
    out = tmp_path / "wf"
    assert walkforward.main(["--backend", "reference", "--synthetic-rows", "20000", "--folds", "1",
                             "--steps-per-fold", "2", "--no-plots", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "foxc.walkforward: error: --data synthetic: fold 0: labelling its training window: out of memory: "
        + need.format(8_000, "3.20 MB", "0.67 MB") + "; give fewer --synthetic-rows, or more --folds (each fold "
        f"labels its training window whole) (the report of every fold is in {out})\n")
    window = MarketData(generate(300, seed=1), "", 0, "parquet", [], 1)  # real data: from files, or a cache
    assert str(fold.no_room_labelling(window, 3, {"fold": 2, "cache": ""})) == (
        "labelling its training window: out of memory: " + need.format(300, "0.12 MB", "0.03 MB")
        + CACHE_HINT.format("DATA"))
    assert str(fold.no_room_labelling(window, 3, {"fold": 2, "cache": "/data/cache"})).endswith(
        "; give more --folds, or fewer --train-days (each fold labels its training window whole)")


@pytest.mark.parametrize("rows", [0, -1, 2.5, None])
def test_a_chunk_of_no_rows_is_refused_naming_rows(rows, tmp_path):
    """FileStream(path, None, 0) said "no records after the DBN metadata" of a good file (a Parquet file: nothing
    read, "no usable rows"): `rows` is refused before the file is opened."""
    with pytest.raises(ValueError, match=re.escape(f"rows must be a whole number >= 1 (the snapshots a chunk holds "
                                                   f"at most; default 16,384), got {rows!r}")):
        FileStream(FIXTURES / "mbp10.v2.dbn", None, rows)
