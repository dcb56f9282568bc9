"""Run every detector on one run log: :func:`diagnose`."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from grpojax.diagnose._concentration import detect_policy_concentration
from grpojax.diagnose._config import DEFAULT_CONFIG, DiagnoseConfig
from grpojax.diagnose._degeneracy import detect_advantage_degeneracy
from grpojax.diagnose._hacking import detect_reward_hacking
from grpojax.diagnose._instability import detect_dynamical_instability
from grpojax.diagnose._series import as_run
from grpojax.diagnose._types import Diagnosis, make_evidence
from grpojax.diagnose._validity import check_mean_field_validity


def p_unstable_from_fit(fit: Any) -> float | None:
    """Posterior P(C <= 0) from a Bayesian fit result, or ``None`` if it does not carry one.

    Accepts a float, a mapping or object with ``p_unstable`` / ``prob_unstable``, or a ``p_regime``
    / ``P_regime`` / ``regime_probs`` mapping with an ``"unstable"`` entry (NaN there, as for a flat curve
    whose regime is not identified, gives ``None``).
    """
    if fit is None:
        return None
    if isinstance(fit, (int, float, np.floating)):
        return float(fit)
    get = (lambda k: fit.get(k)) if isinstance(fit, dict) else (lambda k: getattr(fit, k, None))
    for k in ("p_unstable", "prob_unstable"):
        v = get(k)
        if v is not None:
            return float(np.asarray(v))
    for k in ("p_regime", "P_regime", "regime_probs", "regime_probabilities"):
        v = get(k)
        if isinstance(v, dict) and "unstable" in v:
            p = float(np.asarray(v["unstable"]))
            return p if np.isfinite(p) else None  # NaN: the fit identified no regime (no learning)
    return None


def diagnose(run: Any, *, config: DiagnoseConfig | None = None, fit: Any = None,
             validity: bool = True, name: str | None = None) -> Diagnosis:
    """Run the four failure-mode detectors and the mean-field validity check.

    Args:
        run: a ``grpojax.logs.RunLog`` or a mapping ``{canonical column: (N,) array}`` (with an optional
            ``"step"`` array), e.g. the output of ``grpojax.bandit.rollout_log``.
        config: thresholds (default :data:`DEFAULT_CONFIG`).
        fit: optional Bayesian fit of the reward curve (``grpojax.fit``) or its P(C <= 0); feeds the
            instability detector.
        validity: also run the mean-field validity check (a least-squares fit; off for speed in
            benchmarks that only need the verdicts).
        name: overrides the run's name.

    Returns:
        :class:`Diagnosis` with one :class:`ModeResult` per mode.
    """
    cfg = DEFAULT_CONFIG if config is None else config
    r = as_run(run, name=name)
    results = {
        "reward_hacking": detect_reward_hacking(r, cfg),
        "advantage_degeneracy": detect_advantage_degeneracy(r, cfg),
        "policy_concentration": detect_policy_concentration(r, cfg),
        "dynamical_instability": detect_dynamical_instability(r, cfg, p_unstable=p_unstable_from_fit(fit)),
    }
    if validity:
        val = check_mean_field_validity(r, cfg)
        results["mean_field_validity"] = val
        zeta = val.panel_data.get("params", {}).get("zeta") if val.verdict != "insufficient_data" else None
        if zeta is not None and np.isfinite(zeta):
            # the least-squares damping ratio of the reward curve: C <= 0 <=> zeta <= 0 (supporting only:
            # a point estimate on a noisy curve; a posterior P(C <= 0) is decisive when given)
            inst = results["dynamical_instability"]
            s, _ = r.series("reward_mean")
            e = make_evidence("reward_mean", s, "three-phase least-squares damping ratio zeta", float(zeta),
                              0.0, "<=", kind="flag")._replace(role="supporting", score=0.0)
            results["dynamical_instability"] = dataclasses.replace(inst, evidence=inst.evidence + (e,))
    return Diagnosis(r.name, results, cfg.to_dict())
