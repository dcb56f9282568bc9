"""The whole-displacement escape model: moments against a simulation of the same recurrence, the reduction to
the one-direction model, the stationary covariance, the invariant subspace, and bad input."""

import numpy as np
import pytest

from _linear_update import linear_instance
from grpojax._errors import InvalidValueError
from grpojax.dynamics._escape import escape_probability
from grpojax.dynamics._escape_full import (displacement_moments, escape_full, growth_stationary, invariant_subspace,
                                           stationary_displacement)


def _simulate(k0, kd, cov, eta, mu, k_ref, steps, paths, c=0.0, M=None, seed=1):
    """The recurrence written out directly, vectorised over paths: heavy ball on the linear gradient, the step's
    noise Σ^½ z scaled by sqrt(1 + c eᵀ M e) at the displacement before the step (c = 0: additive)."""
    rng = np.random.default_rng(seed)
    n = k0.shape[0]
    L = np.linalg.cholesky(cov)
    e, m, s = np.zeros((paths, n)), np.zeros((paths, n)), np.zeros((paths, n))
    prev = None
    for t in range(steps):
        if t % k_ref == 0:
            s = e.copy()
        noise = rng.standard_normal((paths, n)) @ L.T
        if c:
            noise *= np.sqrt(1.0 + c * np.einsum("pi,ij,pj->p", e, M, e))[:, None]
        g = e @ k0.T + s @ kd.T + noise
        m = mu * m + g
        prev = e
        e = e - eta * m
    return e, prev


@pytest.mark.parametrize("mu,k_ref", [(0.0, 1), (0.6, 3)])
def test_covariance_matches_simulation_of_the_recurrence(mu, k_ref):
    k0, kd, cov = linear_instance()
    eta, steps, paths = 0.3, 25, 20000
    P, lag1 = displacement_moments(k0, kd, cov, eta, mu, k_ref, steps)
    e, prev = _simulate(k0, kd, cov, eta, mu, k_ref, steps, paths)
    emp = e.T @ e / paths  # mean is zero exactly: second moments
    emp_lag = e.T @ prev / paths
    # standard error of a product moment of a centred Gaussian pair: sqrt((P_ii P_jj + P_ij^2) / paths)
    d = np.diag(P[-1])
    se = np.sqrt((np.outer(d, d) + P[-1] ** 2) / paths)
    assert np.all(np.abs(emp - P[-1]) < 5 * se)
    dprev = np.diag(P[-2])
    se_lag = np.sqrt((np.outer(d, dprev) + lag1[-1] ** 2) / paths)
    assert np.all(np.abs(emp_lag - lag1[-1]) < 5 * se_lag)
    assert np.abs(P[-1]).max() > 10 * se.max()  # the band is narrow against the covariance itself


@pytest.mark.parametrize("eta,mu,k_ref,kd,k0,w", [(0.5, 0.0, 1, 0.4, 0.3, 1.0), (0.05, 0.9, 4, -0.1, 1.1, 0.7),
                                                  (0.05, 0.5, 16, 0.3, 0.2, 0.5)])
def test_one_dimension_reduces_to_the_one_direction_model(eta, mu, k_ref, kd, k0, w):
    noise, batch, steps = 2.0, 8, 400
    ref = escape_probability(eta, mu, k_ref, kd, k_instant=k0, noise=noise, samples_per_step=batch, basin=w,
                             steps=steps, lag="periodic")
    full = escape_full([[k0]], [[kd]], [[noise / batch]], eta, mu, k_ref, steps, exits="exact_1d", width=w)
    assert 1e-6 < float(ref.probability) < 1 - 1e-6  # a case where the number means something
    np.testing.assert_allclose(full.probability, float(ref.probability), rtol=1e-6)
    np.testing.assert_allclose(full.expected_exits, float(ref.expected_exits), rtol=1e-6)
    np.testing.assert_allclose(full.covariance[0, 0], float(ref.variance), rtol=1e-9)


