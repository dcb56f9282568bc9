"""Figures of bandit sweeps: phase diagram, limit-cycle amplitude, variance law, mean trajectories."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg", force=False)
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

__all__ = ["phase_diagram_figure", "amplitude_figure", "variance_law_figure", "mean_trajectory_figure"]

REGIME_STYLE = {
    "overdamped": ("tab:blue", "o"),
    "oscillatory": ("tab:green", "s"),
    "limit_cycle": ("tab:orange", "^"),
    "collapsed": ("tab:red", "x"),
    "diverged": ("black", "*"),
}


def phase_diagram_figure(columns: Mapping[str, np.ndarray], *, x: str = "eta", y: str = "k_ref",
                         boundaries: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
                         title: str | None = None, logx: bool = True):
    """Measured regime of each sweep row as a marker in the (x, y) plane, predicted boundaries as lines.

    Args:
        columns: sweep columns (``SweepResult.columns``) with ``x``, ``y`` and ``regime``.
        x, y: column names for the axes (default η and K_ref).
        boundaries: label → (x values, y values) curves, e.g. the exact and closed-form thresholds.
        title: optional title.
        logx: log-scaled x axis.

    Returns:
        The matplotlib Figure.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    fig, ax = plt.subplots(figsize=(7.0, 4.8))
    xs, ys, reg = np.asarray(columns[x], float), np.asarray(columns[y], float), np.asarray(columns["regime"])
    handles = []
    for name, (color, marker) in REGIME_STYLE.items():
        sel = reg == name
        if sel.any():
            ax.scatter(xs[sel], ys[sel], c=color, marker=marker, s=36, label=f"measured: {name}", zorder=3)
    styles = ["-", "--", ":", "-."]
    for i, (label, (bx, by)) in enumerate((boundaries or {}).items()):
        ax.plot(bx, by, styles[i % len(styles)], color="k" if i == 0 else "0.35", lw=2, label=label, zorder=2)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel({"eta": "learning rate η (per step)", "eta_rel": "η / η*_exact"}.get(x, x))
    ax.set_ylabel({"k_ref": "K_ref (steps of lag)", "group_size": "group size G"}.get(y, y))
    if title:
        ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=8, loc="best", framealpha=0.9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def amplitude_figure(series: Sequence[Mapping[str, Any]], *, title: str | None = None):
    """Late oscillation amplitude vs η/η*_exact, one line per (μ, K_ref, lag) series.

    Args:
        series: dicts with ``label``, ``eta_rel`` (array), ``amplitude`` (array), optional ``collapsed``
            (bool array: drawn as × above the curves instead of an amplitude), ``measured`` (the measured
            onset, in units of η*_exact) and ``closed`` (closed-form η*/η*_exact, a ▼ marker at the bottom).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    fig, ax = plt.subplots(figsize=(7.2, 4.8))
    amps = np.concatenate([np.where(np.asarray(s.get("collapsed", np.zeros(len(s["amplitude"]), bool)), bool),
                                    np.nan, np.asarray(s["amplitude"], float)) for s in series])
    ok = amps[np.isfinite(amps) & (amps > 0)]
    lo, hi = (ok.min() / 3, ok.max() * 3) if ok.size else (1e-4, 1.0)
    for i, s in enumerate(series):
        color = f"C{i % 10}"
        a = np.asarray(s["amplitude"], float).copy()
        col = np.asarray(s.get("collapsed", np.zeros(len(a), bool)), bool)
        a[col] = np.nan
        ax.plot(s["eta_rel"], a, "o-", color=color, ms=4, label=s["label"])
        if col.any():
            ax.plot(np.asarray(s["eta_rel"])[col], np.full(col.sum(), hi), "x", color=color, ms=7)
        if s.get("measured") is not None and np.isfinite(s["measured"]):
            ax.axvline(s["measured"], color=color, lw=0.8, ls=":")
        if s.get("closed") is not None and np.isfinite(s["closed"]):
            ax.plot([s["closed"]], [lo], "v", color=color, ms=7)
    ax.axvline(1.0, color="k", lw=2, label="exact discrete threshold η*")
    ax.set_yscale("log")
    ax.set_ylim(lo / 1.5, hi * 1.5)
    ax.set_xlabel("η / η*_exact")
    ax.set_ylabel("late std of p (reward units)")
    ax.plot([], [], "v", color="0.4", label="closed-form η* (▼, bottom)")
    ax.plot([], [], "x", color="0.4", label="escaped to p→1 (×, top)")
    ax.plot([], [], ":", color="0.4", label="measured onset (dotted)")
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def variance_law_figure(G: np.ndarray, measured, predicted, *, stderr=None, slope=None, title: str | None = None):
    """Stationary Var(p) vs group size on log axes: measured (markers) and D/(2 G C K_eff) (lines).

    ``measured``/``predicted``/``stderr``/``slope`` are arrays (one series) or dicts label → array (several).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    G = np.asarray(G, float)
    if not isinstance(measured, Mapping):
        measured, predicted = {"": measured}, {"": predicted}
        stderr = {"": stderr} if stderr is not None else None
        slope = {"": slope} if slope is not None else None
    for i, name in enumerate(measured):
        color = f"C{i}"
        tag = f"{name}: " if name else ""
        sl = f" (slope {slope[name]:.2f})" if slope is not None else ""
        if stderr is not None:
            ax.errorbar(G, measured[name], yerr=2 * np.asarray(stderr[name]), fmt="o", color=color, ms=5,
                        label=f"{tag}measured ±2 s.e.{sl}")
        else:
            ax.plot(G, measured[name], "o", color=color, label=f"{tag}measured{sl}")
        ax.plot(G, predicted[name], "-", color=color, lw=1.5, label=f"{tag}predicted D/(2 G C K_eff)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("group size G (answers per prompt)")
    ax.set_ylabel("stationary Var(p) (reward units²)")
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def mean_trajectory_figure(curves: Sequence[Mapping[str, Any]], *, title: str | None = None):
    """Monte Carlo mean ± 2 s.e. bands (measured) against exact finite-G mean-field trajectories (lines).

    Args:
        curves: dicts with ``label``, ``t``, ``mc_mean``, ``mc_se``, ``mean_field`` and optional
            ``infinite_g`` (the G → ∞ drift's trajectory, drawn dotted).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    for i, c in enumerate(curves):
        color = f"C{i % 10}"
        t = np.asarray(c["t"])
        ax.plot(t, c["mean_field"], "-", color=color, lw=1.5, label=f"{c['label']}: exact finite-G mean field")
        every = max(1, len(t) // 24)
        ax.errorbar(t[::every], c["mc_mean"][::every], yerr=2 * c["mc_se"][::every], fmt="o", mfc="none", ms=5,
                    color=color, lw=1)
        if c.get("infinite_g") is not None:
            ax.plot(t, c["infinite_g"], ":", color=color, lw=1.2)
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], ls="none", marker="o", mfc="none", color="0.3"), Line2D([], [], ls=":", color="0.3")]
    labels += ["Monte Carlo mean ± 2 s.e. (circles)", "G → ∞ drift (dotted)"]
    ax.legend(handles, labels, fontsize=8)
    ax.set_xlabel("optimizer step n")
    ax.set_ylabel("mean reward p (probability of the correct arm)")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
