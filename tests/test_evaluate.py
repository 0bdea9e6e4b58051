"""Evaluation: a scripted policy on a hand-made 20-snapshot book gives the hand-computed figures."""
import math

import numpy as np
import pytest

from foxc.data.record import LEVELS, PRICE_SCALE, SNAPSHOT_DTYPE
from foxc.driver.reference.runtime import ReferenceRuntime
from foxc.evaluate import EvalConfig, evaluate
from foxc.evaluate import metrics as M
from foxc.lobsim import FLAT_FROM_LONG, HOLD, LONG, SHORT

CENT = PRICE_SCALE // 100
MONEY = CENT // 10          # the figures below are in units of 0.001 (1e6 money units)
DAY0 = 1_704_067_200 * 10**9  # 2024-01-01 00:00 UTC
# best bid per snapshot, in cents above 100.00; the ask is one cent above; 5 lots at each level
BID = [0, 0, 1, 2, 3, 4, 4, 3, 2, 1, 0, 0, -1, -1, 0, 1, 2, 2, 1, 1]
DAY = [0] * 7 + [1] * 7 + [2] * 6
SCRIPT = [HOLD] * 20
SCRIPT[2], SCRIPT[5], SCRIPT[7], SCRIPT[10], SCRIPT[13], SCRIPT[15] = LONG, FLAT_FROM_LONG, SHORT, LONG, FLAT_FROM_LONG, SHORT
FEE = MONEY  # 0.001 per lot per side


class ScriptedPolicy:
    """Plays a fixed action per snapshot index: `script[i]` is the action at records[i]."""

    name = "scripted"
    is_baseline = True

    def __init__(self, script):
        self.script = np.asarray(script, np.int32)

    def __call__(self, ctx):
        return np.where(ctx.active, self.script[ctx.cursor], HOLD).astype(np.int32)


def hand_book() -> np.ndarray:
    rec = np.zeros(20, SNAPSHOT_DTYPE)
    lv = np.arange(LEVELS, dtype=np.int64)
    for t, b in enumerate(BID):
        rec["bid_px"][t] = 100 * PRICE_SCALE + (b - lv) * CENT
        rec["ask_px"][t] = 100 * PRICE_SCALE + (b + 1 + lv) * CENT
        rec["ts_ns"][t] = DAY0 + DAY[t] * M.NS_PER_DAY + 14 * 3600 * 10**9 + t * 10**9  # one second apart
    rec["bid_sz"] = rec["ask_sz"] = 5
    rec["bid_ct"] = rec["ask_ct"] = 1
    rec["prev_ts_ns"] = np.r_[rec["ts_ns"][:1], rec["ts_ns"][:-1]]
    return rec


