"""The LOB simulator on the reference backend: records, hand-made books, invariants, the environment."""
import re
import shutil
import subprocess

import numpy as np
import pytest

from foxc.data.record import PRICE_SCALE, PRICE_UNDEF
from foxc.lobsim import (FLAT_FROM_LONG, FLAT_FROM_SHORT, HOLD, LONG, POSITION_DTYPE, REASON_EPISODE_END,
                         REASON_SIGNAL, REASON_STOP_LOSS, SHORT, TRADE_DTYPE, LobEnv, LobSimConfig, layout)
from foxc.lobsim.books import random_books
from foxc.lobsim.kernels import scaled_cost, tdiv

from lobsim_cases import FEE, HostDrivenSim, book, naive_order, run_random

TICK_X = PRICE_SCALE // 100


def test_records_layout():
    assert layout.POSITION_DTYPE.itemsize == 176 and layout.POSITION_DTYPE.itemsize % 16 == 0
    assert layout.TRADE_DTYPE.itemsize == 64
    assert POSITION_DTYPE.fields["cash"][1] == 0 and POSITION_DTYPE.fields["lots"][1] == 48
    assert layout.header_is_current(), "run python -m foxc.lobsim.layout --write"


@pytest.mark.parametrize("compiler", ["nvcc", "g++"])
def test_c_structs_agree(tmp_path, compiler):
    """The generated header's static_asserts (sizeof and every offsetof) hold under a real compiler."""
    if shutil.which(compiler) is None:
        pytest.skip(f"{compiler} not installed")
    src = tmp_path / ("check.cu" if compiler == "nvcc" else "check.cpp")
    src.write_text('#include "foxc/lobsim.h"\n'
                   'int main() { return sizeof(FoxcPosition) == 176 && sizeof(FoxcTrade) == 64 ? 0 : 1; }\n')
    cmd = [compiler, "-std=c++17", "-I", str(layout.HEADER_PATH.parents[1]), "-o", str(tmp_path / "check"), str(src)]
    if compiler == "nvcc":
        cmd[1:1] = ["-arch=sm_80"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert subprocess.run([str(tmp_path / "check")]).returncode == 0


def test_integer_helpers_match_c(rng):
    a = rng.integers(-10**17, 10**17, 1000)
    b = rng.integers(1, 10**6, 1000)
    want = np.array([int(x / y) if abs(x) < 2**52 else (abs(x) // y) * (1 if x >= 0 else -1) for x, y in zip(a, b)])
    assert np.array_equal(tdiv(a, b), want)
    k = np.minimum(rng.integers(1, 10**6, 1000), b)
    exact = [(abs(c) * kk // h) * (1 if c >= 0 else -1) for c, kk, h in zip(a.tolist(), k.tolist(), b.tolist())]
    assert np.array_equal(scaled_cost(a, k, b), np.array(exact))


def flat_book_snaps(n=10, **kw):
    s = book([(100.00, 5), (99.99, 4), (99.98, 3)], [(100.02, 5), (100.03, 4), (100.04, 3)], **kw)
    out = np.repeat(s, n)
    out["ts_ns"] = np.arange(n) * 1000
    return out


def test_round_trip_on_unchanged_book_loses_spread_plus_fees(ref_rt):
    h = HostDrivenSim(ref_rt, flat_book_snaps(), 2, fee_per_lot=FEE, lots_per_entry=3)
    rewards = []
    for t, acts in enumerate([[LONG, SHORT], [FLAT_FROM_LONG, FLAT_FROM_SHORT], [HOLD, HOLD]]):
        h.set_cursor([t, t])
        r, d, p = h.step(acts)
        rewards.append(r)
    spread = 2 * TICK_X  # 0.02 per lot
    loss = 3 * spread + 2 * 3 * FEE
    assert np.all(p["lots"] == 0) and np.all(p["cash"] == -loss) and np.all(p["fees_paid"] == 6 * FEE)
    assert np.all(p["realized_pnl"] == -3 * spread) and np.all(p["pnl_sum"] == -loss)
    assert np.all(p["trades"] == 1) and np.all(p["wins"] == 0)
    # rewards: entering costs half the spread plus the fee (marked at mid), leaving the other half plus the fee
    assert np.allclose(np.sum(rewards, axis=0), -loss / PRICE_SCALE, rtol=1e-6)
    assert np.allclose(rewards[0], -(3 * spread // 2 + 3 * FEE) / PRICE_SCALE, rtol=1e-6)
    log0, log1 = h.sim.trades(0), h.sim.trades(1)
    assert log0["side"][0] == 1 and log1["side"][0] == -1
    assert log0["entry_px"][0] == round(100.02 * PRICE_SCALE) and log0["exit_px"][0] == round(100.00 * PRICE_SCALE)
    assert log1["entry_px"][0] == round(100.00 * PRICE_SCALE) and log1["exit_px"][0] == round(100.02 * PRICE_SCALE)
    assert np.all(np.r_[log0["pnl"], log1["pnl"]] == -loss) and np.all(np.r_[log0["fees"], log1["fees"]] == 6 * FEE)
    assert log0["reason"][0] == REASON_SIGNAL and log0["open_ts"][0] == 0 and log0["close_ts"][0] == 1000



def test_partial_fills_never_exceed_displayed_size(ref_rt):
    h = HostDrivenSim(ref_rt, flat_book_snaps(), 1, fee_per_lot=FEE, lots_per_entry=20)
    r, d, p = h.step([LONG])  # 12 lots displayed on the ask side: 5 @ 100.02, 4 @ 100.03, 3 @ 100.04
    notional = 5 * 100_020_000_000 + 4 * 100_030_000_000 + 3 * 100_040_000_000
    assert p["lots"][0] == 12 and p["unfilled_lots"][0] == 8
    assert p["cash"][0] == -notional - 12 * FEE and p["cost"][0] == notional
    assert p["vwap_px"][0] == notional // 12
    h.set_cursor([1])
    r, d, p = h.step([SHORT])  # flip: sells 12 bid lots max, closing the long first
    assert p["lots"][0] == 0 and p["unfilled_lots"][0] == 8 + 20 and p["trades"][0] == 1


def test_stop_loss_flattens_and_is_logged(ref_rt):
    h = HostDrivenSim(ref_rt, flat_book_snaps(), 2, lots_per_entry=2)
    h.step([SHORT, SHORT])
    h.set_cursor([1, 1])
    r, d, p = h.step([SHORT, SHORT], stop=[1, 0])
    assert list(p["lots"]) == [0, -2] and p["last_reason"][0] == REASON_STOP_LOSS
    assert h.sim.trades(0)["reason"][0] == REASON_STOP_LOSS


def test_episode_end_forces_flat_beyond_the_book(ref_rt):
    snaps = flat_book_snaps(4)
    h = HostDrivenSim(ref_rt, snaps, 1, lots_per_entry=10)
    h.step([LONG])  # ask side shows 12: all 10 fill
    h.set_cursor([1])
    thin = snaps.copy()
    r, d, p = h.step([HOLD])
    h.set_cursor([3], [3])
    r, d, p = h.step([LONG])  # the last snapshot: forced flat; bids show 12 so no forcing needed
    assert d[0] == 1 and p["lots"][0] == 0 and p["episodes"][0] == 1 and p["forced_lots"][0] == 0
    assert h.sim.trades(0)["reason"][0] == REASON_EPISODE_END
    # a book thinner than the position: the rest closes at the deepest bid's price, counted
    thin["bid_sz"][:, :3] = [1, 1, 1]
    h2 = HostDrivenSim(ref_rt, thin, 1, lots_per_entry=10)
    h2.step([LONG])
    h2.set_cursor([3], [3])
    r, d, p = h2.step([HOLD])
    assert p["lots"][0] == 0 and p["forced_lots"][0] == 7 and d[0] == 1
    t = h2.sim.trades(0)[0]
    assert t["exit_px"] == (100_000_000_000 + 99_990_000_000 + 8 * 99_980_000_000) // 10


def test_unreasonable_snapshots_skipped_and_counted(ref_rt):
    snaps = flat_book_snaps(5)
    snaps["bid_px"][1, 0] = PRICE_UNDEF  # empty best bid
    snaps["ask_px"][2, 4] = 10**17  # a deep level far out of range
    snaps["bid_px"][3, 0] = snaps["ask_px"][3, 0]  # locked: counted as crossed
    h = HostDrivenSim(ref_rt, snaps, 1, max_price=1000 * PRICE_SCALE)
    for t in range(4):
        h.set_cursor([t])
        h.step([HOLD])
    assert h.sim.skip_range.download()[0] == 2 and h.sim.skip_crossed.download()[0] == 1
    assert h.sim.book()["bid_px"][0, 0] == snaps["bid_px"][0, 0]
    assert h.sim.book_ts.download()[0] == snaps["ts_ns"][0]


def test_atr_ema_follows_mid_moves(ref_rt):
    snaps = flat_book_snaps(4)
    for t, shift in enumerate([0, 2, 2, 6]):  # mid moves 0.02, 0, 0.04 between snapshots
        for side in ("bid_px", "ask_px"):
            snaps[side][t, :3] += shift * TICK_X  # the defined levels only
    alpha = np.float32(0.5)
    h = HostDrivenSim(ref_rt, snaps, 1, atr_alpha=float(alpha))
    for t in range(4):
        h.set_cursor([t])
        h.step([HOLD])
    ema = np.float32(0)
    for move in (0.02, 0.0, 0.04):
        ema = ema + alpha * (np.float32(move) - ema)
    assert np.isclose(h.sim.atr_ema.download()[0], ema, rtol=1e-6)


def test_invariants_on_random_books(ref_rt, rng):
    snaps = random_books(3000, rng, bad_frac=0.03, empty_level_frac=0.3, max_size=4)
    h, history = run_random(ref_rt, snaps, 48, 120, rng, int(rng.integers(1 << 30)), fee_per_lot=FEE, lots_per_entry=6)
    for rec in history:
        before, after, bk = rec["before"], rec["after"], rec["book"]
        assert np.all(after["fees_paid"] >= before["fees_paid"]) and np.all(after["fees_paid"] >= 0)
        for b in range(48):
            at_end = rec["cursor"][b] >= rec["end"][b]
            fills, left = naive_order(int(before["lots"][b]), int(rec["acts"][b]), bool(rec["stop"][b]), at_end,
                                      bk["bid_px"][b], bk["bid_sz"][b], bk["ask_px"][b], bk["ask_sz"][b], 6)
            lots_filled = sum(q for q, _ in fills)
            if at_end:  # flat at the episode end, whatever the book showed
                assert after["lots"][b] == 0 and rec["dones"][b] == 1
                continue
            assert rec["dones"][b] == 0
            # never more than displayed: exactly the walk's fills, the rest counted
            assert after["lots"][b] == before["lots"][b] + lots_filled
            assert after["unfilled_lots"][b] - before["unfilled_lots"][b] == left
            # cash + position value conserved up to fees: cash moves by exactly -Σ q·px - fees
            fees = FEE * sum(abs(q) for q, _ in fills)
            assert after["fees_paid"][b] - before["fees_paid"][b] == fees
            assert after["cash"][b] - before["cash"][b] == -sum(q * px for q, px in fills) - fees
        # equity is cash plus the position at the mark; rewards are its change
        dq = (after["equity"] - before["equity"]).astype(np.float64) / PRICE_SCALE
        assert np.allclose(rec["rewards"], dq.astype(np.float32))
        flat = after["lots"] == 0
        assert np.all(after["cost"][flat] == 0)
    last = history[-1]["after"]
    flat = last["lots"] == 0
    # flat: cash is realized PnL net of fees, and the closed trades' net PnL sums to it
    assert np.all(last["cash"][flat] == last["realized_pnl"][flat] - last["fees_paid"][flat])
    assert np.all(last["pnl_sum"][flat] == last["cash"][flat])
    assert np.all(last["wins"] <= last["trades"])


def test_results_do_not_depend_on_neighbours(ref_rt, rng):
    snaps = random_books(2000, rng, bad_frac=0.02)
    seed = int(rng.integers(1 << 30))
    _, small = run_random(ref_rt, snaps, 5, 60, rng, seed, fee_per_lot=FEE, lots_per_entry=3)
    # the same five backtests first, 40 others after them: actions come from the same generator prefix per step
    h = HostDrivenSim(ref_rt, snaps, 45, fee_per_lot=FEE, lots_per_entry=3)
    arng = np.random.default_rng(seed)
    start5 = arng.integers(0, snaps.size - 41, 5)
    start = np.r_[start5, rng.integers(0, snaps.size - 41, 40)]
    cursor, end = start.copy(), start + 39
    h.set_cursor(cursor, end)
    for rec in small:
        acts = np.r_[arng.integers(-1, 6, 5), rng.integers(0, 5, 40)]
        stop = np.r_[(arng.random(5) < 0.05), rng.random(40) < 0.05].astype(np.uint32)
        assert np.array_equal(acts[:5], rec["acts"])
        r, d, p = h.step(acts, stop)
        assert p[:5].tobytes() == rec["after"].tobytes()
        assert np.array_equal(r[:5], rec["rewards"]) and np.array_equal(d[:5], rec["dones"])
        cursor = np.where(d != 0, start, cursor + 1)
        end = np.where(d != 0, start + 39, end)
        h.set_cursor(cursor, end)


def test_env_scripted_policy_and_reset_determinism(ref_rt, rng):
    snaps = random_books(4000, rng, segments=3, bad_frac=0.01)
    def run(seed):
        env = LobEnv(snaps, 32, episode_len=60, rt=ref_rt, fee_per_lot=FEE, lots_per_entry=2)
        obs = env.reset(seed)
        total, done_lots = np.zeros(32), []
        for _ in range(150):
            # a scripted momentum policy: long when the best bid size beats the ask size, short otherwise
            acts = np.where(obs["bid_sz"][:, 0] > obs["ask_sz"][:, 0], LONG, SHORT)
            r, d, info = env.step(acts)
            total += r
            done_lots.extend(info["lots"][d != 0])
            assert np.all(info["cursor"] >= 0)
            obs = env.observation()
        p = env.sim.positions()
        env.close()
        return total, p, done_lots
    t1, p1, done_lots = run(11)
    t2, p2, _ = run(11)
    assert p1.tobytes() == p2.tobytes() and np.array_equal(t1, t2)
    assert done_lots and all(l == 0 for l in done_lots)
    assert np.all(p1["episodes"] >= 2)
    assert np.allclose(t1, p1["equity"] / PRICE_SCALE, rtol=1e-4, atol=1e-4)


def test_env_episodes_stay_inside_segments(ref_rt, rng):
    snaps = random_books(500, rng, segments=5)
    env = LobEnv(snaps, 64, episode_len=30, rt=ref_rt)
    env.reset(3)
    seg = snaps["segment"]
    seg_last = np.r_[np.flatnonzero(seg[1:] != seg[:-1]), seg.size - 1][seg]  # each row's segment's last row
    prev = None
    for _ in range(70):
        cur, end = env.cursors.cursor.download(), env.cursors.episode_end.download()
        assert np.all(seg[cur] == seg[end]) and np.all(end >= cur) and np.all(end - cur < 30)
        if prev is not None:  # a new episode: a start with a row after it, cut at 30 rows or the segment's end
            new = prev[0] >= prev[1]
            assert np.all(cur[new] < seg_last[cur[new]])
            np.testing.assert_array_equal(end[new], np.minimum(cur[new] + 29, seg_last[cur[new]]))
            np.testing.assert_array_equal(cur[~new], prev[0][~new] + 1)
        prev = cur, end
        _, dones, _ = env.step(np.zeros(64, np.int32))
        np.testing.assert_array_equal(dones != 0, cur >= end)
    env.close()


def test_graph_equals_eager_on_reference(ref_rt, rng):
    snaps = random_books(1000, rng)
    envs = [LobEnv(snaps, 16, episode_len=25, rt=ref_rt, fee_per_lot=FEE) for _ in range(2)]
    for e in envs:
        e.reset(5)
    acts = rng.integers(0, 5, 16).astype(np.int32)
    for e in envs:
        e.sim.actions.upload(acts)
    with ref_rt.capture(name="env") as cap:
        envs[1].launch_step(ref_rt.stream)
    for _ in range(40):
        envs[0].launch_step(ref_rt.stream)
        cap.graph.launch(ref_rt.stream)
    assert envs[0].sim.positions().tobytes() == envs[1].sim.positions().tobytes()


def test_raw_ptrs_table(ref_rt, rng):
    env = LobEnv(random_books(100, rng), 8, rt=ref_rt)
    t = env.sim.ptrs
    assert t.pos.addr == env.sim.pos.ptr.addr and t.snapshots.addr == env.snapshots.ptr.addr and t.n_backtests == 8
    assert t.pos_bytes == POSITION_DTYPE.itemsize and t.trade_log_cap == 64
    # every simulator plan takes its pointers from the table
    addrs = {v.addr for v in vars(t).values() if hasattr(v, "addr")}
    for plan in env.sim.plans:
        assert {v.addr for v in plan.values if hasattr(v, "addr")} <= addrs


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="fee_per_lot"):
        LobSimConfig(n_backtests=4, fee_per_lot=-1)
    with pytest.raises(ValueError, match="lots_per_entry"):
        LobSimConfig(n_backtests=4, lots_per_entry=0)


@pytest.mark.parametrize("settings, message", [
    ({"reward_scale": float("nan")}, "reward_scale must be a number from 1.2e-38 to 3.4e+38"),
    ({"reward_scale": float("inf")}, "reward_scale must be"),
    ({"reward_scale": -1e-9}, "reward_scale must be"),
    ({"reward_scale": 0.0}, "reward_scale must be"),
    ({"reward_scale": 1e-50}, "reward_scale must be"),  # float32 holds it as 0: no reward at all
    ({"reward_scale": 1e39}, "reward_scale must be"),  # float32 holds it as inf
    ({"reward_scale": "1e-9"}, "reward_scale must be"),
    ({"atr_alpha": float("nan")}, "atr_alpha must be a number from 1.2e-38 to 1 "),
    ({"atr_alpha": 5.0}, "atr_alpha must be"),
    ({"atr_alpha": 0}, "atr_alpha must be"),
    ({"atr_alpha": -0.05}, "atr_alpha must be"),
    ({"atr_alpha": float("-inf")}, "atr_alpha must be"),
    ({"atr_alpha": 10**400}, "atr_alpha must be"),
    ({"atr_alpha": True}, "atr_alpha must be"),
    ({"atr_alpha": None}, "atr_alpha must be"),
    ({"fee_per_lot": 10**30}, "fee_per_lot must be 0 to max_price"),
    ({"fee_per_lot": 101 * PRICE_SCALE, "max_price": 100 * PRICE_SCALE}, "fee_per_lot must be 0 to max_price"),
])
def test_float_settings_outside_their_range_are_refused_naming_them(ref_rt, rng, settings, message):
    """reward_scale=nan or atr_alpha=5 were accepted: the rewards ran NaN, the ATR diverged (a value float32 holds
    as 0 or inf alike); None or a string failed deep in a kernel's argument packing, a fee past int64 with an
    OverflowError in an upload: each is a ValueError naming the setting and value, before any allocation."""
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        LobSimConfig(n_backtests=4, **settings)
    assert repr(next(iter(settings.values())))[:20] in str(info.value)
    with pytest.raises(ValueError, match=re.escape(message)):
        LobEnv(random_books(50, rng), 4, rt=ref_rt, **settings)
    c = LobSimConfig(n_backtests=4, atr_alpha=1, reward_scale=np.float32(1e-7), fee_per_lot=10 * PRICE_SCALE,
                     max_price=10 * PRICE_SCALE)
    assert type(c.atr_alpha) is float and c.atr_alpha == 1.0 and c.reward_scale == float(np.float32(1e-7))


def test_env_refuses_an_episode_len_past_int64(ref_rt, rng):
    """episode_len=2**63 failed in the cursors' kernel arguments ("parameter 4 ... out of range")."""
    with pytest.raises(ValueError, match="episode_len must be a whole number 0 to 2\\^63 - 1, got 9223372036854775808"):
        LobEnv(random_books(50, rng), 4, episode_len=2**63, rt=ref_rt)


def test_trade_record_dtype_fields():
    assert TRADE_DTYPE.names[:6] == ("open_ts", "close_ts", "entry_px", "exit_px", "pnl", "fees")


def test_bench_runs_on_reference(tmp_path, capsys):
    from foxc.bench import lobsim as bench
    out = tmp_path / "lobsim.json"
    assert bench.main(["--backend", "reference", "--n-backtests", "64", "--steps", "3", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.strip().splitlines()[-1].startswith("summary:") and out.is_file()


@pytest.mark.parametrize("actions, message", [
    (np.full(8, 7), "got 7 at backtest 0"),
    (np.array([0, 1, 2, 3, 4, -1, 0, 0]), "got -1 at backtest 5"),
    (np.full(8, 1.9), "whole numbers"),
    (np.full(8, np.nan), "whole numbers"),
    (np.full(8, 2**32 + 1), "at backtest 0"),
    (np.array(["1"] * 8), "dtype <U1"),
])
def test_env_step_refuses_actions_outside_its_five(ref_rt, rng, actions, message):
    """An action that is none of HOLD..FLAT_FROM_SHORT was a silent HOLD (7, -1, a wrapped 2**32 + 1 became
    LONG, 1.9 became LONG, "1" was parsed): refused naming the value and backtest, the state untouched."""
    env = LobEnv(random_books(200, rng), 8, episode_len=20, rt=ref_rt)
    env.reset(3)
    before = env.sim.positions().tobytes(), env.cursors.cursor.download().tobytes()
    with pytest.raises(ValueError, match="actions") as info:
        env.step(actions)
    assert message in str(info.value)
    assert (env.sim.positions().tobytes(), env.cursors.cursor.download().tobytes()) == before
    rewards, dones, _ = env.step(np.array([LONG, SHORT, HOLD, FLAT_FROM_LONG, FLAT_FROM_SHORT, 1.0, 2.0, 0],
                                          np.float64))  # whole numbers of any dtype, as before
    assert rewards.shape == (8,)


SHAPE = r"stop_loss must have shape \(8,\)"


@pytest.mark.parametrize("stop_loss, message", [
    ([1, 1, 1], SHAPE), (np.ones((2, 4), bool), SHAPE), (True, SHAPE), (np.ones(9, bool), SHAPE),
    (np.array([np.nan] + [0.0] * 7), "stop_loss must be .*got nan at backtest 0"),
    (np.array(["x"] * 8), "stop_loss must be .*dtype <U1"),
    (np.full(8, None), "stop_loss must be .*dtype object"),
])
def test_env_step_refuses_a_stop_loss_mask_that_is_no_mask(ref_rt, rng, stop_loss, message):
    """A mask shorter than B was uploaded as far as it went (the rest kept the last step's flags), a 2-D one
    flattened, a scalar set backtest 0 only; a NaN flag (NaN != 0) or a string forced positions flat without a
    word: refused naming the shape, the value or the dtype, the state untouched; a mask of numbers still works."""
    env = LobEnv(random_books(200, rng), 8, episode_len=20, rt=ref_rt)
    env.reset(3)
    env.step(np.full(8, LONG))
    before = env.sim.positions().tobytes(), env.cursors.cursor.download().tobytes()
    with pytest.raises(ValueError, match=message):
        env.step(np.full(8, LONG), stop_loss=stop_loss)
    assert (env.sim.positions().tobytes(), env.cursors.cursor.download().tobytes()) == before
    _, _, info = env.step(np.full(8, HOLD), stop_loss=np.arange(8) % 2)  # a mask of numbers: nonzero stops
    assert (info["lots"][1::2] == 0).all()


@pytest.mark.parametrize("settings, message", [
    ({"fee_per_lot": 0.005}, "fee_per_lot must be a whole number"),
    ({"lots_per_entry": 1.5}, "lots_per_entry must be a whole number"),
    ({"n_backtests": 4.5}, "n_backtests must be a whole number"),
    ({"n_backtests": "4"}, "n_backtests must be a whole number"),
    ({"fee_per_lot": float("nan")}, "fee_per_lot must be a whole number"),
])
def test_env_refuses_fractional_integer_settings(ref_rt, rng, settings, message):
    """fee_per_lot=0.005 (the price, not its ×1e9 money units) ran with no fee at all; lots_per_entry=1.5 failed
    deep in a kernel's argument packing; n_backtests 4.5 or "4" with an unrelated TypeError: each is a ValueError
    naming the setting. Whole numbers of any type keep working."""
    snaps = random_books(200, rng)
    with pytest.raises(ValueError, match=message):
        LobEnv(snaps, **{"n_backtests": 4, **settings}, rt=ref_rt)
    env = LobEnv(snaps, np.int64(4), rt=ref_rt, fee_per_lot=5e6, lots_per_entry=2.0)
    assert env.sim.config.fee_per_lot == 5_000_000 and env.sim.config.lots_per_entry == 2 and env.n == 4
    env.reset(1)
    for _ in range(4):
        _, _, info = env.step(np.full(4, LONG))
        env.step(np.full(4, SHORT))
    assert (info["fees_paid"] > 0).all()


@pytest.mark.parametrize("seed", [-1, 1.5, None, "7", True])
def test_env_reset_refuses_a_bad_seed_before_touching_the_state(ref_rt, rng, seed):
    """reset(-1) raised from inside the cursors' reset after the accounts were cleared and every cursor set to
    -1 (the next step read snapshot -1: out of bounds on a GPU); 1.5 was cut to 1: a ValueError naming the seed,
    the environment as it was."""
    env = LobEnv(random_books(200, rng), 4, episode_len=20, rt=ref_rt)
    env.reset(3)
    env.step(np.full(4, LONG))
    before = env.sim.positions().tobytes(), env.cursors.cursor.download().tobytes()
    with pytest.raises(ValueError, match="seed must be a non-negative whole number"):
        env.reset(seed)
    assert (env.sim.positions().tobytes(), env.cursors.cursor.download().tobytes()) == before
    assert env.reset(np.int64(5)).shape == (4,) and env.reset(5.0).shape == (4,)


@pytest.mark.parametrize("episode_len", [2.5, None, "20", -1])
def test_env_refuses_an_episode_len_that_is_not_a_whole_number(ref_rt, rng, episode_len):
    """episode_len=2.5 was cut to 2, None or "20" failed with "'<' not supported": a ValueError naming it."""
    with pytest.raises(ValueError, match="episode_len must be"):
        LobEnv(random_books(200, rng), 4, episode_len=episode_len, rt=ref_rt)
    assert LobEnv(random_books(200, rng), 4, episode_len=20.0, rt=ref_rt).episode_len == 20


@pytest.mark.parametrize("snapshots, message", [
    (None, "got NoneType"),
    (np.zeros(10), r"got float64 \(10,\)"),
])
def test_env_names_what_it_got_for_snapshots(ref_rt, snapshots, message):
    """A list or None failed with an AttributeError on .dtype, a float array without saying what it was."""
    with pytest.raises(ValueError, match=f"snapshots must be .*{message}"):
        LobEnv(snapshots, 4, rt=ref_rt)


def test_a_new_env_starts_as_reset_zero_leaves_it(ref_rt, rng):
    """docs/internals/lobsim.md: step works before any reset, from the state reset(0) gives (fresh accounts,
    episodes of seed 0)."""
    snaps = random_books(400, rng, segments=2)
    fresh, reset = LobEnv(snaps, 8, episode_len=30, rt=ref_rt), LobEnv(snaps, 8, episode_len=30, rt=ref_rt)
    reset.step(np.full(8, LONG))
    reset.reset(0)
    assert np.array_equal(fresh.observation(), reset.observation())
    for _ in range(40):
        got, want = fresh.step(np.full(8, LONG)), reset.step(np.full(8, LONG))
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[2]["equity"], want[2]["equity"])
