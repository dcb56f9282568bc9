"""The escape model with noise that grows with the state, pre-registered on held-out atlas cells and new seeds.

The diagnosis on the development cells (``escape_diagnosis.py``: rules none and clipped, K_ref 1 and 4) found
that the trainer's noise is smallest at the plateau θ* (the policy-gradient part and the KL estimator's part
of the sampled update largely cancel there) and grows quickly away from it, which the escape model, with its
noise measured at θ*, does not see. The model's correction (``escape_probability(..., noise_growth=c)``): the
step's noise variance along v is σ²/B · (1 + c x²) at displacement x along v; the second moments stay exact
(module notes of ``grpojax.dynamics._escape``).

c is measured on the network before any run, from the noise alone (no run is used): the central second
difference of the variance of v·(sampled update) at θ* ± (w/2) v against θ*,
c = ((r₊ + r₋)/2 − 1) / (w/2)², r± the variance ratios, ``NOISE_DRAWS`` steps of 72 samples at each state.
The half-basin w/2 is fixed in advance (the middle of the basin, where the runs spend their time before they
leave). At θ = θ_b the three rules' sampled updates coincide and their stiffest directions are the same, so
one c serves all cells. Everything else is the escape validation's inputs (K_0, K_d, σ², w, T = 400) and the
stiffest direction alone (the model ``advise`` uses).

Held-out cells (none of them used by the diagnosis or to set c): rule unclipped at every K_ref, and K_ref 2,
8 and 16 of rules none and clipped; SGD momentum 0 and 0.9; 72, 288 and 1,152 samples per step; the 12
learning rates 0.1-10 η* of the atlas; new seeds 2 and 3 (never run before: the atlas and the escape
validation ran seeds 0 and 1). ``predictions.json`` holds, for each run, P(escape) of the new model and of
the committed old model (primary: all directions; secondary: v alone) and is committed before the runs.
Scores (``--stage run``): Brier score against the measured label (unstable = not stable), and agreement outside
±25% of each model's onset (of η* for the η*-only rule), overall, at 72 samples per step and per momentum-0.9
cell at 72 samples per step.
"""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time

import jax
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import escape_advise_check as eac  # noqa: E402
import escape_validation as ev  # noqa: E402
import network_stability_atlas as atlas  # noqa: E402

from grpojax._experiment import Claim, experiment_parser, load_average, parse_args, print_claims, write_summary  # noqa: E402

NAME = "escape_heldout"
VALIDATION = pathlib.Path(__file__).resolve().parent / "results" / "escape_validation" / "full" / "predictions.json"
SEEDS = (2, 3)
NOISE_DRAWS = 3000
HALF = 0.5  # c from the noise at θ* ± HALF·w along v
STEPS = 400
RELS = tuple(float(r) for r in np.geomspace(0.1, 10.0, 12))


def heldout(t):
    return t["optimizer"] != "adam" and (t["rule"] == "unclipped" or t["k_ref"] in (2, 8, 16))


def measure_growth(ctx, apred, vpred, log=print):
    v = np.asarray(apred["stiffness"]["none"]["direction"])
    v = v / np.linalg.norm(v)
    w = vpred["basin"]["none"]["w"]
    ts = np.asarray(ctx["theta_star"])
    var = {}
    for s in (0.0, HALF, -HALF):
        g = ev.step_gradients(ctx, "none", NOISE_DRAWS, jax.random.key(21), theta=ts + s * w * v)
        var[s] = float(np.var(g @ v, ddof=1))
    r_plus, r_minus = var[HALF] / var[0.0], var[-HALF] / var[0.0]
    c = ((r_plus + r_minus) / 2.0 - 1.0) / (HALF * w) ** 2
    log(f"noise along v: x{r_plus:.3f} at +{HALF} w, x{r_minus:.3f} at -{HALF} w -> c = {c:.4g} per unit x^2 "
        f"(c w^2 = {c * w * w:.3g})")
    return dict(c=c, c_times_w2=c * w * w, ratio_plus=r_plus, ratio_minus=r_minus, variance_at_theta_star=var[0.0],
                half=HALF, draws=NOISE_DRAWS, w=w)


