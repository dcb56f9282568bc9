"""The bands of the statistical tests (tests/_bands.py) and the `seeded` marker of the tests that use the seed."""

from __future__ import annotations

import pytest
from scipy import stats

from _bands import FAMILY, count_limits, z_limit


@pytest.mark.parametrize("m", [1, 3, 20, 80])
def test_z_limit_splits_the_family_level_over_the_comparisons(m):
    z = z_limit(m)
    assert m * 2 * stats.norm.sf(z) == pytest.approx(FAMILY, rel=1e-9)
    assert z_limit(m, family=0.05) < z


@pytest.mark.parametrize("n, p", [(40, 0.01), (100, 0.0228), (180, 0.9), (50, 0.5)])
def test_count_limits_hold_each_tail_below_half_the_family_level_and_are_the_tightest(n, p):
    lo, hi = count_limits(n, p)
    assert 0 <= lo <= n * p <= hi <= n
    assert stats.binom.cdf(lo - 1, n, p) <= FAMILY / 2 < stats.binom.cdf(lo, n, p)  # P(X < lo), P(X <= lo)
    assert stats.binom.sf(hi, n, p) <= FAMILY / 2 < stats.binom.sf(hi - 1, n, p)  # P(X > hi), P(X >= hi)


@pytest.fixture
def _draws(test_seed):
    return test_seed


def test_a_test_taking_the_seed_is_marked_seeded(request, test_seed):
    assert request.node.get_closest_marker("seeded") is not None


def test_a_fixture_taking_the_seed_marks_its_tests_seeded(request, _draws):
    assert request.node.get_closest_marker("seeded") is not None


def test_a_test_without_the_seed_is_not_marked_seeded(request):
    assert request.node.get_closest_marker("seeded") is None


@pytest.mark.seeded
def test_an_explicit_seeded_marker_is_kept(request):
    assert request.node.get_closest_marker("seeded") is not None
