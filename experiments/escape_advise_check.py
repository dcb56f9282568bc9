"""Does ``advise`` ever advise a learning rate whose measured escape rate exceeds its stated level?

``grpojax advise --escape-level L`` caps the advised η range where the escape model's P(escape within the
planned run) reaches L (default 0.05, ``grpojax._defaults.ESCAPE_LEVEL``), and at (1 − margin) η* (default
margin 0.2). This experiment takes every cell of the policy network's stability atlas (rule × SGD momentum
0 / 0.9 × K_ref 1-16 × 72 / 288 / 1,152 samples per step), computes the η the advisor would advise there, writes
those η to ``predictions.json`` (to be committed before any run), then runs new seeds at exactly those η and
measures the fraction of runs that leave the plateau within the planned length (the atlas's regime rule:
unstable = not stable).

The advisor's own code path: the escape cap is ``grpojax.monitor._advisor._escape`` (the function
:func:`grpojax.monitor.advise` calls; ``escape_onset`` at the level, one direction, periodic refresh) with the
inputs the escape validation used: K_0 and K_d along the stiffest direction (the atlas's committed
predictions), the per-sample noise σ² (the per-step variance of 72 samples along v, times 72) with
B = 72 × groups per prompt, the basin w (TV 0.15 along v), T = 400. ``advise`` itself refuses K_d ≤ 0 (its
damping-ratio band is defined for a positive stale stiffness), and K_d < 0 along the stiffest direction of
this network, so the damping-ratio band is left out: the advised η is the top of the range the escape level
and the margin leave, η_adv = min(η_escape, (1 − margin) η*), η* the advisor's exact threshold
(``exact_critical_eta`` of the same K_0, K_d). Both η_adv and η_escape (the escape cap alone) are run.

Measured: per cell and η, the fraction of ``SEEDS`` new seeds (never run before: the atlas and the
escape validation ran seeds 0 and 1) whose run is unstable, with its exact (Clopper-Pearson) 95% interval;
the count of cells whose measured rate exceeds the level, and of cells whose lower 95% bound does.

``--noise-growth-from FILE`` (the held-out experiment's predictions.json, its measured ``growth.c``): the same
check with the advisor's escape cap computed with noise that grows with the state (``advise(...,
noise_growth=c)``), on 30 other new seeds (140-169), at the advised η only.

Stages: ``--stage predict`` writes predictions.json and stops; ``--stage run`` runs against an existing
(committed) predictions.json; ``all`` (default) does both. ``--quick``: rule none with momentum 0.9,
K_ref 1 and 4, 10 seeds.
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

from grpojax import _defaults  # noqa: E402
from grpojax._experiment import (Claim, committed_predictions, experiment_parser, load_average, parse_args,  # noqa: E402
                                 print_claims, write_summary)

NAME = "escape_advise_check"
VALIDATION = pathlib.Path(__file__).resolve().parent / "results" / "escape_validation" / "full" / "predictions.json"
STEPS = 400
SEEDS = tuple(range(100, 140))  # 40 seeds never run before (the atlas and the escape validation: 0 and 1)
QUICK_SEEDS = tuple(range(100, 110))
GROWTH_SEEDS = tuple(range(140, 170))  # the check with noise growth: 30 more seeds never run before
CHUNK = 1200  # members per vmapped program call (memory)


def cells(apred, quick: bool):
    cs = ev.cells(apred, quick=False)
    if quick:
        cs = [c for c in cs if c["rule"] == "none" and c["mu"] == 0.9 and c["k_ref"] in (1, 4)]
    return cs


def predict(out: pathlib.Path, quick: bool, log=print, growth: float = 0.0):
    from grpojax.monitor._advisor import _escape, _exact

    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    vpred = json.loads(VALIDATION.read_text())
    level, margin = _defaults.ESCAPE_LEVEL, _defaults.ADVICE_MARGIN
    rows = []
    for c in cells(apred, quick):
        rule, mu, K, k0, kd = c["rule"], c["mu"], c["k_ref"], c["k_instant"], c["k_stale"]
        noise = vpred["noise"][rule]["per_step_variance_72"] * 72
        w = vpred["basin"][rule]["w"]
        eta_star = _exact(mu, K, kd, "periodic", k0)
        for R in ev.REPEATS:
            args = (mu, K, kd, "periodic", k0, noise, 72 * R, w, None, STEPS, level, eta_star, growth)
            cap = _escape(eta_star * 0.5, *args)["eta_hb"]
            eta_margin = (1.0 - margin) * eta_star
            eta_adv = min(cap, eta_margin)
            p_adv = _escape(eta_adv, *args)["probability"]
            p_cap = _escape(cap, *args)["probability"]
            rows.append(dict(rule=rule, optimizer=c["optimizer"], mu=mu, k_ref=K, repeats=R, samples_per_step=72 * R,
                             k_instant=k0, k_stale=kd, noise=noise, basin=w, steps=STEPS, level=level, margin=margin,
                             eta_star=eta_star, eta_exact_multi=c["eta_exact"], eta_escape=cap, eta_margin=eta_margin,
                             eta_advised=eta_adv, binding="escape" if cap <= eta_margin else "margin",
                             p_escape_at_advised=p_adv, p_escape_at_escape_cap=p_cap))
            log(f"{rule:>9} mu={mu} K_ref={K:>2} x{R:>2}: eta_escape {cap / eta_star:.3f} eta*, advised "
                f"{eta_adv / eta_star:.3f} eta* ({rows[-1]['binding']}), P there {p_adv:.3g}")
    pred = dict(experiment=NAME, quick=quick, written_before_runs=True, git_head=atlas.git_head(), steps=STEPS,
                level=level, margin=margin, noise_growth=growth, only_advised=growth > 0,
                seeds=list(GROWTH_SEEDS if growth > 0 else (QUICK_SEEDS if quick else SEEDS)),
                inputs=f"K_0, K_d: {ev.ATLAS_PREDICTIONS.name}; noise and basin: escape_validation/full/predictions.json",
                advisor="grpojax.monitor._advisor._escape (escape_onset at the level, periodic refresh, one direction); "
                        "advised eta = min(eta_escape, (1 - margin) eta*); the damping-ratio band is not applied "
                        "(advise refuses K_d <= 0, and K_d < 0 here)",
                label_rule=atlas.RULE_TEXT, cells=rows)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    return pred


def run_members(members, ctx, apred, repeats: int, steps: int, log=print, traces: dict | None = None):
    """Run ``members`` (dicts with rule, optimizer, mu, k_ref, eta, seed) at ``repeats`` groups per prompt,
    one vmapped program per chunk of ``CHUNK``; returns the atlas regime of each. ``traces``: a dict whose keys
    name traced outputs of the program (e.g. ``param_dist``, ``tv``); each gets the list of every member's trace."""
    p32 = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), ctx["unravel"](ctx["theta_star"]))
    theta32, unravel32 = ravel_pytree_(p32)
    direction = jnp.asarray(np.asarray(apred["stiffness"]["none"]["direction"]), jnp.float32)
    program = atlas.make_program(jnp.asarray(ctx["x"], jnp.float32), ctx["correct"],
                                 jnp.asarray(ctx["ref_logp"], jnp.float32), unravel32, theta32, direction, steps,
                                 repeats)
    regimes, wall = [], 0.0
    for s in range(0, len(members), CHUNK):
        part = members[s:s + CHUNK]
        n = len(part)
        part = part + [part[-1]] * (min(CHUNK, len(members)) - n)  # pad: one compiled shape
        f32 = lambda v: jnp.asarray(np.asarray(v, np.float32))  # noqa: E731
        args = (f32([r["eta"] for r in part]), f32([r["mu"] for r in part]),
                jnp.asarray(np.asarray([r["k_ref"] for r in part], np.int32)),
                f32([np.inf if r["rule"] == "unclipped" else atlas.CLIP for r in part]),
                f32([0.0 if r["rule"] == "none" else 1.0 for r in part]), f32([0.0] * len(part)),
                jnp.asarray(np.asarray([r["key"] for r in part], np.uint32)))
        t0 = time.perf_counter()
        outs = {k: np.asarray(v) for k, v in jax.block_until_ready(program(*args)).items()}
        wall += time.perf_counter() - t0
        for i in range(n):
            regimes.append(atlas.classify(outs["param_dist"][i], outs["tv"][i], outs["proj"][i], outs["alive"][i],
                                          steps))
            for k in traces or {}:
                traces[k].append(outs[k][i])
    log(f"{len(members)} runs x {steps} steps ({repeats * 9 * atlas.G} samples per step): {wall:.1f} s")
    return regimes, wall


