"""Why the escape model under-predicts escape with momentum 0.9 and few samples per step: measurements.

Development cells only (the escape validation's quick cells: rules none and clipped, K_ref 1 and 4), SGD
momentum 0.9, 72 samples per step (one group per prompt), the five learning rates 0.1-0.53 η* of the
atlas grid, 16 new seeds (300-315, never run before). Every candidate cause is measured, none fitted:

1. The noise along the stiffest direction v: skewness and excess kurtosis of v·g over independent steps
   of 72 samples at θ* (Gaussian: 0 and 0), and its variance at θ* + s w v (s = ±0.5, ±1) against θ*
   (state-dependent noise).
   Its growth away from θ*, along ±v and at states the trainer's runs visit, split into the policy-gradient
   part and the part of the KL term's sampled (k3) estimator (the same draws with β = 0).
2. Three simulations of the same members, each classified by the atlas's regime rule:
   - ``linear``: the full 197-parameter linear recurrence (dense K_0, K_d at θ*, heavy ball, periodic
     refresh) with Gaussian noise of the *full* per-step covariance measured at θ* (every direction, no
     pruning, coupled), the policy evaluated exactly at θ* + e (TV, distance, projection);
   - ``mean+gauss``: the exact nonlinear mean update u(θ, θ_b) plus the same Gaussian noise;
   - ``mean+empirical``: the exact mean update plus the trainer's sampled noise as it is at θ* (a centred
     draw from 4,000 sampled steps at θ*: its skew and tails, but not its growth with the state);
   - ``trainer``: the trainer's own sampled update (the atlas program), parameters traced.
   The one-direction model's P (``escape_probability`` along v, the validation's inputs) beside them.
3. On the trainer's runs that leave: the step where the policy first passes TV 0.15, the share of
   ‖θ − θ*‖² along v and along the 5 stiffest modes there, |x_v|/w there (the basin along v), and
   which clause of the regime rule labels the run (TV late > 0.5, TV late > 0.15, distance growth > 2).

Writes ``diagnosis.json`` and ``escape_diagnosis.md`` to ``--out``. A few minutes on 2 cores.
"""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import escape_validation as ev  # noqa: E402
import network_stability_atlas as atlas  # noqa: E402

from grpojax._experiment import experiment_parser, load_average, parse_args  # noqa: E402

NAME = "escape_diagnosis"
RULES = ("none", "clipped")
KS = (1, 4)
MU = 0.9
RELS = tuple(float(r) for r in np.geomspace(0.1, 10.0, 12)[:5])  # the atlas grid's five lowest: 0.1-0.53 η*
SEEDS = tuple(range(300, 316))
POOL = 4000  # sampled updates at θ*: the noise's shape, covariance and the empirical-noise simulation's pool
STATE_DRAWS = 600  # sampled updates per state for the noise's growth (s.e. of a variance ratio about 6%)
PATH_RUNS, PATH_STEPS = 3, (5, 10, 20)
TV_RULE = 0.15
STEPS = 400
VALIDATION = pathlib.Path(__file__).resolve().parent / "results" / "escape_validation" / "full" / "predictions.json"


def members(apred):
    th = {(t["rule"], t["k_ref"]): t for t in apred["thresholds"] if t["optimizer"] == f"sgd{MU}"}
    out = []
    for rule in RULES:
        for K in KS:
            for rel in RELS:
                for sd in SEEDS:
                    out.append(dict(rule=rule, k_ref=K, eta_rel=rel, eta=rel * th[(rule, K)]["eta_exact"], seed=sd,
                                    key=1000 * len(out) + sd))
    return out


def policy_fns(ctx):
    x = jnp.asarray(ctx["x"], jnp.float32)
    un = ctx["unravel"]
    ts = jnp.asarray(ctx["theta_star"], jnp.float32)
    p_star = jnp.exp(atlas.logp_all(jax.tree.map(lambda a: a.astype(jnp.float32), un(ts)), x))

    def tv(theta):
        pol = jnp.exp(atlas.logp_all(jax.tree.map(lambda a: a.astype(jnp.float32), un(theta)), x))
        return 0.5 * jnp.abs(pol - p_star).sum(-1).mean()

    return ts, tv


