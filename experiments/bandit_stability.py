"""Two-arm softmax bandit: measured vs exact vs closed-form stability, the oscillatory transition, G laws.

Sections (all on the exact two-arm reduction; plateau p* = 0.8 set by the KL anchor β with
π_ref = 0.5, ``grpo`` advantages, stale gradient):

A. Stability threshold: η/η*_exact swept around 1 for μ ∈ {0.9, 0.99}, K_ref ∈ {2, 4, 8, 16}, both lag
   modes; G = 2^20 (noise floor ~1e-3), started at p*. A row is unstable when its late std leaves the noise
   floor (> 5× the median of the rows at η ≤ 0.98 η*) or it escapes (collapse). The measured onset is the
   midpoint of the bracket [last stable, first unstable]; a Hopf extrapolation (amplitude² linear in η on
   the first two limit-cycle rows) is reported beside it. Acceptance (constant lag): |onset/η* − 1| ≤ 5%.
B. Overdamped → oscillatory boundary on the exact mean-field map (float64, started 0.01 above p*): a row is
   oscillatory when the transient overshoots p* by more than 1e-7 of the initial offset. Measured boundary:
   bracket midpoint, and the extrapolation of 1/x², x = −ln(overshoot)/π (→ 0 at ζ = 1). Acceptance: 10%.
C. Stationary variance vs G ∈ {4, ..., 256} (μ = 0, on-policy, η·K ≤ 0.05): log-log slope −1 ± 0.1 and
   level within 20% of D/(2 G C K_eff) with D, C, K_eff from the exact mean field (no simulation input).
D. Mean trajectories from p = 0.3 at G = 4, 16, 64: Monte Carlo mean vs exact finite-G mean-field map
   (within 3 s.e. at checkpoints), and the G-dependence the finite-G drift predicts.
E. Phase diagram in (η, K_ref), μ = 0.9, constant lag: measured regimes with the exact and closed-form
   boundaries drawn over them.

Outputs in ``--out`` (default ``out/bandit_stability``): summary.json, phase_diagram.png, amplitude.png,
variance_vs_G.png, mean_trajectories.png.
"""

from __future__ import annotations

import time

import jax
import numpy as np

from grpojax._experiment import Claim, experiment_parser, parse_args, print_claims, write_summary

NAME = "bandit_stability"


def _sweep(**kw):
    from grpojax.sweep import make_grid, run_sweep

    steps = kw.pop("num_steps")
    opts = {k: kw.pop(k) for k in ("mean_field", "return_traces", "late_frac", "osc_tol", "stride", "seed")
            if k in kw}
    seed = opts.pop("seed", 0)
    return run_sweep(make_grid(**kw), steps, key=jax.random.key(seed), **opts)


def _onset(rel: np.ndarray, unstable: np.ndarray) -> tuple[float, float, float]:
    """(bracket midpoint, last stable, first unstable) such that every row above is unstable."""
    order = np.argsort(rel)
    r, u = rel[order], unstable[order]
    first = len(r)
    for i in range(len(r) - 1, -1, -1):
        if u[i]:
            first = i
        else:
            break
    if first == len(r) or first == 0:
        return float("nan"), float(r[first - 1]) if first > 0 else float("nan"), float(r[first]) if first < len(r) else float("nan")
    return 0.5 * (r[first - 1] + r[first]), float(r[first - 1]), float(r[first])


