"""Why does ``advise``'s escape cap let runs escape? The measured escape curve against the model's, per cell.

Reads only committed results (no run): every measured run of the policy network's atlas cells at η < η*
(the escape validation's grid, seeds 0-1, 12 learning rates 0.1-10 η*, all 90 cells; the held-out experiment's
grid, seeds 2-3, 66 cells; the advise checks at the advised η and at the escape cap, 30-40 seeds each) and
compares, cell by cell, the measured fraction of unstable runs as a function of η with the escape model's
P(escape within 400 steps) (``grpojax.dynamics.escape_onset`` at the levels 0.05 and 0.5, the stiffest
direction, the inputs the advise check used; additive noise and noise growing with the state, c from the
held-out experiment).

Per cell: a probit in log η, P = Φ((ln η − ln m) / s), fitted by maximum likelihood to the measured runs
(m: the measured onset; s: the width of the measured curve in ln η, bounded below by 0.005, where the runs
are separable in η it sits at that bound and only the bracket of m is informative); the model's onset η50,
its 5% point η05 and its width s_model = ln(η50/η05)/1.645. Shift = ln(m / η50); widening = s / s_model.
Per group (momentum × samples per step): the cells' shifts and widths; a pooled fit with one free shift per
cell and one common width (the within-cell slope, free of cell-to-cell shifts); and the count of cells whose
measured rate at the model's own 5% point is above 1/2 with its lower 95% bound (the measured onset itself is
below the model's 5% point there: a shift, whatever the width).

Writes ``results/escape_advise_check/analysis.json`` and prints the tables used in ``analysis.md``.
"""

from __future__ import annotations

import collections
import json
import math
import pathlib
import sys

import numpy as np
from scipy import optimize, stats

HERE = pathlib.Path(__file__).resolve().parent
RES = HERE / "results"
Z05 = stats.norm.ppf(0.95)  # 1.645: ln(η50/η05) = Z05 · s for a probit
S_MIN = 0.005


def key_of(r):
    return (r["rule"], r["optimizer"], r["k_ref"], r["repeats"])


def measured_points():
    """{cell: {η/η*: [unstable, n, {regime: count}]}} from every committed run below 1.3 η*."""
    pts = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0, collections.Counter()]))
    val = json.loads((RES / "escape_validation" / "full" / "runs.json").read_text())
    ho = json.loads((RES / "escape_heldout" / "runs.json").read_text())["runs"]
    for r in val + ho:
        p = pts[key_of(r)][round(r["eta_rel"], 4)]
        p[0] += int(r["unstable"])
        p[1] += 1
        p[2][r["measured"]] += 1
    for sub in ("", "growth"):
        for c in json.loads((RES / "escape_advise_check" / sub / "summary.json").read_text())["cells"]:
            for which, eta in (("advised", c["eta_advised"]), ("escape_cap", c["eta_escape"])):
                m = c.get(f"measured_{which}")
                if m is None or (which == "escape_cap" and c["eta_escape"] == c["eta_advised"]):
                    continue
                p = pts[key_of(c)][round(eta / c["eta_star"], 4)]
                p[0] += m["unstable"]
                p[1] += m["n"]
                p[2].update(m["regimes"])
    return pts


def model_points(cells, c_growth):
    """The escape model's η05 and η50 (relative to η*) per cell, additive noise and noise growth c."""
    from grpojax.dynamics import escape_onset

    out = {}
    for K in sorted({c["k_ref"] for c in cells}):
        cs = [c for c in cells if c["k_ref"] == K]
        arr = lambda f: np.asarray([f(c) for c in cs], np.float64)  # noqa: E731
        kw = dict(noise=arr(lambda c: c["noise"]), basin=arr(lambda c: c["basin"]), steps=cs[0]["steps"],
                  lag="periodic", k_instant=arr(lambda c: c["k_instant"]),
                  samples_per_step=arr(lambda c: c["samples_per_step"]))
        star = arr(lambda c: c["eta_star"])
        for name, g in (("additive", 0.0), ("growth", c_growth)):
            for lev in (0.05, 0.5):
                on = escape_onset(arr(lambda c: c["mu"]), K, arr(lambda c: c["k_stale"]), level=lev,
                                  eta_max=10 * star, noise_growth=g, **kw)
                for c, v, s in zip(cs, on, star):
                    out.setdefault(key_of(c), {})[f"{name}_{int(lev * 100):02d}"] = float(v / s)
    return out


