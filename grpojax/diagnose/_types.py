"""Result types of the failure-mode detectors.

Every detector returns a :class:`ModeResult`; :func:`grpojax.diagnose.diagnose` bundles one per mode
in a :class:`Diagnosis`.

Verdicts
    The failure-mode detectors answer ``"detected"``, ``"not_detected"`` or
    ``"insufficient_data"`` (with the reason in ``ModeResult.reason``). The mean-field validity check
    answers ``"valid"``, ``"violated"`` or ``"insufficient_data"``.

Severity
    A float in ``[0, 1]`` (``0.0`` when nothing was detected) and a level: ``"none"`` (0), ``"low"``
    (< 1/3), ``"medium"`` (< 2/3), ``"high"``. Each triggered piece of evidence has its own score and
    the severity is the largest. For a ratio ``r`` compared with a threshold ``c`` the score is
    ``log r / (2 log c)`` clipped to ``[0, 1]``: exactly at the threshold it is 0.5, at ``c**2`` it is
    1. For a fraction compared with a threshold (``frac_zero_std``) the score is the fraction itself.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, NamedTuple

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.diagnose._format import comparison, fmt_num, holding_op

VERDICTS = ("detected", "not_detected", "insufficient_data")
VALIDITY_VERDICTS = ("valid", "violated", "insufficient_data")
MODES = ("reward_hacking", "advantage_degeneracy", "policy_concentration", "dynamical_instability", "collapse")
"""The failure modes: the four of the oscillator model and the collapse (the reward falls away and stays down)."""
HEALTH_MODES = ("length_pathology", "learning_plateau", "clip_saturation", "kl_drift", "gradient_spikes",
                "reward_imbalance")
"""Training-health detectors next to the four modes (same verdicts, severity and evidence)."""
ALL_MODES = MODES + HEALTH_MODES
VALIDITY = "mean_field_validity"


class Evidence(NamedTuple):
    """One measured statistic and the threshold it is compared with.

    Attributes:
        metric: canonical column(s) the statistic is computed from, e.g. ``"frac_zero_std"``.
        step_range: ``(first_step, last_step)`` of the data used.
        statistic: what was computed, e.g. ``"late mean"`` or ``"late/early median ratio"``.
        value: the measured number (``nan`` when it could not be computed).
        threshold: the number it is compared with (``nan`` for purely informative evidence).
        op: ``">="`` or ``"<="`` -- the evidence triggers when ``value op threshold``; ``"info"`` never
            triggers.
        triggered: whether the comparison holds.
        score: this evidence's severity contribution in ``[0, 1]`` (0 when not triggered).
        role: ``"decisive"`` (can make the verdict) or ``"supporting"`` (shown, compared with its
            threshold, but does not decide the verdict on its own).
        kind: how the score is computed (:func:`make_evidence`); ``"gate"`` marks a precondition
            rather than a measure of the failure.
        label: a short name of the statistic for the one-line report (default: ``statistic`` without its
            parenthesised and bracketed details).
    """

    metric: str
    step_range: tuple[float, float]
    statistic: str
    value: float
    threshold: float
    op: str
    triggered: bool
    score: float
    role: str = "decisive"
    kind: str = "ratio"
    label: str = ""

    @property
    def past(self) -> bool:
        """The value is past its threshold (whether or not it counted: see :attr:`gated`)."""
        return _past(self.value, self.threshold, self.op)

    @property
    def gated(self) -> bool:
        """The value is past its threshold but did not count (another condition held it back)."""
        return self.past and not self.triggered

    def held_back(self, why: str = "") -> "Evidence":
        """This evidence not counted (not triggered, score 0), ``why`` appended to its statistic."""
        return self._replace(triggered=False, score=0.0, statistic=self.statistic + why)

    def comparison(self) -> str:
        """The comparison of value and threshold that holds, e.g. ``"0.984 >= 0.8"`` or ``"1.8 > 0.12"``
        (:func:`grpojax.diagnose._format.comparison`); empty for information."""
        if self.op == "info":
            return ""
        return comparison(self.value, self.threshold, self.op)

    def condition(self) -> str:
        """When the statistic counts, e.g. ``"counts when <= 0.12"``; with ``gated`` / ``supporting`` marks."""
        if self.op == "info":
            return ""
        if self.kind == "gate":  # a precondition: met or not
            state = "condition met" if self.triggered else f"condition: {self.op} {_fmt(self.threshold)}"
        elif self.triggered:
            state = "past its threshold"
        elif self.gated:
            state = "past its threshold but gated"
        else:
            state = f"counts when {self.op} {_fmt(self.threshold)}"
        return state + (", supporting" if self.role == "supporting" else "")

    def describe(self) -> str:
        """One line: ``metric statistic: value OP threshold (what that means; steps a-b)``, the operator
        being the one that holds; a triggered statistic starts with ``!``."""
        lo, hi = self.step_range
        rng = f"steps {_fmt(lo)}-{_fmt(hi)}"
        if self.op == "info":
            return f"{self.metric} {self.statistic} = {_fmt(self.value)} ({rng})"
        mark = "!" if self.triggered else " "
        return f"{mark}{self.metric} {self.statistic}: {self.comparison()} ({self.condition()}; {rng})"

    def short_label(self) -> str:
        """``metric label`` for the one-line report: the first metric and the statistic's short name."""
        label = self.label
        if not label:  # the statistic without its details in (nested) parentheses and brackets
            label, prev = self.statistic, None
            while label != prev:
                prev, label = label, re.sub(r"\([^()]*\)|\[[^\[\]]*\]", "", label)
            label = re.sub(r"\s+", " ", label).strip()
        return f"{self.metric.split(',')[0]} {label}".strip()

    def short(self) -> str:
        """The evidence as one short phrase, ``metric label value OP threshold``, the operator being the one
        that holds; a value past its threshold that another condition held back ends ``[gated]``."""
        if self.op == "info":
            return f"{self.short_label()} {_fmt(self.value)}"
        return f"{self.short_label()} {self.comparison()}" + (" [gated]" if self.gated else "")

    def record(self) -> dict:
        """The printed comparison as data: ``{"value", "op", "threshold", "holds"}`` with the operator that
        holds (``None`` for information or a NaN value)."""
        held = None if self.op == "info" else holding_op(self.value, self.threshold, self.op)
        return {"value": self.value, "op": held, "threshold": self.threshold, "trigger_op": self.op,
                "counts": bool(self.triggered), "gated": bool(self.gated)}


