"""Bands for statistical assertions, derived from their Monte Carlo error.

A test that checks ``m`` z-scores (an estimate minus its exact value, over its Monte Carlo standard error) at
once asks ``max |z| < z_limit(m)``: under the null each |z| exceeds it with probability ``family / m``, so the
whole test fails with probability at most ``family`` (Bonferroni), whatever the seed, while a bias of a few
standard errors still fails it. A test that counts events of known probability (false alarms, misses of an
interval) over independent draws asks the count to stay within its binomial band (``count_limits``).
"""

from __future__ import annotations

from scipy import stats

FAMILY = 1e-3  # probability that a correct implementation fails a test, per test and seed


def z_limit(m: int, family: float = FAMILY) -> float:
    """Two-sided normal limit for the largest of ``m`` |z|-scores at family-wise level ``family``."""
    return float(stats.norm.isf(family / (2 * m)))


def count_limits(n: int, p: float, family: float = FAMILY) -> tuple[int, int]:
    """``(lo, hi)``: a Binomial(``n``, ``p``) count falls below ``lo`` or above ``hi`` with probability at most
    ``family`` in all (``family / 2`` on each side)."""
    lo = int(stats.binom.ppf(family / 2, n, p))
    hi = int(stats.binom.isf(family / 2, n, p))
    return lo, hi
