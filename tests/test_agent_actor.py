"""The acting path (foxc.agent.actor) against the model's numpy math: state, shared layer, C51 means, greedy choice."""
import numpy as np

from foxc.agent.actor import Actor
from foxc.agent.layout import N_POSITION_FEATURES, POS_INDEX, Q_INVALID, valid_actions
from foxc.data.features import F_SPREAD, FEATURES
from foxc.isv import IsvBus
from foxc.lobsim.layout import POSITION_DTYPE
from foxc.nn import functional as F
from foxc.nn.model import Parameters


def test_greedy_actor_acts_on_the_best_valid_c51_mean(ref_rt, rng):
    B, K, D, R = 64, 3, 8, 16
    params = Parameters(ref_rt, FEATURES, D, rl_hidden=R)
    params.init(rng)
    isv = IsvBus(ref_rt)
    isv["entry_margin"] = 0.0  # the plain argmax (the margin's own tests: test_agent_reference)
    h = ref_rt.device_array((B, D), np.float32, "h")
    h.upload(np.tanh(rng.standard_normal((B, D))).astype(np.float32))
    pos = ref_rt.device_array(B, POSITION_DTYPE, "pos")
    p = np.zeros(B, POSITION_DTYPE)
    p["lots"] = rng.integers(-1, 2, B)
    pos.upload(p)
    features = ref_rt.device_array((K, B, FEATURES), np.float32, "features")
    f = rng.standard_normal((K, B, FEATURES)).astype(np.float32)
    f[K - 1, :, F_SPREAD] = 1.0
    features.upload(f)
    actor = Actor(ref_rt, params, isv, h=h, pos=pos, features=features, batch=B, seq_len=K, tick=250_000_000,
                  greedy=True)
    actor.reset(0)
    for plan in actor.state_plans + actor.act_plans:
        plan.launch(ref_rt.stream)
    state = actor.state.download()
    assert state.shape == (B, D + N_POSITION_FEATURES)
    assert np.array_equal(state[:, D + POS_INDEX["side"]], np.sign(p["lots"]))
    th = {k: v.astype(np.float64) for k, v in params.host().items()}
    z = F.linear(state.astype(np.float64), th["rl_w"], th["rl_b"], F.ACT_RELU)
    _, q = F.c51_distribution(F.linear(z, th["dqn_w"], th["dqn_b"]), isv["c51_v_min"], isv["c51_v_max"])
    valid = valid_actions(np.sign(p["lots"]))
    got = actor.q.download()
    assert np.allclose(got[valid], q[valid], atol=1e-5) and np.all(got[~valid] == Q_INVALID)
    want = np.argmax(np.where(valid, q, -np.inf), axis=1)
    clear = np.sort(np.where(valid, q, -np.inf), axis=1)[:, -1] - np.sort(np.where(valid, q, -np.inf), axis=1)[:, -2] > 1e-4
    assert np.array_equal(actor.actions.download()[clear], want[clear])
    assert np.all(actor.probs.download()[np.arange(B), actor.actions.download()] == 1.0)
