"""The pure pieces of experiments/grpo_real.py: paired difference, run classification, Lanczos curvature."""

from __future__ import annotations

import math
import pathlib

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest

from _experiments import load_experiment

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def gr():
    return load_experiment("grpo_real")


# ------------------------------------------------------------------------------------------ paired difference
def test_paired_difference_matches_hand_computation(gr):
    before = [1, 0, 0, 1, 0, 1, 0, 0]
    after = [1, 1, 0, 1, 1, 1, 0, 1]
    r = gr.paired_difference(before, after)
    n = 8
    # by hand: before 3/8, after 6/8; d = [0,1,0,0,1,0,0,1], mean 3/8, sample variance (3*(5/8)^2 + 5*(3/8)^2)/7
    var_d = (3 * (5 / 8) ** 2 + 5 * (3 / 8) ** 2) / 7
    assert r.n == n
    assert r.before == pytest.approx(3 / 8) and r.after == pytest.approx(6 / 8)
    assert r.se_before == pytest.approx(math.sqrt(3 / 8 * 5 / 8 / n))
    assert r.se_after == pytest.approx(math.sqrt(6 / 8 * 2 / 8 / n))
    assert r.diff == pytest.approx(3 / 8)
    assert r.se_diff == pytest.approx(math.sqrt(var_d / n))
    assert r.z == pytest.approx((3 / 8) / math.sqrt(var_d / n))
    assert r.significant == (abs(r.z) > 1.96)


def test_paired_difference_against_numpy_on_random_data(gr):
    rng = np.random.default_rng(3)
    b = rng.random(300) < 0.4
    a = np.where(rng.random(300) < 0.8, b, rng.random(300) < 0.6)
    r = gr.paired_difference(b, a)
    d = a.astype(float) - b.astype(float)
    se = np.std(d, ddof=1) / np.sqrt(300)
    assert r.se_diff == pytest.approx(se)
    assert r.z == pytest.approx(d.mean() / se)


def test_paired_difference_no_change_has_undefined_z(gr):
    r = gr.paired_difference([1, 0, 1], [1, 0, 1])
    assert r.diff == 0 and r.se_diff == 0 and math.isnan(r.z) and not r.significant


@pytest.mark.parametrize("before,after,match", [([1, 0], [1], "same problems"), ([1], [0], "n >= 2"),
                                                ([1, 2], [0, 1], "0/1")])
def test_paired_difference_rejects_bad_input(gr, before, after, match):
    with pytest.raises(ValueError, match=match):
        gr.paired_difference(before, after)


# ------------------------------------------------------------------------------------------ classification
def _flat(n, v):
    return [v] * n


def test_classify_stable(gr):
    rng = np.random.default_rng(0)
    ent = 1.0 + 0.02 * rng.standard_normal(12)
    gn = 1.0 + 0.1 * rng.random(12)
    assert gr.classify_run(_flat(12, 0.1), ent, gn, [0.4, 0.45, 0.38], samples_per_rollout=64) == "stable"


def test_classify_collapsed_by_nonfinite_entropy_or_reward(gr):
    ok_ent, ok_gn = _flat(9, 1.0), _flat(9, 1.0)
    assert gr.classify_run([0.1] * 8 + [np.nan], ok_ent, ok_gn, [0.4], samples_per_rollout=64) == "collapsed"
    assert gr.classify_run(_flat(9, 0.1), ok_ent, [1.0] * 8 + [np.inf], [0.4], samples_per_rollout=64) == "collapsed"
    ent = np.linspace(1.0, 0.3, 9)  # entropy collapse below H_0/2
    assert gr.classify_run(_flat(9, 0.1), ent, ok_gn, [0.4], samples_per_rollout=64) == "collapsed"
    ent = np.linspace(1.0, 2.5, 9)  # blow-up above 2 H_0
    assert gr.classify_run(_flat(9, 0.1), ent, ok_gn, [0.4], samples_per_rollout=64) == "collapsed"
    # reward 0.5 -> 0: more than 3 SE (64 samples) and below a quarter
    assert gr.classify_run(_flat(9, 0.1), ok_ent, ok_gn, [0.5, 0.2, 0.0], samples_per_rollout=64) == "collapsed"
    # the same drop with 4 samples per rollout is within noise (3 SE = 0.75)
    assert gr.classify_run(_flat(9, 0.1), ok_ent, ok_gn, [0.5, 0.2, 0.0], samples_per_rollout=4) == "stable"


def test_classify_oscillating(gr):
    gn = [1.0, 1.1, 0.9, 1.0, 2.0, 3.0, 5.0, 6.0, 1.0]  # last third peaks above 4x the first third's median
    assert gr.classify_run(_flat(9, 0.1), _flat(9, 1.0), gn, [0.4], samples_per_rollout=64) == "oscillating"
    ent = [1.0, 1.1, 0.9, 1.3, 0.75, 1.2, 0.9, 1.1, 1.0]  # excursions outside [0.8, 1.25] H_0, back at the end
    assert gr.classify_run(_flat(9, 0.1), ent, _flat(9, 1.0), [0.4], samples_per_rollout=64) == "oscillating"


