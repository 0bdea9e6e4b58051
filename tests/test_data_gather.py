"""The device dataset on the reference backend: gather against a naive loop, episodes, graphs."""
import subprocess
import sys

import numpy as np
import pytest

from foxc.data import features as F, gather
from foxc.data.device import DeviceDataset
from foxc.data.labels import LabelConfig, compute_labels
from foxc.data.record import PRICE_UNDEF
from foxc.data.synthetic import synthetic_data


def naive_feature_row(s, tick, newest):
    """One snapshot's features by the definitions in data.h, element by element."""
    row = np.zeros(F.FEATURES)
    b0, a0 = int(s["bid_px"][0]), int(s["ask_px"][0])
    mid = (b0 + a0) / 2
    for l in range(10):
        for base, px in ((F.F_BID_PX, int(s["bid_px"][l])), (F.F_ASK_PX, int(s["ask_px"][l]))):
            row[base + l] = 0.0 if px == PRICE_UNDEF else (px - mid) / tick
        row[F.F_BID_SZ + l] = np.log1p(float(s["bid_sz"][l]))
        row[F.F_ASK_SZ + l] = np.log1p(float(s["ask_sz"][l]))
    row[F.F_SPREAD] = (a0 - b0) / tick
    bs, as_ = float(s["bid_sz"][0]), float(s["ask_sz"][0])
    row[F.F_IMBALANCE] = (bs - as_) / (bs + as_) if bs + as_ else 0.0
    bd, ad = float(s["bid_sz"].sum()), float(s["ask_sz"].sum())
    row[F.F_DEPTH_IMB] = (bd - ad) / (bd + ad) if bd + ad else 0.0
    row[F.F_MID_REL] = (mid - (int(newest["bid_px"][0]) + int(newest["ask_px"][0])) / 2) / tick
    row[F.F_LOG_DT] = np.log1p(max(int(s["ts_ns"]) - int(s["prev_ts_ns"]), 0) / 1000)
    row[F.F_LOG_TRADES] = np.log1p(float(s["trade_count"]))
    return row


def make(rt, n=3000, segments=3, B=16, K=8, seed=1, max_steps=0):
    data = synthetic_data(n, seed=seed, n_segments=segments)
    data.records["bid_px"][::13, 7:] = PRICE_UNDEF  # some thin books
    data.records["bid_sz"][::13, 7:] = 0
    labels = compute_labels(data.records, data.tick, LabelConfig((1, 4, 9)))
    return data, labels, DeviceDataset(rt, data, labels, B, K, seed=seed, max_episode_steps=max_steps)


def naive_window(rec, c, K):
    """The K rows ending at c, each before the segment's first row replaced by that first row."""
    first = int(np.flatnonzero(rec["segment"] == rec["segment"][c])[0])
    return rec[[max(c - K + 1 + k, first) for k in range(K)]]


