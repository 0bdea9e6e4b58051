"""The run's policy is chosen on validation rows it did not train on: the best validated weights, or flat; the choice
is carried by checkpoints, resumed exactly, and used by every evaluation of the run."""
import numpy as np
import pytest

from foxc.checkpoint import read_checkpoint
from foxc.data.market import spread_unit_ticks
from foxc.data.markets import MARKETS, market as named
from foxc.data.record import PRICE_UNDEF
from foxc.data.synthetic import generate
from foxc.evaluate.agent import AgentPolicy, FlatPolicy
from foxc.evaluate.selection import VAL_Z, validates_at
from foxc.trainer.config import TrainConfig
from foxc.trainer.heldout import validation_split
from foxc.trainer.session import run_data
from trainer_cases import assert_same_state, config, market, state, trainer

DATA = market(20_000)


def metric(pnl, se, trades=10):
    return {"val_pnl_ticks": pnl, "val_se": se, "val_trades": trades}


def test_the_best_validation_above_two_standard_errors_is_kept(ref_rt):
    t = trainer(ref_rt, config(), DATA)
    kept, params = t.ts.kept, t.ts.learner.params
    theta = params.theta.download()

    def weights(value):
        params.theta.upload(np.full_like(theta, value))

    weights(1.0)
    assert not kept.consider(10, metric(0.019, 0.01))  # below VAL_Z standard errors
    weights(2.0)
    assert kept.consider(20, metric(0.05, 0.01))
    weights(3.0)
    assert not kept.consider(30, metric(0.04, 0.001))  # sure, but not better
    weights(4.0)
    assert not kept.consider(40, metric(0.09, None))  # no standard error (one piece): never sure
    r = kept.read()
    assert (r["step"], r["val_pnl_ticks"], r["val_se"], r["validations"]) == (20, 0.05, 0.01, 4)
    assert (kept.theta.download() == 2.0).all()  # the weights of the step it kept
    assert np.array_equal(kept.isv.download(), t.ts.isv.values)
    policy = kept.policy(4, "q", "f32")
    assert isinstance(policy, AgentPolicy) and "kept at step 20" in policy.name
    policy.release()
    t.close()


def test_flat_when_no_validation_beats_flat(ref_rt, tmp_path):
    t = trainer(ref_rt, config(), DATA, tmp_path)
    assert t.ts.kept.policy(4, "q", "f32") is None  # nothing validated: the live weights
    for step, (pnl, se) in enumerate([(-0.02, 0.01), (0.0, 0.0), (0.015, 0.01)]):
        assert not t.ts.kept.consider(step, metric(pnl, se))
    assert isinstance(t.ts.kept.policy(4, "q", "f32"), FlatPolicy)
    assert t.selection()["kept"] == "flat" and t.selection()["validations"] == 3
    path = t.save()
    assert isinstance(AgentPolicy.from_checkpoint(ref_rt, read_checkpoint(path)), FlatPolicy)
    t.close()


def test_a_checkpoint_acts_with_the_kept_weights(ref_rt, tmp_path):
    t = trainer(ref_rt, config(), DATA, tmp_path)
    t.train(4)
    t.ts.kept.consider(4, metric(0.05, 0.01))
    kept = t.ts.learner.params.theta.download()
    t.train(4)  # the live weights move on
    assert not np.array_equal(t.ts.learner.params.theta.download(), kept)
    policy = AgentPolicy.from_checkpoint(ref_rt, read_checkpoint(t.save()))
    assert "kept at step 4" in policy.name
    assert np.array_equal(policy.params.theta.download(), kept)
    policy.release()
    t.close()


@pytest.mark.slow  # 5-8 s on two cores: in CI's slow pass
def test_the_selection_resumes_exactly(ref_rt, tmp_path):
    """Validations every 3 steps (the entry margin 0, so the greedy agent trades and its PnL varies): 12 steps
    straight and 6 + 6 through a checkpoint keep the same weights with the same record."""
    m, labels = DATA
    cfg = config(graph="on", val_every=3, isv=(("entry_margin", 0.0),))
    train, val = validation_split(cfg, m)
    from foxc.data.labels import LabelConfig, compute_labels
    labels = compute_labels(train.records, train.tick, LabelConfig())
    from foxc.trainer.run import Trainer

    def make(out=None):
        return Trainer(ref_rt, cfg, train, labels, out, val=val)
    straight = make()
    straight.train(12)
    first = make(tmp_path)
    first.train(6)
    path = first.save()
    resumed = make(tmp_path / "b")
    assert resumed.resume(path) == 6
    resumed.train(6)
    assert_same_state(state(straight), state(resumed))
    assert straight.ts.kept.read() == resumed.ts.kept.read()
    assert straight.ts.kept.read()["validations"] == 4
    for t in (straight, first, resumed):
        t.close()