def simulate(kind, mem, ctx, K0, Kd, C, v, *, pool=None):
    """Simulate ``mem`` (one rule) for STEPS steps: ``linear`` (K_0, K_d, Gaussian noise of covariance C),
    ``mean+gauss`` (the exact mean update, the same noise) or ``mean+empirical`` (the exact mean update plus a
    centred sampled update at θ* drawn from ``pool`` each step: the trainer's noise as it is at θ*, not
    Gaussian, not growing with the state); returns the regimes and the traces (d, tv, proj)."""
    ts, tv = policy_fns(ctx)
    n = ts.size
    vals, vecs = np.linalg.eigh(0.5 * (C + C.T))
    L = vecs * np.sqrt(np.clip(vals, 0, None))[None, :]
    L = jnp.asarray(L, jnp.float32)
    pool_j = None if pool is None else jnp.asarray(pool - pool.mean(0), jnp.float32)
    K0j, Kdj = jnp.asarray(K0, jnp.float32), jnp.asarray(Kd, jnp.float32)
    vj = jnp.asarray(v / np.linalg.norm(v), jnp.float32)
    rule = mem[0]["rule"]
    if kind in ("mean+gauss", "mean+empirical"):
        from jax.flatten_util import ravel_pytree

        x32 = jnp.asarray(ctx["x"], jnp.float32)
        u = atlas.mean_update(rule, x32, ctx["correct"], jnp.asarray(ctx["ref_logp"], jnp.float32))
        un = ctx["unravel"]

        def drift(e, eb):
            f = lambda t: jax.tree.map(lambda a: a.astype(jnp.float32), un(t))  # noqa: E731
            return -ravel_pytree(u(f(ts + e), f(ts + eb)))[0]  # the gradient (descent direction's negative)
    else:
        def drift(e, eb):
            return K0j @ e + Kdj @ eb

    def run(eta, k_ref, key):
        def step(carry, t):
            e, eb, m = carry
            eb = jnp.where((t % k_ref) == 0, e, eb)
            kt = jax.random.fold_in(key, t)
            if pool_j is None:
                g = drift(e, eb) + L @ jax.random.normal(kt, (n,))
            else:  # the pool holds sampled updates (−gradients): the gradient's noise is their negative
                g = drift(e, eb) - pool_j[jax.random.randint(kt, (), 0, pool_j.shape[0])]
            m = MU * m + g
            e = e - eta * m
            return (e, eb, m), (jnp.sqrt(e @ e), tv(ts + e), e @ vj, jnp.all(jnp.isfinite(e)).astype(jnp.float32))

        z = jnp.zeros(n, jnp.float32)
        return jax.lax.scan(step, (z, z, z), jnp.arange(STEPS))[1]

    prog = jax.jit(jax.vmap(run))
    d, tvs, pr, al = (np.asarray(a) for a in prog(jnp.asarray([m["eta"] for m in mem], jnp.float32),
                                                  jnp.asarray([m["k_ref"] for m in mem], jnp.int32),
                                                  jax.vmap(jax.random.key)(jnp.asarray([m["key"] for m in mem],
                                                                                       jnp.uint32))))
    regimes = [atlas.classify(d[i], tvs[i], pr[i], al[i], STEPS) for i in range(len(mem))]
    return regimes, dict(d=d, tv=tvs, proj=pr)


def trainer_runs(mem, ctx, apred):
    from jax.flatten_util import ravel_pytree

    p32 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), ctx["unravel"](ctx["theta_star"]))
    theta32, unravel32 = ravel_pytree(p32)
    direction = jnp.asarray(np.asarray(apred["stiffness"]["none"]["direction"]), jnp.float32)
    prog = atlas.make_program(jnp.asarray(ctx["x"], jnp.float32), ctx["correct"],
                              jnp.asarray(ctx["ref_logp"], jnp.float32), unravel32, theta32, direction, STEPS, 1,
                              trace_theta=True)
    f32 = lambda v: jnp.asarray(np.asarray(v, np.float32))  # noqa: E731
    outs = prog(f32([m["eta"] for m in mem]), f32([MU] * len(mem)),
                jnp.asarray(np.asarray([m["k_ref"] for m in mem], np.int32)),
                f32([np.inf if m["rule"] == "unclipped" else atlas.CLIP for m in mem]),
                f32([0.0 if m["rule"] == "none" else 1.0 for m in mem]), f32([0.0] * len(mem)),
                jnp.asarray(np.asarray([m["key"] for m in mem], np.uint32)))
    outs = {k: np.asarray(v) for k, v in outs.items()}
    regimes = [atlas.classify(outs["param_dist"][i], outs["tv"][i], outs["proj"][i], outs["alive"][i], STEPS)
               for i in range(len(mem))]
    return regimes, outs