FAR_PAST = 10.0
"""A statistic at least this factor past its threshold (``value >= 10 x threshold`` for ``>=``,
``value <= threshold / 10`` for ``<=``) counts whatever gate would hold it back (:func:`finish_result`)."""


def _past(value: float, threshold: float, op: str) -> bool:
    if op not in (">=", "<=", ">", "<") or value is None or not np.isfinite(value):
        return False
    if op in (">=", ">"):
        return bool(value >= threshold) if op == ">=" else bool(value > threshold)
    return bool(value <= threshold) if op == "<=" else bool(value < threshold)


def far_past(e: "Evidence", factor: float = FAR_PAST) -> bool:
    """``e``'s value is ``factor`` times past a positive threshold (a zero or negative threshold has no
    "times past"; a gate is never far past: it is a precondition, not a measure)."""
    if e.kind == "gate" or e.op not in (">=", "<=") or not np.isfinite(e.value):
        return False
    t = e.threshold
    if not np.isfinite(t) or t <= 0:
        return False
    return bool(e.value >= factor * t) if e.op == ">=" else bool(0 <= e.value <= t / factor)


def _fmt(x: float) -> str:
    return fmt_num(x)


def make_evidence(metric: str, steps: np.ndarray | tuple[float, float], statistic: str, value: float,
                  threshold: float = float("nan"), op: str = "info", *, kind: str = "ratio",
                  label: str = "") -> Evidence:
    """Build an :class:`Evidence`, evaluating the comparison and its severity score.

    Args:
        metric, statistic: see :class:`Evidence`.
        steps: the steps used (their min and max become ``step_range``) or the range itself.
        value, threshold, op: see :class:`Evidence`.
        kind: ``"ratio"`` (score ``log value / (2 log threshold)``, for a ratio to a baseline of 1),
            ``"level"`` (an absolute level against a bound: score ``0.5 + 0.5 log10(value / threshold)``,
            0.5 at the bound and 1 at ten times it; mirrored for ``"<="``), ``"fraction"`` (score = value),
            ``"probability"`` (score = value), ``"zscore"`` (score ``value / (2 threshold)``),
            ``"flag"`` (score 1) or ``"gate"`` (score 0: a precondition, not a measure of severity).
        label: short name of the statistic for the one-line report (see :class:`Evidence`).
    """
    steps_arr = np.asarray(steps, dtype=float)
    if steps_arr.size:
        step_range = (float(np.nanmin(steps_arr)), float(np.nanmax(steps_arr)))
    else:
        step_range = (float("nan"), float("nan"))
    value = float(value)
    threshold = float(threshold)
    if op == "info" or not np.isfinite(value):
        triggered = False
    elif op == ">=":
        triggered = bool(value >= threshold)
    elif op == "<=":
        triggered = bool(value <= threshold)
    else:
        raise InvalidValueError(f"op must be '>=', '<=' or 'info', got {op!r}")
    if kind not in _KINDS:
        raise InvalidValueError(f"kind must be ratio/level/fraction/probability/zscore/flag/gate, got {kind!r}")
    score = _score(value, threshold, op, kind) if triggered else 0.0
    return Evidence(metric, step_range, statistic, value, threshold, op, triggered, score, kind=kind, label=label)


