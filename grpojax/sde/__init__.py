"""Stochastic GRPO oscillator: diffrax ensembles, the exact linear-SDE discretisation, calibration.

Public surface:

- :func:`exact_transition`, :func:`exact_moments`, :func:`sample_exact` — exact Gaussian transition of
  ``x = (e, ė)`` (Van Loan), reference moments and an exact sampler.
- :func:`simulate` → :class:`Ensemble` — diffrax ensembles (``SOLVERS``: euler, heun, sra1, shark),
  every path of a parameter set in one batched solve, parameter sets vmapped, one ``jit``.
- :func:`strong_errors`, :func:`weak_errors` — convergence measurements against the references.
- :func:`expected_trajectory`, :func:`calibrate`, :func:`calibrate_ensemble` — differentiable
  calibration of the curvature K (and p*) through ``diffeqsolve`` with optax.
- :func:`solve_meanfield`, :func:`bandit_meanfield` — nonlinear mean-field SDEs (user callables, or the
  two-arm bandit's exact finite-G drift) with multiplicative noise, Itô or Stratonovich.
"""

from grpojax.sde._calibrate import Calibration, calibrate, calibrate_ensemble, expected_trajectory
from grpojax.sde._convergence import strong_errors, weak_errors
from grpojax.sde._exact import exact_moments, exact_transition, sample_exact
from grpojax.sde._meanfield import bandit_meanfield, solve_meanfield
from grpojax.sde._solve import Ensemble, SOLVERS, simulate

__all__ = [
    "Calibration",
    "Ensemble",
    "SOLVERS",
    "bandit_meanfield",
    "calibrate",
    "calibrate_ensemble",
    "exact_moments",
    "exact_transition",
    "expected_trajectory",
    "sample_exact",
    "simulate",
    "solve_meanfield",
    "strong_errors",
    "weak_errors",
]