def section_thresholds(quick: bool) -> dict:
    rels = [0.95, 0.98, 0.99, 1.0, 1.01, 1.02, 1.03, 1.05] if quick else \
        [0.9, 0.95, 0.97, 0.98, 0.99, 1.0, 1.005, 1.01, 1.015, 1.02, 1.03, 1.04, 1.05, 1.08]
    res = _sweep(mu=[0.9, 0.99], k_ref=[2, 4, 8, 16], eta_rel=rels, group_size=2**20, p_star=0.8, p_init=0.8,
                 lag=["constant", "periodic"], num_steps=40000 if quick else 80000, late_frac=0.25, seed=1)
    c = res.columns
    rows, series = [], []
    for lag in ("constant", "periodic"):
        for mu in (0.9, 0.99):
            for K in (2, 4, 8, 16):
                sel = np.where((c["lag"] == lag) & (c["mu"] == mu) & (c["k_ref"] == K))[0]
                rel = c["eta_rel"][sel]
                std = np.where(np.isfinite(c["late_std"][sel]), c["late_std"][sel], 0.0)
                collapsed = c["regime"][sel] == "collapsed"
                floor = float(np.median(std[rel <= 0.98])) if np.any(rel <= 0.98) else float(np.min(std))
                unstable = collapsed | (std > 5 * floor) | (c["regime"][sel] == "diverged")
                mid, lo, hi = _onset(rel, unstable)
                # Hopf: amplitude² ∝ (η − η_c) on the first two bounded limit-cycle rows
                lc = np.where((c["regime"][sel] == "limit_cycle") & (rel >= hi))[0] if np.isfinite(hi) else []
                hopf = float("nan")
                if len(lc) >= 2:
                    a2 = std[lc[:2]] ** 2
                    x = rel[lc[:2]]
                    if a2[1] > a2[0]:
                        hopf = float(x[0] - a2[0] * (x[1] - x[0]) / (a2[1] - a2[0]))
                eta_exact = float(c["eta_crit_exact"][sel][0])
                closed = float(c["eta_crit_closed"][sel][0]) / eta_exact
                rows.append(dict(lag=lag, mu=mu, k_ref=K, eta_exact=eta_exact,
                                 eta_closed=float(c["eta_crit_closed"][sel][0]), K_d=float(c["K_d"][sel][0]),
                                 K_0=float(c["K_0"][sel][0]), noise_floor_std=floor, onset_rel=mid,
                                 bracket=[lo, hi], hopf_rel=hopf, measured_error=mid - 1.0,
                                 hopf_error=hopf - 1.0, closed_form_error=closed - 1.0,
                                 regimes=dict(zip(map(float, rel), c["regime"][sel].tolist()))))
                if lag == "constant":
                    series.append(dict(label=f"μ={mu}, K_ref={K}", eta_rel=rel, amplitude=std, measured=mid,
                                       closed=closed, collapsed=collapsed))
    const = [r for r in rows if r["lag"] == "constant"]
    worst = max(abs(r["measured_error"]) for r in const)
    return dict(rows=rows, series=series, worst_constant=worst, seconds=res.meta["seconds"],
                all_finite=bool(np.all(np.isfinite(np.array([r["onset_rel"] for r in const])))))


def section_oscillatory(quick: bool) -> dict:
    rels = [0.9, 0.95, 1.05, 1.1, 1.25] if quick else [0.9, 0.95, 0.98, 1.02, 1.05, 1.1, 1.25]
    ks = [1, 4, 16] if quick else [1, 2, 4, 8, 16]
    with jax.enable_x64(True):
        res = _sweep(mu=[0.9, 0.99], k_ref=ks, eta_rel_osc=rels, group_size=16, p_star=0.8, p_init=0.81,
                     lag=["constant", "periodic"], num_steps=10000 if quick else 30000, mean_field=True,
                     osc_tol=1e-7, late_frac=0.1)
    c = res.columns
    rows = []
    for lag in ("constant", "periodic"):
        for mu in (0.9, 0.99):
            for K in ks:
                sel = np.where((c["lag"] == lag) & (c["mu"] == mu) & (c["k_ref"] == K))[0]
                rel = c["eta_rel_osc"][sel]
                osc = c["regime"][sel] == "oscillatory"
                mid, lo, hi = _onset(rel, osc)
                os_ = c["overshoot"][sel]
                good = np.where(osc & (os_ > 1e-6) & (os_ < 0.5))[0]
                extrap = float("nan")
                if len(good) >= 2:
                    g2 = good[np.argsort(rel[good])][:2]
                    y = (np.pi / -np.log(os_[g2])) ** 2
                    if y[1] > y[0]:
                        extrap = float(rel[g2[0]] - y[0] * (rel[g2[1]] - rel[g2[0]]) / (y[1] - y[0]))
                rows.append(dict(lag=lag, mu=mu, k_ref=K, eta_osc_exact=float(c["eta_osc_exact"][sel][0]),
                                 boundary_rel=mid, bracket=[lo, hi], extrapolated_rel=extrap,
                                 error=mid - 1.0, overshoot=dict(zip(map(float, rel), map(float, os_)))))
    worst = max(abs(r["error"]) for r in rows)
    worst_ex = max(abs(r["extrapolated_rel"] - 1.0) for r in rows if np.isfinite(r["extrapolated_rel"]))
    return dict(rows=rows, worst=worst, worst_extrapolated=worst_ex, seconds=res.meta["seconds"])


