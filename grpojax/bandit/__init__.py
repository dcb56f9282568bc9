"""Softmax-bandit GRPO: the exact two-arm reduction, its finite-G mean field, and an A-arm bandit.

- :class:`BanditConfig` / :class:`MultiArmConfig`: knobs (η, μ, K_ref, lag, G, advantage, gradient, β, ...).
- :func:`init` / :func:`step`: pure simulator; :func:`rollout_log`: canonical run-log columns.
- :func:`mean_drift`, :func:`fixed_point`, :func:`with_fixed_point`, :func:`stiffness`, :func:`plateau`,
  :func:`oscillator_params`, :func:`mean_field_trajectory`: exact mean field.
- :func:`binomial`: exact count sampler whose cost does not grow with G.
"""

from grpojax.bandit._binomial import binomial
from grpojax.bandit._config import BanditConfig, MultiArmConfig
from grpojax.bandit._mean_field import (
    fixed_point,
    mean_drift,
    mean_field_trajectory,
    oscillator_params,
    plateau,
    stiffness,
    with_fixed_point,
)
from grpojax.bandit._rollout import init, rollout_log, step

# Importable for the packages after this one, the command line and the experiments, but not part
# of the public API (not in __all__, not in the API reference).
from grpojax.bandit._config import ADVANTAGES, GRADIENTS, LAGS
from grpojax.bandit._mean_field import drift_logit, gradient_noise, mean_field_step
from grpojax.bandit._two_arm import two_arm_init, two_arm_step_batch

__all__ = [
    "BanditConfig",
    "MultiArmConfig",
    "binomial",
    "fixed_point",
    "init",
    "mean_drift",
    "mean_field_trajectory",
    "oscillator_params",
    "plateau",
    "rollout_log",
    "step",
    "stiffness",
    "with_fixed_point",
]
