"""The escape-curve analysis: its probit fit, separability test and onset bracket on simulated data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from _experiments import load_experiment

ana = load_experiment("escape_advise_analysis")


def test_probit_fit_recovers_a_known_curve():
    # binomial data from a probit with known onset and width; the band is 4 standard errors of the MLE,
    # the standard errors from the observed information (numerical Hessian of the negative log-likelihood)
    rng = np.random.default_rng(0)
    m, s = 0.6, 0.15
    x = np.log(np.geomspace(0.3, 1.2, 10))
    n = np.full(x.shape, 200.0)
    k = rng.binomial(200, stats.norm.cdf((x - math.log(m)) / s)).astype(float)
    fit = ana.probit_fit(x, k, n)
    theta = np.array([fit["ln_m"], math.log(fit["s"])])
    h = 1e-4
    H = np.zeros((2, 2))
    for i in range(2):
        for j in range(2):
            e_i, e_j = np.eye(2)[i] * h, np.eye(2)[j] * h
            H[i, j] = (ana.nll(theta + e_i + e_j, x, k, n) - ana.nll(theta + e_i - e_j, x, k, n)
                       - ana.nll(theta - e_i + e_j, x, k, n) + ana.nll(theta - e_i - e_j, x, k, n)) / (4 * h * h)
    se = np.sqrt(np.diag(np.linalg.inv(H)))
    assert abs(fit["ln_m"] - math.log(m)) < 4 * se[0]
    assert abs(math.log(fit["s"]) - math.log(s)) < 4 * se[1]


def test_separable_points_give_the_gap_not_a_fit():
    x = np.log(np.array([0.1, 0.2, 0.4, 0.8]))
    n = np.array([4.0, 4.0, 4.0, 4.0])
    k = np.array([0.0, 0.0, 4.0, 4.0])
    assert ana.separable(x, k, n)
    assert ana.probit_fit(x, k, n) is None
    ln_m, kind = ana.onset_estimate(x, k, n, None)
    assert kind == "gap" and math.exp(ln_m) == pytest.approx(math.sqrt(0.2 * 0.4))
    # every run unstable: only a bound below the lowest η
    ln_m, kind = ana.onset_estimate(x, n, n, None)
    assert kind == "below" and math.exp(ln_m) == pytest.approx(0.1)
    # one mixed point: not separable, a fit
    k2 = np.array([0.0, 1.0, 4.0, 4.0])
    assert not ana.separable(x, k2, n)
    assert ana.probit_fit(x, k2, n) is not None
