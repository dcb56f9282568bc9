"""Stochastic GRPO oscillator: diffrax ensembles, the exact linear-SDE discretisation, calibration.

Public surface:

- :func:`exact_transition`, :func:`exact_moments`, :func:`sample_exact` — exact Gaussian transition of
  ``x = (e, ė)`` (Van Loan), reference moments and an exact sampler.
"""

from grpojax.sde._exact import exact_moments, exact_transition, sample_exact

__all__ = ["exact_moments", "exact_transition", "sample_exact"]