def nll(params, x, k, n):
    lm, ls = params
    p = stats.norm.cdf((x - lm) / math.exp(ls))
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return -float(np.sum(k * np.log(p) + (n - k) * np.log1p(-p)))


def separable(x, k, n):
    """True where one η splits the points into all-stable below and all-unstable above."""
    o = np.argsort(x)
    k, n = k[o], n[o]
    return any(np.all(k[:i] == 0) and np.all(k[i:] == n[i:]) for i in range(len(k) + 1))


def probit_fit(x, k, n):
    """MLE of (ln m, s) with s ≥ S_MIN; None where the points are separable in η (the width is then not
    identified: only the bracket of the onset is)."""
    if separable(x, k, n):
        return None
    best = None
    for lm0 in np.linspace(x.min(), x.max(), 7):
        for ls0 in (math.log(0.01), math.log(0.1), math.log(0.5)):
            r = optimize.minimize(nll, [lm0, ls0], args=(x, k, n), method="L-BFGS-B",
                                  bounds=[(x.min() - 2, x.max() + 2), (math.log(S_MIN), math.log(5.0))])
            if best is None or r.fun < best.fun:
                best = r
    return dict(ln_m=float(best.x[0]), s=float(math.exp(best.x[1])), nll=float(best.fun))


def onset_estimate(x, k, n, fit):
    """ln of the measured onset: the probit's m, or the geometric middle of the separating gap; with a flag
    'below' / 'above' where every point is unstable / stable (then the bound: the smallest / largest η)."""
    if fit is not None:
        return fit["ln_m"], "fit"
    if np.all(k == n):
        return float(x.min()), "below"
    if np.all(k == 0):
        return float(x.max()), "above"
    lo = max(x[k == 0][x[k == 0] < x[k == n].min()])
    hi = min(x[k == n][x[k == n] > lo])
    return 0.5 * (lo + hi), "gap"


def pooled_width(cells_data):
    """One common width s, a free shift per cell (the within-cell slope); cells all-0 or all-1 carry no
    information on s and are left out. Returns s and its profile-likelihood 95% interval."""
    use = [d for d in cells_data if 0 < d["k"].sum() < d["n"].sum()]
    if not use:
        return None

    def prof(ls):
        tot = 0.0
        for d in use:
            r = optimize.minimize_scalar(lambda lm: nll((lm, ls), d["x"], d["k"], d["n"]),
                                         bounds=(d["x"].min() - 2, d["x"].max() + 2), method="bounded")
            tot += r.fun
        return tot

    grid = np.linspace(math.log(S_MIN), math.log(2.0), 150)
    vals = np.asarray([prof(g) for g in grid])
    i = int(np.argmin(vals))
    ok = grid[vals <= vals[i] + stats.chi2.ppf(0.95, 1) / 2]
    return dict(s=float(math.exp(grid[i])), ci95=[float(math.exp(ok.min())), float(math.exp(ok.max()))],
                cells=len(use))


def binom_lo(k, n):
    return float(stats.binomtest(int(k), int(n)).proportion_ci(0.95, method="exact").low)


