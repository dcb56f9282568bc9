"""The creep posterior in NumPy against its numpyro statement, and Pareto smoothing (arviz) against the method written out."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.infer.util import potential_energy

from grpojax.fit._creep import SITES, creep_model, fit_creep_batched
from grpojax.fit._creep_density import constrain, potential_and_grad, unconstrain
from grpojax.fit._psis import psis_log_weights


@pytest.fixture(scope="module")
def curve():
    rng = np.random.default_rng(1)
    n = 57
    t = np.sort(rng.uniform(0.0, 1.0, n))
    t[0] = 0.0
    y = np.tanh(3 * t) + 0.3 * rng.standard_normal(n)
    y = (y - y.mean()) / y.std()
    return t, y, np.array([y[:3].mean(), y[-10:].mean()])


def test_numpy_potential_and_gradient_equal_numpyro_and_jax_grad(curve):
    """U and dU/dz of every variant (0: one exponential, 1: creep, 2: logistic) at random points, against
    numpyro's potential_energy of creep_model and jax.grad of it (the test session runs JAX in float64)."""
    t, y, anc = curve
    n = t.size

    def U(z, flag):
        a = jnp.concatenate([jnp.asarray(anc), flag[None]])
        return potential_energy(creep_model, (jnp.asarray(t), jnp.asarray(y), jnp.ones(n, bool), a),
                                {}, {k: z[i] for i, k in enumerate(SITES)})

    ref = jax.jit(jax.vmap(jax.value_and_grad(U), in_axes=(0, None)))
    rng = np.random.default_rng(2)
    for flag in (0.0, 1.0, 2.0):
        Z = rng.normal(0.0, 0.7, (8, len(SITES)))
        u_ref, g_ref = (np.asarray(a, float) for a in ref(jnp.asarray(Z), jnp.asarray(flag)))
        u, g = potential_and_grad(Z, t, y, anc, flag)
        np.testing.assert_allclose(u, u_ref, rtol=1e-10)
        np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-10 * np.abs(g_ref).max())
        # and the gradient is the derivative of the potential (central differences in float64)
        h = 1e-6
        fd = np.stack([(potential_and_grad(Z + h * e, t, y, anc, flag, grad=False)
                        - potential_and_grad(Z - h * e, t, y, anc, flag, grad=False)) / (2 * h) for e in np.eye(len(SITES))], -1)
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-5)


def test_constrain_inverts_unconstrain():
    v = {"y0": 0.3, "p_star": 1.2, "w": 0.25, "log_rate": 1.0, "log_theta": -0.5, "log_k": 0.1, "sigma": 0.4, "rho": 0.6,
         "nu": 7.0}
    back = constrain(unconstrain(v))
    for k in SITES:
        assert back[k] == pytest.approx(v[k], rel=1e-12)


def _arviz_psis(log_weights):
    """arviz's PSIS (Vehtari et al. 2024: Zhang and Stephens' generalized Pareto fit of the tail with its weak prior
    towards k = 0.5), the reference the NumPy smoothing is held to."""
    import warnings  # noqa: PLC0415

    with warnings.catch_warnings():  # arviz announces its coming refactor with a FutureWarning on import
        warnings.simplefilter("ignore", FutureWarning)
        from arviz import psislw  # noqa: PLC0415

    lw, k = psislw(np.array(log_weights, dtype=float))
    return np.asarray(lw, dtype=float), float(k)


@pytest.mark.parametrize("df, scale", [(3, 0.5), (5, 2.0), (30, 4.0)])
def test_pareto_smoothing_equals_arviz(df, scale):
    rng = np.random.default_rng(df)
    lw = scale * rng.standard_t(df, 2000)
    lw[:50] = -np.inf  # proposals outside the support
    a, ka = _arviz_psis(lw)
    b, kb = psis_log_weights(lw)
    assert kb == pytest.approx(float(ka), rel=1e-12)
    np.testing.assert_allclose(np.exp(b), np.exp(a), atol=1e-15)
    assert np.exp(b).sum() == pytest.approx(1.0, rel=1e-12)


def test_creep_posterior_depends_on_the_key_only():
    """Draws are reproducible for a key and do not depend on the other curves of the call."""
    s = np.arange(60.0)
    y1 = 0.2 + 0.5 * (1 - np.exp(-s / 15)) + 0.02 * np.random.default_rng(0).standard_normal(60)
    y2 = 0.1 + 0.3 * (1 - np.exp(-s / 30)) + 0.02 * np.random.default_rng(1).standard_normal(60)
    kw = dict(num_draws=50, num_proposals=200, opt_steps=100)
    a = fit_creep_batched([(s, y1), (s, y2)], key=jax.random.key(3), **kw)
    b = fit_creep_batched([(s, y1), (s, y2)], key=jax.random.key(3), **kw)
    c = fit_creep_batched([(s, y1)], key=jax.random.key(4), **kw)
    np.testing.assert_array_equal(a.samples["p_star"], b.samples["p_star"])
    assert not np.array_equal(a.samples["p_star"][0], c.samples["p_star"][0])
