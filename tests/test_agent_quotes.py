"""The agent with resting orders (--orders passive): its nine actions, the quotes' state features, acting, and a
training run through the simulator's resting orders on the reference backend."""
import math

import numpy as np
import pytest

from agent_cases import act_inputs, quote_state_inputs
from foxc.agent import kernels as K
from foxc.agent.layout import (EXPLORE_QUOTE, N_ACTIONS, N_PASSIVE_ACTIONS, N_POSITION_FEATURES, N_QUOTE_FEATURES,
                               QUOTE_INDEX, SPREAD_CAP_TICKS, TIME_SCALE_STEPS, ACTOR_Q)
from foxc.lobsim.layout import (HOLD, LONG, QUEUE_LIVE, QUEUE_NONE, QUEUE_SENT, QUOTE_ASK, QUOTE_BID, QUOTE_BOTH,
                                QUOTE_CANCEL, QUOTE_JOIN, QUOTE_KEEP, QUOTE_NONE, split_actions)
from kernel_check import poisoned, run_kernel
from test_agent_reference import state_inputs


def test_the_actions_split_into_market_orders_and_quotes():
    market, quotes = split_actions(np.arange(N_PASSIVE_ACTIONS))
    assert market.tolist() == [0, 1, 2, 3, 4, HOLD, HOLD, HOLD, HOLD]
    keep, join, cancel = QUOTE_KEEP, QUOTE_JOIN, QUOTE_CANCEL
    assert quotes[0].tolist() == [keep] * 5 + [join, cancel, join, cancel]  # the bid
    assert quotes[1].tolist() == [keep] * 5 + [cancel, join, join, cancel]  # the ask
    assert (QUOTE_BID, QUOTE_ASK, QUOTE_BOTH, QUOTE_NONE) == (5, 6, 7, 8)


def test_quote_state_matches_its_definition(ref_rt, rng):
    """agent_state_quotes' features, per backtest and side, as its comment defines them."""
    B, D, W, tick = 400, 16, 4, 250_000_000
    h, pos, features, steps, prev = state_inputs(rng, B, D, W)
    snaps, cursor, q_px, q_state, q_front, q_since, quote_since, quote_steps = quote_state_inputs(rng, B, tick)
    width = D + N_POSITION_FEATURES + N_QUOTE_FEATURES
    out = run_kernel(ref_rt, K.AGENT_STATE_QUOTES, B, 128, [
        h, pos.view(np.uint8), features, steps.copy(), prev.copy(), poisoned((B, width)), poisoned(B, np.int32),
        poisoned(B), tick, 1e-9, D, W, B, snaps.view(np.uint8), cursor, q_px, q_state, q_front, q_since,
        quote_since.copy(), quote_steps.copy()])
    state, seen, counted = out[5], out[14], out[15]
    plain = run_kernel(ref_rt, K.AGENT_STATE, B, 128, [
        h, pos.view(np.uint8), features, steps.copy(), prev.copy(), poisoned((B, D + N_POSITION_FEATURES)),
        poisoned(B, np.int32), poisoned(B), tick, 1e-9, D, W, B])[5]
    assert np.array_equal(state[:, :D + N_POSITION_FEATURES], plain), "h and the position's features as agent_state's"
    kinds = {QUEUE_NONE: 0, QUEUE_SENT: 0, QUEUE_LIVE: 0}
    for b in range(B):
        s = snaps[cursor[b]]
        for side, name in enumerate(("bid", "ask")):
            kinds[int(q_state[side, b])] += 1
            got = [state[b, D + QUOTE_INDEX[f"{name}_{f}"]] for f in ("live", "queue", "behind", "age")]
            if q_state[side, b] == QUEUE_NONE:
                assert got == [0, 0, 0, 0] and counted[side, b] == 0 and seen[side, b] == 0
                continue
            n = quote_steps[side, b] + 1 if quote_steps[side, b] > 0 and quote_since[side, b] == q_since[side, b] else 1
            assert counted[side, b] == n and seen[side, b] == q_since[side, b]
            prices, sizes = s[f"{name}_px"], s[f"{name}_sz"]
            shown = int(sizes[list(prices).index(q_px[side, b])]) if q_px[side, b] in prices else 0
            live = q_state[side, b] == QUEUE_LIVE
            touch = int(prices[0])
            gap = 0 if touch == np.iinfo(np.int64).max else (touch - q_px[side, b]) * (1 if side == 0 else -1) / tick
            want = [1.0 if live else 0.5, min(q_front[side, b] / max(shown, 1), 1.0) if live else 1.0,
                    min(max(gap, 0.0), SPREAD_CAP_TICKS), math.tanh(n / TIME_SCALE_STEPS)]
            assert np.allclose(got, want, rtol=1e-6, atol=1e-7), (b, side, got, want)
    assert min(kinds.values()) > 50, "the case has orders of every kind"