def section_variance(quick: bool) -> dict:
    from grpojax.bandit import BanditConfig, stiffness, with_fixed_point

    Gs = [4, 8, 16, 32, 64, 128, 256]
    advs = ["dr_grpo", "grpo"]
    # η so that η·(K_0 + K_d) ≤ 0.04 at every G and advantage
    Ks = [float(sum(stiffness(with_fixed_point(BanditConfig(0.1, group_size=G, advantage=a), 0.8))))
          for G in Gs for a in advs]
    eta = 0.04 / max(Ks)
    R = 4 if quick else 16
    res = _sweep(eta=eta, mu=0.0, k_ref=1, lag="periodic", group_size=Gs, replica=list(range(R)), p_star=0.8,
                 p_init=0.8, advantage=advs, num_steps=10000 if quick else 40000, late_frac=0.5, seed=3)
    c = res.columns
    out = dict(G=Gs, eta=eta, eta_K_max=eta * max(Ks), seconds=res.meta["seconds"])
    for adv in advs:
        meas, se, pred = [], [], []
        for G in Gs:
            sel = (c["group_size"] == G) & (c["advantage"] == adv)
            v = c["late_std"][sel] ** 2
            meas.append(float(v.mean()))
            se.append(float(v.std(ddof=1) / np.sqrt(sel.sum())))
            pred.append(float(c["var_pred"][sel][0]))
        out[adv] = dict(measured=meas, stderr=se, predicted=pred, ratio=[m / p for m, p in zip(meas, pred)],
                        slope=float(np.polyfit(np.log(Gs), np.log(meas), 1)[0]),
                        predicted_slope=float(np.polyfit(np.log(Gs), np.log(pred), 1)[0]))
    return out


def section_mean(quick: bool) -> dict:
    from grpojax.bandit import BanditConfig, mean_field_trajectory

    Gs = [4, 16, 64]
    R = 2000  # the same in full mode: more replicas resolve the O(noise) Jensen bias (reported below)
    T = 120
    res = _sweep(eta=0.1, mu=0.0, k_ref=2, group_size=Gs, replica=list(range(R)), beta=0.4, p_init=0.3,
                 num_steps=T, stride=1, return_traces=True, seed=4)
    c, tr = res.columns, res.traces
    curves, checks = [], []
    t = np.arange(1, T + 1)
    ref_inf = None
    for G in Gs + [4096]:
        cfg = BanditConfig(0.1, 0.0, 2, G, beta=0.4, p_init=0.3)
        mf = np.asarray(mean_field_trajectory(cfg, T + 1))[1:]
        if G == 4096:
            ref_inf = mf
            continue
        sel = c["group_size"] == G
        mc = tr[sel]
        mean, sem = mc.mean(0), mc.std(0, ddof=1) / np.sqrt(sel.sum())
        curves.append(dict(label=f"G={G}", t=t, mc_mean=mean, mc_se=sem, mean_field=mf))
        cp = np.array([9, 24, 49, 79, 119])
        z = (mean[cp] - mf[cp]) / sem[cp]
        checks.append(dict(G=G, checkpoints=(cp + 1).tolist(), z=z.tolist(), max_abs_z=float(np.max(np.abs(z)))))
    for cu in curves:
        cu["infinite_g"] = ref_inf
    # G-dependence: how far apart the finite-G predictions are, in Monte Carlo standard errors
    sep = float(np.max(np.abs(curves[0]["mean_field"] - curves[2]["mean_field"]) / curves[0]["mc_se"]))
    z_inf_g4 = float(np.max(np.abs(curves[0]["mc_mean"] - ref_inf) / curves[0]["mc_se"]))
    return dict(checks=checks, curves=curves, separation_G4_G64_in_se=sep, z_infinite_G_drift_at_G4=z_inf_g4,
                replicas=R, seconds=res.meta["seconds"])


