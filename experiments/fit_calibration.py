"""Calibration of the state-space posterior: do 90% intervals cover the truth?

Simulates ``N`` (≥ 100) reward curves from the linear SDE observed with noise (exact sampler,
:func:`grpojax.sde.sample_exact`) with known parameters — ζ ~ U(0.2, 2.5) (under- to overdamped),
ω₀·span ~ LogNormal(log 8, 0.4), p0 ~ U(0.05, 0.35), p* ~ U(0.55, 0.9), process-noise scale
s ~ U(0.005, 0.03), observation noise 0.03, 120 steps with 10% of the observations missing — and
fits all of them with :func:`grpojax.fit.fit_state_space_batched` (one compiled NUTS program, chains
vmapped, ``--batch-size`` curves per call).
Reports the empirical coverage of the equal-tailed 90% intervals of p* and ζ (target 80–97%), with
a binomial standard error, over all curves and over the converged ones.

Usage: ``python experiments/fit_calibration.py [--quick] [--curves N] [--batch-size B] [--out DIR]``.
"""

from __future__ import annotations

import sys
import time

import jax
import numpy as np

from grpojax._experiment import Claim, experiment_parser, parse_args, print_claims, write_summary

NAME = "fit_calibration"


def simulate(n, T, seed):
    from grpojax.dynamics import OscillatorParams
    from grpojax.sde import sample_exact

    rng = np.random.default_rng(seed)
    steps = np.arange(T, dtype=float)
    span = steps[-1] - steps[0]
    truth = dict(zeta=rng.uniform(0.2, 2.5, n), omega0=np.exp(rng.normal(np.log(8.0), 0.4, n)) / span,
                 p0=rng.uniform(0.05, 0.35, n), p_star=rng.uniform(0.55, 0.9, n), s_proc=rng.uniform(0.005, 0.03, n))
    om, z = truth["omega0"], truth["zeta"]
    p = OscillatorParams(np.ones(n), 2 * z * om, om**2, truth["p_star"], 4 * om**3 * truth["s_proc"] ** 2)
    x = np.asarray(sample_exact(p, steps, key=jax.random.key(seed), n_paths=1, e0=truth["p0"] - truth["p_star"]))[:, 0, :, 0]
    Y = truth["p_star"][:, None] + x + 0.03 * rng.standard_normal((n, T))
    Y[rng.random((n, T)) < 0.1] = np.nan
    Y[:, 0] = np.where(np.isnan(Y[:, 0]), truth["p0"], Y[:, 0])
    return steps, Y, truth


def main(argv=None) -> int:
    ap = experiment_parser(NAME, __doc__, quick_help="40 curves, 150 draws per chain (default 100 curves, 300 draws)")
    ap.add_argument("--curves", type=int, default=None, help="number of simulated curves (default 40 with --quick, else 100)")
    ap.add_argument("--batch-size", type=int, default=1, help="curves per compiled NUTS call (default 1)")
    args = parse_args(ap, argv)
    jax.config.update("jax_enable_x64", True)
    from grpojax.fit import fit_state_space_batched

    n = args.curves or (40 if args.quick else 100)
    draws = 150 if args.quick else 300
    out = args.out
    t0 = time.perf_counter()
    steps, Y, truth = simulate(n, 120, seed=0)
    bp = fit_state_space_batched(steps, Y, key=jax.random.key(1), num_warmup=draws, num_samples=draws, num_chains=2,
                                 batch_size=args.batch_size, show_progress=True)
    res = {}
    for name in ("p_star", "zeta"):
        d = bp.samples[name].reshape(n, -1)
        lo, hi = np.quantile(d, 0.05, axis=1), np.quantile(d, 0.95, axis=1)
        inside = (lo <= truth[name]) & (truth[name] <= hi)
        conv = bp.converged
        res[name] = {"coverage": float(inside.mean()), "se": float(np.sqrt(inside.mean() * (1 - inside.mean()) / n)),
                     "coverage_converged": float(inside[conv].mean()) if conv.any() else float("nan"),
                     "median_width": float(np.median(hi - lo))}
    ok = all(0.80 <= res[k]["coverage"] <= 0.97 for k in res)
    rmax = np.max(np.stack([bp.r_hat[k] for k in bp.r_hat]), 0)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, name in zip(axes, ("p_star", "zeta")):
        d = bp.samples[name].reshape(n, -1)
        med = np.median(d, 1)
        lo, hi = np.quantile(d, 0.05, axis=1), np.quantile(d, 0.95, axis=1)
        inside = (lo <= truth[name]) & (truth[name] <= hi)
        ax.errorbar(truth[name], med, yerr=[med - lo, hi - med], fmt="none", ecolor=np.where(inside, "tab:blue", "tab:red").tolist(),
                    alpha=0.5, lw=1)
        ax.plot(truth[name], med, ".", color="k", ms=3, label="posterior median (90% CI bars; red = misses)")
        lim = [min(truth[name].min(), lo.min()), max(truth[name].max(), hi.max())]
        ax.plot(lim, lim, "--", color="0.5", label="truth = estimate")
        ax.set_xlabel(f"true {name} (simulated)")
        ax.set_ylabel(f"estimated {name} (posterior)")
        ax.set_title(f"{name}: 90% CI coverage {100 * res[name]['coverage']:.0f}% (n={n})")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "calibration.png", dpi=100)
    plt.close(fig)
    claims = [Claim(
        claim="state-space posterior: 90% credible intervals of p* and ζ cover the truth in 80-97% of simulated curves",
        paper=None,
        measured=(f"{n} curves, 2 chains x {draws} draws each (NUTS per curve): p* coverage "
                  f"{100 * res['p_star']['coverage']:.0f}% ± {100 * res['p_star']['se']:.0f}, ζ coverage "
                  f"{100 * res['zeta']['coverage']:.0f}% ± {100 * res['zeta']['se']:.0f}; median 90% width "
                  f"p* {res['p_star']['median_width']:.2f}, ζ {res['zeta']['median_width']:.2f} (ζ is weakly "
                  f"identified for overdamped curves); max r_hat per curve: median {np.median(rmax):.3f}, "
                  f"≤ 1.05 for {100 * np.mean(rmax <= 1.05):.0f}%; {100 * bp.converged.mean():.0f}% met the "
                  f"strict r_hat ≤ 1.01 & ESS ≥ 100/chain"),
        # coverage in the band with chains that mostly mixed (median max r_hat ≤ 1.05); else partial
        verdict=("confirmed" if np.median(rmax) <= 1.05 else "partial") if ok else "refuted",
    )]
    summary = {
        "coverage": res, "n_curves": n, "draws": draws, "converged_frac": float(bp.converged.mean()),
        "max_r_hat_median": float(np.median(rmax)), "max_r_hat_le_1.05_frac": float(np.mean(rmax <= 1.05)),
        "sampler_s": bp.runtime_s, "runtime_s": time.perf_counter() - t0,
    }
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=["calibration.png"], **summary)
    print_claims(claims)
    print(f"{summary['runtime_s']:.0f} s -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