def test_the_run_is_evaluated_with_its_policy(ref_rt):
    """The final held-out evaluation is the run's policy's; the trainer's summary says which it is."""
    cfg = TrainConfig.for_backend("reference", n_steps=20, n_backtests=8, seq_len=4, per_capacity=64,
                                  synthetic_rows=20_000, eval_rows=2_000, log_every=5, checkpoint_every=0, val_every=0)
    data = run_data(cfg)
    assert data.val is not None and data.val.n_rows == 2_000  # at most --eval-rows
    from foxc.trainer.run import Trainer
    t = Trainer(ref_rt, cfg, data.market, data.labels, held=data.held, optimum=data.optimum, val=data.val)
    summary = t.train(cfg.n_steps)
    sel, ev = summary["selection"], summary["evaluation"]
    assert sel["validations"] == 2 and sel["val_rows"] == 2_000  # at steps 10 and 20
    assert ev["eval_policy"] == ("flat: never trades" if sel["kept"] == "flat" else
                                 f"rl: foxc agent (greedy), kept at step {sel['kept']}")
    if sel["kept"] == "flat":
        assert ev["eval_trades"] == 0 and ev["eval_pnl"] == 0.0
    else:
        assert sel["val_pnl_ticks"] > VAL_Z * sel["val_se"]
    t.close()


def test_validation_steps_do_not_depend_on_the_run_length():
    by_default = [s for s in range(1, 2_000_001) if validates_at(s, 0)]
    assert by_default == [10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000,
                          500_000, 1_000_000, 2_000_000]
    assert [s for s in range(1, 40) if validates_at(s, 7)] == [7, 14, 21, 28, 35]


def test_val_frac_zero_keeps_the_final_weights(ref_rt):
    cfg = TrainConfig.for_backend("reference", n_steps=4, n_backtests=8, seq_len=4, per_capacity=64,
                                  synthetic_rows=20_000, eval_rows=2_000, val_frac=0.0, checkpoint_every=0)
    data = run_data(cfg)
    assert data.val is None and data.market.n_rows == 20_000
    from foxc.trainer.run import Trainer
    t = Trainer(ref_rt, cfg, data.market, data.labels, held=data.held, optimum=data.optimum, val=data.val)
    summary = t.train(cfg.n_steps)
    assert summary["selection"] is None and summary["evaluation"]["eval_policy"] == "the live weights"
    t.close()


@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5])
def test_val_frac_out_of_range_is_refused_naming_it(value):
    from foxc.trainer.config import ConfigError
    with pytest.raises(ConfigError, match="--val-frac must be 0 .off. or between 0 and 1"):
        TrainConfig.for_backend("reference", val_frac=value)


# ---- the markets as hard as real ones, and the unit the agent sees them in

def test_spread_unit_is_the_median_spread_in_ticks():
    wide, default = named("wide").params, named("default").params
    assert spread_unit_ticks(generate(20_000, 0, wide), wide.tick_units) in (14, 15, 16)  # of 10..20, drawn evenly
    assert spread_unit_ticks(generate(20_000, 0, default), default.tick_units) == 1
    rec = generate(100, 0, default)
    rec["ask_px"][:, 0] = PRICE_UNDEF  # no touch anywhere: one tick
    assert spread_unit_ticks(rec, default.tick_units) == 1


def test_wide_looks_like_a_stock():
    p = named("wide").params
    rec = generate(200_000, 1, p)
    spread = (rec["ask_px"][:, 0] - rec["bid_px"][:, 0]) // p.tick_units
    mid2 = rec["ask_px"][:, 0] + rec["bid_px"][:, 0]
    assert spread.min() >= 10 and spread.max() <= 20 and abs(spread.mean() - 15) < 0.3
    assert 0.44 < (np.diff(mid2) != 0).mean() < 0.52  # the mid moves on about half of the snapshots


def test_regime_flips_the_signal_by_segment():
    """Each 10,000-row segment has its own β: the level-1 imbalance calls the next bid move with, against, or
    without the sign of the segment's β."""
    p = named("regime").params
    rec = generate(60_000, 2, p)
    assert list(np.unique(rec["segment"])) == list(range(6))
    imb = rec["bid_sz"][:, 0].astype(float) - rec["ask_sz"][:, 0]
    move = np.diff(rec["bid_px"][:, 0].astype(np.int64))
    for s in range(6):
        rows = np.flatnonzero(rec["segment"][:-1] == s)
        agree = np.mean(np.sign(imb[rows])[move[rows] != 0] == np.sign(move[rows])[move[rows] != 0])
        beta = p.beta_cycle[s % 3]
        assert (agree > 0.55) if beta > 0 else (agree < 0.45) if beta < 0 else (abs(agree - 0.5) < 0.03), (s, agree)