def section_phase(quick: bool) -> dict:
    ks = [1, 2, 4, 8, 16] if quick else [1, 2, 3, 4, 6, 8, 12, 16]
    etas = np.geomspace(0.004, 1.0, 10 if quick else 18)
    res = _sweep(eta=etas, mu=0.9, k_ref=ks, group_size=4096, p_star=0.8, p_init=0.7,
                 num_steps=2000 if quick else 6000, seed=5)
    c = res.columns
    kk = np.array(ks, float)
    first = [int(np.where(c["k_ref"] == k)[0][0]) for k in ks]
    kd, k0 = float(c["K_d"][first[0]]), float(c["K_0"][first[0]])
    bounds = {"exact stability threshold η*": (c["eta_crit_exact"][first], kk),
              "exact oscillatory boundary": (c["eta_osc_exact"][first], kk),
              "closed form (1−μ)/(K_d K_ref)": (c["eta_crit_closed"][first], kk)}
    agree = np.mean((c["regime_exact"] == "unstable") == np.isin(c["regime"], ["limit_cycle", "collapsed",
                                                                                 "diverged"]))
    return dict(columns=c, bounds=bounds, K_d=kd, K_0=k0, stability_agreement=float(agree),
                counts=res.regime_counts(), seconds=res.meta["seconds"])


