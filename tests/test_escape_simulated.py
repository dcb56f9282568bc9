"""The exact first passage of the whole-displacement recurrence (``escape_simulated``): against closed forms and
quadrature where they exist, against a direct simulation written apart, its moments against the exact recursion,
the conditional covariance of the state-dependent noise, and bad input."""

import math

import numpy as np
import pytest
from scipy.special import erf
from scipy.stats import norm

from _linear_update import linear_instance
from grpojax._errors import InvalidValueError
from grpojax.dynamics._escape_full import displacement_moments, escape_simulated


def _never(e):
    return np.zeros(e.shape[0], bool)


def test_independent_steps_give_the_binomial_first_passage():
    # K_0 = I / eta, no lag, no momentum: e_{t+1} = -eta xi_t, independent draws, so
    # P(escape within T) = 1 - (1 - p)^T with p the probability that one draw leaves the box |e_i| <= w_i.
    eta, steps, paths = 0.5, 40, 4000
    sd = np.array([0.3, 0.5, 0.8])
    w = np.array([0.45, 0.7, 1.1])
    n = sd.size
    p_out = 1.0 - np.prod(erf(w / (eta * sd * math.sqrt(2.0))))
    exact = 1.0 - (1.0 - p_out) ** steps
    est = escape_simulated(np.eye(n) / eta, np.zeros((n, n)), np.diag(sd**2), eta, 0.0, 1, steps,
                           lambda e: np.any(np.abs(e) > w, axis=1), paths=paths, seed=2)
    assert 0.2 < exact < 0.8
    assert abs(est.probability - exact) < 4 * math.sqrt(exact * (1 - exact) / paths)
    left = est.first_exit > 0
    assert np.all(est.first_exit[left] <= steps) and np.all(np.any(np.abs(est.displacement[left]) > w, axis=1))
    assert np.all(np.all(np.abs(est.displacement[~left]) <= w, axis=1))


def _survival_by_quadrature(a, scale, c, w, steps, nodes=240):
    """P(|e_t| <= w for t = 1..T | e_0 = 0) of e_{t+1} = a e_t + scale sqrt(1 + c e_t^2) z_t (Nystrom method on
    Gauss-Legendre nodes of [-w, w]): the survival u_{k+1}(x) = integral of the Gaussian kernel times u_k."""
    y, wt = np.polynomial.legendre.leggauss(nodes)
    y, wt = w * y, w * wt

    def kernel(x):
        s = scale * np.sqrt(1.0 + c * x**2)
        return norm.pdf(y[None, :], loc=a * x[:, None], scale=s[:, None]) * wt[None, :]

    Kmat = kernel(y)
    u = np.ones(nodes)
    for _ in range(steps - 1):
        u = Kmat @ u
    return float((kernel(np.zeros(1)) @ u)[0])


@pytest.mark.parametrize("c,w", [(0.0, 1.0), (2.0, 1.2)])
def test_one_dimension_first_passage_matches_quadrature(c, w):
    # n = 1, no momentum, refresh every step: e_{t+1} = (1 - eta (k0 + kd)) e_t - eta sqrt(1 + c e_t^2) sigma z_t
    k0, kd, var, eta, steps, paths = 0.8, 0.4, 1.0, 0.25, 120, 4000
    exact = 1.0 - _survival_by_quadrature(1.0 - eta * (k0 + kd), eta * math.sqrt(var), c, w, steps)
    est = escape_simulated([[k0]], [[kd]], [[var]], eta, 0.0, 1, steps, lambda e: np.abs(e[:, 0]) > w,
                           paths=paths, seed=4, noise_growth=c)
    assert 0.1 < exact < 0.9
    assert abs(est.probability - exact) < 4 * math.sqrt(exact * (1 - exact) / paths)
    if c > 0:  # the growth matters against the band
        additive = 1.0 - _survival_by_quadrature(1.0 - eta * (k0 + kd), eta * math.sqrt(var), 0.0, w, steps)
        assert exact - additive > 10 * math.sqrt(exact * (1 - exact) / paths)


def _first_passage_direct(k0, kd, cov, eta, mu, k_ref, steps, paths, width, c=0.0, M=None, seed=11):
    """The recurrence in velocity form (heavy ball on the linear gradient), every path followed to the end."""
    rng = np.random.default_rng(seed)
    n = k0.shape[0]
    M = np.eye(n) if M is None else M
    L = np.linalg.cholesky(cov)
    e, m, s = np.zeros((paths, n)), np.zeros((paths, n)), np.zeros((paths, n))
    left = np.zeros(paths, bool)
    for t in range(steps):
        if t % k_ref == 0:
            s = e.copy()
        scale = np.sqrt(1.0 + c * np.einsum("pi,ij,pj->p", e, M, e))
        g = e @ k0.T + s @ kd.T + scale[:, None] * (rng.standard_normal((paths, n)) @ L.T)
        m = mu * m + g
        e = e - eta * m
        left |= np.linalg.norm(e, axis=1) > width
    return float(left.mean())