def cell_row(c, pts, model, g05, label):
    """The measured curve of one cell against the model's (label: 'unstable', the atlas's rule, or 'diverged')."""
    key = key_of(c)
    data = sorted((e, v) for e, v in pts[key].items() if e < 1.0)
    x = np.log(np.asarray([e for e, _ in data]))
    n = np.asarray([v[1] for _, v in data], float)
    k = np.asarray([v[0] if label == "unstable" else v[2]["diverged"] for _, v in data], float)
    fit = probit_fit(x, k, n)
    ln_m, kind = onset_estimate(x, k, n, fit)
    mp = model[key]
    # the empirical safe learning rate: the largest measured η below which no point (itself included) has a
    # rate above the level (an estimate: 2-4 runs at most grid points)
    over = [e for e, kk, nn in zip(np.exp(x), k, n) if kk / nn > 0.05]
    safe = max([e for e in np.exp(x) if not over or e < min(over)], default=None)
    row = dict(safe=None if safe is None else float(safe), cell="/".join(map(str, key)), mu=c["mu"], samples=c["samples_per_step"], k_ref=c["k_ref"],
               rule=c["rule"], model=mp, fit=fit, onset=math.exp(ln_m), onset_kind=kind,
               points=[[e, int(kk), int(nn)] for e, kk, nn in zip(np.exp(x), k, n)])
    for name in ("additive", "growth"):
        row[f"s_model_{name}"] = math.log(mp[f"{name}_50"] / mp[f"{name}_05"]) / Z05
        row[f"shift_{name}"] = ln_m - math.log(mp[f"{name}_50"])
    at = pts[key].get(round(g05, 4))
    if at is not None:
        kk = at[0] if label == "unstable" else at[2]["diverged"]
        row["at_growth_05"] = dict(eta_rel=g05, k=int(kk), n=int(at[1]), lower95=binom_lo(kk, at[1]))
    return row


def group_summary(rs):
    g = dict(cells=len(rs), onset_kinds=dict(collections.Counter(r["onset_kind"] for r in rs)))
    for name in ("additive", "growth"):
        sh = [r[f"shift_{name}"] for r in rs if r["onset_kind"] in ("fit", "gap")]
        g[f"shift_{name}_median"] = float(np.median(sh)) if sh else None
        g[f"shift_{name}_range"] = [float(min(sh)), float(max(sh))] if sh else None
        g[f"s_model_{name}_median"] = float(np.median([r[f"s_model_{name}"] for r in rs]))
    on = [r["onset"] for r in rs if r["onset_kind"] in ("fit", "gap")]
    g["onset_rel_median"] = float(np.median(on)) if on else None
    sf = [r["safe"] for r in rs if r["safe"] is not None]
    g["safe_rel_median"] = float(np.median(sf)) if sf else None
    g["safe_none"] = sum(r["safe"] is None for r in rs)
    g["shift_growth_censored_below"] = sum(r["onset_kind"] == "below" for r in rs)
    sm = [r["fit"]["s"] for r in rs if r["fit"] is not None]
    g["s_measured_median"] = float(np.median(sm)) if sm else None
    g["s_measured_cells"] = len(sm)
    cd = [dict(x=np.log(np.asarray(r["points"], float)[:, 0]), k=np.asarray(r["points"], float)[:, 1],
               n=np.asarray(r["points"], float)[:, 2]) for r in rs]
    g["pooled_within_cell_width"] = pooled_width(cd)
    at = [r for r in rs if "at_growth_05" in r]
    g["at_growth_05"] = dict(cells=len(at), over_level=sum(r["at_growth_05"]["k"] / r["at_growth_05"]["n"] > 0.05
                                                          for r in at),
                             above_half_lower95=sum(r["at_growth_05"]["lower95"] > 0.5 for r in at),
                             pooled=(sum(r["at_growth_05"]["k"] for r in at) / sum(r["at_growth_05"]["n"] for r in at))
                             if at else None)
    return g


def failure_causes(cells, pts, gcell):
    """Each cell over the level at the advised η of the check with noise growth: 'shift' (the lower 95% bound
    of the measured rate there is above 1/2: the measured onset lies below the advised η, itself at or below
    the model's 5% point), 'label' (no run there diverged: every unstable run is the regime rule's
    drifting/oscillating clause), else 'width' (an escape rate between the level and about 1/2)."""
    out = []
    for c in cells:
        key = key_of(c)
        g = gcell[key]
        m = g["measured_advised"]
        if m["rate"] <= g["level"]:
            continue
        div = m["regimes"].get("diverged", 0)
        cause = "label" if div == 0 else ("shift" if m["ci95"][0] > 0.5 else "width")
        out.append(dict(cell="/".join(map(str, key)), mu=c["mu"], samples=c["samples_per_step"], cause=cause,
                        advised_rel=g["eta_advised"] / g["eta_star"], binding=g["binding"], unstable=m["unstable"],
                        diverged=div, n=m["n"]))
    return out


