"""Live monitoring of GRPO runs: the watch engine, training hooks and the hyperparameter advisor.

- :func:`update` (with :func:`init_state`, :class:`MonitorConfig`): the pure watch engine
  ``update(state, run) -> (state, report)`` behind ``grpojax watch``: forecast plateau and interval, time
  to plateau, stability margin, detector findings, best checkpoint.
- :class:`MonitorHook`: the engine as a training hook ``hook(step, metrics) -> stop reason or None``
  (grpojax's trainer or any loop); :func:`attach`: the same as a ``transformers.TrainerCallback``
  registered ahead of a TRL ``GRPOTrainer``'s reporters (:func:`trl_callback` builds the callback alone).
- :func:`advise`: damping ratio, exact stability margin and the η, K_ref and G ranges of ``grpojax advise``;
  :func:`in_advised_range` is its vectorised verdict.

Example:
    >>> from grpojax.monitor import advise
    >>> a = advise(eta=0.01, mu=0.9, k_ref=4, group_size=8, curvature=0.5, pass_rate=0.8)
    >>> a.regime, a.group_size_needed
    ('underdamped', 11)
"""

from grpojax.monitor._advisor import ZETA_BAND, Advice, advise, curvature_from_rate, damping_ratio_np, in_advised_range
from grpojax.monitor._engine import (
    MonitorConfig,
    WatchReport,
    WatchState,
    hyperparams_from_meta,
    init_state,
    update,
)
from grpojax.monitor._follow import log_signature, read_growing
from grpojax.monitor._hooks import STOP_RULES, Hook, MonitorHook, attach, canonical_metrics, trl_callback

__all__ = [
    "ZETA_BAND",
    "Advice",
    "advise",
    "curvature_from_rate",
    "damping_ratio_np",
    "in_advised_range",
    "MonitorConfig",
    "WatchReport",
    "WatchState",
    "hyperparams_from_meta",
    "init_state",
    "update",
    "log_signature",
    "read_growing",
    "STOP_RULES",
    "Hook",
    "MonitorHook",
    "attach",
    "canonical_metrics",
    "trl_callback",
]
