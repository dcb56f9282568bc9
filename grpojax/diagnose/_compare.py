"""Several runs side by side: the hyperparameters that differ and where the curves separate.

:func:`compare_runs` takes two or more :class:`grpojax.logs.RunLog` s (a sweep, a rerun, an ablation) and
returns a :class:`Comparison`:

- the hyperparameters that differ (:func:`run_hyperparameters`: the scalars of each run's meta -- the
  settings its reader or its hyperparameter file stated -- without the reader's bookkeeping);
- for every metric the runs share, the first step at which each run separates from the first run (the
  reference) beyond noise.

Divergence, defined
    Both curves are taken on the reference's steps inside the steps both runs cover (the other run
    linearly interpolated there) and smoothed by a trailing running median of ``w`` points (the point and
    the ``w - 1`` before it; fewer at the start), ``w = min(window, max(1, n // 8))`` for ``n`` common
    points (a sparse eval curve is not smeared over half its length): the value at a step uses no later
    data, so a divergence is never dated before the data show it (a median follows a jump once half of
    its points are past it: up to ``(w - 1) // 2`` points later), and a single spike moves a median
    little, so one outlier is not a divergence. Each run's per-step noise sd is estimated from its first
    differences, robustly: ``sigma = 1.4826 MAD(diff y) / sqrt(2)`` (exact for white noise on a smooth
    trend; the MAD ignores the trend's own steps and single jumps). The difference of the smoothed curves
    at a point whose median takes ``m`` points has noise sd ``c sqrt(sigma_a^2 + sigma_b^2) / sqrt(m)``,
    ``c = sqrt(pi / 2)`` (the large-sample sd of a Gaussian median, above the exact one for every ``m >=
    3``) and ``c = 1`` for ``m <= 2`` (a point, a mean of two). The runs
    *diverge* at the first step of the first ``consecutive`` points in a row where ``|difference| > k`` times
    that sd (defaults: ``window = 5``, ``k = 3``, ``consecutive = 3``; under white noise a 3-sd excursion of
    the smoothed difference three points in a row is rare, and two runs with the same trend stay together).
    A run that never does is reported as not diverging (``None``). Runs that differ from their first
    step (another initial checkpoint, another scale) diverge at the first step.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.diagnose._events import noise_sd
from grpojax.logs import RunLog

__all__ = ["Comparison", "Divergence", "compare_runs", "divergence_step", "effective_window", "noise_sd",
           "run_hyperparameters", "trailing_median"]

# meta keys a reader writes about the file, not about the training (never "hyperparameters")
_BOOKKEEPING = {"read", "mapping", "column_sources", "converted_from", "notes", "warnings", "skipped_rows",
                "skipped_columns", "original_names", "step_key", "n_train_points", "n_eval_points", "index_note",
                "source", "license", "nan_counts", "hyperparams", "hyperparameters", "hyperparameters_from",
                "format", "name", "run", "path", "file", "files", "sweep_status",
                # progress a trainer records about itself (TRL's trainer_state), not settings
                "global_step", "epoch", "best_metric", "best_global_step", "best_model_checkpoint", "total_flos",
                "trial_name", "trial_params", "is_local_process_zero", "is_world_process_zero"}
_BOOKKEEPING_SUFFIX = ("_dir", "_path", "_file", "_source", "_note", "_notes")

# the canonical metrics first (the ones a reader maps), then the others in name order
_ORDER = ("reward_mean", "eval_reward", "reward_std", "frac_zero_std", "entropy", "kl", "grad_norm", "response_length",
          "response_clip_frac", "clip_frac", "is_ratio_max", "is_ratio_mean", "loss")


def run_hyperparameters(run: RunLog) -> dict[str, Any]:
    """The run's settings as ``{name: scalar}``: the scalars of ``run.meta`` (what its reader found in
    the log's header or config) and of ``run.meta["hyperparams"]`` (a hyperparameter file beside it),
    without the reader's bookkeeping (source paths, column mappings, notes)."""
    out: dict[str, Any] = {}
    hp = run.meta.get("hyperparams")
    if isinstance(hp, dict):
        out.update({str(k): v for k, v in hp.items() if _scalar(v)})
    for k, v in run.meta.items():
        if k in _BOOKKEEPING or str(k).endswith(_BOOKKEEPING_SUFFIX) or not _scalar(v):
            continue
        out.setdefault(str(k), v)
    return out


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str, np.integer, np.floating))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float, np.integer, np.floating)) and isinstance(b, (int, float, np.integer, np.floating)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0) or (math.isnan(float(a)) and math.isnan(float(b)))
    return a == b