def test_monte_carlo_exits_match_the_exact_ones_in_one_dimension():
    eta, mu, k_ref, kd, k0, noise, w, steps = 0.05, 0.9, 4, -0.1, 1.1, 0.25, 0.7, 400
    exact = escape_full([[k0]], [[kd]], [[noise]], eta, mu, k_ref, steps, exits="exact_1d", width=w)
    samples = 4000
    mc = escape_full([[k0]], [[kd]], [[noise]], eta, mu, k_ref, steps, lambda e: np.abs(e[:, 0]) > w,
                     samples=samples, seed=3)
    assert exact.expected_exits > 0.05
    # the exits of one step are a binomial count over fresh draws: s.e. of the sum about sqrt(sum / samples)
    se = np.sqrt(exact.expected_exits / samples)
    assert abs(mc.expected_exits - exact.expected_exits) < 4 * se


def test_stationary_covariance_is_the_limit_of_the_iterated_one():
    k0, kd, cov = linear_instance(n=3, seed=2)
    eta, mu, k_ref = 0.4, 0.3, 2
    Pst, radius = stationary_displacement(k0, kd, cov, eta, mu, k_ref)
    assert radius < 1
    P, _ = displacement_moments(k0, kd, cov, eta, mu, k_ref, 2000)
    np.testing.assert_allclose(P[-1], Pst, rtol=1e-8, atol=1e-12)  # 2000 is a multiple of k_ref: same phase
    Pu, ru = stationary_displacement(k0, kd, cov, 50.0, mu, k_ref)
    assert ru > 1 and np.isnan(Pu).all()


def test_invariant_subspace_gives_the_same_law():
    rng = np.random.default_rng(4)
    n, r = 9, 3
    B = np.linalg.qr(rng.standard_normal((n, n)))[0][:, :r]  # the noise and the matrices live on r directions
    k0 = B @ (np.diag([0.9, 0.5, 0.2]) + 0.05 * rng.standard_normal((r, r))) @ B.T
    kd = B @ (0.2 * rng.standard_normal((r, r))) @ B.T
    L = rng.standard_normal((r, 2))
    cov = B @ (L @ L.T) @ B.T * 0.1  # rank 2 of the 3: the third direction is reached through K_0, K_d
    U = invariant_subspace(k0, kd, cov)
    assert U.shape == (n, r)
    P, _ = displacement_moments(k0, kd, cov, 0.3, 0.5, 2, 40)
    Pr, _ = displacement_moments(U.T @ k0 @ U, U.T @ kd @ U, U.T @ cov @ U, 0.3, 0.5, 2, 40)
    np.testing.assert_allclose(U @ Pr[-1] @ U.T, P[-1], atol=1e-12 * np.abs(P[-1]).max() + 1e-15)


def test_bad_input_is_refused():
    k0, kd, cov = linear_instance(n=2)
    with pytest.raises(InvalidValueError, match="noise_cov must be positive semi-definite"):
        displacement_moments(k0, kd, -cov, 0.1, 0.0, 1, 5)
    with pytest.raises(InvalidValueError, match="same size"):
        displacement_moments(k0, kd[:1, :1], cov, 0.1, 0.0, 1, 5)
    with pytest.raises(InvalidValueError, match="k_ref"):
        displacement_moments(k0, kd, cov, 0.1, 0.0, 0, 5)
    with pytest.raises(InvalidValueError, match="mu"):
        displacement_moments(k0, kd, cov, 0.1, 1.0, 1, 5)
    with pytest.raises(InvalidValueError, match="outside must be given"):
        escape_full(k0, kd, cov, 0.1, 0.0, 1, 5)
    with pytest.raises(InvalidValueError, match="exact_1d"):
        escape_full(k0, kd, cov, 0.1, 0.0, 1, 5, exits="exact_1d", width=1.0)


# noise that grows with the state: Σ(e) = Σ (1 + c eᵀ M e)


