"""Figures of the closed-form oscillator: predicted trajectory and exact vs closed-form thresholds."""

from __future__ import annotations

from typing import Sequence

import matplotlib

matplotlib.use("Agg", force=False)
import numpy as np  # noqa: E402


def predicted_trajectory_figure(params, p0: float, steps: int, *, std=None, title: str | None = None):
    """Predicted mean reward from rest, with a ±2σ stationary band around the plateau when ``std`` is given.

    Args:
        params: scalar :class:`~grpojax.dynamics.OscillatorParams`.
        p0: initial reward.
        steps: horizon in optimizer steps.
        std: stationary standard deviation of the reward (optional).
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    from grpojax.dynamics import REGIMES, damping_ratio, mean_reward, regime  # noqa: PLC0415  (JAX when used)
    t = np.linspace(0.0, steps, 600)
    r = np.asarray(mean_reward(params, t, p0))
    fig, ax = plt.subplots(figsize=(6.4, 3.8), constrained_layout=True)
    ax.plot(t, r, color="C0", lw=2, label="predicted mean reward (closed form)")
    ps = float(params.p_star)
    ax.axhline(ps, color="k", ls=":", lw=1, label=f"plateau p* = {ps:.3g}")
    if std is not None and np.isfinite(std):
        ax.fill_between(t, ps - 2 * std, ps + 2 * std, color="C0", alpha=0.15, label="±2σ stationary noise")
    z = float(damping_ratio(params))
    name = REGIMES[int(regime(params))]
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("expected reward p(t)")
    ax.set_title(title or f"{name} (ζ = {z:.3g})")
    finite = r[np.isfinite(r)]
    if finite.size and (np.abs(finite).max() > 10 * max(abs(ps), abs(p0), 1.0)):
        ax.set_ylim(min(p0, ps) - 1.0, max(p0, ps) + 1.0)
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def threshold_comparison_figure(table: Sequence[dict]):
    """Exact / closed-form critical a = ηK_d against K_ref, one line per (μ, lag); 1 means the closed form is exact.

    ``table`` rows need keys ``mu``, ``k_ref``, ``lag``, ``a_exact``, ``a_closed``.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415  (pyplot only when a figure is drawn)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True, sharey=True)
    for ax, lag in zip(axes, ("constant", "periodic")):
        rows = [r for r in table if r["lag"] == lag]
        for i, mu in enumerate(sorted({r["mu"] for r in rows})):
            sel = sorted((r for r in rows if r["mu"] == mu), key=lambda r: r["k_ref"])
            k = np.array([r["k_ref"] for r in sel])
            ratio = np.array([r["a_exact"] / r["a_closed"] for r in sel])
            ax.plot(k, ratio, "o-", color=f"C{i}", label=f"μ = {mu}")
        ax.axhline(1.0, color="k", lw=1, ls=":")
        if lag == "constant":
            ax.axhline(np.pi / 2, color="gray", lw=1, ls="--", label="π/2 (long-lag limit, μ = 0)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K_ref (optimizer steps)")
        ax.set_title(f"{lag} lag")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("exact a* / closed-form a*  (a = η K_d)")
    return fig