@pytest.mark.parametrize("kw,match", [
    (dict(loss=[0.1] * 2, entropy=[1.0] * 2, grad_norm=[1.0] * 2, reward=[0.4]), "expected equal lengths >= 3"),
    (dict(loss=[0.1] * 3, entropy=[1.0] * 4, grad_norm=[1.0] * 3, reward=[0.4]), "expected equal lengths >= 3"),
    (dict(loss=[0.1] * 3, entropy=[1.0] * 3, grad_norm=[1.0] * 3, reward=[]), "reward is empty"),
])
def test_classify_rejects_bad_series(gr, kw, match):
    with pytest.raises(ValueError, match=match):
        gr.classify_run(**kw, samples_per_rollout=4)


# ------------------------------------------------------------------------------------------ curvature
def test_lanczos_matches_explicit_hessian_of_a_quadratic(gr):
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    eig = np.array([-2.0, -0.5, 0.1, 0.7, 1.5, 4.0])
    A = jnp.asarray(q @ np.diag(eig) @ q.T, jnp.float32)

    def loss(p):  # params as a pytree of two leaves
        x = jnp.concatenate([p["a"], p["b"].ravel()])
        return 0.5 * x @ A @ x

    params = {"a": jnp.zeros(2, jnp.float32), "b": jnp.zeros((2, 2), jnp.float32)}
    grad = jax.grad(loss)
    hvp = lambda v: jax.jvp(grad, (params,), (v,))[1]  # noqa: E731
    v0 = {"a": jnp.ones(2, jnp.float32), "b": jnp.asarray([[1.0, -2.0], [0.5, 3.0]], jnp.float32)}
    est = gr.lanczos_curvature(hvp, v0, iters=6)
    assert est.top == pytest.approx(4.0, rel=1e-4)
    assert est.bottom == pytest.approx(-2.0, rel=1e-4)


def test_lanczos_on_a_tiny_network_matches_the_explicit_hessian(gr):
    key = jax.random.key(0)
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.normal(k1, (16, 3), jnp.float32)
    y = jnp.sin(x[:, 0]) - x[:, 1]
    params = {"w1": 0.5 * jax.random.normal(k2, (3, 4), jnp.float32), "w2": 0.5 * jax.random.normal(k3, (4,), jnp.float32)}

    def loss(p):
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    flat, unravel = jax.flatten_util.ravel_pytree(params)
    H = np.asarray(jax.hessian(lambda f: loss(unravel(f)))(flat), float)
    ev = np.linalg.eigvalsh((H + H.T) / 2)
    grad = jax.grad(loss)
    hvp = lambda v: jax.jvp(grad, (params,), (v,))[1]  # noqa: E731
    v0 = jax.tree.map(lambda a: jnp.ones_like(a) + 0.1 * jnp.arange(a.size, dtype=a.dtype).reshape(a.shape), params)
    est = gr.lanczos_curvature(hvp, v0, iters=12)
    assert est.top == pytest.approx(ev[-1], rel=1e-3)


def test_lanczos_rejects_bad_input(gr):
    with pytest.raises(ValueError, match="iters=0"):
        gr.lanczos_curvature(lambda v: v, {"a": jnp.ones(2, jnp.float32)}, iters=0)
    with pytest.raises(ValueError, match="zero"):
        gr.lanczos_curvature(lambda v: v, {"a": jnp.zeros(2, jnp.float32)}, iters=3)


def test_predicted_thresholds_follow_the_periodic_refresh_formula(gr):
    # mu = 0 periodic: the exact threshold is a * K_ref = 2, so eta* = 2 / (K K_ref)
    th = gr.predicted_thresholds(0.0, [1, 2, 4], 10.0)
    for k in (1, 2, 4):
        assert th[k]["exact"] == pytest.approx(2.0 / (10.0 * k), rel=1e-4)
    assert math.isinf(th[1]["closed_form"])
    assert th[4]["closed_form"] == pytest.approx(1.0 / (10.0 * 1.5))


# ------------------------------------------------------------------------------------------ the real model
@pytest.mark.real_model
def test_shipped_config_prompts_fit_and_answers_parse():
    if not MODEL.is_dir():
        pytest.skip(f"{MODEL} is absent (make real-model writes it)")
    from grpojax.grpo import load_config, score_completions

    cfg = load_config("smollm2-arith")
    gr = load_experiment("grpo_real")
    setup = gr.load_setup(cfg)
    toks, mask = gr._pad(setup, setup.heldout[:50])
    assert mask.any(1).all()
    sc = score_completions([" 13-11=2\n", " 9+17=26"], ["2", "26"], cfg.rewards.weights,
                           options=cfg.rewards.parse_options())
    assert list(sc.correct) == [1.0, 1.0]


def test_two_proportions_matches_a_hand_computation():
    mod = load_experiment("smollm2_arith_cpu")
    r = mod.two_proportions(0.425, 0.55, 200)
    se = math.sqrt(0.425 * 0.575 / 200 + 0.55 * 0.45 / 200)  # 0.04954...
    assert r["diff"] == pytest.approx(0.125) and r["se_diff"] == pytest.approx(se)
    assert r["z"] == pytest.approx(0.125 / se) and r["significant"]
    assert not mod.two_proportions(0.425, 0.45, 200)["significant"]
    assert math.isnan(mod.two_proportions(1.0, 1.0, 10)["z"])