@pytest.mark.parametrize("c,width", [(0.0, 1.2), (2.0, 1.8)])
def test_first_passage_matches_a_direct_simulation_written_apart(c, width):
    k0, kd, cov = linear_instance()
    eta, mu, k_ref, steps, paths = 0.3, 0.6, 3, 150, 3000
    M = np.diag([1.0, 0.5, 2.0, 1.0])
    direct = _first_passage_direct(k0, kd, cov, eta, mu, k_ref, steps, paths, width, c=c, M=M)
    est = escape_simulated(k0, kd, cov, eta, mu, k_ref, steps, lambda e: np.linalg.norm(e, axis=1) > width,
                           paths=paths, seed=1, noise_growth=c, growth_metric=M)
    assert 0.1 < direct < 0.9
    se = math.sqrt(2 * direct * (1 - direct) / paths)  # two independent binomial counts
    assert abs(est.probability - direct) < 4 * se
    # the band can tell a wrong recurrence: the momentum halved gives another rate
    other = _first_passage_direct(k0, kd, cov, eta, mu / 2, k_ref, steps, paths, width, c=c, M=M)
    assert abs(other - direct) > 6 * se


def test_moments_of_the_simulated_paths_are_the_exact_ones_with_growth():
    k0, kd, cov = linear_instance()
    rng = np.random.default_rng(7)
    B = rng.standard_normal((4, 4))
    M = B @ B.T / 4
    eta, mu, k_ref, steps, paths = 0.3, 0.6, 3, 25, 20000
    P0, _ = displacement_moments(k0, kd, cov, eta, mu, k_ref, steps)
    c = 0.6 / float(np.sum(M * P0[-1]))
    P, _ = displacement_moments(k0, kd, cov, eta, mu, k_ref, steps, noise_growth=c, growth_metric=M)
    est = escape_simulated(k0, kd, cov, eta, mu, k_ref, steps, _never, paths=paths, seed=3, noise_growth=c,
                           growth_metric=M)
    assert est.probability == 0.0 and np.all(est.first_exit == 0)
    e = est.displacement
    prod = e[:, :, None] * e[:, None, :]
    se = prod.std(0) / np.sqrt(paths)
    assert np.all(np.abs(prod.mean(0) - P[-1]) < 5 * se)
    assert np.trace(P[-1]) - np.trace(P0[-1]) > 10 * np.sqrt(np.sum(se**2))


def test_the_noise_given_the_state_has_the_grown_covariance():
    # one step from rest at e_0: e_1 = e_0 - eta (K_0 + K_d) e_0 - eta xi, xi ~ N(0, cov (1 + c e_0^T M e_0))
    k0, kd, cov = linear_instance(n=3, seed=5)
    M = np.diag([2.0, 1.0, 0.5])
    eta, c, paths = 0.2, 3.0, 40000
    for e0 in (np.zeros(3), np.array([0.4, -0.3, 0.8])):
        est = escape_simulated(k0, kd, cov, eta, 0.9, 1, 1, _never, paths=paths, seed=6, noise_growth=c,
                               growth_metric=M, start=e0)
        e1 = est.displacement
        mean = e0 - eta * (k0 + kd) @ e0
        want = eta**2 * cov * (1.0 + c * e0 @ M @ e0)
        d = np.diag(want)
        se_cov = np.sqrt((np.outer(d, d) + want**2) / paths)  # product moments of a centred Gaussian pair
        dev = e1 - mean
        assert np.all(np.abs(dev.T @ dev / paths - want) < 5 * se_cov)
        assert np.all(np.abs(e1.mean(0) - mean) < 5 * np.sqrt(d / paths))
        if e0.any():  # the growth is visible against the band
            assert np.trace(want) - np.trace(eta**2 * cov) > 20 * np.sqrt(np.sum(se_cov**2))


def test_same_seed_same_paths():
    k0, kd, cov = linear_instance(n=2)
    out = lambda e: np.linalg.norm(e, axis=1) > 1.2  # noqa: E731
    a = escape_simulated(k0, kd, cov, 0.3, 0.5, 2, 60, out, paths=500, seed=9, noise_growth=1.0)
    b = escape_simulated(k0, kd, cov, 0.3, 0.5, 2, 60, out, paths=500, seed=9, noise_growth=1.0)
    np.testing.assert_array_equal(a.first_exit, b.first_exit)
    assert 0 < a.probability < 1


def test_an_unstable_update_leaves_for_sure():
    k0, kd, cov = linear_instance(n=2)
    est = escape_simulated(k0, kd, cov, 50.0, 0.0, 1, 400, lambda e: np.zeros(e.shape[0], bool), paths=50)
    assert est.probability == 1.0  # the update overflows: every path counts as gone


def test_bad_input_is_refused():
    k0, kd, cov = linear_instance(n=2)
    with pytest.raises(InvalidValueError, match="outside must be a predicate"):
        escape_simulated(k0, kd, cov, 0.1, 0.0, 1, 5, None)
    with pytest.raises(InvalidValueError, match="paths"):
        escape_simulated(k0, kd, cov, 0.1, 0.0, 1, 5, _never, paths=0)
    with pytest.raises(InvalidValueError, match="start must be a finite displacement"):
        escape_simulated(k0, kd, cov, 0.1, 0.0, 1, 5, _never, start=np.zeros(3))
    with pytest.raises(InvalidValueError, match="noise_growth"):
        escape_simulated(k0, kd, cov, 0.1, 0.0, 1, 5, _never, noise_growth=-1.0)
    with pytest.raises(InvalidValueError, match="positive semi-definite"):
        escape_simulated(k0, kd, -cov, 0.1, 0.0, 1, 5, _never)
