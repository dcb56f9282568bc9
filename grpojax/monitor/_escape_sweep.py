"""A measured bound on P(escape) from a learning-rate sweep: :func:`escape_sweep_bound`.

The escape model (``docs/model/escape.md``) predicts P(escape within the planned run) from the curvature and the
noise; on a real network it can put the escape onset too high (momentum with few samples per step leaves the
basin well below the model's 5 % point). A sweep of short runs measures it instead: runs at several learning
rates, each run as long as the planned one, each marked escaped or not. This module turns such a sweep into the
largest learning rate whose escape probability is bounded by ``level`` at a stated confidence, with no model of
the noise and no assumed shape of the escape curve.

The one assumption is that P(escape within T) does not fall as η grows (a larger step leaves no less often).
Then:

1. Per probed η_j (ascending), the runs at η_j and at the next larger probed rates, added in order until the pool
   holds ``runs_needed`` runs (the fewest for which zero escapes give an upper bound ≤ ``level``), estimate an
   average escape probability that is ≥ P(η_j). Its one-sided Clopper–Pearson upper bound U_j is therefore an
   upper bound on P(η_j) at ``confidence``. The pool depends on the run counts only, never on the outcomes.
2. The rates are tested in ascending order and the walk stops at the first U_j > ``level`` (fixed-sequence
   testing). The certified η is the last rate passed. Because the rates with P > ``level`` form an upper set,
   certifying one of them needs the first of them to pass, which happens with probability ≤ 1 − ``confidence``:
   the guarantee holds for the certified η and, by the monotonicity, for every smaller η.

:func:`read_escape_sweep` reads such a sweep from a CSV or JSON-lines file (columns ``eta``, ``escaped`` and,
optionally, ``steps``), or from a population's ``population.json``.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
from typing import NamedTuple

import numpy as np

from grpojax._errors import InvalidValueError

__all__ = ["SweepBound", "SweepLevel", "escape_sweep_bound", "read_escape_sweep", "runs_needed"]


class SweepLevel(NamedTuple):
    """One probed learning rate of a sweep.

    Attributes:
        eta: the learning rate (user's units).
        runs, escaped: the runs at this rate and how many of them escaped.
        pooled_runs, pooled_escaped: the pool that bounds P(escape) here (this rate and the next larger ones).
        upper: the one-sided upper confidence bound on P(escape) at this rate.
        certified: whether the ascending walk passed this rate (``upper`` ≤ level and every smaller rate passed).
    """

    eta: float
    runs: int
    escaped: int
    pooled_runs: int
    pooled_escaped: int
    upper: float
    certified: bool


class SweepBound(NamedTuple):
    """What :func:`escape_sweep_bound` found.

    Attributes:
        eta: the largest probed learning rate certified: P(escape within the runs' length) ≤ ``level`` there and
            below, at ``confidence``; None when the smallest probed rate is not certified.
        upper: the upper bound at ``eta`` (None with it).
        level, confidence: the bound asked for and its confidence.
        runs_needed: the fewest pooled runs for which zero escapes certify a rate.
        levels: one :class:`SweepLevel` per probed rate, ascending.
        runs, escaped: totals over the sweep.
    """

    eta: float | None
    upper: float | None
    level: float
    confidence: float
    runs_needed: int
    levels: tuple
    runs: int
    escaped: int

    def describe(self) -> str:
        """One line for a report."""
        head = f"{self.runs} runs at {len(self.levels)} learning rates, {self.escaped} escaped"
        if self.eta is None:
            lo = self.levels[0]
            return (f"{head}; no rate certified: at the smallest, η = {lo.eta:.3g}, P(escape) ≤ {lo.upper:.3g} "
                    f"({self.confidence:.0%}) from {lo.pooled_escaped} of {lo.pooled_runs} pooled runs (a rate needs "
                    f"≥ {self.runs_needed} pooled runs and few escapes to reach ≤ {self.level:g}: probe lower rates or "
                    "more seeds)")
        nxt = next((v for v in self.levels if not v.certified), None)
        stop = "" if nxt is None else \
            f"; the next rate, η = {nxt.eta:.3g}, has a bound of {nxt.upper:.3g} ({nxt.pooled_escaped} of {nxt.pooled_runs})"
        return (f"{head}; P(escape) ≤ {self.upper:.3g} ({self.confidence:.0%}) up to η = {self.eta:.3g}{stop}")

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        d = self._asdict()
        d["levels"] = [v._asdict() for v in self.levels]
        return d


def runs_needed(level: float, confidence: float = 0.95) -> int:
    """The fewest runs for which zero escapes give a one-sided upper bound ≤ ``level`` at ``confidence``:
    the smallest n with 1 − (1 − confidence)^(1/n) ≤ level."""
    _probability("level", level)
    _probability("confidence", confidence)
    n = max(1, math.ceil(math.log1p(-confidence) / math.log1p(-level) - 1e-12))
    return n if _upper(0, n, confidence) <= level else n + 1


def _upper(k: int, n: int, confidence: float) -> float:
    """One-sided Clopper–Pearson upper bound on a binomial probability from ``k`` of ``n``."""
    from scipy.stats import beta  # noqa: PLC0415

    return 1.0 if k >= n else float(beta.ppf(confidence, k + 1, n - k))


def _probability(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) < 1.0:
        raise InvalidValueError(f"{name} must be a probability in (0, 1), got {v!r}")
    return float(v)


def escape_sweep_bound(eta, escaped, *, level: float = 0.05, confidence: float = 0.95) -> SweepBound:
    """The largest probed learning rate whose P(escape) is bounded by ``level``, from measured runs.

    Args:
        eta: learning rate of each run (> 0, finite), any order; runs at one rate share the exact value.
        escaped: whether each run left the plateau's basin within the planned length (booleans or 0/1).
        level: the bound on P(escape), in (0, 1) (default 0.05).
        confidence: the confidence of the bound, in (0, 1) (default 0.95).

    Returns:
        :class:`SweepBound`.

    Raises:
        InvalidValueError: no runs, lengths that differ, a learning rate that is not finite and > 0, an escape
            flag that is not a boolean or 0/1, or ``level``/``confidence`` outside (0, 1).
    """
    level, confidence = _probability("level", level), _probability("confidence", confidence)
    try:
        e = np.asarray(eta, dtype=float).reshape(-1) if np.size(eta) else np.zeros(0)
    except (TypeError, ValueError):
        raise InvalidValueError(f"eta must be learning rates (numbers), got {eta!r:.80}") from None
    raw = list(np.asarray(escaped, dtype=object).reshape(-1)) if np.size(escaped) else []
    if e.size == 0:
        raise InvalidValueError("the sweep holds no runs; give at least one (eta, escaped) pair")
    if e.size != len(raw):
        raise InvalidValueError(f"the sweep has {e.size} learning rates but {len(raw)} escape flags; give one per run")
    bad = np.flatnonzero(~(np.isfinite(e) & (e > 0)))
    if bad.size:
        raise InvalidValueError(f"run {int(bad[0])}: learning rate {float(e[bad[0]])!r}; expected a finite number > 0")
    flags = np.zeros(e.size, dtype=bool)
    for i, f in enumerate(raw):
        if isinstance(f, (bool, np.bool_)) or (isinstance(f, (int, np.integer, float)) and f in (0, 1)):
            flags[i] = bool(f)
        else:
            raise InvalidValueError(f"run {i}: escape flag {f!r}; expected true/false or 1/0")
    rates, inverse = np.unique(e, return_inverse=True)
    runs = np.bincount(inverse, minlength=rates.size)
    esc = np.bincount(inverse, weights=flags, minlength=rates.size).astype(int)
    need = runs_needed(level, confidence)
    levels, passing = [], True
    for j in range(rates.size):
        n = k = 0
        for m in range(j, rates.size):  # pool upward until the pool can certify: counts only, never outcomes
            n, k = n + int(runs[m]), k + int(esc[m])
            if n >= need:
                break
        u = _upper(k, n, confidence)
        passing = passing and u <= level
        levels.append(SweepLevel(float(rates[j]), int(runs[j]), int(esc[j]), n, k, u, passing))
    done = [v for v in levels if v.certified]
    return SweepBound(done[-1].eta if done else None, done[-1].upper if done else None, level, confidence, need,
                      tuple(levels), int(e.size), int(flags.sum()))


_PER_RUN = ("lr", "seed", "name")  # what may differ between the members of one sweep


def _population_rows(p: pathlib.Path, pop: dict) -> list[dict]:
    """The rows of a population's ``population.json`` (``grpojax train --population``): a member's peak lr, whether
    it diverged, and the population's steps; the members must differ in the lr and the seed only."""
    members = pop["members"]
    settings = [{k: v for k, v in (m.get("member") or {}).items() if k not in _PER_RUN} for m in members]
    for key in sorted({k for s in settings for k in s}):
        values = {json.dumps(s.get(key)) for s in settings}
        if len(values) > 1:
            raise InvalidValueError(f"{p}: the members differ in {key} ({', '.join(sorted(values))}); a sweep is one "
                                    "configuration at several learning rates and seeds")
    return [dict(eta=(m.get("member") or {}).get("lr"), escaped=m.get("diverged"), steps=pop.get("steps"))
            for m in members]


_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def read_escape_sweep(path, *, steps: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read a sweep: a CSV file (header row) or JSON lines, one run per row, with ``eta`` (the learning rate),
    ``escaped`` (true/false or 1/0) and optionally ``steps`` (the run's length in optimizer steps); or the
    ``population.json`` of ``grpojax train --population``, whose members must differ in ``lr`` and ``seed`` only:
    a member escaped when it diverged (a collapse without a divergence is not counted: write a CSV from your own
    verdicts to count it).

    Args:
        path: the file (``.csv``, or ``.jsonl``/``.json`` with one object per line).
        steps: the planned length; when given, every row with a ``steps`` value must have run at least this long
            (a shorter run cannot tell whether it would have left within the planned length).

    Returns:
        ``(eta, escaped)`` arrays.

    Raises:
        InvalidValueError: an unreadable row, a missing column, a bad value, or a run shorter than ``steps``.
    """
    p = pathlib.Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise InvalidValueError(f"{p}: {exc.strerror or exc}") from None
    whole = None
    if p.suffix.lower() == ".json":
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
    if isinstance(whole, dict) and isinstance(whole.get("members"), list):
        rows = _population_rows(p, whole)
    elif p.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    raise InvalidValueError(f"{p}: line {i} is not a JSON object") from None
                if not isinstance(rows[-1], dict):
                    raise InvalidValueError(f"{p}: line {i} is not a JSON object")
    if not rows:
        raise InvalidValueError(f"{p}: no runs; expected one row per run with columns eta, escaped[, steps]")
    eta, escaped = [], []
    for i, r in enumerate(rows, 1):
        where = f"{p}: row {i}"
        for col in ("eta", "escaped"):
            if r.get(col) in (None, ""):
                raise InvalidValueError(f"{where}: no '{col}'; expected columns eta, escaped[, steps]")
        try:
            eta.append(float(r["eta"]))
        except (TypeError, ValueError):
            eta.append(math.nan)
        if not (math.isfinite(eta[-1]) and eta[-1] > 0):
            raise InvalidValueError(f"{where}: eta {r['eta']!r}; expected a learning rate, a finite number > 0")
        f = r["escaped"]
        f = _TRUE.get(f.strip().lower()) if isinstance(f, str) else (bool(f) if f in (0, 1) else None)
        if f is None:
            raise InvalidValueError(f"{where}: escaped {r['escaped']!r}; expected true/false or 1/0")
        escaped.append(f)
        if steps is not None and r.get("steps") not in (None, ""):
            try:
                n = float(r["steps"])
            except (TypeError, ValueError):
                raise InvalidValueError(f"{where}: steps {r['steps']!r}; expected a number of optimizer steps") from None
            if not n >= steps:
                raise InvalidValueError(f"{where}: ran {r['steps']} steps, fewer than the planned {steps}; a sweep's runs "
                                        "must be at least as long as the planned run")
    return np.asarray(eta, dtype=float), np.asarray(escaped, dtype=bool)