_KINDS = ("ratio", "level", "fraction", "probability", "zscore", "flag", "gate")


def _score(value: float, threshold: float, op: str, kind: str) -> float:
    """Severity score of a triggered comparison (see :func:`make_evidence`)."""
    if kind in ("ratio", "level", "zscore") and op == ">=" and not threshold > 0:
        return 1.0  # a threshold set to 0 (--set name=0): any value is past it without measure
    if kind == "ratio":
        lv, lt = np.log(max(value, 1e-300)), np.log(threshold)
        return 1.0 if lt == 0 else float(np.clip(lv / (2 * lt), 0.0, 1.0))
    if kind == "level":
        r = value / threshold if op == ">=" else threshold / max(value, 1e-300)
        return float(np.clip(0.5 + 0.5 * np.log10(max(r, 1e-300)), 0.0, 1.0))
    if kind in ("fraction", "probability"):
        return float(np.clip(value if op == ">=" else 1 - value, 0.0, 1.0))
    if kind == "zscore":
        return float(np.clip(value / (2 * threshold), 0.0, 1.0))
    if kind == "flag":
        return 1.0
    return 0.0  # a gate: a condition that must hold but says nothing about how severe


def severity_level(severity: float) -> str:
    """Map a severity in [0, 1] to ``"none"``, ``"low"``, ``"medium"`` or ``"high"``."""
    if severity <= 0:
        return "none"
    if severity < 1 / 3:
        return "low"
    if severity < 2 / 3:
        return "medium"
    return "high"


