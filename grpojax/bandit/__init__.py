"""Softmax-bandit GRPO: the exact two-arm reduction, its finite-G mean field, and an A-arm bandit.

- :class:`BanditConfig` / :class:`MultiArmConfig`: knobs (η, μ, K_ref, lag, G, advantage, gradient, β, ...).
- :func:`init` / :func:`step`: pure simulator; :func:`rollout_log`: canonical run-log columns.
- :func:`mean_drift`, :func:`fixed_point`, :func:`stiffness`, :func:`plateau`, :func:`oscillator_params`,
  :func:`mean_field_step`, :func:`mean_field_trajectory`: exact mean field.
- :func:`two_arm_init`, :func:`two_arm_step_batch`: the two-arm state and its batched counter-based step.
- :func:`binomial`: exact count sampler whose cost does not grow with G.
"""

from grpojax.bandit._binomial import binomial
from grpojax.bandit._config import ADVANTAGES, GRADIENTS, LAGS, BanditConfig, MultiArmConfig
from grpojax.bandit._mean_field import (
    Plateau,
    drift_logit,
    fixed_point,
    gradient_noise,
    mean_drift,
    mean_field_step,
    mean_field_trajectory,
    oscillator_params,
    plateau,
    stiffness,
    with_fixed_point,
)
from grpojax.bandit._multi_arm import MultiArmState, multinomial
from grpojax.bandit._rollout import LOG_COLUMNS, init, rollout_log, step
from grpojax.bandit._two_arm import TwoArmState, advantage_mass, two_arm_init, two_arm_step_batch

__all__ = [
    "ADVANTAGES",
    "GRADIENTS",
    "LAGS",
    "LOG_COLUMNS",
    "BanditConfig",
    "MultiArmConfig",
    "MultiArmState",
    "Plateau",
    "TwoArmState",
    "advantage_mass",
    "binomial",
    "drift_logit",
    "fixed_point",
    "gradient_noise",
    "init",
    "mean_drift",
    "mean_field_step",
    "mean_field_trajectory",
    "multinomial",
    "oscillator_params",
    "plateau",
    "rollout_log",
    "step",
    "stiffness",
    "two_arm_init",
    "two_arm_step_batch",
    "with_fixed_point",
]
