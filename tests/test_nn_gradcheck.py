"""Every backward kernel (reference backend) against float64 finite differences of the forward math.

Each test prints the relative error it measured (`pytest -s` shows them).
"""
import numpy as np
import pytest

from foxc.agent.layout import HOLD, LONG, POS_INDEX, Q_INVALID, SHORT, valid_actions
from foxc.nn import functional as F
from foxc.nn import losses, matmul, model, ssm
from gradcheck import check, numeric_grad
from kernel_check import poisoned, run_kernel

from test_nn_forward import c51_inputs, isv_values

RTOL = 1e-4  # float32 kernels against float64 differences


def dev(rt, a, name):
    d = rt.device_array(a.shape, a.dtype, name)
    d.upload(a)
    return d


@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_linear_backward(ref_rt, rng, act):
    M, K, N = 6, 4, 5
    x = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((K, N)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    r = rng.standard_normal((M, N)).astype(np.float32)
    X, W, Bb = dev(ref_rt, x, "X"), dev(ref_rt, w, "W"), dev(ref_rt, b, "b")
    Y = ref_rt.device_array((M, N), np.float32, "Y")
    dY = dev(ref_rt, r, "dY")
    dX, grad = ref_rt.device_array((M, K), np.float32, "dX"), ref_rt.device_array((K + 1) * N, np.float32, "grad")
    partials = matmul.GradPartials(ref_rt, grad)
    passes = [matmul.plan_row_split(ref_rt, partials, 0, dY, M, N, A=X, M=K),
              matmul.plan_row_split(ref_rt, partials, K * N, dY, M, N)]
    partials.finish()
    matmul.plan_linear(ref_rt, Y, X, W, Bb, M, K, N, act).launch(ref_rt.stream)
    matmul.plan_act_bwd(ref_rt, dY, dY, Y, M * N, act).launch(ref_rt.stream)
    matmul.plan_matmul_nt(ref_rt, dX, dY, W, M, N, K).launch(ref_rt.stream)
    for p in (*passes, partials):
        p.launch(ref_rt.stream)
    g = grad.download()
    dW, db = g[:K * N].reshape(K, N), g[K * N:]
    r64 = r.astype(np.float64)
    loss = lambda x_, w_, b_: float((r64 * F.linear(x_, w_, b_, act)).sum())  # noqa: E731
    check(f"linear act={act} dX", dX.download(), numeric_grad(lambda v: loss(v, w, b), x), RTOL)
    check(f"linear act={act} dW", dW, numeric_grad(lambda v: loss(x, v, b), w), RTOL)
    check(f"linear act={act} db", db, numeric_grad(lambda v: loss(x, w, v), b), RTOL)


def test_ssm_scan_backward(ref_rt, rng):
    K, B, D = 5, 2, 3
    z = rng.standard_normal((K, B, 4 * D)).astype(np.float32)
    r = rng.standard_normal((B, D)).astype(np.float32)
    states, _, _ = run_kernel(ref_rt, ssm.SSM_SCAN_FWD, 1, 256, [poisoned((K, B, D)), poisoned((B, D)), z, K, B, D])
    dz, *_ = run_kernel(ref_rt, ssm.SSM_SCAN_BWD, 1, 256, [poisoned(z.shape), z, states, r, K, B, D])
    num = numeric_grad(lambda v: float((r * F.ssm_scan(v, D)[1]).sum()), z)
    check("ssm scan dz", dz, num, RTOL)


def small_params(rt, rng, n_features=3, hidden=4):
    p = model.Parameters(rt, n_features, hidden)
    p.init(rng)
    theta = p.theta.download()
    theta += rng.standard_normal(theta.size).astype(np.float32) * 0.3  # biases away from zero too
    p.load(theta)
    return p


def test_encoder_backward_end_to_end(ref_rt, rng):
    B, K, Fdim, D = 2, 3, 3, 4
    p = small_params(ref_rt, rng, Fdim, D)
    x = rng.standard_normal((K, B, Fdim)).astype(np.float32)
    r = rng.standard_normal((B, D)).astype(np.float32)
    enc = model.Encoder(ref_rt, p, B, K, dev(ref_rt, x, "x"))
    model.launch_all(enc.forward, ref_rt.stream)
    enc.dh.upload(r)
    model.launch_all(enc.backward, ref_rt.stream)
    theta = {k: v.astype(np.float64) for k, v in p.host().items()}
    grads = p.host("grad")
    x64 = x.reshape(K * B, Fdim).astype(np.float64)

    def loss(name, value):
        t = dict(theta, **{name: value})
        z = F.linear(x64, t["enc_w_in"], t["enc_b_in"]).reshape(K, B, 4 * D)
        y = F.ssm_scan(z, D)[1]
        return float((r * F.linear(y, t["enc_w_out"], t["enc_b_out"], F.ACT_TANH)).sum())

    h = F.linear(F.ssm_scan(F.linear(x64, theta["enc_w_in"], theta["enc_b_in"]).reshape(K, B, 4 * D), D)[1],
                 theta["enc_w_out"], theta["enc_b_out"], F.ACT_TANH)
    assert np.abs(enc.h.download() - h).max() < 1e-5
    for name in ("enc_w_in", "enc_b_in", "enc_w_out", "enc_b_out"):
        check(f"encoder {name}", grads[name], numeric_grad(lambda v, n=name: loss(n, v), theta[name]), RTOL)


def test_c51_loss_gradient(ref_rt, rng):
    B = 3
    logits, next_probs, next_q, action, ret, gamma_n, done, weight = c51_inputs(rng, B)
    isv = isv_values(c51_v_min=-10.0, c51_v_max=10.0)
    grad, *_ = run_kernel(ref_rt, losses.C51_LOSS, 1, 256, [
        poisoned(logits.shape), poisoned(B), poisoned(B), logits, next_probs, next_q, action, ret, gamma_n, done,
        weight, isv, B])
    m = F.c51_project(next_probs.astype(np.float64), next_q, ret.astype(np.float64), gamma_n.astype(np.float64),
                      done.astype(np.float64), -10.0, 10.0)
    num = numeric_grad(lambda v: float((weight * F.c51_cross_entropy(v, m, action)).mean()), logits)
    check("c51 cross-entropy dlogits", grad, num, RTOL)


def value_policy_loss(rt, B, v=None, v_next=None, ret=None, gamma_n=None, done=None, logits=None, q=None, isv=None):
    """value_policy_loss on the reference backend; inputs of the head not under test are zeros (q: all valid)."""
    z = np.zeros(B, np.float32)
    args = [poisoned(B), poisoned(B), poisoned(B), *(z if a is None else a for a in (v, v_next, ret, gamma_n, done)),
            poisoned((B, 5)), poisoned(B), np.zeros((B, 5), np.float32) if logits is None else logits,
            np.zeros((B, 5), np.float32) if q is None else q, isv_values() if isv is None else isv, B]
    return run_kernel(rt, losses.VALUE_POLICY_LOSS, 1, 256, args)


def test_value_loss_gradient(ref_rt, rng):
    B = 5
    v, v_next, ret, gamma_n = (rng.standard_normal(B).astype(np.float32) for _ in range(4))
    done = (rng.random(B) < 0.4).astype(np.float32)
    grad, loss, adv, *_ = value_policy_loss(ref_rt, B, v, v_next, ret, gamma_n, done)
    y = F.value_target(v_next.astype(np.float64), ret, gamma_n, done)
    assert np.allclose(adv, y - v, atol=1e-6)
    check("value MSE dv", grad, numeric_grad(lambda u: float(F.value_loss(u, y).mean()), v), RTOL)


def test_policy_distillation_gradient(ref_rt, rng):
    B = 6
    logits = rng.standard_normal((B, 5)).astype(np.float32)
    side = np.array([-1, 0, 1, 1, 0, -1])
    q = np.where(valid_actions(side), rng.standard_normal((B, 5)), Q_INVALID).astype(np.float32)
    isv = isv_values(distill_temperature=0.3)
    out = value_policy_loss(ref_rt, B, logits=logits, q=q, isv=isv)
    grad, loss = out[8], out[9]
    t = np.exp(q.astype(np.float64) / 0.3 - (q.astype(np.float64) / 0.3).max(1, keepdims=True))
    t = np.where(valid_actions(side), t, 0)
    t /= t.sum(1, keepdims=True)
    pi = np.where(valid_actions(side), np.exp(logits.astype(np.float64)), 0)
    pi /= pi.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(t > 0, t * (np.log(t) - np.log(pi)), 0).sum(1)  # an independent KL over the valid actions
    assert np.allclose(loss, kl, atol=1e-5) and np.all(kl > 0)
    num = numeric_grad(lambda v: float(F.distill_loss(v, q.astype(np.float64), 0.3).mean()), logits)
    check("policy distillation dlogits", grad, num, RTOL)
    assert np.all(grad[~valid_actions(side)] == 0), "the logits of invalid actions get no gradient"


def test_bce_gradient(ref_rt, rng):
    rows, cols = 4, 9
    x = rng.standard_normal((rows, cols)).astype(np.float32) * 3
    y = (rng.random((rows, cols)) < 0.5).astype(np.float32)
    mask = (rng.random((rows, cols)) < 0.7).astype(np.float32)
    grad, *_ = run_kernel(ref_rt, losses.BCE_MASKED, 1, 256, [poisoned((rows, cols)), poisoned((rows, cols)),
                                                              x, y, mask, rows, cols])
    num = numeric_grad(lambda v: float(F.bce_masked(v, y, mask).sum() / rows), x)
    check("masked BCE dlogits", grad, num, RTOL)


def test_rl_heads_backward_end_to_end(ref_rt, rng):
    """The RL heads' gradients on their weights, with the targets (the target network's next-state
    distribution under its best valid action, the value target, the distillation target) held
    constant as the losses define them; only the C51 loss reaches the shared layer."""
    B, D, R = 4, 4, 6
    p = model.Parameters(ref_rt, 3, D, rl_hidden=R)
    p.init(rng)
    S = p.state_dim
    side_col = D + POS_INDEX["side"]

    def states():
        s = rng.standard_normal((B, S)).astype(np.float32)
        s[:, side_col] = [-1, 0, 1, 0]
        return s
    s_t, s_next = states(), states()
    _, _, _, action, ret, gamma_n, done, weight = c51_inputs(rng, B)
    action = np.array([HOLD, LONG, SHORT, SHORT], np.int32)  # valid for each state's side
    isv_host = isv_values(c51_v_min=-3.0, c51_v_max=3.0, distill_temperature=0.5)
    arrays = [dev(ref_rt, a, n) for a, n in [(s_t, "s_t"), (s_next, "s_next"), (action, "action"), (ret, "ret"),
                                             (gamma_n, "gamma_n"), (done, "done"), (weight, "weight"),
                                             (isv_host, "isv")]]
    rl = model.RlHeads(ref_rt, p, *arrays, batch=B)
    model.launch_all(rl.forward + rl.backward, ref_rt.stream)
    th = {k: v.astype(np.float64) for k, v in p.host().items()}
    grads = p.host("grad")
    side = lambda s: s[:, side_col]  # noqa: E731
    z = lambda s, t: F.linear(s, t["rl_w"], t["rl_b"], F.ACT_RELU)  # noqa: E731
    # constants of the losses, from the base point (the target network equals the online one after init)
    next_probs, next_q = F.c51_distribution(F.linear(z(s_next, th), th["dqn_w"], th["dqn_b"]), -3.0, 3.0)
    next_q = np.where(valid_actions(side(s_next)), next_q, Q_INVALID)
    m = F.c51_project(next_probs, next_q, ret.astype(np.float64), gamma_n, done, -3.0, 3.0)
    y = F.value_target(F.linear(z(s_next, th), th["value_w"], th["value_b"])[:, 0], ret, gamma_n, done)
    _, q_now = F.c51_distribution(F.linear(z(s_t, th), th["dqn_w"], th["dqn_b"]), -3.0, 3.0)
    q_now = np.where(valid_actions(side(s_t)), q_now, Q_INVALID)
    z_fixed = z(s_t.astype(np.float64), th)

    def total(**over):
        t = dict(th, **over)
        zz = z(s_t.astype(np.float64), t)
        q = (weight * F.c51_cross_entropy(F.linear(zz, t["dqn_w"], t["dqn_b"]), m, action)).mean()
        pi = F.distill_loss(F.linear(z_fixed, t["policy_w"], t["policy_b"]), q_now, 0.5).mean()
        v = F.value_loss(F.linear(z_fixed, t["value_w"], t["value_b"])[:, 0], y).mean()
        return float(q + pi + v)

    for name in ("rl_w", "rl_b", "dqn_w", "dqn_b", "policy_w", "policy_b", "value_w", "value_b"):
        check(f"rl heads {name}", grads[name], numeric_grad(lambda v, n=name: total(**{n: v}), th[name]), RTOL)