@dataclasses.dataclass(frozen=True)
class ModeResult:
    """The answer of one detector.

    Attributes:
        mode: one of :data:`MODES` or ``"mean_field_validity"``.
        verdict: see the module docstring.
        severity: float in ``[0, 1]``; ``0.0`` unless detected / violated.
        evidence: the statistics behind the verdict (triggered ones first).
        reason: one line explaining the verdict (for ``insufficient_data``: what is missing).
        episodes: ``[(first_step, last_step), ...]`` where the failure is visible (shaded in figures).
        panel_data: arrays the figure panel draws (steps, series, fitted curves); drawn by
            :func:`grpojax.plot.draw_panel`.
        advice: "what to change", one or two sentences (empty unless detected); derived from the
            oscillator model where it can be (a learning rate or lag that restores damping, a group
            size that keeps zero-variance groups rare).
    """

    mode: str
    verdict: str
    severity: float = 0.0
    evidence: tuple[Evidence, ...] = ()
    reason: str = ""
    episodes: tuple[tuple[float, float], ...] = ()
    panel_data: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    advice: str = ""

    @property
    def level(self) -> str:
        """Severity level: none / low / medium / high."""
        return severity_level(self.severity)

    @property
    def detected(self) -> bool:
        """True for ``detected`` (failure modes) or ``violated`` (validity check)."""
        return self.verdict in ("detected", "violated")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (no panel data)."""
        return {
            "mode": self.mode,
            "verdict": self.verdict,
            "severity": round(float(self.severity), 4),
            "level": self.level,
            "reason": self.reason,
            "advice": self.advice,
            "episodes": [list(e) for e in self.episodes],
            "evidence": [
                {**e._asdict(), "step_range": list(e.step_range), "text": e.describe(),
                 "comparison": e.record()}
                for e in self.evidence
            ],
        }


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """All detectors' results for one run.

    Attributes:
        run: the run's name.
        results: ``{mode: ModeResult}`` for the failure modes, the training-health checks (:data:`HEALTH_MODES`)
            and ``"mean_field_validity"``.
        config: the thresholds used (as a dict).
        events: ``{metric: SeriesEvents}``: the abrupt level shifts of every logged series
            (:mod:`grpojax.diagnose._events`), each with its step, size in noise sd, direction and confidence.
    """

    run: str
    results: dict[str, ModeResult]
    config: dict[str, Any]
    events: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __getitem__(self, mode: str) -> ModeResult:
        return self.results[mode]

    @property
    def detected(self) -> tuple[str, ...]:
        """The failure modes with verdict ``detected``."""
        return tuple(m for m in MODES if m in self.results and self.results[m].verdict == "detected")

    @property
    def findings(self) -> tuple[str, ...]:
        """Every detector (the failure modes and the training-health checks) with verdict ``detected``."""
        return tuple(m for m in ALL_MODES if m in self.results and self.results[m].verdict == "detected")

    @property
    def main_finding(self) -> str | None:
        """The finding a reader should see first: a collapse when there is one, else the most severe finding
        (ties in the order of :data:`ALL_MODES`), None when nothing was found. A learning plateau at the level
        the reward fell to (its ``panel_data["fell"]``) is never the main finding: the fall is what the run
        shows, so with no other finding there is none."""
        found = self.findings
        if "collapse" in found:
            return "collapse"
        main = [m for m in found if not (m == "learning_plateau" and (self.results[m].panel_data or {}).get("fell"))]
        if not main:
            return None
        return max(main, key=lambda m: (self.results[m].severity, -found.index(m)))

    def __str__(self) -> str:
        """A plain-text report: the main finding, then one line per detector (verdict, severity, reason)
        with its advice beneath; what ``print(diagnose(path))`` shows."""
        main = self.main_finding
        head = (f"main finding {main}" if main else "no main finding (learning_plateau: the reward fell to its flat "
                "tail)" if self.findings else "nothing detected")
        lines = [f"diagnosis of {self.run}: " + head]
        width = max((len(m) for m in self.results), default=0)
        for mode, r in self.results.items():
            sev = f" ({r.level}, severity {float(r.severity):.2f})" if r.detected else ""
            lines.append(f"  {mode:<{width}}  {r.verdict}{sev}: {r.reason}" if r.reason
                         else f"  {mode:<{width}}  {r.verdict}{sev}")
            if r.advice:
                lines.append(f"  {'':<{width}}  advice: {r.advice}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "detected": list(self.detected),
            "findings": list(self.findings),
            "main_finding": self.main_finding,
            "results": {m: r.to_dict() for m, r in self.results.items()},
            "events": {m: e.to_dict() for m, e in self.events.items()},
            "collapse": (self.results["collapse"].panel_data or {}).get("collapse") if "collapse" in self.results
            else None,
            "config": self.config,
        }


def _unhide(e: Evidence) -> Evidence:
    """A decisive statistic :data:`FAR_PAST` times past its threshold counts, whatever held it back."""
    if e.role != "decisive" or e.triggered or not far_past(e):
        return e
    return e._replace(triggered=True, score=_score(e.value, e.threshold, e.op, e.kind),
                      statistic=e.statistic + f" [{FAR_PAST:g}x past its threshold: counts whatever the gates say]")


def finish_result(mode: str, evidence: list[Evidence], episodes, panel_data: dict,
                  *, require_all: bool = False) -> ModeResult:
    """Combine evidence into a verdict: detected when any (``require_all``: every non-info) decisive
    evidence triggered; severity = the largest score of the triggered evidence.

    No gate hides a statistic :data:`FAR_PAST` times past its threshold: such a statistic triggers (and
    with ``require_all`` decides the verdict on its own). When the verdict is ``not_detected`` although a
    statistic passed its threshold, that statistic is marked gated (``Evidence.gated``) and the reason
    names what held it back.
    """
    evidence = [_unhide(e) for e in evidence]
    gating = [e for e in evidence if e.op != "info" and e.role == "decisive"]
    trig = [e for e in gating if e.triggered]
    if require_all:
        far = [e for e in trig if far_past(e)]
        hit = bool(gating) and (len(trig) == len(gating) or bool(far))
    else:
        hit = bool(trig)
    if hit:
        ordered = tuple(trig + [e for e in evidence if e not in trig])
        sev = max(e.score for e in trig)
        reason = "; ".join(e.describe().lstrip("!") for e in trig)
        return ModeResult(mode, "detected", sev, ordered, reason, tuple(sorted(set(episodes))), panel_data)
    # not detected: a measure that passed its threshold was held back by a failing gate -> mark it gated
    failed = [e for e in gating if not e.triggered and e.kind == "gate"]
    note = "; ".join(f"{e.statistic} {e.comparison()}" for e in failed)
    out = []
    for e in evidence:
        if e.triggered and e.kind != "gate" and e.role == "decisive":
            e = e.held_back(f" [gated by: {note}]")
        out.append(e)
    gated = [e for e in out if e.gated and e.role == "decisive"]
    reason = ("no statistic passed its threshold" if not gated else
              "past its threshold but gated: " + "; ".join(e.describe().strip() for e in gated))
    ordered = tuple(gated + [e for e in out if e not in gated])
    return ModeResult(mode, "not_detected", 0.0, ordered, reason, (), panel_data)