def assert_gathered(ds, data, labels, cursors, K):
    feats, lab = ds.features.download(), ds.labels_out.download()
    for b, c in enumerate(cursors):
        window = naive_window(data.records, int(c), K)
        assert len(set(window["segment"])) == 1  # never across a segment
        for k in range(K):
            np.testing.assert_allclose(feats[k, b], naive_feature_row(window[k], data.tick, window[-1]),
                                       rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(lab[:, b, :], labels[:, :, c])


def test_gather_matches_naive_loop(ref_rt, rng):
    B, K = 12, 6
    data, labels, ds = make(ref_rt, B=B, K=K, seed=int(rng.integers(1 << 30)))
    ds.gather()
    cursors = ds.cursor.download()
    starts, _ = data.segment_bounds()
    assert np.all(cursors - starts[data.records["segment"][cursors]] >= K - 1)  # drawn with a whole window
    assert_gathered(ds, data, labels, cursors, K)


def test_gather_at_any_cursor_repeats_the_segments_first_snapshot(ref_rt, rng):
    """At another component's cursors, the first K - 1 rows of a segment included: the window is padded
    with the segment's first snapshot, never read from the segment before."""
    K = 7
    data = synthetic_data(600, seed=int(rng.integers(1 << 30)), n_segments=3)
    labels = compute_labels(data.records, data.tick, LabelConfig((1, 4, 9)))
    starts, ends = data.segment_bounds()
    cursors = np.r_[starts, starts + 1, starts + K - 2, starts + K - 1, ends[:-1] - 1, 0, 599, 250].astype(np.int64)
    B = len(cursors)
    cursor = ref_rt.device_array(B, np.int64, "cursor")
    cursor.upload(cursors)
    with DeviceDataset(ref_rt, data, labels, B, K, cursor=cursor) as ds:
        assert ds.cursors is None
        ds.gather()
        assert_gathered(ds, data, labels, cursors, K)
        with pytest.raises(RuntimeError, match="another component's cursors"):
            ds.advance()


def test_episodes_run_to_segment_end_and_redraw(ref_rt):
    data, labels, ds = make(ref_rt, n=400, segments=4, B=8, K=4, seed=2)
    starts, ends = data.segment_bounds()
    seg = data.records["segment"]
    ended = np.zeros(8, bool)
    for step in range(150):
        cur, end = ds.cursor.download(), ds.cursors.episode_end.download()
        np.testing.assert_array_equal(end, ends[seg[cur]] - 1)  # no step limit: the segment's last row
        ds.advance()
        nxt = ds.cursor.download()
        going = cur < end
        np.testing.assert_array_equal(nxt[going], cur[going] + 1)  # advanced by one
        drawn = nxt[~going]
        assert np.all(drawn - starts[seg[drawn]] >= 3) and np.all(drawn + 1 < ends[seg[drawn]])
        ended |= ~going
    assert ended.all()


def test_max_episode_steps(ref_rt):
    data, labels, ds = make(ref_rt, n=4000, segments=1, B=4, K=4, seed=3, max_steps=5)
    lasts = []
    for _ in range(10):
        lasts.append(ds.cursor.download() >= ds.cursors.episode_end.download())
        ds.advance()
    lasts = np.array(lasts)
    assert np.all(lasts[4]) and np.all(lasts[9]) and not lasts[:4].any() and not lasts[5:9].any()


def test_graph_replay_equals_eager(ref_rt):
    _, _, eager = make(ref_rt, seed=4)
    for _ in range(20):
        eager.gather(); eager.advance()
    _, _, graphed = make(ref_rt, seed=4)
    with ref_rt.capture(name="data") as cap:
        graphed.gather(); graphed.advance()
    for _ in range(20):
        cap.graph.launch(ref_rt.stream)
    for a, b in zip(eager.buffers(), graphed.buffers()):
        assert a.download().tobytes() == b.download().tobytes(), a.name


def test_bad_arguments(ref_rt):
    data = synthetic_data(50, seed=1)
    labels = compute_labels(data.records, data.tick)
    with pytest.raises(ValueError, match="seq_len K must be in 1"):
        DeviceDataset(ref_rt, data, labels, 4, F.GATHER_MAX_K + 1)
    with pytest.raises(ValueError, match="no segment holds"):
        DeviceDataset(ref_rt, data, labels, 4, 50)


def test_data_cli(tmp_path):
    from foxc.data.__main__ import main
    out = tmp_path / "s.parquet"
    assert main(["synth", "--out", str(out), "--rows", "3000", "--seed", "2"]) == 0
    assert main(["inspect", str(out), "--run-dir", str(tmp_path / "run")]) == 0
    assert (tmp_path / "run" / "data_validation.json").is_file()
    (tmp_path / "bad.parquet").write_text("nope")
    done = subprocess.run([sys.executable, "-m", "foxc.data", "inspect", str(tmp_path / "bad.parquet")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"foxc.data inspect: error: {tmp_path / 'bad.parquet'}: not a Parquet file")


def test_bench_runs_small_on_reference(capsys):
    from foxc.bench import data as bench
    assert bench.main(["--backend", "reference", "--rows", "20000", "--n-backtests", "8", "--seq-len", "8",
                       "--launches", "2"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("summary:")


def test_windows_that_slide_are_moved_and_equal_windows_formed_whole(ref_rt):
    """Most steps slide every window by one (the held rows move down); each step's features equal the windows
    formed from scratch, through episode ends and redraws."""
    data, labels, ds = make(ref_rt, n=600, segments=3, B=16, K=8, seed=5, max_steps=9)
    slid = 0
    for _ in range(40):
        held = ds.held.download()
        ds.gather()
        c = ds.cursor.download()
        slid += int((held == c - 1).sum())
        rows = gather.window_rows(data.records, ds.segment_first.download(), c, 8)
        want = F.window_features(data.records, rows, data.tick).transpose(1, 0, 2)
        assert ds.features.download().tobytes() == want.tobytes()
        assert (ds.held.download() == c).all()
        ds.advance()
    assert slid > 16 * 40 // 2, "most windows slide"


def test_rows_rewritten_under_held_windows_are_forgotten(ref_rt):
    """A window held over rows that changed would be moved stale: `forget` makes the next gather form it whole
    (and without it the moved rows are the old ones, so the check can fail)."""
    data, labels, ds = make(ref_rt, n=600, segments=1, B=4, K=5, seed=6)
    ds.gather()
    ds.advance()
    changed = data.records.copy()
    changed["bid_sz"] += 7
    ds.records.upload(changed)
    c = ds.cursor.download()
    want = F.window_features(changed, gather.window_rows(changed, ds.segment_first.download(), c, 5),
                             data.tick).transpose(1, 0, 2)
    ds.gather()
    assert ds.features.download().tobytes() != want.tobytes()  # moved stale
    ds.held.upload(c - 1)  # held again as before that gather: it would slide, moving stale rows
    ds.forget()
    ds.gather()
    assert ds.features.download().tobytes() == want.tobytes()