def predict(out: pathlib.Path, log=print):
    from grpojax.dynamics._escape import escape_onset, escape_probability

    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    vpred = json.loads(VALIDATION.read_text())
    ctx = atlas.context_from(apred)
    growth = measure_growth(ctx, apred, vpred, log)
    old = {(p["rule"], p["optimizer"], p["k_ref"], p["repeats"], round(p["eta_rel"], 6)): p
           for p in vpred["predictions"]}
    old_on = {(o["rule"], o["optimizer"], o["k_ref"], o["repeats"]): o for o in vpred["onsets"]}
    rows, onsets = [], []
    for t in (t for t in apred["thresholds"] if heldout(t)):
        rule, mu, K = t["rule"], t["mu"], t["k_ref"]
        for R in ev.REPEATS:
            kw = dict(noise=vpred["noise"][rule]["per_step_variance_72"] * 72, samples_per_step=72 * R,
                      basin=vpred["basin"][rule]["w"], steps=STEPS, lag="periodic", k_instant=t["k_instant"],
                      noise_growth=growth["c"])
            etas = np.asarray(RELS) * t["eta_exact"]
            p_new = escape_probability(etas, mu, K, t["k_stale"], **kw).probability
            on = float(escape_onset(mu, K, t["k_stale"], eta_max=t["eta_exact"] * 10.0, **kw))
            o = old_on[(rule, t["optimizer"], K, R)]
            onsets.append(dict(rule=rule, optimizer=t["optimizer"], mu=mu, k_ref=K, repeats=R, eta_exact=t["eta_exact"],
                               onset_rel=on / t["eta_exact"], old_onset_rel=o["onset_rel"],
                               old_onset_one_direction_rel=o["onset_one_direction_rel"]))
            for rel, eta, p in zip(RELS, etas, p_new):
                op = old[(rule, t["optimizer"], K, R, round(rel, 6))]
                rows.append(dict(rule=rule, optimizer=t["optimizer"], mu=mu, k_ref=K, repeats=R, eta_rel=rel,
                                 eta=float(eta), eta_exact=t["eta_exact"], p_escape=float(p),
                                 p_escape_old=op["p_escape"], p_escape_old_one_direction=op["p_escape_one_direction"]))
            log(f"  {rule:>9} {t['optimizer']} K_ref={K:>2} x{R:>2}: onset {on / t['eta_exact']:.3g} eta* "
                f"(old model {o['onset_rel']:.3g})")
    pred = dict(experiment=NAME, written_before_runs=True, git_head=atlas.git_head(), steps=STEPS, seeds=list(SEEDS),
                growth=growth, model="stiffest direction alone, escape_probability with noise_growth = c (measured "
                "from the noise at theta* +- w/2 along v), the escape validation's K_0, K_d, noise, basin, T = 400; "
                "p_escape_old / p_escape_old_one_direction: the committed predictions of the escape validation",
                label_rule=atlas.RULE_TEXT, onsets=onsets, predictions=rows)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    return pred


def run(pred, log=print):
    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    measured, walls = [], {}
    for R in ev.REPEATS:
        members = []
        for p in (p for p in pred["predictions"] if p["repeats"] == R):
            for sd in pred["seeds"]:
                # the atlas's stream convention, 1000 * index + seed: seeds 2 and 3 give streams no earlier run used
                members.append(dict(p, seed=sd, key=1000 * len(members) + sd))
        regimes, walls[R] = eac.run_members(members, ctx, apred, R, pred["steps"], log=log)
        for m, g in zip(members, regimes):
            measured.append(dict(rule=m["rule"], optimizer=m["optimizer"], mu=m["mu"], k_ref=m["k_ref"], repeats=R,
                                 eta_rel=m["eta_rel"], seed=m["seed"], measured=g, unstable=g != "stable"))
    return measured, walls