def ravel_pytree_(p):
    from jax.flatten_util import ravel_pytree

    return ravel_pytree(p)


def binom_ci(k: int, n: int):
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def run(pred, log=print):
    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    seeds = pred["seeds"]
    results, walls = [], {}
    for R in ev.REPEATS:
        cs = [c for c in pred["cells"] if c["repeats"] == R]
        members = []
        for ci, c in enumerate(cs):
            etas = {"advised": c["eta_advised"]}
            if c["eta_escape"] != c["eta_advised"] and not pred.get("only_advised"):
                etas["escape_cap"] = c["eta_escape"]
            for which, eta in etas.items():
                for sd in seeds:
                    # the member's random stream: 1000 * index + seed, the atlas's convention; seeds >= 100 give
                    # streams no earlier run used (those had seeds 0 and 1)
                    members.append(dict(cell=ci, which=which, rule=c["rule"], mu=c["mu"], k_ref=c["k_ref"], eta=eta,
                                        seed=sd, key=1000 * len(members) + sd))
        regimes, walls[R] = run_members(members, ctx, apred, R, pred["steps"], log=log)
        for ci, c in enumerate(cs):
            for which in ("advised",) if pred.get("only_advised") else ("advised", "escape_cap"):
                sel = [g for m, g in zip(members, regimes) if m["cell"] == ci and m["which"] == which]
                if not sel and which == "escape_cap":  # the cap is the advised eta: the same runs
                    sel = [g for m, g in zip(members, regimes) if m["cell"] == ci and m["which"] == "advised"]
                k = sum(g != "stable" for g in sel)
                lo, hi = binom_ci(k, len(sel))
                c[f"measured_{which}"] = dict(n=len(sel), unstable=k, rate=k / len(sel), ci95=[lo, hi],
                                              regimes={r: sel.count(r) for r in sorted(set(sel))})
            results.append(c)
    return results, walls