def differing_hyperparameters(runs: Sequence[RunLog]) -> dict[str, list[Any]]:
    """``{name: [value of each run]}`` for every setting whose value is not the same in all runs (a setting
    one run states and another does not counts: its value there is ``None``)."""
    hps = [run_hyperparameters(r) for r in runs]
    names = sorted(set().union(*hps))
    out = {}
    for k in names:
        vals = [h.get(k) for h in hps]
        if any(not _same(vals[0], v) for v in vals[1:]):
            out[k] = vals
    return out


def trailing_median(y: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Median of each point and the ``window - 1`` before it (fewer at the start), and how many points each
    median takes."""
    y = np.asarray(y, float)
    if y.size == 0:
        return y.copy(), y.copy()
    padded = np.concatenate([np.full(window - 1, np.nan), y])
    med = np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, window), axis=1)
    return med, np.minimum(np.arange(1, y.size + 1), window).astype(float)


def median_sd_factor(m: np.ndarray) -> np.ndarray:
    """The sd of a median of ``m`` Gaussian points over sigma / sqrt(m): 1 for one or two points (a point, a
    mean), sqrt(pi / 2) beyond (the large-sample value, above the exact one for every m >= 3)."""
    return np.where(np.asarray(m) <= 2, 1.0, math.sqrt(math.pi / 2))


def effective_window(window: int, n: int) -> int:
    """The points of the running median on ``n`` common points: ``min(window, max(1, n // 8))``."""
    return int(min(window, max(1, n // 8)))


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Where one run separates from the reference on one metric.

    Attributes:
        metric: the column compared.
        run: the run's name; ``reference``: the reference run's name.
        step: first step of the first ``consecutive`` points beyond ``k`` noise sd (``None``: never).
        direction: ``"higher"`` or ``"lower"`` (the run against the reference at ``step``), or ``None``.
        final_difference: run minus reference, smoothed, at the last common step.
        noise_sd: ``sqrt(sigma_run^2 + sigma_ref^2)``, the per-point noise sd of the raw difference.
        n_points: common points compared; ``window``: points of the running median used
            (:func:`effective_window`).
        steps, difference, threshold: the compared steps, the smoothed difference and ``k`` times its
            noise sd there (for the figure).
    """

    metric: str
    run: str
    reference: str
    step: float | None
    direction: str | None
    final_difference: float
    noise_sd: float
    n_points: int
    window: int = 1
    steps: np.ndarray = dataclasses.field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    difference: np.ndarray = dataclasses.field(repr=False, compare=False, default_factory=lambda: np.zeros(0))
    threshold: np.ndarray = dataclasses.field(repr=False, compare=False, default_factory=lambda: np.zeros(0))

    def to_dict(self) -> dict[str, Any]:
        step = int(self.step) if self.step is not None and float(self.step).is_integer() else self.step
        return {"metric": self.metric, "run": self.run, "reference": self.reference, "diverges_at_step": step,
                "direction": self.direction, "final_difference": self.final_difference, "noise_sd": self.noise_sd,
                "n_points": self.n_points, "window": self.window}


def divergence_step(steps: np.ndarray, a: np.ndarray, b: np.ndarray, *, window: int = 5, k: float = 3.0,
                    consecutive: int = 3, sigma_a: float | None = None, sigma_b: float | None = None):
    """First step where curve ``b`` separates from curve ``a`` (same ``steps``) beyond noise.

    See the module docstring for the definition. ``sigma_a`` / ``sigma_b``: the curves' per-step noise sd
    (default: :func:`noise_sd` of each).

    Returns:
        ``(step or None, smoothed difference b - a, k x its noise sd)``; ``window`` is the most points of the
        running median (:func:`effective_window`).
    """
    steps = np.asarray(steps, float)
    a, b = np.asarray(a, float), np.asarray(b, float)
    sa = noise_sd(a) if sigma_a is None else float(sigma_a)
    sb = noise_sd(b) if sigma_b is None else float(sigma_b)
    w = effective_window(window, steps.size)
    mb, counts = trailing_median(b, w)
    diff = mb - trailing_median(a, w)[0]
    thr = k * median_sd_factor(counts) * math.sqrt(sa * sa + sb * sb) / np.sqrt(counts)
    out = np.abs(diff) > thr
    run = 0
    for i in range(steps.size):
        run = run + 1 if out[i] else 0
        if run >= consecutive:
            return float(steps[i - consecutive + 1]), diff, thr
    return None, diff, thr


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The answer of :func:`compare_runs`.

    Attributes:
        runs: the runs' names, the reference first.
        hyperparameters: ``{name: [value per run]}`` of the settings that differ.
        metrics: the metrics compared, in report order.
        divergences: one :class:`Divergence` per (metric, run other than the reference).
        skipped: ``{metric: why}`` for shared metrics that could not be compared.
        settings: the divergence definition's parameters (``window``, ``k``, ``consecutive``).
    """

    runs: tuple[str, ...]
    hyperparameters: dict[str, list[Any]]
    metrics: tuple[str, ...]
    divergences: tuple[Divergence, ...]
    skipped: dict[str, str]
    settings: dict[str, Any]

    def first_divergence(self, metric: str, run: str | None = None) -> float | None:
        """The divergence step of ``run`` (default: the second run) from the reference on ``metric``."""
        run = self.runs[1] if run is None else run
        for d in self.divergences:
            if d.metric == metric and d.run == run:
                return d.step
        raise KeyError(f"no comparison of {metric!r} for run {run!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"runs": list(self.runs), "reference": self.runs[0], "hyperparameters": self.hyperparameters,
                "metrics": list(self.metrics), "divergences": [d.to_dict() for d in self.divergences],
                "skipped": self.skipped, "settings": self.settings}


def _finite(run: RunLog, col: str) -> tuple[np.ndarray, np.ndarray]:
    s, v = run.series(col)
    ok = np.isfinite(v)
    return s[ok].astype(float), v[ok].astype(float)


def compare_runs(runs: Sequence[RunLog], *, metrics: Sequence[str] | None = None, window: int = 5, k: float = 3.0,
                 consecutive: int = 3, min_points: int = 8) -> Comparison:
    """Compare two or more runs: differing hyperparameters and per-metric divergence from the first run.

    Args:
        runs: the runs; the first is the reference every other run is compared with.
        metrics: the columns to compare (default: the canonical metrics -- reward, eval reward, entropy, KL,
            grad norm, length, clip fraction, ... -- all runs log with ``>= min_points`` finite points; every
            shared column when they share none of those).
        window: most points of the trailing running median (fewer on a short curve: see the module docstring).
        k: the number of noise sd the smoothed difference must exceed ...
        consecutive: ... at this many points in a row.
        min_points: fewest common points for a metric to be compared.

    Returns:
        :class:`Comparison`.

    Raises:
        ValueError: fewer than two runs, two runs with the same name, a metric no run has, or settings out of
            range (a window below 1, k <= 0, consecutive < 1).
    """
    runs = list(runs)
    if len(runs) < 2:
        raise InvalidValueError(f"compare needs at least two runs, got {len(runs)}")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        raise InvalidValueError(f"runs to compare need distinct names, got {', '.join(map(repr, dup))} twice")
    if not (isinstance(window, (int, np.integer)) and window >= 1):
        raise InvalidValueError(f"window must be a positive number of points, got {window!r}")
    if not (np.isfinite(k) and k > 0):
        raise InvalidValueError(f"k must be a positive number of noise sd, got {k!r}")
    if not (isinstance(consecutive, (int, np.integer)) and consecutive >= 1):
        raise InvalidValueError(f"consecutive must be a positive number of points, got {consecutive!r}")
    shared = [c for c in runs[0].columns if all(r.count(c) >= min_points for r in runs)]
    if metrics is None:
        cols = [c for c in _ORDER if c in shared] or sorted(shared)
    else:
        cols = list(metrics)
        unknown = [c for c in cols if not any(c in r.columns for r in runs)]
        if unknown:
            have = sorted(set().union(*(r.columns for r in runs)))
            raise InvalidValueError(f"no run logs {', '.join(map(repr, unknown))} (they log: {', '.join(have)})")
    ref = runs[0]
    divs: list[Divergence] = []
    skipped: dict[str, str] = {}
    done: list[str] = []
    for col in cols:
        missing = [r.name for r in runs if r.count(col) < min_points]
        if missing:
            skipped[col] = f"fewer than {min_points} points in {', '.join(missing)}"
            continue
        s0, y0 = _finite(ref, col)
        sig0 = noise_sd(y0)
        row = []
        for r in runs[1:]:
            s1, y1 = _finite(r, col)
            lo, hi = max(s0[0], s1[0]), min(s0[-1], s1[-1])
            keep = (s0 >= lo) & (s0 <= hi)
            if keep.sum() < min_points:
                row = None
                skipped[col] = f"fewer than {min_points} common steps between {ref.name} and {r.name}"
                break
            st, a = s0[keep], y0[keep]
            b = np.interp(st, s1, y1)
            step, diff, thr = divergence_step(st, a, b, window=window, k=k, consecutive=consecutive,
                                              sigma_a=sig0, sigma_b=noise_sd(y1))
            direction = None
            if step is not None:
                direction = "higher" if diff[int(np.searchsorted(st, step))] > 0 else "lower"
            row.append(Divergence(col, r.name, ref.name, step, direction, float(diff[-1]),
                                  math.sqrt(sig0 ** 2 + noise_sd(y1) ** 2), int(st.size),
                                  effective_window(window, int(st.size)), st, diff, thr))
        if row is not None:
            divs += row
            done.append(col)
    return Comparison(tuple(names), differing_hyperparameters(runs), tuple(done), tuple(divs), skipped,
                      {"window": int(window), "k": float(k), "consecutive": int(consecutive),
                       "min_points": int(min_points)})