@pytest.mark.parametrize("name,rows", [("short", 30_000), ("regime", 60_000), ("default", 200_000)])
def test_a_market_trains_on_its_own_window(name, rows):
    cfg = TrainConfig.for_backend("reference", synthetic=name, n_steps=1, eval_rows=2_000)
    data = run_data(cfg)
    assert data.source["rows"] == rows and data.market.n_rows + data.val.n_rows == rows
    assert data.optimum == pytest.approx({"short": 0.02824, "regime": 0.0, "default": 0.02824}[name], abs=1e-4)
    assert MARKETS[name].window_rows == (None if name == "default" else rows)


def test_synth_writes_any_named_market(tmp_path):
    from foxc.data.__main__ import main
    from foxc.data.source import load
    out = tmp_path / "wide.parquet"
    assert main(["synth", "--market", "wide", "--rows", "5000", "--out", str(out)]) == 0
    rec = load(str(out)).records
    spread = (rec["ask_px"][:, 0] - rec["bid_px"][:, 0]) // named("wide").params.tick_units
    assert spread.min() >= 10 and spread.max() <= 20
    with pytest.raises(SystemExit) as err:
        main(["synth", "--market", "bogus", "--out", str(tmp_path / "x.parquet")])
    assert err.value.code == 2


@pytest.mark.slow
def test_a_day_with_no_edge_is_not_traded(tmp_path, capsys):
    """A stock-like day (wide: no edge a market order can take) as a file: the run's policy makes no losing trades
    on its held-out rows, where the yardstick (which trades on the imbalance) loses; both are on the last line."""
    import json
    from foxc import train
    from foxc.data.__main__ import main
    day = tmp_path / "day.parquet"
    assert main(["synth", "--market", "wide", "--rows", "60000", "--seed", "3", "--out", str(day)]) == 0
    assert train.main(["--backend", "reference", "--data", str(day), "--n-steps", "1000", "--out",
                       str(tmp_path / "run")]) == 0
    e = json.loads((tmp_path / "run" / "summary.json").read_text())["evaluation"]
    assert e["eval_pnl"] >= 0 and e["eval_trades"] * 2000 / e["eval_rows"] <= 1
    assert e["eval_yardstick_pnl"] < 0 and e["eval_yardstick_trades"] > 0
    assert "beside it flat +0.0000 and the logistic-imbalance yardstick -" in capsys.readouterr().out


@pytest.mark.slow
def test_weights_that_go_wrong_after_a_good_validation_are_not_the_runs_policy(ref_rt):
    """A learner that memorises its window gets worse on the rows after it as it trains on: its later weights
    lose where its earlier ones earned. Here the later weights are made to go wrong on purpose (the C51 head's
    weights negated between validations, so the agent trades against the signal it learned): the selection keeps
    the step it validated before, and the run's held-out evaluation earns what those weights earn while the live
    weights lose."""
    from foxc.trainer.run import Trainer
    cfg = TrainConfig.for_backend("reference", synthetic="easy", n_steps=3500, val_every=500, checkpoint_every=0)
    data = run_data(cfg)
    t = Trainer(ref_rt, cfg, data.market, data.labels, held=data.held, optimum=data.optimum, val=data.val)
    t.train(3000)
    good = t.selection()
    assert good["kept"] != "flat", good  # easy's edge is found within 3,000 steps on a CPU (the quick start's run)
    params = t.ts.learner.params
    theta = params.theta.download()
    for name in ("dqn_w", "dqn_b"):
        tensor = params.by_name[name]
        theta[tensor.offset:tensor.offset + tensor.size] *= -1.0
    params.theta.upload(theta)
    live = t.heldout.run()  # the live weights, gone wrong
    assert live["eval_pnl"] < 0 and live["eval_trades"] > 0
    params.theta.upload(theta)  # (the evaluation reads them only)
    summary = t.train(500)
    assert summary["selection"]["kept"] == good["kept"]  # the validation at 3,500 did not beat the kept one
    e = summary["evaluation"]
    assert e["eval_policy"] == f"rl: foxc agent (greedy), kept at step {good['kept']}"
    assert e["eval_pnl"] > 0.5 * data.optimum
    t.close()