def which_clause(d, tv):
    T = STEPS
    mid, late = slice(int(0.375 * T), int(0.625 * T)), slice(int(0.75 * T), T)
    tl = float(np.mean(tv[late]))
    g = float(np.median(d[late]) / max(np.median(d[mid]), 1e-12))
    if not np.all(np.isfinite(d)) or tl > 0.5:
        return "tv_late>0.5"
    if tl > 0.15:
        return "tv_late>0.15"
    if g > 2:
        return "growth>2 only"
    return "stable"


def moments(z):
    from scipy.stats import kurtosis, skew

    n = z.size
    return dict(skew=float(skew(z)), skew_se=math.sqrt(6.0 / n), excess_kurtosis=float(kurtosis(z)),
                kurtosis_se=math.sqrt(24.0 / n), n=int(n))


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="(no quick version: the script is already small)")
    args = parse_args(ap, argv)
    out = args.out
    t0 = time.perf_counter()
    load0 = load_average()
    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    vpred = json.loads(VALIDATION.read_text())
    ctx = atlas.context_from(apred)
    mem_all = members(apred)
    res = dict(rules={}, seeds=list(SEEDS), rels=list(RELS), mu=MU, k_refs=list(KS), steps=STEPS)
    tr_reg, tr = trainer_runs(mem_all, ctx, apred)
    print(f"trainer runs: {time.perf_counter() - t0:.0f} s")
    # 1. the noise (at θ = θ_b the three rules' sampled updates coincide: measured once, with rule none)
    g = ev.step_gradients(ctx, "none", POOL, jax.random.key(11))
    C = np.cov(g, rowvar=False)
    ts = np.asarray(ctx["theta_star"])
    res["noise"] = noise_measurements(ctx, apred, vpred, g, C, tr, mem_all)
    print(f"noise measured ({time.perf_counter() - t0:.0f} s)")
    for rule in RULES:
        idx = [i for i, m in enumerate(mem_all) if m["rule"] == rule]
        mem = [mem_all[i] for i in idx]
        v = np.asarray(apred["stiffness"][rule]["direction"])
        v = v / np.linalg.norm(v)
        w = vpred["basin"][rule]["w"]
        K0, Kd = ev.dense_stiffness(ctx, rule)
        V = ev.mode_basis(K0, Kd, v)
        # 2. the simulations
        sims = {k: simulate(k, mem, ctx, K0, Kd, C, v, pool=g if k == "mean+empirical" else None)
                for k in ("linear", "mean+gauss", "mean+empirical")}
        print(f"{rule}: simulations done ({time.perf_counter() - t0:.0f} s)")
        vp = {(p["k_ref"], round(p["eta_rel"], 6)): p for p in vpred["predictions"]
              if p["rule"] == rule and p["mu"] == MU and p["repeats"] == 1}
        cells = []
        for K in KS:
            for rel in RELS:
                sel = [j for j, m in enumerate(mem) if m["k_ref"] == K and m["eta_rel"] == rel]
                trj = [idx[j] for j in sel]
                p = vp[(K, round(rel, 6))]
                row = dict(k_ref=K, eta_rel=rel, n=len(sel),
                           trainer=float(np.mean([tr_reg[i] != "stable" for i in trj])),
                           model_one_direction=p["p_escape_one_direction"], model_all_directions=p["p_escape"],
                           clauses=dict(trainer=_count([which_clause(tr["param_dist"][i], tr["tv"][i]) for i in trj])))
                for k, (regs, trace) in sims.items():
                    row[k] = float(np.mean([regs[j] != "stable" for j in sel]))
                    row["clauses"][k] = _count([which_clause(trace["d"][j], trace["tv"][j]) for j in sel])
                cells.append(row)
        # 3. where the trainer's runs cross TV 0.15
        top5 = V[:, :5]
        cross = []
        for i in idx:
            hit = np.nonzero(tr["tv"][i] > TV_RULE)[0]
            if hit.size:
                t = int(hit[0])
                e = tr["theta"][i, t] - ts
                e2 = float(e @ e)
                cross.append(dict(k_ref=mem_all[i]["k_ref"], eta_rel=mem_all[i]["eta_rel"], step=t,
                                  share_v=float((e @ v) ** 2 / e2), share_top5=float(((top5.T @ e) ** 2).sum() / e2),
                                  xv_over_w=float(abs(e @ v) / w), dist=float(math.sqrt(e2))))
        res["rules"][rule] = dict(basin_w=w, cells=cells, trainer_crossings=cross,
                                  crossing_summary=_cross_summary(cross))
    res["seconds"] = time.perf_counter() - t0
    res["load_before"] = load0
    res["load_after"] = load_average()
    (out / "diagnosis.json").write_text(json.dumps(res, indent=1))
    write_md(out, res)
    return 0