def test_scripted_policy_on_a_hand_made_book_gives_the_hand_computed_figures():
    ev = evaluate(ScriptedPolicy(SCRIPT), hand_book(), EvalConfig(n_backtests=1, fee_per_lot=FEE),
                  rt=ReferenceRuntime("test"))
    m = ev.metrics
    # trades (entry -> exit, cents): long 2->4 (+2), short 3->1 (+2), long 1->-1 (-2),
    # short 1->2 closed by the episode end at the ask of the last snapshot (-1); fees 2 x 0.001 each
    assert [t for t in ev.trades["pnl"] // MONEY] == [18, 18, -22, -12]
    assert list(ev.trades["fees"] // MONEY) == [2, 2, 2, 2]
    assert list(ev.trades["side"]) == [1, -1, 1, -1]
    assert list(ev.trades["reason"]) == [0, 0, 0, 2]
    assert m["trades"] == 4 and m["wins"] == 2 and m["win_rate"] == 0.5
    assert m["gross_pnl"] == 10 * MONEY and m["fees"] == 8 * MONEY and m["net_pnl"] == 2 * MONEY
    # equity after each snapshot: cash + lots x mid of the next snapshot, net of fees
    assert list(ev.equity // MONEY) == [0, 0, 4, 14, 24, 18, 18, 22, 32, 42, 30, 20, 20, 14, 14, -2, -2, 8, 8, 2]
    assert m["max_drawdown"] == 44 * MONEY            # from 42 (snapshot 9) to -2 (snapshot 15)
    assert m["max_drawdown_frac"] == pytest.approx(44 / 42)
    # per-trade net PnL 18, 18, -22, -12: mean 0.5, sample variance 1275 / 3 = 425
    assert m["sharpe_per_trade"] == pytest.approx(0.5 / math.sqrt(425))
    assert m["trade_t_stat"] == pytest.approx(0.5 / math.sqrt(425) * 2)
    # daily PnL: day 1 ends at 18, day 2 at 14, day 3 at 2 -> 18, -4, -12
    daily = np.array([18.0, -4.0, -12.0])
    assert m["days"] == 3
    assert m["sharpe_per_day"] == pytest.approx(daily.mean() / daily.std(ddof=1))
    assert m["sharpe_annual"] == pytest.approx(daily.mean() / daily.std(ddof=1) * math.sqrt(252))
    # actions: 14 HOLD, 2 LONG, 2 SHORT, 2 FLAT_FROM_LONG
    assert m["steps"] == 20 and m["action_counts"] == [14, 2, 2, 2, 0]
    assert m["hold_frac"] == 0.7
    assert m["action_entropy"] == pytest.approx(-(0.7 * math.log(0.7) + 3 * 0.1 * math.log(0.1)))
    assert m["policy_entropy"] is None
    # held 3 s, 3 s, 3 s, 4 s; open after snapshots 2-4, 7-9, 10-12, 15-18: 13 of 20
    assert m["mean_holding_s"] == pytest.approx(3.25)
    assert m["exposure"] == 0.65 and m["mean_holding_steps"] == 3.25
    assert m["final_equity"] == m["net_pnl"]
    assert ev.sim["forced_lots"] == 0 and ev.sim["unfilled_lots"] == 0


def test_chunks_end_flat_and_cover_every_snapshot_once(rng):
    from foxc.lobsim.books import random_books
    snaps = random_books(300, rng, segments=3)
    script = rng.integers(0, 5, 300)
    ev = evaluate(ScriptedPolicy(script), snaps, EvalConfig(n_backtests=7, fee_per_lot=2 * MONEY),
                  rt=ReferenceRuntime("test"))
    assert (ev.actions == script).all()                       # every snapshot acted on exactly once
    assert ev.chunks[0, 0] == 0 and ev.chunks[-1, 1] == 300 and (ev.chunks[1:, 0] == ev.chunks[:-1, 1]).all()
    seg = snaps["segment"]
    assert all(seg[a] == seg[b - 1] for a, b in ev.chunks)   # no chunk crosses a segment
    m = ev.metrics
    assert m["net_pnl"] == int(ev.trades["pnl"].sum()) == int(ev.equity[-1])
    assert m["gross_pnl"] - m["fees"] == m["net_pnl"]
    assert (np.diff(ev.trades["close_ts"].astype(np.int64)) >= 0).all()  # time order


def test_metric_functions_by_hand():
    assert M.max_drawdown([5, 3, 8, 1, 4]) == 7
    assert M.max_drawdown([-3, -1]) == 3          # the curve starts from 0
    assert M.max_drawdown([1, 2, 3]) == 0
    assert M.sharpe([1.0]) is None and M.sharpe([2.0, 2.0]) is None
    assert M.sharpe([1.0, 3.0]) == pytest.approx(2.0 / math.sqrt(2.0))
    assert M.entropy([1, 1, 0, 0, 0]) == pytest.approx(math.log(2))
    assert M.entropy([0, 0, 0, 0, 0]) == 0.0
    assert M.row_entropies([[0.5, 0.5, 0, 0, 0], [1, 0, 0, 0, 0]]) == pytest.approx([math.log(2), 0.0])
    days, pnl = M.daily_pnl([1, 2, 3], [0, M.NS_PER_DAY - 1, M.NS_PER_DAY])
    assert list(days) == [0, 1] and list(pnl) == [3.0, 3.0]
    assert M.quarter_entropies([0, 0, 1, 1, 0, 1, 0, 1]) == pytest.approx([0.0, 0.0, math.log(2), math.log(2)])
    f = M.trade_figures([], [], [], [])
    assert f["trades"] == 0 and f["win_rate"] is None and f["sharpe_per_trade"] is None


def test_policy_output_is_checked():
    snaps = hand_book()
    with pytest.raises(ValueError, match="integer actions"):
        evaluate(lambda ctx: np.zeros(3, np.int32), snaps, EvalConfig(n_backtests=1), rt=ReferenceRuntime("t"))
    with pytest.raises(ValueError, match="probs"):
        evaluate(lambda ctx: (np.zeros(1, np.int32), np.ones((1, 4))), snaps, EvalConfig(n_backtests=1),
                 rt=ReferenceRuntime("t"))


def test_agent_holds_without_a_whole_window_in_its_segment(ref_rt):
    """A window cut from the middle of the data (segment ids from 2) over three segments: the agent holds
    at each segment's first K - 1 snapshots and acts elsewhere (random weights trade nearly every step)."""
    from foxc.data.features import FEATURES
    from foxc.data.synthetic import synthetic_data
    from foxc.evaluate.agent import AgentPolicy
    from foxc.isv import IsvBus
    from foxc.nn.model import HIDDEN_DIM, Parameters
    data = synthetic_data(1200, seed=3, n_segments=6)
    window = data.records[450:1000]  # segments 2 (from its 50th row), 3, 4
    K = 6
    params = Parameters(ref_rt, FEATURES, HIDDEN_DIM)
    params.init(np.random.default_rng(0))
    bus = IsvBus(ref_rt)
    bus["entry_margin"] = 0.0  # random weights trade at once without the margin
    agent = AgentPolicy(ref_rt, params, bus, seq_len=K)
    ev = evaluate(agent, window, EvalConfig(n_backtests=4), tick=data.tick, rt=ref_rt)
    agent.close()
    seg = window["segment"]
    new_segment = np.flatnonzero(np.r_[False, seg[1:] != seg[:-1]])
    short = np.zeros(len(window), bool)
    for s in new_segment:
        short[s:s + K - 1] = True
    assert len(new_segment) == 2
    assert np.all(ev.actions[short] == HOLD)
    assert np.mean(ev.actions[~short] != HOLD) > 0.5


@pytest.mark.parametrize("n_backtests", [0, -5, 2.5, "4", None, True])
def test_eval_config_refuses_a_chunk_count_that_is_none(n_backtests):
    """EvalConfig(n_backtests=0) or -5 ran one chunk as if asked, 2.5 and "4" failed in range() with a
    TypeError: a ValueError naming the field. Whole numbers of any type keep working."""
    with pytest.raises(ValueError, match=r"n_backtests must be a whole number >= 1, got"):
        EvalConfig(n_backtests=n_backtests)
    assert EvalConfig(n_backtests=np.int64(4)).n_backtests == 4 and EvalConfig(n_backtests=4.0).n_backtests == 4


@pytest.mark.parametrize("records, tick, message", [
    ([1, 2, 3], 1, "got list"),
    (np.zeros(5), 1, r"got float64 \(5,\)"),
    (hand_book(), float("nan"), "tick must be"),
    (hand_book(), None, "tick must be"),
    (hand_book(), 0.5, "tick must be"),
])
def test_evaluate_refuses_records_or_a_tick_that_are_not_one(records, tick, message):
    """A list of records (or a MarketData: its .records are meant) failed with an AttributeError, a NaN or None
    tick with int()'s own error: a ValueError naming the argument and what it got."""
    with pytest.raises(ValueError, match=message):
        evaluate(lambda ctx: np.zeros(len(ctx.cursor), np.int32), records, EvalConfig(n_backtests=1), tick=tick,
                 rt=ReferenceRuntime("t"))


@pytest.mark.parametrize("probs", [np.full((1, 5), np.nan), np.full((1, 5), 3.0), np.array([[2.0, -1, 0, 0, 0]])])
def test_a_policy_distribution_must_be_one(probs):
    """probs of NaN gave a policy entropy of 0, rows summing to 15 an entropy of -16 nats: refused naming the row."""
    with pytest.raises(ValueError, match=r"probs must be .* sum to 1 .* row 0"):
        evaluate(lambda ctx: (np.zeros(1, np.int32), probs), hand_book(), EvalConfig(n_backtests=1),
                 rt=ReferenceRuntime("t"))


def test_agent_policy_refuses_an_evaluation_on_another_runtime(ref_rt):
    """evaluate(agent, ...) without rt= opened a runtime of its own: the agent's kernels read that runtime's
    simulator through pointers of another address space (an IndexError deep in the reference gather; on a GPU
    another context's memory). Refused naming the remedy; with rt= it runs."""
    from foxc.data.features import FEATURES
    from foxc.data.synthetic import synthetic_data
    from foxc.evaluate.agent import AgentPolicy
    from foxc.isv import IsvBus
    from foxc.nn.model import HIDDEN_DIM, Parameters
    data = synthetic_data(300, seed=3)
    params = Parameters(ref_rt, FEATURES, HIDDEN_DIM)
    params.init(np.random.default_rng(0))
    agent = AgentPolicy(ref_rt, params, IsvBus(ref_rt), seq_len=4)
    with pytest.raises(ValueError, match=r"another runtime.*rt="):
        evaluate(agent, data.records, EvalConfig(n_backtests=2, backend="reference"), tick=data.tick)
    ev = evaluate(agent, data.records, EvalConfig(n_backtests=2), tick=data.tick, rt=ref_rt)
    agent.close()
    assert len(ev.actions) == 300


def test_an_evaluator_runs_a_window_as_often_as_wanted():
    """docs/guide/evaluation.md: `Evaluator(records, config, tick=…, rt=…)` from foxc.evaluate builds the window once;
    each run starts from fresh accounts, so two runs of one policy give the same figures."""
    from foxc.evaluate import Evaluator
    with Evaluator(hand_book(), EvalConfig(n_backtests=2, fee_per_lot=FEE), rt=ReferenceRuntime("t")) as ev:
        first, second = ev.run(ScriptedPolicy(SCRIPT)), ev.run(ScriptedPolicy(SCRIPT))
    assert first.metrics == second.metrics and first.metrics["trades"] > 0