def score(pred, measured):
    key = lambda r: (r["rule"], r["optimizer"], r["k_ref"], r["repeats"], round(r["eta_rel"], 6))  # noqa: E731
    p_of = {key(p): p for p in pred["predictions"]}
    on_of = {(o["rule"], o["optimizer"], o["k_ref"], o["repeats"]): o for o in pred["onsets"]}
    rec = []
    for m in measured:
        p = p_of[key(m)]
        o = on_of[key(m)[:4]]
        rec.append(dict(cell=key(m)[:4], y=float(m["unstable"]), rel=m["eta_rel"], new=p["p_escape"],
                        old=p["p_escape_old"], star=1.0 if m["eta_rel"] >= 1.0 else 0.0,
                        on_new=o["onset_rel"], on_old=o["old_onset_rel"]))

    def agree(rs, which):
        on = {"new": "on_new", "old": "on_old"}.get(which)
        far = [r for r in rs if (abs(math.log(r["rel"])) > math.log(1.25) if on is None else
                                 (r[on] <= 0 or not math.isfinite(r[on]) or
                                  abs(math.log(r["rel"] / r[on])) > math.log(1.25)))]
        ok = [(r[which] >= 0.5) == (r["y"] > 0.5) for r in far]
        return (float(np.mean(ok)) if ok else None), len(far)

    def block(rs):
        out = dict(n=len(rs), unstable=int(sum(r["y"] for r in rs)))
        for w in ("new", "old", "star"):
            out[f"brier_{w}"] = float(np.mean([(r[w] - r["y"]) ** 2 for r in rs]))
            out[f"agreement_far_{w}"], out[f"n_far_{w}"] = agree(rs, w)
        return out

    res = dict(all=block(rec), by_samples={str(72 * R): block([r for r in rec if r["cell"][3] == R])
                                           for R in ev.REPEATS})
    res["cells"] = {"/".join(map(str, k)): block([r for r in rec if r["cell"] == k])
                    for k in sorted({r["cell"] for r in rec})}
    mom72 = {k: v for k, v in res["cells"].items() if k.split("/")[1] == "sgd0.9" and k.endswith("/1")}
    res["momentum_72"] = mom72
    for w in ("new", "old", "star"):
        vals = [v[f"agreement_far_{w}"] for v in mom72.values() if v[f"agreement_far_{w}"] is not None]
        res[f"momentum_72_min_agreement_{w}"] = min(vals) if vals else None
        res[f"momentum_72_cells_at_least_80_{w}"] = sum(v >= 0.8 for v in vals)
    return res


