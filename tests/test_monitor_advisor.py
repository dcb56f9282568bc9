"""grpojax.monitor.advise against the closed forms and exact thresholds of grpojax.dynamics."""

import numpy as np
import pytest

import grpojax.dynamics as dyn
from grpojax.monitor import advise, curvature_from_rate, in_advised_range
from grpojax.monitor._advisor import damping_ratio_np


def _zeta(eta, mu, k, kd, lag, k0=0.0):
    return float(dyn.damping_ratio(dyn.from_hyperparams(eta, mu, k, kd, lag=lag, k_instant=k0)))


@pytest.fixture(scope="module")
def adv():
    return advise(eta=0.01, mu=0.9, k_ref=4, group_size=8, curvature=0.5, pass_rate=0.8)


def test_damping_ratio_and_margin_match_dynamics(adv):
    assert adv.inputs["lag"] == "periodic"
    assert adv.damping_ratio == pytest.approx(_zeta(0.01, 0.9, 4, 0.5, "periodic"), rel=1e-5)
    star = float(dyn.exact_critical_eta(0.9, 4, 0.5, lag="periodic"))
    assert adv.exact_critical_eta == pytest.approx(star, rel=1e-9)
    assert adv.margin == pytest.approx(1 - 0.01 / star, rel=1e-9)
    rho = float(dyn.spectral_radius_periodic(0.005, 0.9, 4))
    assert adv.spectral_radius == pytest.approx(rho, rel=1e-9)
    assert damping_ratio_np(0.01, 0.9, 4, 0.5, lag="periodic") == pytest.approx(adv.damping_ratio, rel=1e-5)


def test_eta_range_edges(adv):
    lo, hi = adv.eta_range
    assert _zeta(lo, 0.9, 4, 0.5, "periodic") == pytest.approx(1.5, rel=1e-4)
    star = float(dyn.exact_critical_eta(0.9, 4, 0.5, lag="periodic"))
    z_hi = _zeta(hi, 0.9, 4, 0.5, "periodic")
    # the upper edge is the ζ = 0.7 root unless the exact margin is tighter
    assert z_hi == pytest.approx(0.7, rel=1e-4) or hi == pytest.approx(0.8 * star, rel=1e-9)
    assert hi <= 0.8 * star * (1 + 1e-12)
    # the configuration (ζ ≈ 0.67) lies just above the range
    assert not adv.in_range and 0.01 > hi


def test_k_range_members_satisfy_the_rule():
    a = advise(eta=0.004, mu=0.9, staleness=2, group_size=8, curvature=0.5)
    assert a.inputs["lag"] == "constant"
    lo, hi = a.k_range
    for k in range(lo, hi + 2):
        z = _zeta(0.004, 0.9, k, 0.5, "constant")
        star = float(dyn.exact_critical_eta(0.9, k, 0.5, lag="constant"))
        ok = 0.7 <= z <= 1.5 and 0.004 <= 0.8 * star
        assert ok == (k <= hi), (k, z, star)


def test_adam_maps_to_heavy_ball():
    a = advise(eta=0.02, beta1=0.9, k_ref=2, group_size=8, curvature=0.5)
    b = advise(eta=0.002, mu=0.9, k_ref=2, group_size=8, curvature=0.5)
    assert a.optimizer == "adam" and a.eta_hb == pytest.approx(0.002)
    assert a.damping_ratio == pytest.approx(b.damping_ratio)
    assert a.eta_range[0] == pytest.approx(10 * b.eta_range[0]) and a.eta_range[1] == pytest.approx(10 * b.eta_range[1])
    assert a.exact_critical_eta == pytest.approx(10 * b.exact_critical_eta)


def test_group_size_against_brute_force(adv):
    p = 0.8
    g = next(g for g in range(2, 200) if p**g + (1 - p) ** g <= 0.1)
    assert adv.group_size_needed == g
    assert adv.zero_std_fraction == pytest.approx(p**8 + 0.2**8)
    # stationary std scales as 1/sqrt(G)
    assert adv.noise_std[32] == pytest.approx(adv.noise_std[8] / 2, rel=1e-5)


def test_curvature_from_rate_round_trip():
    for lag, k in (("constant", 3), ("periodic", 4)):
        p = dyn.from_hyperparams(0.02, 0.5, k, 0.7, lag=lag, k_instant=0.1)
        rate = float(p.K_eff) / float(p.C)
        assert curvature_from_rate(rate, 0.02, 0.5, k, lag=lag, k_instant=0.1) == pytest.approx(0.7, rel=1e-5)
    with pytest.raises(ValueError, match="rate"):
        curvature_from_rate(-1.0, 0.02, 0.5, 2)


def test_vectorised_rule_matches_scalar():
    rng = np.random.default_rng(0)
    eta = 10 ** rng.uniform(-3, -1, 12)
    got = in_advised_range(eta, 0.9, 2, 0.5, lag="constant")
    want = [advise(eta=float(e), mu=0.9, staleness=2, group_size=8, curvature=0.5).in_range for e in eta]
    assert got.tolist() == want


@pytest.mark.parametrize("kw, match", [
    (dict(eta=-1.0), "eta must be > 0"),
    (dict(mu=1.0), "mu must be in"),
    (dict(mu=0.5, beta1=0.9), "not both"),
    (dict(staleness=2), "exactly one of k_ref"),
    (dict(k_ref=0), "k_ref must be an integer >= 1"),
    (dict(group_size=1), "group_size must be"),
    (dict(curvature=0.0), "curvature must be > 0"),
    (dict(pass_rate=1.5), "pass_rate must be in"),
    (dict(zeta_band=(1.5, 0.7)), "zeta_band"),
    (dict(margin=1.0), "margin must be in"),
    (dict(eta=float("nan")), "eta must be a finite number"),
])
def test_bad_input_one_line(kw, match):
    base = dict(eta=0.01, mu=0.9, k_ref=4, group_size=8, curvature=0.5)
    base.update(kw)
    with pytest.raises(ValueError, match=match) as e:
        advise(**base)
    assert "\n" not in str(e.value)
