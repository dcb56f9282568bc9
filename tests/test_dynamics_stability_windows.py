"""Every instability window, against an independent eigenvalue computation (NumPy, written here).

Reference: the characteristic polynomial of the update, built here from the recurrence, and the
eigenvalues of its companion matrix (``numpy.linalg.eigvals``). Constant lag d: z^{d+1} − (1 + μ − η K_0) z^d
+ μ z^{d−1} + η K_d. Periodic refresh every K steps: the period map on (e_n, e_{n−1}) obtained by running the
recurrence from the two unit vectors (snapshot s = e at the start of the period), then z² − tr z + det.
"""

import numpy as np
import pytest

import grpojax.dynamics as dyn


def _companion_radius(coeffs):
    """Largest |root| of the monic polynomial ``coeffs`` (highest power first) via its companion matrix."""
    c = np.asarray(coeffs, float)
    n = len(c) - 1
    comp = np.zeros((n, n))
    comp[0, :] = -c[1:]
    comp[1:, :-1] = np.eye(n - 1)
    return np.abs(np.linalg.eigvals(comp)).max()


def _radius_constant(eta, mu, d, kd, k0):
    c = np.zeros(d + 2)
    c[0], c[1], c[2] = 1.0, -(1.0 + mu - eta * k0), mu
    c[d + 1] += eta * kd
    return _companion_radius(c)


def _radius_periodic(eta, mu, k, kd, k0):
    period = np.zeros((2, 2))
    for j in range(2):
        e, e_prev = (1.0, 0.0) if j == 0 else (0.0, 1.0)
        snap = e
        for _ in range(k):
            e, e_prev = (1.0 + mu - eta * k0) * e - mu * e_prev - eta * kd * snap, e
        period[:, j] = (e, e_prev)
    char = [1.0, -np.trace(period), np.linalg.det(period)]
    return _companion_radius(char) ** (1.0 / k)


def _radius(lag):
    return _radius_constant if lag == "constant" else _radius_periodic


