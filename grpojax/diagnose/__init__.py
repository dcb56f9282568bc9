"""Failure-mode diagnostics from GRPO run logs (``docs/guide/diagnostics.md``).

Four detectors -- reward hacking, advantage degeneracy, policy concentration, dynamical instability --,
six training-health detectors (length pathology, learning plateau, clip saturation, KL drift, gradient
spikes, reward-component imbalance) and a mean-field validity check, each taking a :class:`grpojax.logs.RunLog` and returning a
:class:`ModeResult` (verdict, severity, evidence, and the arrays ``grpojax.plot.draw_panel`` draws).
Thresholds live in :class:`DiagnoseConfig` (documented and justified there).

Example:
    >>> import numpy as np
    >>> from grpojax.diagnose import diagnose
    >>> t = np.arange(200.0)
    >>> d = diagnose({"reward_mean": 1 - np.exp(-t / 30), "frac_zero_std": np.full(200, 0.9)},
    ...              validity=False)
    >>> d["advantage_degeneracy"].verdict
    'detected'
"""

from grpojax.diagnose._concentration import detect_policy_concentration
from grpojax.diagnose._config import DEFAULT_CONFIG, DiagnoseConfig
from grpojax.diagnose._degeneracy import detect_advantage_degeneracy
from grpojax.diagnose._diagnose import diagnose, p_unstable_from_fit
from grpojax.diagnose._hacking import detect_reward_hacking
from grpojax.diagnose._health import (
    detect_clip_saturation,
    detect_gradient_spikes,
    detect_kl_drift,
    detect_learning_plateau,
    detect_length_pathology,
    detect_reward_imbalance,
    reward_components,
)
from grpojax.diagnose._advice import group_size_for, pass_rate_from_zero_std, zero_std_fraction
from grpojax.diagnose._instability import detect_dynamical_instability
from grpojax.diagnose._types import (
    ALL_MODES,
    HEALTH_MODES,
    MODES,
    VALIDITY,
    VALIDITY_VERDICTS,
    VERDICTS,
    Diagnosis,
    Evidence,
    ModeResult,
    severity_level,
)
from grpojax.diagnose._validity import check_mean_field_validity

__all__ = [
    "ALL_MODES",
    "DEFAULT_CONFIG",
    "HEALTH_MODES",
    "MODES",
    "VALIDITY",
    "VALIDITY_VERDICTS",
    "VERDICTS",
    "Diagnosis",
    "DiagnoseConfig",
    "Evidence",
    "ModeResult",
    "check_mean_field_validity",
    "detect_advantage_degeneracy",
    "detect_clip_saturation",
    "detect_gradient_spikes",
    "detect_kl_drift",
    "detect_learning_plateau",
    "detect_length_pathology",
    "detect_reward_imbalance",
    "detect_dynamical_instability",
    "detect_policy_concentration",
    "detect_reward_hacking",
    "diagnose",
    "group_size_for",
    "pass_rate_from_zero_std",
    "reward_components",
    "zero_std_fraction",
    "p_unstable_from_fit",
    "severity_level",
]
