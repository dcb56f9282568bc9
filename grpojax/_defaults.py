"""The defaults the Python API and the command line share, each stated once.

Every function of the library and every flag of ``grpojax`` that has one of these settings takes its
default from here, so ``grpojax predict ...`` and the same call from Python give the same numbers.

- :data:`LAG` -- what K_ref means when nothing says otherwise: ``"periodic"``. A synchronous GRPO
  loop samples a rollout with the current policy and then takes K_ref optimizer steps on it (TRL's
  ``num_iterations``, verl's ``ppo_epochs`` times its mini-batches per rollout, OpenRLHF's
  ``max_epochs``): the behaviour snapshot is refreshed every K_ref steps and the lag cycles
  0, 1, ..., K_ref − 1 (``docs/model/oscillator.md``). ``"constant"`` (every update exactly K_ref
  steps stale) describes an asynchronous pipeline; it is asked for by name (``staleness`` in
  :func:`grpojax.monitor.advise`, ``--staleness`` / ``--lag constant`` on the command line).
- :data:`SEED` -- the seed of every random stream when none is given (NUTS keys, the window
  forecast's NumPy streams, simulations): 0, the command line's ``--seed`` default.
- :data:`FORECAST_METHOD`, :data:`FORECAST_WINDOW`, :data:`FORECAST_LEVEL` -- the window forecast:
  the calibrated combination of the four forecasters, the last 10% of the run, a 90% interval.
- :data:`ZETA_BAND`, :data:`ADVICE_MARGIN`, :data:`ZERO_STD_TARGET` -- the advice: the damping-ratio
  band, the margin to the exact threshold, the bound on zero-variance groups.

The softmax-bandit simulator keeps its own lag default (``"constant"``, one step stale at K_ref = 1):
it is a simulator configured field by field, not a prediction the command line makes.
"""

from __future__ import annotations

LAG = "periodic"
"""Default lag model of the oscillator, its thresholds and the advice (periodic refresh)."""

SEED = 0
"""Default seed of every random stream of the API and the command line."""

NUTS_CHAINS, NUTS_WARMUP, NUTS_DRAWS = 4, 500, 1000
"""NUTS chains, warm-up iterations and kept draws per chain of :func:`grpojax.fit.fit_bayes` and ``grpojax fit
--bayes``. Half as much warm-up as draws: on the quickstart curve the state-space posterior adapts within 500
iterations (0 divergences and max r̂ ≤ 1.007 at each of six seeds), and the fit runs a quarter fewer iterations
than with 1,000."""

FORECAST_METHOD = "combined"
"""Default window forecaster."""

FORECAST_WINDOW = 0.1
"""Default final fraction of the run whose mean the window forecast targets."""

FORECAST_LEVEL = 0.9
"""Default level of the window forecast's interval."""

ZETA_BAND = (0.7, 1.5)
"""Damping ratios the advice keeps (``grpojax advise --zeta-band``, :func:`grpojax.monitor.advise`)."""

ADVICE_MARGIN = 0.2
"""Relative margin the advice keeps below the exact critical learning rate (``--margin``)."""

ZERO_STD_TARGET = 0.1
"""Bound on the fraction of zero-variance groups p^G + (1 − p)^G the advised G keeps (``--zero-std-target``)."""

ESCAPE_LEVEL = 0.05
"""Bound on P(escape from the plateau's basin within the planned run) the advised η range keeps
(``--escape-level``, :func:`grpojax.monitor.advise`'s ``escape_level``)."""

PLANNED_STEPS = 1000
"""Planned run length in optimizer steps that ``grpojax predict`` and ``grpojax advise`` take for P(escape)
when ``--steps`` is not given."""

#: Learning-rate schedule shapes the model evaluates the margin along (the names transformers and TRL use).
SCHEDULES = ("constant", "constant_with_warmup", "linear", "cosine")
