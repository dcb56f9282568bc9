"""Closed-form trajectory against jax.scipy expm and a float64 diffrax ODE solve."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import expm

import grpojax.dynamics as dyn
from grpojax.dynamics._trajectory import state_trajectory


def _params_with_zeta(zeta, M=1.3, K=0.02):
    C = 2.0 * zeta * np.sqrt(M * K)
    return dyn.OscillatorParams(M=M, C=C, K_eff=K, p_star=0.7, D=0.0)


@jax.jit
def _ode_solution(p, ts, e0):
    F = dyn.drift_matrix(p)
    term = diffrax.ODETerm(lambda t, y, args: F @ y)
    sol = diffrax.diffeqsolve(
        term, diffrax.Tsit5(), t0=0.0, t1=ts[-1], dt0=0.01, y0=jnp.stack([e0, 0.0 * e0]),
        saveat=diffrax.SaveAt(ts=ts), stepsize_controller=diffrax.PIDController(rtol=1e-13, atol=1e-14),
        max_steps=200_000,
    )
    return sol.ys[:, 0]


@pytest.mark.parametrize("zeta", [3.0, 1.0 + 1e-6, 1.0, 1.0 - 1e-6, 0.3, 0.02])
def test_closed_form_equals_ode_solve(zeta):
    p = jax.tree.map(lambda x: jnp.asarray(x, dtype=jnp.float64), _params_with_zeta(zeta))
    ts = jnp.linspace(0.0, 200.0, 41)
    e0 = -0.6
    closed = dyn.trajectory(p, ts, e0=e0)
    numeric = _ode_solution(p, ts, jnp.float64(e0))
    assert np.max(np.abs(closed - numeric)) <= 1e-8 * abs(e0)


def test_unstable_regime_matches_ode_solve():
    p = jax.tree.map(lambda x: jnp.asarray(x, dtype=jnp.float64), dyn.OscillatorParams(M=1.0, C=-0.05, K_eff=0.04))
    ts = jnp.linspace(0.0, 200.0, 41)
    closed = dyn.trajectory(p, ts, e0=1.0)
    numeric = _ode_solution(p, ts, jnp.float64(1.0))
    np.testing.assert_allclose(closed, numeric, rtol=1e-9, atol=1e-9)


def test_expm2_matches_scipy_expm_including_repeated_roots():
    rng = np.random.default_rng(1)
    mats = [rng.normal(size=(2, 2)) for _ in range(20)]
    mats += [np.array([[0.0, 1.0], [-1.0, -2.0]]), np.array([[0.0, 1.0], [-0.25, -1.0 + 1e-9]])]
    for F in mats:
        for t in (0.0, 0.3, 4.0):
            np.testing.assert_allclose(dyn.expm2(F, t), expm(F * t), rtol=1e-11, atol=1e-12)


def test_expm2_coefficients_numpy_equal_the_jitted_ones():
    """The NumPy twin (used where XLA would not pay off) equals the compiled coefficients on every branch:
    Taylor (q² t² small), real roots (overdamped, also strongly) and complex roots (underdamped)."""
    from grpojax.dynamics._expm2 import expm2_coefficients

    rng = np.random.default_rng(2)
    s = np.concatenate([rng.normal(size=200), [-1.0, -1.0, -50.0, 0.0]])
    d = np.concatenate([rng.normal(size=200), [1.0, 1.0 - 1e-5, 1.0, 4.0]])
    t = np.concatenate([rng.uniform(0, 5, size=200), [3.0, 3.0, 2.0, 1.0]])
    for a, b in zip(dyn.expm2_coefficients_numpy(s, d, t), expm2_coefficients(s, d, t)):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-14)

def test_starts_at_rest_with_zero_slope():
    for zeta in (0.2, 1.0, 4.0):
        p = _params_with_zeta(zeta)
        assert float(dyn.trajectory(p, 0.0, e0=0.4)) == pytest.approx(0.4, abs=1e-15)
        slope = jax.grad(lambda t: dyn.trajectory(p, t, e0=0.4))(0.0)
        assert abs(float(slope)) < 1e-12


def test_massless_limit_is_single_exponential():
    C, K = 0.1, 0.002
    p = dyn.OscillatorParams(M=1e-9, C=C, K_eff=K)
    ts = jnp.linspace(0.0, 500.0, 11)
    np.testing.assert_allclose(dyn.trajectory(p, ts, e0=1.0)[1:], np.exp(-K * ts[1:] / C), rtol=1e-6)


def test_gradients_finite_and_correct_at_critical_damping():
    def e_at(params_vec, t=30.0):
        M, C, K = params_vec
        return dyn.trajectory(dyn.OscillatorParams(M=M, C=C, K_eff=K), t, e0=1.0)

    M, K = 1.0, 0.01
    x = jnp.array([M, 2.0 * np.sqrt(M * K), K])  # ζ = 1 exactly
    g = jax.grad(e_at)(x)
    assert np.all(np.isfinite(g))
    h = 1e-6
    fd = np.array([(e_at(x.at[i].add(h)) - e_at(x.at[i].add(-h))) / (2 * h) for i in range(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-10)


def test_vectorised_over_parameters_equals_loop_and_jit_equals_eager():
    zetas = jnp.linspace(0.05, 3.0, 2000)
    p = _params_with_zeta(zetas)
    ts = 25.0
    batched = dyn.trajectory(p, ts)
    jitted = jax.jit(lambda z: dyn.trajectory(_params_with_zeta(z), ts))(zetas)
    vmapped = jax.vmap(lambda z: dyn.trajectory(_params_with_zeta(z), ts))(zetas)
    loop = np.array([float(dyn.trajectory(_params_with_zeta(float(z)), ts)) for z in zetas[::250]])
    np.testing.assert_allclose(batched[::250], loop, rtol=1e-13)
    np.testing.assert_allclose(jitted, batched, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(vmapped, batched, rtol=1e-12, atol=1e-15)


def test_mean_reward_and_state_trajectory():
    p = dyn.from_hyperparams(0.05, 0.9, 2, 0.3, p_star=0.8)
    ts = jnp.array([0.0, 10.0, 100.0])
    r = dyn.mean_reward(p, ts, 0.2)
    np.testing.assert_allclose(r, 0.8 + (0.2 - 0.8) * dyn.trajectory(p, ts))
    x = state_trajectory(p, ts, jnp.array([-0.6, 0.0]))
    np.testing.assert_allclose(x[:, 0], r - 0.8, rtol=1e-12)
    with pytest.raises(ValueError, match="t"):
        dyn.trajectory(p, -1.0)