@pytest.mark.parametrize("mu,k_ref", [(0.0, 1), (0.6, 3)])
def test_growth_covariance_matches_simulation_of_the_recurrence(mu, k_ref):
    k0, kd, cov = linear_instance()
    rng = np.random.default_rng(7)
    B = rng.standard_normal((4, 4))
    M = B @ B.T / 4
    eta, steps, paths = 0.3, 25, 20000
    P0, _ = displacement_moments(k0, kd, cov, eta, mu, k_ref, steps)
    c = 0.6 / float(np.sum(M * P0[-1]))  # c q(e) about 0.6 at the additive model's spread
    P, lag1 = displacement_moments(k0, kd, cov, eta, mu, k_ref, steps, noise_growth=c, growth_metric=M)
    e, prev = _simulate(k0, kd, cov, eta, mu, k_ref, steps, paths, c, M, seed=5)
    # standard error of each product moment from the simulated products themselves (the law is not normal)
    prod = e[:, :, None] * e[:, None, :]
    se = prod.std(0) / np.sqrt(paths)
    assert np.all(np.abs(prod.mean(0) - P[-1]) < 5 * se)
    lagp = e[:, :, None] * prev[:, None, :]
    assert np.all(np.abs(lagp.mean(0) - lag1[-1]) < 5 * lagp.std(0) / np.sqrt(paths))
    # the growth is visible against the band: the additive model's covariance is far outside it
    assert np.trace(P[-1]) - np.trace(P0[-1]) > 10 * np.sqrt(np.sum(se**2))


