"""Live monitoring of GRPO runs: the watch engine, training hooks and the hyperparameter advisor.

- :func:`update` (with :func:`init_state` -> :class:`WatchState`, :class:`MonitorConfig`; a
  :class:`WatchReport` per call): the pure watch engine
  ``update(state, run) -> (state, report)`` behind ``grpojax watch``: forecast plateau and interval, time
  to plateau, stability margin, detector findings, best checkpoint and collapse-risk alerts
  (:func:`collapse_risk`, thresholds in :class:`AlertConfig`; levels :data:`ALERT_LEVELS`).
- :class:`MonitorHook`: the engine as a training hook (a :data:`Hook`:
  ``hook(step, metrics) -> stop reason or None``)
  (grpojax's trainer or any loop); :func:`attach`: the same as a ``transformers.TrainerCallback``
  registered ahead of a TRL ``GRPOTrainer``'s reporters (:func:`trl_callback` builds the callback alone).
- :func:`advise`: damping ratio, exact stability margin and the η, K_ref and G ranges of ``grpojax advise``;
  :func:`in_advised_range` is its vectorised verdict; :func:`advise` returns an :class:`Advice`;
  :func:`curvature_from_rate` turns the fitted rate of a reward curve into the curvature it implies.
- :func:`escape_sweep_bound`: the largest learning rate of a measured sweep whose P(escape) is bounded by a level
  at a stated confidence (a :class:`SweepBound`; :func:`read_escape_sweep` reads a sweep's file), the measured
  cap ``advise --escape-sweep`` keeps beside the escape model's.
- :func:`run_status`: whether the run in a run folder is running, finished or stale (its ``summary.json``
  says ``running`` but the process that wrote it is gone); a :class:`RunStatus`. ``grpojax status`` and
  ``grpojax watch`` report it.

Example:
    >>> from grpojax.monitor import advise
    >>> a = advise(eta=0.01, mu=0.9, k_ref=4, group_size=8, curvature=0.5, pass_rate=0.8)
    >>> a.regime, a.group_size_needed
    ('underdamped', 11)
"""

from grpojax.monitor._advisor import Advice, advise, curvature_from_rate, in_advised_range
from grpojax.monitor._alerts import ALERT_LEVELS, AlertConfig, collapse_risk
from grpojax.monitor._escape_sweep import SweepBound, SweepLevel, escape_sweep_bound, read_escape_sweep
from grpojax.monitor._engine import MonitorConfig, WatchReport, WatchState, init_state, update
from grpojax.monitor._hooks import Hook, MonitorHook, attach, trl_callback
from grpojax._run_status import RunStatus, run_status

__all__ = [
    "Advice",
    "Hook",
    "MonitorConfig",
    "MonitorHook",
    "RunStatus",
    "WatchReport",
    "WatchState",
    "advise",
    "attach",
    "curvature_from_rate",
    "in_advised_range",
    "init_state",
    "run_status",
    "trl_callback",
    "update",
]
