"""The JAX peer (bench/jax_step.py) on the CPU: its gradients, |TD| and losses are foxc's Learner's on the
same weights and inputs, and a couple of tiny jitted steps stay sane. Skipped where jax does not import
(foxc does not depend on it)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")

from kernel_check import rel_error  # noqa: E402
from peer_cases import foxc_learning_pass, load_peer  # noqa: E402


@pytest.fixture(scope="module")
def peer():
    return load_peer("jax_step")


def test_gradients_match_foxc_learner(peer, ref_rt, rng):
    B, K = 8, 4
    ref = foxc_learning_pass(ref_rt, rng, B, K)
    st = peer.Settings(peer.PeerConfig(B=B, K=K, capacity=64))
    theta = {k: np.asarray(v) for k, v in ref.theta.items()}
    target = {k: theta[k].copy() for k in peer.TARGET}  # foxc's target starts as the online copy
    i = ref.inputs
    batch = {"s_t": i["h_t"], "s_tp1": i["h_tp1"], "action": i["action"], "ret": i["ret"], "gamma_n": i["gamma_n"],
             "done": i["done"], "weight": i["weight"]}
    learn = jax.jit(peer.learn_grads, static_argnums=6)  # one compile: faster than op by op
    with jax.default_matmul_precision("highest"):
        grads, h, report, td = learn(theta, target, i["features"], i["labels"], i["mask"], batch, st)
    assert rel_error(np.asarray(h), ref.h) < 1e-5
    assert sorted(grads) == sorted(ref.grads) and len(grads) == 14
    for name, g in grads.items():
        assert rel_error(np.asarray(g), ref.grads[name]) < 1e-4, name
    assert rel_error(np.asarray(td), ref.td) < 1e-4
    assert rel_error(np.asarray(report), ref.losses) < 1e-4


def test_tiny_jitted_steps_are_sane(peer):
    from foxc.data.labels import LabelConfig, compute_labels
    from foxc.data.synthetic import synthetic_data
    market = synthetic_data(3000, seed=0)
    tables = peer.market_tables(market, compute_labels(market.records, market.tick, LabelConfig()))
    mk = peer.device_market(tables, market.tick)
    cfg = peer.PeerConfig(B=8, K=4, capacity=64)
    run = peer.make_runner(peer.Settings(cfg), steps_per_call=cfg.warm_steps() + 2)
    x = peer.init_state(cfg, len(tables["mid"]))
    before = {k: np.asarray(v).copy() for k, v in x["params"].items()}
    x = run(x, mk)
    ok, why = peer.sane(x, cfg, cfg.warm_steps() + 2)
    assert ok, why
    assert int(x["count"]) == cfg.capacity  # the buffer filled
    assert all(not np.array_equal(before[k], np.asarray(v)) for k, v in x["params"].items())
    assert bool((x["priority"] > 0).all()) and bool(np.isfinite(np.asarray(x["frames"])).all())
    side = np.asarray(x["st_s"])[:, peer.SIDE]
    assert set(np.unique(side)) <= {-1.0, 0.0, 1.0}
    bad = dict(x)
    bad["losses"] = x["losses"].at[0].set(np.nan)
    ok, why = peer.sane(bad, cfg, cfg.warm_steps() + 2)
    assert not ok and "non-finite losses" in why


def test_main_cpu_smoke(peer, tmp_path, capsys):
    out = tmp_path / "jax.json"
    assert peer.main(["--steps", "2", "--steps-per-call", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.strip().splitlines()[-1].startswith("summary:") and "jax state sane: True" in text
    assert '"jax_peer"' in out.read_text()
