"""GRPO maths: advantages vs hand-computed groups, k3 KL, clipped surrogate gradients, aggregation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from grpojax.grpo import aggregate, clipped_surrogate, grpo_loss, group_advantages, k3_kl


def test_advantages_hand_computed():
    r = jnp.array([[1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 2.0, 3.0]])
    # group 0: mean 1/4, population std sqrt(3)/4; group 2: mean 1.5, std sqrt(1.25)
    s0, s2 = np.sqrt(3) / 4, np.sqrt(1.25)
    want_grpo = np.array([
        [0.75 / s0, -0.25 / s0, -0.25 / s0, -0.25 / s0],
        [0, 0, 0, 0],
        [-1.5 / s2, -0.5 / s2, 0.5 / s2, 1.5 / s2],
    ])
    np.testing.assert_allclose(group_advantages(r, "grpo", eps=0.0), want_grpo, rtol=1e-12)
    want_dr = np.array([[0.75, -0.25, -0.25, -0.25], [0, 0, 0, 0], [-1.5, -0.5, 0.5, 1.5]])
    np.testing.assert_allclose(group_advantages(r, "dr_grpo"), want_dr, rtol=1e-12)
    # rloo: r_i - mean of the other three
    want_rloo = np.array([[1.0, -1 / 3, -1 / 3, -1 / 3], [0, 0, 0, 0], [-2.0, -2 / 3, 2 / 3, 2.0]])
    np.testing.assert_allclose(group_advantages(r, "rloo"), want_rloo, rtol=1e-12)


@pytest.mark.parametrize("mode", ["grpo", "dr_grpo", "rloo"])
@pytest.mark.parametrize("eps", [0.0, 1e-4])
def test_all_equal_groups_zero_no_nan(mode, eps):
    r = jnp.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.3, 0.3, 0.3]], jnp.float32)
    a = group_advantages(r, mode, eps=eps)
    assert a.dtype == jnp.float32
    assert np.all(np.asarray(a) == 0.0)


def test_advantages_bad_input():
    with pytest.raises(ValueError, match="advantage mode 'ppo'"):
        group_advantages(jnp.zeros((2, 3)), "ppo")
    with pytest.raises(ValueError, match=r"\(B, G\)"):
        group_advantages(jnp.zeros(3), "grpo")
    with pytest.raises(ValueError, match="G >= 2"):
        group_advantages(jnp.zeros((3, 1)), "rloo")


def test_k3_nonnegative_and_zero_at_equal(key):
    a, b = jax.random.normal(key, (2, 1000)) * 3
    kl = k3_kl(a, b)
    assert float(kl.min()) >= 0.0
    np.testing.assert_array_equal(k3_kl(a, a), 0.0)
    # unbiased for KL(p || q) when sampling from p: two categoricals
    p = jnp.array([0.7, 0.2, 0.1])
    q = jnp.array([0.5, 0.3, 0.2])
    exact = float(jnp.sum(p * jnp.log(p / q)))
    est = float(jnp.sum(p * k3_kl(jnp.log(p), jnp.log(q))))
    assert est == pytest.approx(exact, rel=1e-12)


def test_clipped_surrogate_gradient_zero_outside_clip_range():
    eps = 0.2
    old = jnp.zeros((4, 1))
    # ratios 1.5 (A>0: clipped), 0.5 (A<0: clipped), 1.5 (A<0: not clipped), 1.1 (A>0: inside)
    logp = jnp.log(jnp.array([[1.5], [0.5], [1.5], [1.1]]))
    adv = jnp.array([1.0, -1.0, -1.0, 1.0])

    def total(lp):
        s, _, _ = clipped_surrogate(lp, old, adv, eps_low=eps, eps_high=eps)
        return s.sum()

    g = jax.grad(total)(logp)[:, 0]
    assert float(g[0]) == 0.0 and float(g[1]) == 0.0
    # unclipped branch: d(ratio * A)/dlogp = ratio * A
    np.testing.assert_allclose(g[2], -1.5, rtol=1e-12)
    np.testing.assert_allclose(g[3], 1.1, rtol=1e-12)
    _, ratio, active = clipped_surrogate(logp, old, adv, eps_low=eps, eps_high=eps)
    np.testing.assert_array_equal(active[:, 0], [True, True, False, False])


def test_ratio_one_and_no_clip_when_on_policy(key):
    logp = -jnp.abs(jax.random.normal(key, (6, 5)))
    adv = jnp.linspace(-2, 2, 6)
    mask = jnp.ones((6, 5), bool)
    t = grpo_loss(logp, jnp.zeros_like(logp), jax.lax.stop_gradient(logp), None, adv, mask)
    assert float(t.is_ratio_mean) == 1.0 and float(t.is_ratio_max) == 1.0 and float(t.clip_frac) == 0.0


def test_aggregation_modes():
    v = jnp.array([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    m = jnp.array([[True, True, True], [True, False, False]])
    assert float(aggregate(v, m, "token_mean")) == pytest.approx(10 / 4)
    assert float(aggregate(v, m, "seq_mean_token_mean")) == pytest.approx((2.0 + 4.0) / 2)
    assert float(aggregate(v, m, "seq_mean_token_sum_norm")) == pytest.approx(10 / 6)
    with pytest.raises(ValueError, match="aggregation 'sum'"):
        aggregate(v, m, "sum")


def test_kl_term_gradient_pulls_towards_reference():
    logp = jnp.log(jnp.array([[0.5, 0.2]]))
    ref = jnp.log(jnp.array([[0.4, 0.4]]))
    mask = jnp.ones((1, 2), bool)

    def loss(lp):
        return grpo_loss(lp, jnp.zeros_like(lp), lp, ref, jnp.zeros(1), mask, beta=1.0).loss

    g = jax.grad(loss)(logp)
    # d/dl [e^{r-l} - (r-l) - 1] = 1 - e^{r-l}: positive where logp > ref, negative where below
    assert float(g[0, 0]) > 0 and float(g[0, 1]) < 0
    with pytest.raises(ValueError, match="needs reference"):
        grpo_loss(logp, logp, logp, None, jnp.zeros(1), mask, beta=0.1)
