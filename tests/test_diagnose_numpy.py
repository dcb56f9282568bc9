"""The diagnose path is NumPy: its statistics match independent computations (SciPy's), its three-phase
curve matches the JAX law, and diagnosing a run imports neither JAX nor SciPy (no compilation, and the
0.15 s of CPU that even ``scipy.special`` costs to import saved per call)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage, stats

from grpojax.diagnose._stats import f_sf, linregress, rankdata, running_median, running_quantile
from grpojax._curve_laws import law_curve


def test_running_median_is_the_median_of_mirrored_windows():
    """Odd windows: the median of the explicit window of a mirrored copy (``d c b | a b c d | c b a``)."""
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4, 7, 10, 21, 50):
        v = rng.standard_normal(n)
        for k in (1, 3, 5, 11, 21, 31):
            kk = max(1, min(k, n))
            if kk % 2 == 0:
                continue
            h = kk // 2
            pad = v if h == 0 else np.pad(v, h, mode="reflect") if h < n else None
            if pad is None:
                continue
            want = np.array([np.median(pad[i:i + kk]) for i in range(n)])
            np.testing.assert_array_equal(running_median(v, k), want, err_msg=f"n={n} k={k}")
    # an even window reaches one point further back and takes the upper middle value
    v = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    np.testing.assert_array_equal(running_median(v, 2), [5.0, 5.0, 4.0, 4.0, 3.0])


def test_running_median_matches_scipy_median_filter_mirror():
    """Odd and even windows, ties, windows as long as the series, and a series long enough to be
    partitioned in several blocks: the numbers of ``scipy.ndimage.median_filter(mode="mirror")``."""
    import grpojax.diagnose._stats as st

    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 8, 21, 64):
        for v in (rng.standard_normal(n), rng.integers(0, 3, n).astype(float)):
            for k in (2, 3, 4, 5, 6, 11, 21, 64):
                want = ndimage.median_filter(v, size=max(1, min(k, n)), mode="mirror")
                np.testing.assert_array_equal(running_median(v, k), want, err_msg=f"n={n} k={k}")
    v = rng.standard_normal(5000)
    chunk = st._MEDIAN_CHUNK
    try:
        st._MEDIAN_CHUNK = 77  # blocks of 7 windows of 11 points
        np.testing.assert_array_equal(running_median(v, 11), ndimage.median_filter(v, size=11, mode="mirror"))
    finally:
        st._MEDIAN_CHUNK = chunk


def test_running_quantile_matches_scipy_generic_filter_mirror():
    rng = np.random.default_rng(2)
    for n in (1, 2, 3, 7, 20, 50):
        v = rng.standard_normal(n)
        for k in (1, 2, 5, 11, 31):
            for q in (0.5, 0.75, 0.9):
                want = ndimage.generic_filter(v, lambda w: np.quantile(w, q), size=max(1, min(k, n)), mode="mirror")
                np.testing.assert_allclose(running_quantile(v, k, q), want, rtol=0, atol=1e-15,
                                           err_msg=f"n={n} k={k} q={q}")


def test_f_tail_linregress_and_ranks_match_scipy():
    for d in (3, 7, 24):
        for x in (0.05, 1.0, 2.5, 20.0, 400.0):
            assert f_sf(x, d, d) == pytest.approx(stats.f.sf(x, d, d), rel=1e-10, abs=1e-300)
    rng = np.random.default_rng(1)
    x, y = rng.random(30), rng.standard_normal(30)
    a, b = linregress(x, y), stats.linregress(x, y)
    np.testing.assert_allclose([a.slope, a.intercept, a.stderr], [b.slope, b.intercept, b.stderr], rtol=1e-12)
    # the F tail by quadrature of the F density, independent of the incomplete beta function
    from scipy import integrate

    for d1, d2, x in ((3, 7, 0.5), (7, 7, 2.5), (24, 24, 1.3)):
        want, _ = integrate.quad(lambda u: stats.f.pdf(u, d1, d2), x, np.inf, epsabs=1e-13)
        assert f_sf(x, d1, d2) == pytest.approx(want, rel=1e-7)
    assert f_sf(-1.0, 3, 3) == 1.0 and f_sf(np.inf, 3, 3) == 0.0
    r = rng.integers(0, 5, 40).astype(float)
    np.testing.assert_array_equal(rankdata(r), stats.rankdata(r))


def test_f_tail_matches_scipy_far_into_its_tails():
    """The F tail of the oscillation test (F(d, d) and unequal degrees) against scipy.special.fdtrc, to 1e-12
    relative, tails down to 1e-300 included."""
    from scipy import special

    for d1, d2 in ((3, 3), (10, 10), (49, 49), (99, 99), (199, 199), (5, 40), (40, 5)):
        for x in (0.01, 0.5, 1.0, 2.0, 40.0, 1e4):
            assert f_sf(x, d1, d2) == pytest.approx(special.fdtrc(d1, d2, x), rel=1e-12, abs=1e-300)


def test_numpy_three_phase_curve_matches_the_jax_law():
    """The NumPy evaluation of the law the validity check fits equals the JAX class, near zeta = 1 too."""
    from grpojax.dynamics import ThreePhase  # float64: the test session enables x64 (conftest)

    t = np.linspace(0.0, 300.0, 301)
    for zeta in (-0.5, 0.0, 0.3, 1.0 - 1e-6, 1.0, 1.0 + 1e-4, 2.0, 20.0):
        for w in (1e-3, 0.05, 0.5):
            want = np.asarray(ThreePhase(0.1, 0.8, w, zeta)(t))
            got = law_curve("three_phase", [0.1, 0.8, w, zeta], t)
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=f"zeta={zeta} w={w}")


def test_diagnose_imports_neither_jax_nor_scipy():
    code = ("import sys, numpy as np\n"
            "from grpojax.diagnose import diagnose\n"
            "t = np.arange(300.0)\n"
            "d = diagnose({'reward_mean': 0.2 + 0.5 * (1 - np.exp(-t / 60)) + 0.01 * np.sin(t),"
            " 'entropy': 0.5 * np.exp(-t / 200), 'grad_norm': 0.3 + 0 * t})\n"
            "assert d['mean_field_validity'].verdict != 'insufficient_data'\n"
            "print(sorted(m for m in ('jax', 'scipy', 'arviz', 'numpyro') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_numpy_branches_of_the_matrix_exponential_give_the_where_numbers():
    """NumPy evaluates each branch of expm2_terms on its own entries; the numbers are those of evaluating every
    branch everywhere and selecting (the JAX form), bit for bit: near zeta = 1, over- and underdamped,
    overflowing, NaN and infinite entries, and the broadcast shapes of a batched fit."""
    from grpojax._curve_laws import _expm2_terms_numpy, _expm2_terms_where

    rng = np.random.default_rng(4)
    cases = []
    for trial in range(60):
        n = int(rng.integers(1, 400))
        s = rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 2, n)
        d = rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 3, n)
        if trial % 3 == 0:
            d = s * s * (1 + rng.choice([0.0, 1e-12, -1e-12, 1e-3], n))
        if trial % 4 == 0:
            s[rng.integers(0, n, 3)] = np.nan
            d[rng.integers(0, n, 2)] = np.inf
        cases.append((s, d, rng.uniform(0, 500, n) * (rng.random(n) < 0.9)))
    cases.append((rng.standard_normal((9, 1)), rng.standard_normal((9, 1)) ** 2, np.linspace(0.0, 3.0, 200)))
    n_branches = set()
    with np.errstate(all="ignore"):
        for s, d, t in cases:
            got, want = _expm2_terms_numpy(s, d, t), _expm2_terms_where(s, d, t, np)
            for g, w in zip(got, want):
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
            q2 = s * s - d
            n_branches |= {int(np.sign(v)) for v in np.ravel(q2) if np.isfinite(v)}
    assert n_branches == {-1, 0, 1}