def tally(results, which, level):
    over = [c for c in results if c[f"measured_{which}"]["rate"] > level]
    sure = [c for c in results if c[f"measured_{which}"]["ci95"][0] > level]
    n = sum(c[f"measured_{which}"]["n"] for c in results)
    k = sum(c[f"measured_{which}"]["unstable"] for c in results)
    return dict(cells=len(results), cells_over=len(over), cells_over_lower_bound=len(sure), runs=n, unstable=k,
                pooled_rate=k / n, pooled_ci95=list(binom_ci(k, n)))


def cell_name(c):
    return f"{c['rule']}/{c['optimizer']}/{c['k_ref']}/{c['repeats']}"


def write_markdown(out, pred, results, scores, walls, total_s, load0, cmd):
    lev = pred["level"]
    L = [f"# Does advise keep its escape level? The policy network's atlas cells ({'quick' if pred['quick'] else 'full'})",
         "", f"Command: `{cmd}`; {len(results)} cells, {len(pred['seeds'])} new seeds per cell and learning rate, "
         f"{pred['steps']} steps; vmapped programs {', '.join(f'x{k}: {v:.0f} s' for k, v in walls.items())}; whole "
         f"run {total_s:.0f} s. Load before: {load0}.",
         "The advised learning rates: `predictions.json`, written and committed before any of these runs.", "",
         (f"Escape model with noise that grows with the state: noise_growth c = {pred['noise_growth']:.4g}. "
          if pred.get("noise_growth") else "") +
         f"Level L = {lev:g} (the default), margin {pred['margin']:g}. Advised eta = min(eta_escape, (1 - margin) eta*); "
         "eta_escape = the largest eta with P(escape within 400 steps) <= L (the advisor's escape model, stiffest "
         "direction). Measured: fraction of runs unstable by the atlas's regime rule, exact 95% binomial interval.", "",
         "## Counts", "", "| learning rate | cells | cells with measured rate > L | cells with lower 95% bound > L | "
         "runs | unstable | pooled rate [95%] |", "|---|---|---|---|---|---|---|"]
    for which, label in (("advised", "advised eta"), ("escape_cap", "eta_escape (the escape cap alone)")):
        if which not in scores:
            continue
        s = scores[which]
        L.append(f"| {label} | {s['cells']} | {s['cells_over']} | {s['cells_over_lower_bound']} | {s['runs']} | "
                 f"{s['unstable']} | {s['pooled_rate']:.3f} [{s['pooled_ci95'][0]:.3f}, {s['pooled_ci95'][1]:.3f}] |")
    for key, sub in (("by_momentum", "momentum"), ("by_samples", "samples per step")):
        L += ["", f"At the advised eta, by {sub}:", "", f"| {sub} | cells | over L | lower bound over L | pooled rate |",
              "|---|---|---|---|---|"]
        for k, s in scores[key].items():
            L.append(f"| {k} | {s['cells']} | {s['cells_over']} | {s['cells_over_lower_bound']} | {s['pooled_rate']:.3f} |")
    L += ["", "## Per cell (rule/optimizer/K_ref/groups per prompt)", "",
          "| cell | eta* | eta_escape / eta* | advised / eta* | binding | P model at advised | measured at advised "
          "[95%] | measured at eta_escape [95%] |", "|---|---|---|---|---|---|---|---|"]
    for c in results:
        a = c["measured_advised"]
        e = c.get("measured_escape_cap", dict(unstable=0, n=0, rate=math.nan, ci95=[math.nan, math.nan]))
        flag = " **over**" if a["ci95"][0] > lev else (" over" if a["rate"] > lev else "")
        at_cap = "not run" if not e["n"] else \
            f"{e['unstable']}/{e['n']} = {e['rate']:.2f} [{e['ci95'][0]:.2f}, {e['ci95'][1]:.2f}]"
        L.append(f"| {cell_name(c)} | {c['eta_star']:.4g} | {c['eta_escape'] / c['eta_star']:.3f} | "
                 f"{c['eta_advised'] / c['eta_star']:.3f} | {c['binding']} | {c['p_escape_at_advised']:.3f} | "
                 f"{a['unstable']}/{a['n']} = {a['rate']:.2f} [{a['ci95'][0]:.2f}, {a['ci95'][1]:.2f}]{flag} | "
                 f"{at_cap} |")
    L += ["", "over: measured rate above L; **over**: its lower 95% bound above L too.", ""]
    (out / f"{NAME}.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="rule none, momentum 0.9, K_ref 1 and 4, 10 seeds")
    ap.add_argument("--noise-growth-from", type=pathlib.Path, default=None, metavar="FILE",
                    help="a predictions.json holding growth.c: the advisor's escape cap with that noise growth")
    ap.add_argument("--stage", choices=("all", "predict", "run"), default="all",
                    help="predict: write predictions.json and stop; run: run against an existing predictions.json")
    args = parse_args(ap, argv)
    out = args.out
    t0 = time.perf_counter()
    load0 = load_average()
    if args.stage == "run":
        pred = committed_predictions(out, args.quick)
    else:
        growth = 0.0 if args.noise_growth_from is None else \
            float(json.loads(args.noise_growth_from.read_text())["growth"]["c"])
        pred = predict(out, args.quick, growth=growth)
        print(f"wrote {out / 'predictions.json'}")
        if args.stage == "predict":
            return 0
    results, walls = run(pred)
    lev = pred["level"]
    scores = {w: tally(results, w, lev) for w in (("advised",) if pred.get("only_advised") else
                                                  ("advised", "escape_cap"))}
    scores["by_momentum"] = {str(m): tally([c for c in results if c["mu"] == m], "advised", lev)
                             for m in sorted({c["mu"] for c in results})}
    scores["by_samples"] = {str(72 * R): tally([c for c in results if c["repeats"] == R], "advised", lev)
                            for R in sorted({c["repeats"] for c in results})}
    total_s = time.perf_counter() - t0
    cmd = f"python experiments/{NAME}.py" + (" --quick" if args.quick else "") + \
        (f" --stage {args.stage}" if args.stage != "all" else "")
    s = scores["advised"]
    claims = [Claim(
        f"advise never advises a learning rate whose measured escape rate over the planned run exceeds its stated "
        f"level ({lev:g}) on the policy network's atlas cells",
        f"{s['cells_over']} of {s['cells']} cells measured above {lev:g}; {s['cells_over_lower_bound']} with the lower "
        f"95% binomial bound above it ({len(pred['seeds'])} seeds per cell); pooled rate {s['pooled_rate']:.3f}",
        "confirmed" if s["cells_over_lower_bound"] == 0 and s["cells_over"] <= 0.1 * s["cells"] else
        ("partial" if s["cells_over_lower_bound"] <= 0.1 * s["cells"] else "refuted"))]
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=[], scores=scores, cells=results,
                  program_wall_s=walls, total_wall_s=total_s, load_before=load0, load_after=load_average(), command=cmd)
    write_markdown(out, pred, results, scores, walls, total_s, load0, cmd)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
