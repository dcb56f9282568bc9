"""Figures of the stochastic oscillator: ensemble paths vs exact moments, strong/weak convergence."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg", force=False)
import numpy as np  # noqa: E402


def sde_ensemble_figure(panels: Sequence[Mapping], *, n_show: int = 25, ylabel: str = "reward p(t)"):
    """Ensemble paths and measured ±2σ bands against the exact mean and ±2σ, one panel per parameter set.

    Args:
        panels: dicts with ``ts (T,)``, ``paths (n, T)``, ``exact_mean (T,)``, ``exact_sd (T,)`` and
            optional ``title`` and ``flag`` (text shown in the corner, e.g. "UNSTABLE").
        n_show: sample paths drawn per panel.
        ylabel: y-axis label (units of ``paths``).

    Returns:
        The Figure. Measured statistics are solid (blue), exact ones dashed (black).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    k = len(panels)
    fig, axes = plt.subplots(1, k, figsize=(4.2 * k, 3.6), constrained_layout=True, squeeze=False)
    for ax, pan in zip(axes[0], panels):
        ts = np.asarray(pan["ts"])
        paths = np.asarray(pan["paths"])
        m, s = paths.mean(0), paths.std(0, ddof=1)
        em, es = np.asarray(pan["exact_mean"]), np.asarray(pan["exact_sd"])
        for j in range(min(n_show, paths.shape[0])):
            ax.plot(ts, paths[j], color="0.6", lw=0.5, alpha=0.6, label="sample paths" if j == 0 else None)
        ax.fill_between(ts, m - 2 * s, m + 2 * s, color="C0", alpha=0.2, label=f"measured ±2σ (n={paths.shape[0]})")
        ax.plot(ts, m, color="C0", lw=2, label="measured mean")
        ax.plot(ts, em, "k--", lw=1.5, label="exact mean")
        ax.plot(ts, em - 2 * es, "k:", lw=1.2, label="exact ±2σ")
        ax.plot(ts, em + 2 * es, "k:", lw=1.2)
        ax.set_xlabel("time (optimizer steps)")
        ax.set_ylabel(ylabel)
        ax.set_title(pan.get("title", ""), fontsize=10)
        if pan.get("flag"):
            ax.text(0.98, 0.04, pan["flag"], transform=ax.transAxes, ha="right", color="C3", fontweight="bold")
        ax.grid(alpha=0.3)
    axes[0][0].legend(loc="best", fontsize=7)
    return fig


def sde_convergence_figure(strong: Mapping, weak: Mapping | None = None):
    """Strong error (log–log, fitted orders) and weak error of the mean per solver.

    Args:
        strong: ``{solver: StrongResult}`` (:func:`grpojax.sde.strong_errors`).
        weak: optional ``{solver: WeakResult}`` (:func:`grpojax.sde.weak_errors`).

    Returns:
        The Figure (measured: markers and solid lines; reference slopes / MC noise floors: dotted/grey).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    n = 2 if weak else 1
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.0), constrained_layout=True, squeeze=False)
    ax = axes[0][0]
    for i, (name, r) in enumerate(strong.items()):
        dts, err = np.asarray(r.dts), np.asarray(r.errors)
        ax.loglog(dts, err, "o-", color=f"C{i}", label=f"{name}: order {r.order:.2f} (theory {r.theory:g})")
        ref = err[-1] * (dts / dts[-1]) ** r.theory
        ax.loglog(dts, ref, ":", color=f"C{i}", lw=1)
    _dt_ticks(ax, np.asarray(next(iter(strong.values())).dts))
    ax.set_xlabel("step Δt (optimizer steps)")
    ax.set_ylabel("strong error RMS |x_Δt(T) − x_ref(T)|")
    ax.set_title("strong convergence (same Brownian paths); dotted: theory slope", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    if weak:
        ax = axes[0][1]
        for i, (name, w) in enumerate(weak.items()):
            dts = np.asarray(w.dts)
            bias = np.abs(np.asarray(w.mean) - w.exact_mean)
            ax.loglog(dts, np.maximum(bias, 1e-12), "s-", color=f"C{i}", label=f"{name}: |mean − exact|")
            ax.loglog(dts, 3 * np.asarray(w.se_mean), ":", color=f"C{i}", lw=1, label=f"{name}: 3·MC s.e.")
        _dt_ticks(ax, np.asarray(next(iter(weak.values())).dts))
        ax.set_xlabel("step Δt (optimizer steps)")
        ax.set_ylabel("weak error of E[e(T)]")
        ax.set_title("weak error vs exact mean (below the dotted line: MC noise)", fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both")
    return fig


def _dt_ticks(ax, dts):
    """Label the x axis at the step sizes used (no overlapping minor log labels)."""
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(dts)
    ax.set_xticklabels([f"{d:.3g}" for d in dts], fontsize=8)
