"""The device dataset on the reference backend: gather against a naive loop, cursors, episodes, graphs."""
import subprocess
import sys

import numpy as np
import pytest

from foxc.data import features as F
from foxc.data.device import DeviceDataset, valid_cursors
from foxc.rng import seed_states
from foxc.rng import xorshift32
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


def test_feature_names_cover_the_layout():
    assert len(F.FEATURE_NAMES) == F.FEATURES


def test_gather_matches_naive_loop(ref_rt, rng):
    B, K = 12, 6
    data, labels, ds = make(ref_rt, B=B, K=K, seed=int(rng.integers(1 << 30)))
    ds.gather()
    cursors = ds.cursors.download()
    feats, lab = ds.features.download(), ds.labels_out.download()
    rec = data.records
    for b in range(B):
        c = int(cursors[b])
        window = rec[c - K + 1:c + 1]
        assert len(set(window["segment"])) == 1  # never across a segment
        for k in range(K):
            np.testing.assert_allclose(feats[k, b], naive_feature_row(window[k], data.tick, window[-1]),
                                       rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(lab[:, b, :], labels[:, :, c])


def test_cursor_draws_follow_xorshift(ref_rt):
    data, labels, ds = make(ref_rt, B=32, K=8, seed=5)
    ds.gather()
    states = xorshift32(seed_states(5, 32, "data"))
    valid = valid_cursors(data, 8)
    np.testing.assert_array_equal(ds.cursors.download(), valid[states % np.uint32(len(valid))])
    np.testing.assert_array_equal(ds.rng.download(), states)


def test_valid_cursors_leave_a_window_and_a_step():
    data = synthetic_data(100, seed=1, n_segments=4)
    v = valid_cursors(data, 5)
    starts, ends = data.segment_bounds()
    assert len(v) == 4 * (25 - 4 - 1)
    seg = data.records["segment"][v]
    assert np.all(v - starts[seg] >= 4) and np.all(v + 1 < ends[seg])


def test_episodes_run_to_segment_end_and_redraw(ref_rt):
    data, labels, ds = make(ref_rt, n=400, segments=4, B=8, K=4, seed=2)
    _, ends = data.segment_bounds()
    prev = None
    for step in range(150):
        ds.gather()
        cur, last = ds.cursors.download(), ds.last.download()
        seg = data.records["segment"][cur]
        np.testing.assert_array_equal(last, (cur + 1 >= ends[seg]).astype(np.int32))
        if prev is not None:
            pc, pl = prev
            moved = pl == 0
            np.testing.assert_array_equal(cur[moved], pc[moved] + 1)  # advanced by one
        ds.advance()
        np.testing.assert_array_equal(ds.done.download(), last)
        prev = (cur, last)


def test_max_episode_steps(ref_rt):
    data, labels, ds = make(ref_rt, n=4000, segments=1, B=4, K=4, seed=3, max_steps=5)
    lasts = []
    for _ in range(10):
        ds.gather()
        lasts.append(ds.last.download().copy())
        ds.advance()
    lasts = np.array(lasts)
    assert np.all(lasts[4] == 1) and np.all(lasts[9] == 1) and lasts[:4].sum() == 0


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
    with pytest.raises(ValueError, match="window"):
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
    assert bench.main(["--backend", "reference", "--rows", "20000", "--backtests", "8", "--window", "8",
                       "--launches", "2"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("summary:")