def noise_measurements(ctx, apred, vpred, g, C, tr, mem_all):
    """Shape of the noise along v at θ*, its growth along ±v and along the trainer's own paths, and the
    share of the KL term's estimator in it."""
    ts = np.asarray(ctx["theta_star"])
    v = np.asarray(apred["stiffness"]["none"]["direction"])
    v = v / np.linalg.norm(v)
    w = vpred["basin"]["none"]["w"]
    zv = g @ v
    tot0 = float(np.trace(C))
    out = dict(draws=int(g.shape[0]), shape_v=moments(zv - zv.mean()),
               shape_norm=moments(np.linalg.norm(g - g.mean(0), axis=1)), total_variance=tot0,
               share_v=float(np.var(zv, ddof=1) / tot0))
    beta = atlas.BETA

    def parts(theta, n, key):
        full = ev.step_gradients(ctx, "none", n, key, theta=theta)
        try:
            atlas.BETA = 0.0  # the same draws without the KL term: the policy-gradient part
            pg = ev.step_gradients(ctx, "none", n, key, theta=theta)
        finally:
            atlas.BETA = beta
        return full, pg, full - pg

    f0, pg0, kl0 = parts(ts, STATE_DRAWS, jax.random.key(12))
    base = {k: (float(np.var(a @ v, ddof=1)), float(np.var(a, axis=0, ddof=1).sum()))
            for k, a in (("full", f0), ("pg", pg0), ("kl", kl0))}
    out["at_theta_star"] = {k: dict(var_v=b[0], var_total=b[1]) for k, b in base.items()}
    rows = []
    states = [(f"{s:+.1f} w along v", ts + s * w * v) for s in (-1.0, -0.5, 0.5, 1.0)]
    pick = [i for i, m in enumerate(mem_all) if m["rule"] == "none" and m["k_ref"] == 1
            and m["eta_rel"] == RELS[0]][:PATH_RUNS]
    states += [(f"trainer path, run {i}, step {t}", tr["theta"][i, t - 1]) for i in pick for t in PATH_STEPS]
    x = jnp.asarray(ctx["x"])
    for name, th in states:
        f, pg, kl = parts(np.asarray(th, np.float64), STATE_DRAWS, jax.random.key(13))
        with jax.enable_x64(True):
            pol = np.exp(np.asarray(atlas.logp_all(ctx["unravel"](jnp.asarray(th, jnp.float64)), x)))
        p0 = np.exp(np.asarray(atlas.logp_all(ctx["unravel"](jnp.asarray(ts)), x)))
        rows.append(dict(state=name, dist=float(np.linalg.norm(np.asarray(th) - ts)),
                         tv=float(0.5 * np.abs(pol - p0).sum(-1).mean()),
                         p_correct=float(pol[np.arange(9), np.asarray(ctx["correct"])].mean()),
                         min_prob=float(pol.min()),
                         **{f"ratio_{k}_total": float(np.var(a, axis=0, ddof=1).sum() / base["full"][1])
                            for k, a in (("full", f), ("pg", pg), ("kl", kl))},
                         ratio_full_v=float(np.var(f @ v, ddof=1) / base["full"][0])))
        print(f"  noise at {name}: total x{rows[-1]['ratio_full_total']:.2f} (PG part x{rows[-1]['ratio_pg_total']:.2f}"
              f" of the full at theta*, KL part x{rows[-1]['ratio_kl_total']:.2f}), TV {rows[-1]['tv']:.3f}")
    out["states"] = rows
    return out