def main(argv=None) -> int:
    args = parse_args(experiment_parser(NAME, __doc__, quick_help="small grids (≤ 150 s on 2 CPU cores)"), argv)
    out = args.out
    from grpojax.plot._bandit import amplitude_figure, mean_trajectory_figure, phase_diagram_figure, \
        variance_law_figure

    t0 = time.perf_counter()
    A = section_thresholds(args.quick)
    B = section_oscillatory(args.quick)
    C = section_variance(args.quick)
    D = section_mean(args.quick)
    E = section_phase(args.quick)

    figs = {}
    f = phase_diagram_figure(E["columns"], boundaries=E["bounds"],
                             title="two-arm bandit, μ=0.9, constant lag, G=4096, p*=0.8 (start p=0.7)")
    f.savefig(out / "phase_diagram.png", dpi=110)
    figs["phase"] = "phase_diagram.png"
    f = amplitude_figure(A["series"], title="late std vs η/η* (constant lag, G=2^20, start at p*)")
    f.savefig(out / "amplitude.png", dpi=110)
    figs["amplitude"] = "amplitude.png"
    f = variance_law_figure(C["G"], {a: np.array(C[a]["measured"]) for a in ("dr_grpo", "grpo")},
                            {a: np.array(C[a]["predicted"]) for a in ("dr_grpo", "grpo")},
                            stderr={a: np.array(C[a]["stderr"]) for a in ("dr_grpo", "grpo")},
                            slope={a: C[a]["slope"] for a in ("dr_grpo", "grpo")}, title="μ=0, on-policy, ηK≤0.04")
    f.savefig(out / "variance_vs_G.png", dpi=110)
    figs["variance"] = "variance_vs_G.png"
    f = mean_trajectory_figure(D["curves"], title="mean reward from p=0.3 (η=0.1, μ=0, K_ref=2, β=0.4)")
    f.savefig(out / "mean_trajectories.png", dpi=110)
    figs["mean"] = "mean_trajectories.png"

    const = [r for r in A["rows"] if r["lag"] == "constant"]
    per = [r for r in A["rows"] if r["lag"] == "periodic"]
    fmt = lambda rs, key: ", ".join(f"μ={r['mu']} K={r['k_ref']}: {100 * r[key]:+.1f}%" for r in rs)
    Cd, Cg = C["dr_grpo"], C["grpo"]
    ratio_ok = all(0.8 <= r <= 1.2 for r in Cd["ratio"])
    ratio_ok_g = all(0.8 <= r <= 1.2 for r in Cg["ratio"])
    claims = [
        Claim(claim="Constant lag, started at p*: the measured onset of the limit cycle is within 5% of the exact "
                    "discrete threshold for μ∈{0.9,0.99}, K_ref∈{2,4,8,16}",
              paper="Instability when K η K_ref > 1 − μ (lag erodes damping)",
              measured=f"onset/η*−1: {fmt(const, 'measured_error')}; worst {100 * A['worst_constant']:.1f}%. "
                       f"Hopf extrapolation: {fmt([r for r in const if np.isfinite(r['hopf_error'])], 'hopf_error')}",
              verdict="confirmed" if A["worst_constant"] <= 0.05 and A["all_finite"] else "refuted"),
        Claim(claim="Closed-form threshold η*=(1−μ)/(K_d K_ref) vs exact (constant lag; reported, not hidden)",
              paper="C < 0 ⇔ K η K_ref > 1 − μ",
              measured=f"closed/exact−1: {fmt(const, 'closed_form_error')}",
              verdict="partial"),
        Claim(claim="Periodic refresh: measured onset vs exact Floquet threshold (τ=(K_ref−1)/2 closed form)",
              paper=None,
              measured=f"onset/η*−1: {fmt(per, 'measured_error')}; closed/exact−1: {fmt(per, 'closed_form_error')}",
              verdict="confirmed" if max(abs(r["measured_error"]) for r in per) <= 0.05 else "partial"),
        Claim(claim="Overdamped→oscillatory boundary (dominant root turns complex) measured on the exact mean-field "
                    "map within 10% of the exact discrete prediction",
              paper="ζ = 1 transition",
              measured=f"worst bracket-midpoint error {100 * B['worst']:.1f}%, worst overshoot-extrapolation error "
                       f"{100 * B['worst_extrapolated']:.1f}% over {len(B['rows'])} (μ, K_ref, lag)",
              verdict="confirmed" if B["worst"] <= 0.10 else "refuted"),
        Claim(claim="Stationary variance ∝ 1/G (slope −1±0.1) at level D/(2GCK_eff) within 20% (dr_grpo)",
              paper="Var(e) = D/(2 G C K_eff)",
              measured=f"slope {Cd['slope']:.3f} (predicted {Cd['predicted_slope']:.3f}); measured/predicted "
                       + ", ".join(f"G={g}: {r:.2f}" for g, r in zip(C["G"], Cd["ratio"])) + f" (ηK≤{C['eta_K_max']:.3f})",
              verdict="confirmed" if abs(Cd["slope"] + 1) <= 0.1 and ratio_ok else "refuted"),
        Claim(claim="grpo (std-normalised) advantages: the same law with the G-dependent σ²(G) of the normalised "
                    "gradient (steeper than 1/G at small G)",
              paper=None,
              measured=f"slope {Cg['slope']:.3f} vs predicted {Cg['predicted_slope']:.3f}; measured/predicted "
                       + ", ".join(f"G={g}: {r:.2f}" for g, r in zip(C["G"], Cg["ratio"])),
              verdict="confirmed" if abs(Cg["slope"] - Cg["predicted_slope"]) <= 0.1 and ratio_ok_g else "partial"),
        Claim(claim="Exact finite-G mean field matches the Monte Carlo mean (3 s.e.) and predicts its G-dependence",
              paper="deterministic trajectory independent of G to leading order",
              measured="; ".join(f"G={ck['G']}: max|z|={ck['max_abs_z']:.2f}" for ck in D["checks"])
                       + f"; finite-G predictions G=4 vs 64 differ by up to {D['separation_G4_G64_in_se']:.0f} s.e.; "
                         f"the G→∞ drift misses the G=4 mean by up to {D['z_infinite_G_drift_at_G4']:.0f} s.e.",
              verdict="confirmed" if all(ck["max_abs_z"] <= 3 for ck in D["checks"]) else "refuted"),
        Claim(claim="Phase diagram: measured instability (limit cycle/collapse) agrees with the exact prediction",
              paper=None, measured=f"agreement on {100 * E['stability_agreement']:.0f}% of {len(E['columns']['eta'])} "
                                   f"rows; regimes {E['counts']}", verdict="partial"),
    ]
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=list(figs.values()),
                  thresholds=A["rows"], oscillatory=B["rows"],
                  variance=C,
                  mean_trajectories=dict(checks=D["checks"], separation_G4_G64_in_se=D["separation_G4_G64_in_se"],
                                         z_infinite_G_drift_at_G4=D["z_infinite_G_drift_at_G4"]),
                  phase=dict(K_d=E["K_d"], K_0=E["K_0"], counts=E["counts"], agreement=E["stability_agreement"]),
                  seconds=dict(thresholds=A["seconds"], oscillatory=B["seconds"], variance=C["seconds"],
                               mean=D["seconds"], phase=E["seconds"], total=time.perf_counter() - t0))
    print_claims(claims)
    print(f"total {time.perf_counter() - t0:.1f} s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