def test_growth_zero_is_the_additive_model():
    k0, kd, cov = linear_instance(n=3, seed=2)
    P, lag = displacement_moments(k0, kd, cov, 0.4, 0.3, 2, 60)
    Pg, lagg = displacement_moments(k0, kd, cov, 0.4, 0.3, 2, 60, noise_growth=0.0, growth_metric=np.eye(3))
    np.testing.assert_array_equal(P, Pg)
    np.testing.assert_array_equal(lag, lagg)
    st = growth_stationary(k0, kd, cov, 0.4, 0.3, 2)
    Pst, radius = stationary_displacement(k0, kd, cov, 0.4, 0.3, 2)
    assert st.stable and st.gain == 0.0 and st.radius == pytest.approx(radius, rel=1e-12)
    np.testing.assert_allclose(st.covariance, Pst, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("eta,mu,k_ref,kd,k0,w,c", [(0.5, 0.0, 1, 0.4, 0.3, 1.0, 0.8), (0.05, 0.9, 4, -0.1, 1.1, 0.7, 2.0),
                                                    (0.05, 0.5, 16, 0.3, 0.2, 0.5, 3.0)])
def test_growth_in_one_dimension_reduces_to_the_one_direction_growth_model(eta, mu, k_ref, kd, k0, w, c):
    noise, batch, steps = 2.0, 8, 400
    ref = escape_probability(eta, mu, k_ref, kd, k_instant=k0, noise=noise, samples_per_step=batch, basin=w,
                             steps=steps, lag="periodic", noise_growth=c)
    add = escape_probability(eta, mu, k_ref, kd, k_instant=k0, noise=noise, samples_per_step=batch, basin=w,
                             steps=steps, lag="periodic")
    full = escape_full([[k0]], [[kd]], [[noise / batch]], eta, mu, k_ref, steps, exits="exact_1d", width=w,
                       noise_growth=c)
    assert float(ref.probability) > float(add.probability) + 0.01  # the growth matters in these cases
    np.testing.assert_allclose(full.probability, float(ref.probability), rtol=1e-6)
    np.testing.assert_allclose(full.covariance[0, 0], float(ref.variance), rtol=1e-9)
    st = growth_stationary([[k0]], [[kd]], [[noise / batch]], eta, mu, k_ref, noise_growth=c)
    assert st.stable == bool(ref.stable)
    # the one-direction model reports the stationary variance averaged over the period
    np.testing.assert_allclose(st.growth_trace.mean(), float(ref.stationary_variance), rtol=1e-8)


def test_growth_gain_marks_where_the_spread_stops_being_bounded():
    k0, kd, cov = linear_instance(n=3, seed=2)
    eta, mu, k_ref = 0.4, 0.3, 2
    unit = growth_stationary(k0, kd, cov, eta, mu, k_ref, noise_growth=1.0)
    c_edge = 1.0 / unit.gain  # the gain is linear in c
    below = growth_stationary(k0, kd, cov, eta, mu, k_ref, noise_growth=0.9 * c_edge)
    above = growth_stationary(k0, kd, cov, eta, mu, k_ref, noise_growth=1.1 * c_edge)
    assert below.stable and not above.stable and np.isnan(above.covariance).all()
    P, _ = displacement_moments(k0, kd, cov, eta, mu, k_ref, 4000, noise_growth=0.9 * c_edge)
    np.testing.assert_allclose(P[-1], below.covariance, rtol=1e-6)  # the iterated recursion converges to it
    Pa, _ = displacement_moments(k0, kd, cov, eta, mu, k_ref, 4000, noise_growth=1.1 * c_edge)
    assert np.trace(Pa[-1]) > 1e3 * np.trace(below.covariance)  # and grows without bound past the edge


def test_growth_bad_input_is_refused():
    k0, kd, cov = linear_instance(n=2)
    with pytest.raises(InvalidValueError, match="noise_growth"):
        displacement_moments(k0, kd, cov, 0.1, 0.0, 1, 5, noise_growth=-1.0)
    with pytest.raises(InvalidValueError, match="growth_metric must be a square"):
        displacement_moments(k0, kd, cov, 0.1, 0.0, 1, 5, noise_growth=1.0, growth_metric=np.eye(3))
    with pytest.raises(InvalidValueError, match="positive semi-definite"):
        growth_stationary(k0, kd, cov, 0.1, 0.0, 1, noise_growth=1.0, growth_metric=-np.eye(2))


def test_growth_monte_carlo_exits_match_the_exact_ones_in_one_dimension():
    eta, mu, k_ref, kd, k0, noise, w, steps, c = 0.05, 0.9, 4, -0.1, 1.1, 0.25, 0.7, 400, 4.0
    exact = escape_full([[k0]], [[kd]], [[noise]], eta, mu, k_ref, steps, exits="exact_1d", width=w, noise_growth=c)
    additive = escape_full([[k0]], [[kd]], [[noise]], eta, mu, k_ref, steps, exits="exact_1d", width=w)
    samples = 4000
    mc = escape_full([[k0]], [[kd]], [[noise]], eta, mu, k_ref, steps, lambda e: np.abs(e[:, 0]) > w,
                     samples=samples, seed=3, noise_growth=c)
    assert exact.expected_exits > 2 * additive.expected_exits > 0.1  # the growth matters here
    se = np.sqrt(exact.expected_exits / samples)
    assert abs(mc.expected_exits - exact.expected_exits) < 4 * se
    st = growth_stationary([[k0]], [[kd]], [[noise]], eta, mu, k_ref, noise_growth=c)
    assert mc.gain == pytest.approx(st.gain, rel=1e-12) and 0 < mc.gain < 1


def test_growth_past_the_edge_escapes_for_sure():
    k0, kd, cov = linear_instance(n=3, seed=2)
    eta, mu, k_ref = 0.4, 0.3, 2
    c = 3.0 / growth_stationary(k0, kd, cov, eta, mu, k_ref, noise_growth=1.0).gain  # gain 3
    width = 5 * np.sqrt(np.trace(stationary_displacement(k0, kd, cov, eta, mu, k_ref)[0]))
    est = escape_full(k0, kd, cov, eta, mu, k_ref, 400, lambda e: np.linalg.norm(e, axis=1) > width, samples=200,
                      noise_growth=c)
    assert est.gain == pytest.approx(3.0, rel=1e-9)
    assert est.probability == 1.0
    add = escape_full(k0, kd, cov, eta, mu, k_ref, 400, lambda e: np.linalg.norm(e, axis=1) > width, samples=200)
    assert add.probability < 0.05  # the additive model at the same rate stays well inside this basin