def input_sensitivity(pred_g):
    """How far the model's 5% point moves when its measured inputs are taken about 2 standard errors against
    the advisor (noise x1.06: a variance from 4,000 steps with excess kurtosis 1.8 has a relative s.e. near
    3%; noise growth x1.10: c from 3,000 steps at each of three states, near 5%): the ratio of η05 with the
    inputs raised to η05 as advised, per escape-bound cell, by group."""
    from grpojax.dynamics import escape_onset

    out = {}
    for mu in (0.0, 0.9):
        for R in (1, 4, 16):
            cs = [c for c in pred_g["cells"] if c["mu"] == mu and c["repeats"] == R and c["binding"] == "escape"]
            rat = []
            for c in cs:
                kw = dict(basin=c["basin"], steps=c["steps"], lag="periodic", k_instant=c["k_instant"],
                          samples_per_step=c["samples_per_step"], level=0.05, eta_max=10 * c["eta_star"])
                base = escape_onset(mu, c["k_ref"], c["k_stale"], noise=c["noise"], noise_growth=pred_g["noise_growth"],
                                    **kw)
                up = escape_onset(mu, c["k_ref"], c["k_stale"], noise=c["noise"] * 1.06,
                                  noise_growth=pred_g["noise_growth"] * 1.10, **kw)
                rat.append(float(up / base))
            if rat:
                out[f"mu={mu}, {72 * R} samples"] = dict(cells=len(rat), median=float(np.median(rat)),
                                                         smallest=float(min(rat)))
    return out


