"""Closed forms, reward-curve laws and exact discrete stability of the GRPO oscillator.

- :func:`from_hyperparams` -> :class:`OscillatorParams` (M, C, K_eff from η, μ, K_ref and the curvature);
  :func:`damping_ratio`; :func:`regime` (integer codes) and :func:`regime_name` (one of :data:`REGIMES`:
  overdamped, critical, underdamped, unstable); :func:`stationary_variance`.
- :func:`trajectory`, :func:`mean_reward`: the closed-form mean trajectory and the expected reward.
- :func:`critical_eta`, :func:`critical_k_ref`: the closed-form stability thresholds; :func:`exact_critical_eta`,
  :func:`exact_critical_a`: the exact discrete ones; :func:`stability_margin`: where η sits among the exact
  instability windows.
- :func:`get_law`: a reward-curve law (exponential, three-phase, sigmoid) by name.

The model pages of the documentation name further building blocks (the exact oscillatory boundary, spectral
radii, transition matrices, the margin along a learning-rate schedule and the AdamW reduction
``schedule_margin`` / ``adam_to_heavy_ball`` / ``adam_escape``, the escape model ``escape_probability`` / ``escape_onset`` and the
noise estimates ``noise_from_samples`` / ``noise_from_reward_std``); they are importable from this package but
are not part of its public API.
"""

from grpojax.dynamics._laws import get_law
from grpojax.dynamics._params import (
    OscillatorParams,
    REGIMES,
    damping_ratio,
    from_hyperparams,
    regime,
    regime_name,
    stationary_variance,
)
from grpojax.dynamics._stability import exact_critical_a, exact_critical_eta
from grpojax.dynamics._thresholds import critical_eta, critical_k_ref
from grpojax.dynamics._trajectory import mean_reward, trajectory
from grpojax.dynamics._windows import stability_margin

# Importable for the packages after this one, the command line and the experiments, but not part
# of the public API (not in __all__, not in the API reference).
from grpojax.dynamics._escape import (
    EscapeEstimate,
    escape_onset,
    escape_probability,
    escape_variance_closed_form,
    noise_from_gradients,
    noise_from_reward_std,
    noise_from_samples,
)
from grpojax.dynamics._expm2 import expm2, expm2_coefficients_numpy
from grpojax.dynamics._laws import Exponential, LAWS, Sigmoid, ThreePhase
from grpojax.dynamics._params import lag_tau, natural_frequency
from grpojax.dynamics._stability import (
    EXACT_RADIUS_MAX_LAG,
    companion_constant,
    dominant_root,
    exact_oscillatory_a,
    exact_oscillatory_eta,
    spectral_radius_constant,
    spectral_radius_periodic,
)
from grpojax.dynamics._thresholds import oscillatory_eta, oscillatory_k_ref
from grpojax.dynamics._schedule import (
    SCHEDULES,
    AdamEscape,
    AdamReduction,
    ScheduleMargin,
    adam_escape,
    adam_to_heavy_ball,
    schedule_margin,
    schedule_shape,
)
from grpojax.dynamics._trajectory import drift_matrix, response_from_rest, transition_matrix
from grpojax.dynamics._windows import instability_windows

__all__ = [
    "OscillatorParams",
    "REGIMES",
    "critical_eta",
    "critical_k_ref",
    "damping_ratio",
    "exact_critical_a",
    "exact_critical_eta",
    "from_hyperparams",
    "get_law",
    "mean_reward",
    "regime",
    "regime_name",
    "stability_margin",
    "stationary_variance",
    "trajectory",
]
