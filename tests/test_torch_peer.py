"""The PyTorch peer (bench/torch_step.py) on the CPU: its losses and gradients are foxc's, and smoke runs
of its whole step, plain and compiled. Skipped where torch is not importable (foxc does not depend on it)."""
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from foxc.data.labels import LabelConfig, compute_labels  # noqa: E402
from foxc.data.synthetic import synthetic_data  # noqa: E402
from kernel_check import rel_error  # noqa: E402
from peer_cases import foxc_learning_pass, load_peer  # noqa: E402


@pytest.fixture(scope="module")
def peer():
    return load_peer("torch_step")


@pytest.fixture(scope="module")
def tiny_market(peer):
    market = synthetic_data(3000, seed=0)
    labels = compute_labels(market.records, market.tick, LabelConfig())
    return peer.TorchMarket(torch, market, labels, "cpu")


def test_foxc_never_imports_the_peers():
    foxc_root = Path(__file__).resolve().parents[1] / "foxc"
    for f in foxc_root.rglob("*.py"):
        text = f.read_text()
        assert "torch_step" not in text and "jax_step" not in text and "peer_common" not in text, f


@pytest.mark.parametrize("scan", ["loop", "parallel"])
def test_losses_and_gradients_match_foxc_learner(peer, tiny_market, ref_rt, rng, scan):
    """One learning pass with the same weights and inputs: torch's autograd gives foxc's gradients of
    every tensor, |TD| and losses, with either scan (the plain loop, the compiled build's closed form)."""
    B, K = 8, 4
    ref = foxc_learning_pass(ref_rt, rng, B, K)
    ts = peer.TorchStep(torch, peer.PeerConfig(B=B, K=K, capacity=64), tiny_market, "cpu")
    ts.model.load_foxc(ref.theta)
    with torch.no_grad():
        for dst, src in zip(ts.target, ts.online_target):
            dst.copy_(src)  # foxc's target starts as the online copy
        ts.x.copy_(torch.from_numpy(ref.inputs["features"]))
        ts.labels.copy_(torch.from_numpy(ref.inputs["labels"]))
        ts.mask.copy_(torch.from_numpy(ref.inputs["mask"]))
    t = lambda k: torch.from_numpy(ref.inputs[k])  # noqa: E731
    batch = dict(s_t=t("h_t"), s_tp1=t("h_tp1"), action=t("action").long(), ret=t("ret"), gamma_n=t("gamma_n"),
                 done=t("done"), weight=t("weight"))
    h = (ts.model.encode if scan == "loop" else ts.model.encode_parallel)(ts.x)
    assert rel_error(h.detach().numpy(), ref.h) < 1e-5
    ts.learn(h, batch)

    checked = 0
    for name in peer.TENSORS:
        got = ts.named(name).grad.numpy()
        got = got.T if name in peer.LAYERS else got
        assert rel_error(got, ref.grads[name]) < 1e-4, name
        checked += 1
    assert checked == 14
    assert rel_error(ts.td.numpy(), ref.td) < 1e-4
    assert rel_error(ts.losses.numpy(), ref.losses) < 1e-4


def test_whole_step_smoke(peer, tiny_market):
    cfg = peer.PeerConfig(B=8, K=4, capacity=64)
    ts = peer.TorchStep(torch, cfg, tiny_market, "cpu")
    run = peer.Peer(ts)
    before = [p.detach().clone() for p in ts.params]
    target_before = [w.clone() for w in ts.target]
    run.eager(cfg.warm_steps() + 5)
    ok, why = peer.sane(torch, ts, run.done)
    assert ok, why
    assert int(ts.count) == cfg.capacity                    # the buffer filled
    assert all(not torch.equal(a, p) for a, p in zip(before, ts.params))
    assert all(not torch.equal(a, w) for a, w in zip(target_before, ts.target))
    assert torch.isfinite(ts.frames).all() and (ts.priority > 0).all()
    assert bool(((ts.cursor >= ts.lo) & (ts.cursor <= ts.hi)).all())
    g = ts.st_gamma
    assert bool(((g > 0) & (g <= 1)).all())
    # stored states carry the position features: sides in {-1, 0, 1}, spreads within the cap
    side = ts.st_s[:, peer.SIDE]
    assert bool(((side == -1) | (side == 0) | (side == 1)).all())
    assert float(ts.st_s[:, peer.SIDE + 3].max()) <= peer.SPREAD_CAP_TICKS
    # the actor only takes valid actions for the position it held (probs are zero on the others)
    assert bool((ts.probs.sum(1) - 1).abs().max() < 1e-5)