def test_acting_with_quotes(ref_rt, rng):
    """agent_act_quotes: quote actions are always valid and picked when best; an exploration segment that starts
    on one repeats it; the simulator gets split_actions of what was chosen (the stop-loss's exit included); the
    first five of nine q values act as agent_act's do when the quotes are worse."""
    B = 4000
    q, logits, state, explore, lots, drawdown, isv = act_inputs(rng, B, N_PASSIVE_ACTIONS)

    def act(q, explore, greedy, kernel=K.AGENT_ACT_QUOTES, A=N_PASSIVE_ACTIONS):
        args = [q, logits[:, :A].copy(), state.copy(), explore.copy(), lots, drawdown, isv, poisoned(B, np.int32),
                poisoned(B), poisoned((B, A)), poisoned(B, np.uint32), poisoned(B, np.uint32), ACTOR_Q, greedy, B]
        if A > N_ACTIONS:
            args += [poisoned(B, np.int32), poisoned((2, B), np.int32)]
        return run_kernel(ref_rt, kernel, K.per_backtest_grid(B), K.BLOCK, args)

    out = act(q, explore, 0)
    actions, new_explore, market, quotes = out[7], out[3], out[12], out[13]
    want_market, want_quotes = split_actions(actions)
    assert np.array_equal(market, want_market) and np.array_equal(quotes, want_quotes)
    going = (explore >= EXPLORE_QUOTE) & (new_explore == explore) & (out[11] == 0)  # not stopped out
    assert going.sum() > 100 and np.array_equal(actions[going], explore[going] - EXPLORE_QUOTE), \
        "a quote segment that goes on repeats its action"
    started = (explore == 0) & (new_explore >= EXPLORE_QUOTE) & (out[11] == 0)
    assert started.sum() > 20 and np.array_equal(new_explore[started] - EXPLORE_QUOTE, actions[started])
    assert (actions >= N_ACTIONS).sum() > 300

    best_quote = q.copy()
    best_quote[:, QUOTE_BOTH] = 100.0  # valid whatever the position
    greedy = act(best_quote, explore, 1)
    stopped = greedy[11] != 0
    assert stopped.any() and (greedy[7][stopped] != QUOTE_BOTH).all(), "the stop-loss exits at market"
    assert (greedy[7][~stopped] == QUOTE_BOTH).all() and (greedy[12][~stopped] == HOLD).all()
    assert (greedy[13][:, ~stopped] == QUOTE_JOIN).all()

    worse = q.copy()
    worse[:, N_ACTIONS:] = -100.0
    nine, five = act(worse, explore % EXPLORE_QUOTE, 1), act(q[:, :N_ACTIONS].copy(), explore % EXPLORE_QUOTE, 1,
                                                            K.AGENT_ACT, N_ACTIONS)
    assert np.array_equal(nine[7], five[7]) and np.array_equal(nine[12], five[7])
    assert (nine[13] == QUOTE_KEEP).all() and (five[7] == LONG).any()


def quoting_config(**over):
    from trainer_cases import config
    return config(orders="passive", queue_model="power2", entry_latency_ns=300_000, **over)


def test_a_quoting_run_resumes_bit_identically_and_its_orders_rest(ref_rt, tmp_path):
    """--orders passive on the reference backend: the simulator's resting orders and the agent's quote counters
    are part of the state a checkpoint keeps (a resume ends with the bits of the uninterrupted run), the replay
    stores the agent's nine-way actions, and orders are posted and filled."""
    from trainer_cases import assert_same_state, market, state, trainer
    data = market(20_000)
    cfg = quoting_config(graph="on")
    straight = trainer(ref_rt, cfg, data)
    straight.train(40)
    sim = straight.ts.sim
    assert sim.q_posts.download().sum() > 20 and sim.q_fill_lots.download().sum() > 0
    from foxc.replay.layout import TR_ACTION
    stored = straight.ts.replay.state["store_rows"].download()[:, TR_ACTION]
    assert (stored >= N_ACTIONS).sum() > 20 and (stored < N_ACTIONS).sum() > 5, "the replay holds both kinds"
    first = trainer(ref_rt, cfg, data, tmp_path)
    first.train(17)
    path = first.save()
    resumed = trainer(ref_rt, cfg, data, tmp_path / "b")
    assert resumed.resume(path) == 17
    resumed.train(23)
    assert_same_state(state(straight), state(resumed))
    names = set(state(straight))
    assert {n for n in names if "q_front" in n or "quote_steps" in n}, "the order state is checkpointed"