def write_markdown(out, pred, res, walls, total_s, load0, cmd):
    f = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    g = pred["growth"]
    L = ["# Escape model with state-dependent noise: held-out cells, new seeds", "",
         f"Command: `{cmd}`; {res['all']['n']} runs x {pred['steps']} steps (seeds {pred['seeds']}); vmapped programs "
         f"{', '.join(f'x{k}: {v:.0f} s' for k, v in walls.items())}; whole run {total_s:.0f} s. Load before: {load0}.",
         "Predictions: `predictions.json`, written and committed before the runs.", "",
         f"Noise growth c = {g['c']:.4g} per unit x^2 along v (c w^2 = {g['c_times_w2']:.3g}): the variance of the "
         f"sampled step along v is x{g['ratio_plus']:.3f} at theta* + w/2 v and x{g['ratio_minus']:.3f} at "
         f"theta* - w/2 v ({g['draws']} steps of 72 samples each), measured before any run.", "",
         "| runs | Brier new | Brier old (all directions) | Brier eta* only | agreement far: new | old | eta* only |",
         "|---|---|---|---|---|---|---|"]
    for name, b in [("all", res["all"])] + [(f"{k} samples", v) for k, v in res["by_samples"].items()]:
        L.append(f"| {name} ({b['n']}) | {b['brier_new']:.4f} | {b['brier_old']:.4f} | {b['brier_star']:.4f} | "
                 f"{f(b['agreement_far_new'])} ({b['n_far_new']}) | {f(b['agreement_far_old'])} ({b['n_far_old']}) | "
                 f"{f(b['agreement_far_star'])} ({b['n_far_star']}) |")
    L += ["", "Momentum-0.9 cells at 72 samples per step: smallest agreement outside +-25% of the onset: new "
          f"{f(res['momentum_72_min_agreement_new'])}, old {f(res['momentum_72_min_agreement_old'])}, eta* only "
          f"{f(res['momentum_72_min_agreement_star'])}; cells at >= 80%: new {res['momentum_72_cells_at_least_80_new']}, "
          f"old {res['momentum_72_cells_at_least_80_old']}, eta* only {res['momentum_72_cells_at_least_80_star']} "
          f"of {len(res['momentum_72'])}.", "",
          "## Per cell (rule/optimizer/K_ref/groups per prompt)", "",
          "| cell | onset new / eta* | onset old / eta* | runs | unstable | Brier new | old | eta* | agree far new | old | eta* |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    on = {f"{o['rule']}/{o['optimizer']}/{o['k_ref']}/{o['repeats']}": o for o in pred["onsets"]}
    for k, c in res["cells"].items():
        L.append(f"| {k} | {on[k]['onset_rel']:.3g} | {on[k]['old_onset_rel']:.3g} | {c['n']} | {c['unstable']} | "
                 f"{c['brier_new']:.3f} | {c['brier_old']:.3f} | {c['brier_star']:.3f} | {f(c['agreement_far_new'])} | "
                 f"{f(c['agreement_far_old'])} | {f(c['agreement_far_star'])} |")
    (out / f"{NAME}.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="(no quick version)")
    ap.add_argument("--stage", choices=("all", "predict", "run", "score"), default="all",
                    help="predict: write predictions.json and stop; run: run against an existing predictions.json; "
                         "score: score the runs.json of an earlier run again")
    args = parse_args(ap, argv)
    out = args.out
    t0 = time.perf_counter()
    load0 = load_average()
    if args.stage in ("run", "score"):
        pred = json.loads((out / "predictions.json").read_text())
    else:
        pred = predict(out)
        print(f"wrote {out / 'predictions.json'}")
        if args.stage == "predict":
            return 0
    if args.stage == "score":  # the runs already made, scored again
        saved = json.loads((out / "runs.json").read_text())
        measured, walls = saved["runs"], saved["program_wall_s"]
    else:
        measured, walls = run(pred)
        (out / "runs.json").write_text(json.dumps(dict(runs=measured, program_wall_s=walls), indent=0))
    res = score(pred, measured)
    total_s = time.perf_counter() - t0
    cmd = f"python experiments/{NAME}.py" + (f" --stage {args.stage}" if args.stage != "all" else "")
    a = res["all"]
    f = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    claims = [
        Claim("With the noise's growth away from the plateau (measured from the noise alone), the escape model's "
              "Brier score on held-out cells and new seeds is below the old model's and at least 30% below the "
              "eta*-only rule's",
              f"Brier {a['brier_new']:.4f} (old model {a['brier_old']:.4f}, eta*-only {a['brier_star']:.4f}) over "
              f"{a['n']} runs", "confirmed" if a["brier_new"] < a["brier_old"] and a["brier_new"] <= 0.7 * a["brier_star"]
              else ("partial" if a["brier_new"] < a["brier_old"] else "refuted")),
        Claim("Outside +-25% of the predicted onset the regime agrees in >= 90% of the held-out runs and in >= 80% in "
              "every momentum-0.9 cell at 72 samples per step",
              f"{f(a['agreement_far_new'])} of {a['n_far_new']} runs (old {f(a['agreement_far_old'])}, eta*-only "
              f"{f(a['agreement_far_star'])}); momentum-0.9 cells at 72 samples: smallest "
              f"{f(res['momentum_72_min_agreement_new'])} (old {f(res['momentum_72_min_agreement_old'])})",
              "confirmed" if (a["agreement_far_new"] or 0) >= 0.9 and (res["momentum_72_min_agreement_new"] or 0) >= 0.8
              else ("partial" if (a["agreement_far_new"] or 0) > (a["agreement_far_old"] or 0) else "refuted")),
    ]
    write_summary(out, NAME, quick=False, claims=claims, figures=[], scores=res, program_wall_s=walls,
                  total_wall_s=total_s, load_before=load0, load_after=load_average(), command=cmd)
    write_markdown(out, pred, res, walls, total_s, load0, cmd)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