def test_sane_names_what_is_wrong(peer, tiny_market):
    ts = peer.TorchStep(torch, peer.PeerConfig(B=8, K=4, capacity=64), tiny_market, "cpu")
    run = peer.Peer(ts)
    run.eager(2)
    assert peer.sane(torch, ts, run.done) == (True, "")
    ts.losses[1] = float("nan")
    ok, why = peer.sane(torch, ts, run.done + 1)
    assert not ok and "non-finite losses" in why and "step counter 2 after 3 steps" in why


def test_main_cpu_smoke(peer, tmp_path, capsys):
    out = tmp_path / "peer.json"
    assert peer.main(["--device", "cpu", "--steps", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.strip().splitlines()[-1].startswith("summary:")
    assert "state sane: torch True" in text
    assert out.exists() and '"torch_peer"' in out.read_text()


def test_main_refuses_bad_flags(peer, capsys):
    with pytest.raises(SystemExit) as e:
        peer.main(["--device", "cpu", "--modes", "eager,fast"])
    assert e.value.code == 2 and "--modes" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        peer.main(["--device", "cpu", "--n-backtests", "8,x"])
    assert e.value.code == 2 and "'8,x'" in capsys.readouterr().err


@pytest.mark.skipif(os.environ.get("FOXC_PEER_COMPILE") != "1",
                    reason="torch.compile through Inductor's C++ backend takes minutes on 2 cores: FOXC_PEER_COMPILE=1")
def test_compiled_step_runs_sane(peer, tiny_market):
    """The compiled build (closed-form scan, compiled encoder, losses and update) trains at tiny sizes."""
    cfg = peer.PeerConfig(B=8, K=4, capacity=64)
    ts = peer.TorchStep(torch, cfg, tiny_market, "cpu", compiled=True)
    run = peer.Peer(ts)
    before = [p.detach().clone() for p in ts.params]
    run.eager(cfg.warm_steps() + 2)
    ok, why = peer.sane(torch, ts, run.done)
    assert ok, why
    assert all(not torch.equal(a, p) for a, p in zip(before, ts.params))


def state_addresses(ts):
    """Every tensor the step keeps between steps: its own attributes, the weights, the optimizer's state."""
    found = {k: v.data_ptr() for k, v in vars(ts).items() if isinstance(v, torch.Tensor)}
    found.update({f"param{i}": p.data_ptr() for i, p in enumerate(ts.params)})
    found.update({f"target{i}": p.data_ptr() for i, p in enumerate(ts.target)})
    for i, st in enumerate(ts.optimizer.state.values()):
        found.update({f"opt{i}.{k}": v.data_ptr() for k, v in st.items() if isinstance(v, torch.Tensor)})
    return found


def test_step_updates_its_state_in_place(peer, tiny_market):
    """What a captured graph needs: a step writes into the same tensors, never rebinds one."""
    ts = peer.TorchStep(torch, peer.PeerConfig(B=8, K=4, capacity=64), tiny_market, "cpu")
    run = peer.Peer(ts)
    run.eager(ts.cfg.n_step + 1)  # the optimizer's state exists, the rings emit from the next step
    before = state_addresses(ts)
    ts.step()                     # what the graph captures
    assert state_addresses(ts) == before
