"""The PyTorch peer (bench/torch_step.py) on the CPU: its losses and gradients are foxc's, and a smoke run
of its whole step. Skipped where torch is not importable (foxc does not depend on it)."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from foxc.data.labels import LabelConfig, compute_labels  # noqa: E402
from foxc.data.synthetic import synthetic_data  # noqa: E402
from foxc.isv import IsvBus  # noqa: E402
from foxc.nn import model  # noqa: E402
from foxc.testing import rel_error  # noqa: E402

PATH = Path(__file__).resolve().parents[1] / "bench" / "torch_step.py"


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("torch_step_peer", PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def tiny_market(peer):
    market = synthetic_data(3000, seed=0)
    labels = compute_labels(market.records, market.tick, LabelConfig())
    return peer.TorchMarket(torch, market, labels, "cpu")


def test_foxc_never_imports_the_peer():
    foxc_root = Path(__file__).resolve().parents[1] / "foxc"
    for f in foxc_root.rglob("*.py"):
        text = f.read_text()
        assert "torch_step" not in text, f


def test_losses_and_gradients_match_foxc_learner(peer, tiny_market, ref_rt, rng):
    """One learning pass with the same weights and inputs: torch's autograd gives foxc's gradients."""
    B, K = 8, 4
    isv = IsvBus(ref_rt)
    learner = model.Learner(ref_rt, isv, B, K, peer.FEATURES)
    learner.params.init(rng)
    inputs = learner.random_inputs(rng)
    inputs["ret"] = (3 * rng.standard_normal(B)).astype(np.float32)  # some atoms clip at the support's ends
    learner.load_inputs(inputs)
    model.launch_all(learner.forward_backward, ref_rt.stream)
    grads = learner.params.host("grad")
    theta = learner.params.host("theta")

    ts = peer.TorchStep(torch, peer.PeerConfig(B=B, K=K, capacity=64), tiny_market, "cpu")
    names = {"enc_w_in": ts.model.enc_in, "enc_w_out": ts.model.enc_out, "perception_w": ts.model.perception,
             "dqn_w": ts.model.dqn, "policy_w": ts.model.policy, "value_w": ts.model.value}
    with torch.no_grad():
        for w, layer in names.items():
            layer.weight.copy_(torch.from_numpy(theta[w].T.copy()))
            layer.bias.copy_(torch.from_numpy(theta[w.replace("_w", "_b")].copy()))
        ts.target_w.copy_(ts.model.dqn.weight)
        ts.target_b.copy_(ts.model.dqn.bias)
        ts.x.copy_(torch.from_numpy(inputs["features"]))
        ts.labels.copy_(torch.from_numpy(inputs["labels"]))
        ts.mask.copy_(torch.from_numpy(inputs["mask"]))
    t = lambda k: torch.from_numpy(inputs[k])  # noqa: E731
    batch = dict(h_t=t("h_t"), h_tp1=t("h_tp1"), action=t("action").long(), ret=t("ret"), gamma_n=t("gamma_n"),
                 done=t("done"), weight=t("weight"), logp_old=t("logp_old"))
    h = ts.model.encode(ts.x)
    assert rel_error(h.detach().numpy(), learner.encoder.h.download()) < 1e-5
    ts.learn(h, batch)

    for w, layer in names.items():
        got_w, got_b = layer.weight.grad.numpy().T, layer.bias.grad.numpy()
        assert rel_error(got_w, grads[w]) < 1e-4, w
        assert rel_error(got_b, grads[w.replace("_w", "_b")]) < 1e-4, w
    assert rel_error(ts.td.numpy(), learner.rl.td_error.download()) < 1e-4
    foxc_losses = np.concatenate([learner.rl.loss_means.download(), learner.perception.loss_mean.download()])
    assert rel_error(ts.losses.numpy(), foxc_losses) < 1e-4


def test_whole_step_smoke(peer, tiny_market):
    cfg = peer.PeerConfig(B=8, K=4, capacity=64)
    ts = peer.TorchStep(torch, cfg, tiny_market, "cpu")
    run = peer.Peer(ts)
    before = [p.detach().clone() for p in ts.params]
    target_before = ts.target_w.clone()
    run.eager(ts.warm_steps() + 5)
    assert int(ts.count) == cfg.capacity                    # the buffer filled
    assert int(ts.step_count) == run.done
    assert all(torch.isfinite(p).all() for p in ts.params)
    assert all(not torch.equal(a, p) for a, p in zip(before, ts.params))
    assert not torch.equal(target_before, ts.target_w)
    assert torch.isfinite(ts.frames).all() and torch.isfinite(ts.priority).all()
    assert (ts.priority > 0).all()
    lo, hi = ts.lo, ts.hi
    assert bool(((ts.cursor >= lo) & (ts.cursor <= hi)).all())
    g = ts.st_gamma
    assert bool(((g > 0) & (g <= 1)).all())


def test_main_cpu_smoke(peer, tmp_path, capsys):
    out = tmp_path / "peer.json"
    assert peer.main(["--device", "cpu", "--steps", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.strip().splitlines()[-1].startswith("summary:")
    assert "state sane: True" in text
    assert out.exists() and '"torch_peer"' in out.read_text()


def state_addresses(ts):
    """Every tensor the step keeps between steps: its own attributes, the weights, the optimizer's state."""
    found = {k: v.data_ptr() for k, v in vars(ts).items() if isinstance(v, torch.Tensor)}
    found.update({f"param{i}": p.data_ptr() for i, p in enumerate(ts.params)})
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
