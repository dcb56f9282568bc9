"""Failure-mode diagnostics from GRPO run logs (``docs/guide/diagnostics.md``).

Five failure-mode detectors -- reward hacking, advantage degeneracy, policy concentration, dynamical
instability and collapse --, six training-health detectors (length pathology, learning plateau, clip saturation, KL drift, gradient
spikes, reward-component imbalance) and a mean-field validity check, each taking a :class:`grpojax.logs.RunLog` and returning a
:class:`ModeResult` (verdict, severity, evidence, and the arrays ``grpojax.plot.draw_panel`` draws).
Thresholds live in :class:`DiagnoseConfig` (documented and justified there).

Mode names are :data:`MODES` (the five failure modes), :data:`HEALTH_MODES` (the six health checks)
and :data:`ALL_MODES` (both); each verdict is one of :data:`VERDICTS`. :func:`diagnose` returns a
:class:`Diagnosis` of :class:`ModeResult` s, each with its :class:`Evidence`; :data:`DEFAULT_CONFIG` holds the
default thresholds. Every logged series is also segmented into events (abrupt level shifts,
``Diagnosis.events``), which the collapse finding reads for its precursor chain.

Example:
    >>> import numpy as np
    >>> from grpojax.diagnose import diagnose
    >>> t = np.arange(200.0)
    >>> d = diagnose({"reward_mean": 1 - np.exp(-t / 30), "frac_zero_std": np.full(200, 0.9)},
    ...              validity=False)
    >>> d["advantage_degeneracy"].verdict
    'detected'
"""

from grpojax.diagnose._config import DEFAULT_CONFIG, DiagnoseConfig
from grpojax.diagnose._collapse import collapse_onset
from grpojax.diagnose._diagnose import diagnose
from grpojax.diagnose._types import ALL_MODES, Diagnosis, Evidence, HEALTH_MODES, MODES, ModeResult, VERDICTS

# Importable for the packages after this one, the command line and the experiments, but not part
# of the public API (not in __all__, not in the API reference).
from grpojax.diagnose._advice import group_size_for, zero_std_fraction
from grpojax.diagnose._health import reward_components
from grpojax.diagnose._events import noise_sd, series_events
from grpojax.diagnose._compare import Comparison, compare_runs, effective_window, trailing_median
from grpojax.diagnose._format import COMPARISON_RE, fmt_num

__all__ = [
    "ALL_MODES",
    "DEFAULT_CONFIG",
    "DiagnoseConfig",
    "Diagnosis",
    "Evidence",
    "HEALTH_MODES",
    "MODES",
    "ModeResult",
    "VERDICTS",
    "collapse_onset",
    "diagnose",
]
