"""Stiffness by Lanczos / Arnoldi on Jacobian-vector products, against dense matrices from ``jax.jacfwd``.

The model: a softmax policy network small enough to build its Jacobians densely (a one-hidden-layer MLP
over 6 prompts and 5 answers, 77 parameters), its exact expected GRPO-like update without a ratio, with a
baseline and a k3 KL anchor on the stale samples (Arnoldi, which does not assume symmetry), and the Hessian of a small MLP loss (symmetric).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from grpojax.grpo import stiffness
from grpojax.grpo._stiffness import jacobian_products, leading_eigen

P, A, H = 6, 5, 6


def _params(key):
    k1, k2, k3 = jax.random.split(key, 3)
    return {"w1": jax.random.normal(k1, (P, H)) * 0.8, "b1": jnp.zeros(H),
            "w2": jax.random.normal(k2, (H, A)) * 0.8, "b2": jax.random.normal(k3, (A,)) * 0.3}


def _logp(p):
    h = jnp.tanh(p["w1"] + p["b1"][None, :])  # one-hot prompts: row i of w1
    return jax.nn.log_softmax(h @ p["w2"] + p["b2"][None, :], axis=-1)


def _update(p, pb, ref, beta=0.3):
    """Expected step direction: reward r(i, a) = [a == i mod A] on samples from π_b, baseline E_b[r], k3 KL."""
    lpb, lref = _logp(pb), _logp(ref)
    r = jax.nn.one_hot(jnp.arange(P) % A, A)
    adv = r - (jnp.exp(lpb) * r).sum(-1, keepdims=True)

    def objective(q):  # no ratio: samples from π_b scored at π_θ; the k3 KL on the same samples
        lq = _logp(q)
        k3 = jnp.exp(lref - lq) - (lref - lq) - 1.0
        return (jnp.exp(lpb) * (adv * lq - beta * k3)).sum()

    return jax.grad(objective)(p)


@pytest.fixture(scope="module")
def setup():
    with jax.enable_x64(True):
        key = jax.random.key(3)
        p = jax.tree.map(lambda x: x.astype(jnp.float64), _params(key))
        ref = jax.tree.map(lambda x: x + 0.1, p)
        upd = lambda a, b: _update(a, b, ref)  # noqa: E731
        flat, unravel = ravel_pytree(p)
        f = lambda x, y: ravel_pytree(upd(unravel(x), unravel(y)))[0]  # noqa: E731
        J0 = np.asarray(jax.jacfwd(lambda x: f(x, flat))(flat))
        Jd = np.asarray(jax.jacfwd(lambda y: f(flat, y))(flat))
        yield p, upd, -J0, -Jd


def _lead(m):
    ev = np.linalg.eigvals(m)
    return ev[np.argmax(ev.real)]


@pytest.mark.slow  # ~30-50 s on a loaded 2-core machine (dense jacfwd of a nested grad, compiled)
def test_jacobian_products_equal_dense_jacobians(setup):
    p, upd, K0, Kd = setup
    with jax.enable_x64(True):
        k0, kd, n = jacobian_products(upd, p)
        v = np.random.default_rng(0).standard_normal(n)
        np.testing.assert_allclose(k0(v), K0 @ v, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(kd(v), Kd @ v, rtol=1e-10, atol=1e-12)
    assert np.abs(Kd).max() > 1e-3 and np.abs(K0).max() > 1e-3


@pytest.mark.slow
def test_arnoldi_leading_eigenvalues_match_dense(setup):
    p, upd, K0, Kd = setup
    with jax.enable_x64(True):
        s = stiffness(upd, p, iters=77, rtol=1e-8)
    assert s.converged
    for est, dense in ((s.instant, K0), (s.stale, Kd), (s.total_estimate, K0 + Kd)):
        ref = _lead(dense)
        assert est.value == pytest.approx(ref.real, rel=1e-6, abs=1e-9)
        assert est.residual <= 1e-8
    v = s.total_estimate.vector
    assert s.k_instant == pytest.approx(v @ K0 @ v, rel=1e-9) and s.k_stale == pytest.approx(v @ Kd @ v, rel=1e-9)


@pytest.mark.slow  # compiles a Hessian: ~20 s on a loaded 2-core machine
def test_lanczos_matches_dense_hessian():
    """A symmetric case: the Hessian of a small MLP regression loss, built by ``jax.hessian``."""
    with jax.enable_x64(True):
        key = jax.random.key(0)
        x = jax.random.normal(key, (20, 3))  # noqa: N806
        y = jnp.sin(x.sum(1))
        p = {"w": jax.random.normal(jax.random.key(1), (3, 8)) * 0.5, "v": jax.random.normal(jax.random.key(2), (8,))}
        flat, unravel = ravel_pytree(p)
        loss = lambda q: jnp.mean((jnp.tanh(x @ unravel(q)["w"]) @ unravel(q)["v"] - y) ** 2)  # noqa: E731
        Hd = np.asarray(jax.hessian(loss)(flat))
        hvp = jax.jit(lambda v: jax.jvp(jax.grad(loss), (flat,), (v,))[1])
        est = leading_eigen(lambda v: np.asarray(hvp(jnp.asarray(v))), flat.size, iters=40, symmetric=True, rtol=1e-9)
    top = np.linalg.eigvalsh(Hd)[-1]
    assert est.converged and est.imag == 0.0
    assert est.value == pytest.approx(top, rel=1e-6)
    assert len(est.history) == est.iterations


def test_convergence_is_reported_not_assumed():
    """Two Krylov steps on a spread spectrum cannot reach 5%: the estimate says so."""
    d = np.linspace(1.0, 10.0, 200)
    est = leading_eigen(lambda v: d * v, 200, iters=2, symmetric=True)
    assert not est.converged and est.residual > 0.05 and est.value < 10.0
    good = leading_eigen(lambda v: d * v, 200, iters=120, symmetric=True)
    assert good.converged and good.value == pytest.approx(10.0, rel=0.05)


def test_bad_input():
    with pytest.raises(ValueError, match="iters"):
        leading_eigen(lambda v: v, 3, iters=0)
    with pytest.raises(ValueError, match="non-finite"):
        leading_eigen(lambda v: v * np.nan, 3)
