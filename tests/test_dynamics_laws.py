"""Reward-curve laws: shared interface, transforms, zero initial slope, parameter recovery."""

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import grpojax.dynamics as dyn

TRUE = {
    "exponential": dyn.Exponential(0.15, 0.8, 60.0),
    "three_phase": dyn.ThreePhase(0.15, 0.8, 0.05, 0.6),
    "sigmoid": dyn.Sigmoid(0.15, 0.8, 80.0, 2.5),
}
START = {
    "exponential": dyn.Exponential(0.1, 0.7, 30.0),
    "three_phase": dyn.ThreePhase(0.1, 0.7, 0.03, 0.9),
    "sigmoid": dyn.Sigmoid(0.1, 0.7, 50.0, 1.5),
}


@pytest.mark.parametrize("name", sorted(dyn.LAWS))
def test_fits_its_own_noiseless_samples_back(name):
    law_cls = dyn.get_law(name)
    t = jnp.linspace(0.0, 400.0, 200)
    y = TRUE[name](t)

    def residual(u, args):
        return law_cls.from_unconstrained(u)(t) - y

    sol = optx.least_squares(residual, optx.LevenbergMarquardt(rtol=1e-12, atol=1e-12),
                             START[name].to_unconstrained(), max_steps=2000)
    got = law_cls.from_unconstrained(sol.value).to_vector()
    np.testing.assert_allclose(got, TRUE[name].to_vector(), rtol=1e-5)


def test_three_phase_has_zero_initial_slope_and_exponential_does_not():
    for zeta in (0.2, 1.0, 3.0):
        law = dyn.ThreePhase(0.1, 0.9, 0.05, zeta)
        assert float(law(0.0)) == pytest.approx(0.1, abs=1e-15)
        assert abs(float(jax.grad(law)(0.0))) < 1e-12
    assert float(jax.grad(TRUE["exponential"])(0.0)) == pytest.approx((0.8 - 0.15) / 60.0)


def test_three_phase_is_the_oscillator_response():
    p = dyn.from_hyperparams(0.01, 0.9, 2, 0.6, p_star=0.8)
    omega0 = float(dyn.natural_frequency(p))
    zeta = float(dyn.damping_ratio(p))
    law = dyn.ThreePhase(0.2, 0.8, omega0, zeta)
    t = jnp.linspace(0.0, 500.0, 50)
    np.testing.assert_allclose(law(t), dyn.mean_reward(p, t, 0.2), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(dyn.LAWS))
def test_transforms_round_trip_and_batch(name):
    law = TRUE[name]
    back = type(law).from_unconstrained(law.to_unconstrained())
    np.testing.assert_allclose(back.to_vector(), law.to_vector(), rtol=1e-12)
    # any unconstrained vector maps inside the bounds
    u = jax.random.normal(jax.random.key(0), (500, law.num_params)) * 5
    v = type(law).from_unconstrained(u).to_vector()
    for i, (lo, hi) in enumerate(type(law).bounds):
        assert np.all(np.asarray(v[:, i]) >= lo) and np.all(np.asarray(v[:, i]) <= hi)
    # batched parameters evaluate like a loop
    batch = type(law).from_vector(jnp.stack([law.to_vector()] * 3) * jnp.array([[1.0], [1.01], [0.99]]))
    t = jnp.linspace(1.0, 100.0, 7)
    vals = jax.vmap(lambda L: L(t))(batch)
    for k in range(3):
        single = type(law).from_vector(batch.to_vector()[k])
        np.testing.assert_allclose(vals[k], single(t), rtol=1e-12)


def test_sigmoid_limits_and_unknown_law():
    s = TRUE["sigmoid"]
    assert float(s(0.0)) == pytest.approx(0.15)
    assert float(s(80.0)) == pytest.approx((0.15 + 0.8) / 2)
    assert float(s(1e9)) == pytest.approx(0.8, abs=1e-6)
    with pytest.raises(ValueError, match="unknown law"):
        dyn.get_law("logistic")