def _settings(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        lag = ("constant", "periodic")[i % 2]
        k = int(rng.choice([1, 2, 3, 4, 8, 13, 16]))
        mu = float(rng.choice([0.0, 0.5, 0.9, rng.uniform(0.0, 0.99)]))
        if i % 3 == 2:  # K_d ≤ 0 with K_0 > 0
            kd, k0 = -float(rng.uniform(0.0, 0.9)), 1.0
        elif i % 5 == 4:  # no instant stiffness
            kd, k0 = 1.0, 0.0
        else:
            kd, k0 = 1.0, float(rng.uniform(0.0, 3.0))
        out.append((lag, k, mu, kd, k0))
    return out


@pytest.mark.parametrize("lag, k, mu, kd, k0", _settings(24, 0))
def test_windows_match_independent_eigenvalues(lag, k, mu, kd, k0):
    w = dyn.instability_windows(mu, k, kd, lag=lag, k_instant=k0)
    rho = _radius(lag)
    assert len(w) >= 1 and np.isinf(w[-1, 1]) and np.all(np.diff(w.ravel()) > 0)
    assert w[0, 0] > 0  # K_0 + K_d > 0: stable at small η (no spurious window at η = 0)
    edges = w.ravel()[np.isfinite(w.ravel()) & (w.ravel() > 0)]
    for eta in np.geomspace(1e-3, 1e2, 300):
        if np.any(np.abs(eta / edges - 1.0) < 1e-6):
            continue
        inside = bool(np.any((w[:, 0] <= eta) & (eta < w[:, 1])))
        assert (rho(eta, mu, k, kd, k0) >= 1.0) == inside, (eta, w)
    for lo, hi in w:  # every edge is a crossing of |z| = 1, in the direction the window says
        if lo > 0:
            assert rho(lo * (1 - 1e-7), mu, k, kd, k0) < 1.0 <= rho(lo * (1 + 1e-7), mu, k, kd, k0) + 1e-12
        if np.isfinite(hi):
            assert rho(hi * (1 - 1e-7), mu, k, kd, k0) + 1e-12 >= 1.0 > rho(hi * (1 + 1e-7), mu, k, kd, k0)


@pytest.mark.parametrize("lag", ["constant", "periodic"])
def test_finite_threshold_without_stale_stiffness(lag):
    """K_d ≤ 0 with K_0 > 0: a finite η*, the first η where the independent radius reaches 1."""
    mu, k = 0.9, 4
    for kd in (0.0, -0.115, -0.5):
        eta_star = float(dyn.exact_critical_eta(mu, k, kd, lag=lag, k_instant=1.0))
        assert np.isfinite(eta_star) and eta_star > 0
        below = np.geomspace(1e-4, eta_star * (1 - 1e-7), 400)
        assert max(_radius(lag)(e, mu, k, kd, 1.0) for e in below) < 1.0
        assert _radius(lag)(eta_star * (1 + 1e-7), mu, k, kd, 1.0) >= 1.0 - 1e-12
    assert float(dyn.exact_critical_eta(mu, k, -1.0, lag=lag, k_instant=0.5)) == 0.0  # K_0 + K_d < 0


def test_stability_returns_above_the_first_window():
    """Periodic refresh, K_0/K_d = 0.86: a stable gap between two windows, confirmed independently."""
    w = dyn.instability_windows(0.0, 8, 1.0, lag="periodic", k_instant=0.8594730734148194)
    assert len(w) == 2
    gap = np.sqrt(w[0, 1] * w[1, 0])
    assert _radius_periodic(gap, 0.0, 8, 1.0, 0.8594730734148194) < 1.0
    assert _radius_periodic(np.sqrt(w[0, 0] * w[0, 1]), 0.0, 8, 1.0, 0.8594730734148194) > 1.0


@pytest.mark.parametrize("lag, k, mu, kd, k0", _settings(8, 1))
def test_margin_and_radius_never_contradict(lag, k, mu, kd, k0):
    crit = float(dyn.instability_windows(mu, k, kd, lag=lag, k_instant=k0)[0, 0])
    for eta in crit * np.geomspace(0.1, 10.0, 7):
        m = dyn.stability_margin(eta, mu, k, kd, lag=lag, k_instant=k0)
        rho = _radius(lag)(eta, mu, k, kd, k0)
        if abs(rho - 1.0) > 1e-9:
            assert (m["margin"] > 0) == (rho < 1.0) == m["stable"], (eta, m, rho)


def test_exact_critical_eta_is_the_first_window_for_periodic_and_matches_constant_fast_path():
    mus = np.array([0.0, 0.5, 0.9])
    for lag in ("constant", "periodic"):
        got = np.asarray(dyn.exact_critical_eta(mus, 4, 2.0, lag=lag, k_instant=3.0))
        ref = [dyn.instability_windows(m, 4, 2.0, lag=lag, k_instant=3.0)[0, 0] for m in mus]
        np.testing.assert_allclose(got, ref, rtol=1e-9)


def test_bad_input_names_the_value():
    with pytest.raises(ValueError, match="mu"):
        dyn.instability_windows(1.5, 4, 1.0)
    with pytest.raises(ValueError, match="lag"):
        dyn.instability_windows(0.5, 4, 1.0, lag="sometimes")
    with pytest.raises(ValueError, match="k_stale"):
        dyn.instability_windows(0.5, 4, float("nan"))


@pytest.mark.slow  # ~45 s on a loaded 2-core machine (the importance-ratio bandit's compile)
def test_sweep_runs_where_the_stale_stiffness_is_negative():
    """Importance ratio + std-normalised advantages: K_d < 0 at the plateau, K_0 > 0 holds it. The sweep
    predicts a finite η* (the window search) and marks rows with M ≤ 0 as outside the closed form."""
    import jax

    from grpojax.sweep import make_grid, run_sweep

    grid = make_grid(eta_rel=[0.5, 2.0], k_ref=[4], mu=0.9, group_size=64, p_star=0.8, p_init=0.8,
                     gradient="importance", advantage="grpo", lag="constant")
    res = run_sweep(grid, 16, key=jax.random.key(0), mean_field=True).columns
    kd, k0 = float(res["K_d"][0]), float(res["K_0"][0])
    assert kd < 0 < k0 + kd
    eta_star = float(res["eta_crit_exact"][0])
    assert np.isfinite(eta_star)
    assert _radius_constant(eta_star * (1 - 1e-6), 0.9, 4, kd, k0) < 1.0 <= _radius_constant(eta_star * (1 + 1e-6), 0.9, 4, kd, k0)
    assert list(res["regime_exact"]) == ["oscillatory", "unstable"]
    m = np.asarray(res["M"])
    assert m[1] <= 0 and res["regime_closed"][1] == "no_oscillator" and np.isnan(res["zeta"][1])