def _count(xs):
    return {k: xs.count(k) for k in sorted(set(xs))}


def _cross_summary(cross):
    if not cross:
        return None
    a = lambda k: np.asarray([c[k] for c in cross])  # noqa: E731
    q = lambda k: [float(x) for x in np.percentile(a(k), [10, 50, 90])]  # noqa: E731
    return dict(n=len(cross), step=q("step"), share_v=q("share_v"), share_top5=q("share_top5"),
                xv_over_w=q("xv_over_w"), dist=q("dist"))


def write_md(out, res):
    nz = res["noise"]
    sv, sn = nz["shape_v"], nz["shape_norm"]
    L = ["# Escape with momentum 0.9 and 72 samples per step: diagnosis on the development cells", "",
         f"Rules none and clipped, K_ref 1 and 4, SGD momentum {res['mu']}, 72 samples per step, {len(res['seeds'])} "
         f"new seeds (300-315) per learning rate, {res['steps']} steps; {res['seconds']:.0f} s. Load: "
         f"{res['load_before']} (before), {res['load_after']} (after).", "",
         "## The noise of one step (72 samples)", "",
         f"At theta* ({nz['draws']} steps): along v skew {sv['skew']:.3f} (s.e. {sv['skew_se']:.3f}), excess kurtosis "
         f"{sv['excess_kurtosis']:.3f} (s.e. {sv['kurtosis_se']:.3f}); v carries {nz['share_v']:.1%} of the total "
         f"variance {nz['total_variance']:.4g}. Of that total, the policy-gradient part alone (beta = 0, same draws) "
         f"{nz['at_theta_star']['pg']['var_total']:.4g}, the KL estimator's part "
         f"{nz['at_theta_star']['kl']['var_total']:.4g}.", "",
         "Away from theta* (variance of the step against the full variance at theta*; "
         f"{STATE_DRAWS} draws each, s.e. of a ratio about 6%):", "",
         "| state | distance | TV | mean P(right) | smallest answer probability | total | along v | PG part | KL part |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in nz["states"]:
        L.append(f"| {r['state']} | {r['dist']:.3f} | {r['tv']:.3f} | {r['p_correct']:.3f} | {r['min_prob']:.2e} | "
                 f"{r['ratio_full_total']:.2f} | {r['ratio_full_v']:.2f} | {r['ratio_pg_total']:.2f} | "
                 f"{r['ratio_kl_total']:.2f} |")
    for rule, r in res["rules"].items():
        L += ["", f"## Rule {rule}: fraction of runs unstable (16 per row)", "",
              "| K_ref | eta/eta* | trainer | linear, all 197 dims, Gaussian | mean update + Gaussian | mean update + "
              "the noise at theta* (resampled) | model, v only | model, all directions | clauses (trainer) | "
              "clauses (mean + resampled) |", "|---|---|---|---|---|---|---|---|---|---|"]
        for c in r["cells"]:
            L.append(f"| {c['k_ref']} | {c['eta_rel']:.3f} | {c['trainer']:.2f} | {c['linear']:.2f} | "
                     f"{c['mean+gauss']:.2f} | {c['mean+empirical']:.2f} | {c['model_one_direction']:.3f} | "
                     f"{c['model_all_directions']:.3f} | {c['clauses']['trainer']} | {c['clauses']['mean+empirical']} |")
        cs = r["crossing_summary"]
        if cs:
            L += ["", f"Trainer runs that pass TV 0.15 ({cs['n']}), at the first such step (10th / 50th / 90th "
                  "percentiles): step " + "/".join(f"{x:.0f}" for x in cs["step"]) + "; share of |theta - theta*|^2 "
                  "along v " + "/".join(f"{x:.3f}" for x in cs["share_v"]) + "; along the 5 stiffest modes "
                  + "/".join(f"{x:.3f}" for x in cs["share_top5"]) + "; |x_v| / w " + "/".join(
                      f"{x:.3f}" for x in cs["xv_over_w"]) + "; |theta - theta*| " + "/".join(
                      f"{x:.3f}" for x in cs["dist"]) + "."]
    (out / f"{NAME}.md").write_text("\n".join(L) + "\n")


if __name__ == "__main__":
    sys.exit(main())