def main():
    pred_old = json.loads((RES / "escape_advise_check" / "predictions.json").read_text())
    pred_g = json.loads((RES / "escape_advise_check" / "growth" / "predictions.json").read_text())
    c_growth = pred_g["noise_growth"]
    cells = pred_old["cells"]
    gcell = {key_of(c): c for c in pred_g["cells"]}
    gsum = {key_of(c): c for c in json.loads((RES / "escape_advise_check" / "growth" / "summary.json").read_text())["cells"]}
    pts = measured_points()
    model = model_points(cells, c_growth)
    out = dict(description=__doc__.split("\n\n")[0], noise_growth=c_growth, s_min=S_MIN)
    for label in ("unstable", "diverged"):
        rows = [cell_row(c, pts, model, gcell[key_of(c)]["eta_escape"] / gcell[key_of(c)]["eta_star"], label)
                for c in cells]
        groups = {f"mu={mu}, {S} samples": group_summary([r for r in rows if r["mu"] == mu and r["samples"] == S])
                  for mu in (0.0, 0.9) for S in (72, 288, 1152)}
        out[label] = dict(groups=groups, cells=rows)
    causes = failure_causes(cells, pts, gsum)
    out["failure_causes"] = causes
    for c in causes:  # how far the advised η would have to come down to reach the empirical safe η
        r = next(r for r in out["unstable"]["cells"] if r["cell"] == c["cell"])
        c["safe_rel"] = r["safe"]
        c["advised_over_safe"] = c["advised_rel"] / (r["safe"] if r["safe"] is not None else 0.1)
    out["input_sensitivity"] = input_sensitivity(pred_g)
    (RES / "escape_advise_check" / "analysis.json").write_text(json.dumps(out, indent=1))

    f = lambda v, d=3: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{d}f}"  # noqa: E731
    for label in ("unstable", "diverged"):
        print(f"\n### label: {label}\n")
        print("| group | onsets fit/gap/below/above | measured onset / model onset, growth: median [range] | additive "
              "| width s measured, median (cells) | within-cell pooled s [95%] | s model: additive | growth | "
              "at model's 5% point: cells over 0.05 / run | lower 95% > 1/2 | pooled rate | measured onset / eta*, "
              "median | empirical safe eta / eta*, median (cells with none) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name, g in out[label]["groups"].items():
            pw = g["pooled_within_cell_width"]
            a = g["at_growth_05"]
            ok = g["onset_kinds"]
            e = lambda v: None if v is None else math.exp(v)  # noqa: E731
            rng = g["shift_growth_range"]
            print(f"| {name} | {ok.get('fit', 0)}/{ok.get('gap', 0)}/{ok.get('below', 0)}/{ok.get('above', 0)} | "
                  f"{f(e(g['shift_growth_median']), 2)} [{f(e(rng[0]), 2) if rng else '-'}, {f(e(rng[1]), 2) if rng else '-'}] | "
                  f"{f(e(g['shift_additive_median']), 2)} | {f(g['s_measured_median'])} ({g['s_measured_cells']}) | "
                  f"{f(pw['s']) + ' [' + f(pw['ci95'][0]) + ', ' + f(pw['ci95'][1]) + '] (' + str(pw['cells']) + ')' if pw else '-'} | "
                  f"{f(g['s_model_additive_median'])} | {f(g['s_model_growth_median'])} | {a['over_level']}/{a['cells']} | "
                  f"{a['above_half_lower95']} | {f(a['pooled'])} | {f(g['onset_rel_median'], 2)} | "
                  f"{f(g['safe_rel_median'], 2)} ({g['safe_none']}) |")
    print("\n### failing cells of the check with noise growth, by cause\n")
    tab = collections.Counter((c["mu"], c["samples"], c["cause"]) for c in causes)
    print("| group | failing | shift | width | label |\n|---|---|---|---|---|")
    for mu in (0.0, 0.9):
        for S in (72, 288, 1152):
            t = [tab[(mu, S, k)] for k in ("shift", "width", "label")]
            print(f"| mu={mu}, {S} | {sum(t)} | {t[0]} | {t[1]} | {t[2]} |")
    t = collections.Counter(c["cause"] for c in causes)
    print(f"| all | {len(causes)} | {t['shift']} | {t['width']} | {t['label']} |")
    print("\n### advised / empirical safe eta, failing cells (0.1 eta* taken where no measured eta was safe)\n")
    print("| group | cause | cells | median | largest | cells with no safe eta measured |\n|---|---|---|---|---|---|")
    for mu in (0.0, 0.9):
        for S in (72, 288, 1152):
            for cause in ("shift", "width", "label"):
                v = [c for c in causes if c["mu"] == mu and c["samples"] == S and c["cause"] == cause]
                if v:
                    r_ = [c["advised_over_safe"] for c in v]
                    print(f"| mu={mu}, {S} | {cause} | {len(v)} | {np.median(r_):.2f} | {max(r_):.2f} | "
                          f"{sum(c['safe_rel'] is None for c in v)} |")
    print("\n### eta05 with noise x1.06 and noise growth x1.10 / eta05 as advised (escape-bound cells)\n")
    print("| group | cells | median | smallest |\n|---|---|---|---|")
    for k_, v in out["input_sensitivity"].items():
        print(f"| {k_} | {v['cells']} | {v['median']:.3f} | {v['smallest']:.3f} |")
    print("\n### per cell (label unstable)\n")
    print("| cell | measured onset / eta* (kind) | s measured | empirical safe eta / eta* | model eta50/eta*: additive "
          "| growth | eta05/eta* growth | at growth eta05 |\n|---|---|---|---|---|---|---|---|")
    for r in out["unstable"]["cells"]:
        a = r.get("at_growth_05")
        print(f"| {r['cell']} | {f(r['onset'])} ({r['onset_kind']}) | {f(r['fit']['s']) if r['fit'] else '-'} | "
              f"{f(r['safe'], 2)} | {f(r['model']['additive_50'])} | {f(r['model']['growth_50'])} | {f(r['model']['growth_05'])} | "
              f"{(str(a['k']) + '/' + str(a['n'])) if a else '-'} |")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    sys.exit(main())