def test_a_resume_with_other_orders_is_refused(ref_rt, tmp_path):
    from foxc.trainer.run import ResumeError
    from trainer_cases import market, trainer
    data = market(20_000)
    first = trainer(ref_rt, quoting_config(), data, tmp_path)
    first.train(2)
    path = first.save()
    from dataclasses import replace
    other = trainer(ref_rt, replace(quoting_config(), orders="market"), data, tmp_path / "b")
    with pytest.raises(ResumeError, match="orders: 'passive' in the checkpoint, 'market' now"):
        other.resume(path)


def test_a_walk_forward_compares_market_and_resting_orders(tmp_path, capsys):
    """--compare-orders: a walk-forward of each agent in OUT/market and OUT/passive, side by side in OUT/orders.md
    with flat and the yardstick; the quoting agent's folds are evaluated with its resting orders (its untrained final
    weights quote: --val-frac 0), the market agent's with market orders only."""
    from foxc.walkforward import main
    out = tmp_path / "wf"
    code = main(["--synthetic", "maker", "--synthetic-rows", "30000", "--folds", "2", "--steps-per-fold", "12",
                 "--backend", "reference", "--eval-backtests", "8", "--compare-orders", "--no-plots", "--out", str(out),
                 "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64", "--val-frac", "0"])
    assert code in (0, 1)
    import json
    both = json.loads((out / "orders.json").read_text())
    assert [r["fold"] for r in both["folds"]] == [0, 1] and set(both["all_passed"]) == {"market", "passive"}
    for orders, width in (("market", N_ACTIONS), ("passive", N_PASSIVE_ACTIONS)):
        report = json.loads((out / orders / "report.json").read_text())
        assert report["orders"] == orders and f"--orders {orders}" in " ".join(report["train_args"])
        for fold, row in zip(report["folds"], both["folds"]):
            counts = fold["metrics"]["action_counts"]
            assert len(counts) == width and row[orders]["net_pnl"] == fold["metrics"]["net_pnl"] / 1e9
            assert row["yardstick"] is not None
        if orders == "passive":
            assert sum(counts[N_ACTIONS:]) > 0 and report["optimum"] == pytest.approx(0.03415, abs=1e-4)
    md = (out / "orders.md").read_text()
    assert md.count("\n| 0 |") == 1 and md.count("\n| 1 |") == 1 and "resting orders" in md
    assert "orders compared" in capsys.readouterr().out


def test_compare_orders_refusals(tmp_path, capsys):
    from foxc.walkforward import main
    for argv, says in ((["--compare-orders", "--trainer", "baseline"], "--compare-orders: compares the rl agent"),
                       (["--compare-orders", "--orders", "passive"], "--orders passive: --compare-orders runs both")):
        assert main([*argv, "--backend", "reference", "--out", str(tmp_path / "x")]) == 2
        assert says in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_the_evaluate_command_evaluates_a_quoting_agent_with_its_orders(tmp_path, capsys):
    """python -m foxc.evaluate on a checkpoint of --orders passive: the agent acts with its nine actions on a
    simulator with its resting orders, its optimum is the market-making one."""
    import json
    from foxc import train
    from foxc.evaluate import command
    run = tmp_path / "run"
    assert train.main(["--backend", "reference", "--n-backtests", "8", "--seq-len", "4", "--per-capacity", "64",
                       "--n-steps", "12", "--synthetic", "maker", "--synthetic-rows", "5000", "--eval-rows", "1000",
                       "--orders", "passive", "--val-frac", "0", "--out", str(run)]) == 0
    ckpt = next(run.glob("checkpoint-*.foxc"))
    out = tmp_path / "eval.json"
    assert command.main([str(ckpt), "--synthetic", "maker", "--rows", "3000", "--n-backtests", "8", "--backend",
                         "reference", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    agent = next(p for p in record["policies"] if p["role"] == "agent")
    assert len(agent["metrics"]["action_counts"]) == N_PASSIVE_ACTIONS and sum(agent["metrics"]["action_counts"][5:])
    assert record["optimum_ticks_per_snapshot"] == pytest.approx(0.03415, abs=1e-4)


def test_bench_edge_trains_the_market_making_markets_with_resting_orders():
    """bench edge's maker runs train --orders passive against the optimum with quotes; its verdicts: maker a
    fraction of that optimum (flat fails), maker_null quiet and within 3 SE of 0 (a losing quoter fails)."""
    from foxc.bench import edge
    assert set(edge.PASSIVE) == {"maker", "maker_null"} and edge.GOALS["maker"] == 0.7
    quiet = dict(trades_per_2000=0.0, pnl_ticks=0.0, pnl_se=0.0)
    assert edge.verdict("maker_null", {**quiet, "opt_frac": None}) == "pass"
    assert edge.verdict("maker_null", dict(trades_per_2000=80.0, pnl_ticks=-0.02, pnl_se=0.001)) == "fail"
    assert edge.verdict("maker", {**quiet, "opt_frac": 0.0}) == "fail"
    assert edge.verdict("maker", {**quiet, "opt_frac": 0.82}) == "pass"
