"""One rollout batch per refresh period: the escape model with held noise against the transformer atlas, pre-registered.

The transformer atlas (``transformer_atlas.py``) trains every member with periodic refresh: the K_ref updates
of a period all take their gradients on the batch sampled at the refresh, so the sampling noise is one draw per
period, not one per step. Its K_ref = 4 cells escaped below the escape model's onset (which draws the noise
afresh every step). This experiment predicts those cells again with the noise held over the period
(:func:`grpojax.dynamics.escape_probability` with ``batch_reuse=True``), from the atlas's committed inputs
(K_0, K_d, σ², basin, groups per step, run length in ``../predictions.json``; θ*, the direction v and the warm
start in ``../predictions.npz``), and runs those cells again on seeds never used before.

Stages (``--stage predict`` writes ``predictions.json`` and stops; it is committed before ``--stage run``):

1. predict: per K_ref = 4 cell (difficulty 1 and 2, μ 0 and 0.9, constant lr; the cosine cell of difficulty 1)
   the onset η/η* of three rules: the per-step escape model (as the atlas), the held-noise escape model, and
   η* alone; a log grid of ``RELS`` learning rates from min(onsets)/3 to max(onsets)·3 (η/η*; the cosine cell:
   peak lr / critical peak lr), ``SEEDS`` members each, with the P(escape within T) of both escape models.
2. run: every planned run a member of the atlas's population program (one per prompt set and schedule), member
   seeds from ``SEED_OFFSET`` (the atlas used 0..511 and 10,000 + i); the atlas's regime rule unchanged.
3. score: per cell the measured onset (the atlas's logistic fit, bootstrap 95% interval over runs) against the
   three predicted onsets; Brier score and agreement outside ±25% of each rule's own onset.
"""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import transformer_atlas as ta  # noqa: E402

from grpojax._experiment import Claim, experiment_parser, load_average, parse_args, print_claims, write_summary  # noqa: E402

NAME = "transformer_atlas_batch_reuse"
ATLAS = pathlib.Path(__file__).resolve().parent / "results" / "transformer_atlas"
SEED_OFFSET = 1_000_000
RELS, SEEDS = 10, 4
RULES = ("per_step", "batch_reuse", "eta_star")


def _predictors(p, cell, steps):
    """P(escape within T) at eta (absolute; the cosine cell: peak lr) for the per-step and held-noise models."""
    from grpojax.dynamics import escape_probability, schedule_margin

    kd, k0 = p["stiffness"]["k_stale"], p["stiffness"]["k_instant"]
    kw = dict(noise=p["noise_per_group"], basin=p["basin"], samples_per_step=p["groups_per_step"])
    if cell["schedule"] == "cosine":
        def prob(eta, reuse):
            return float(schedule_margin(eta, cell["k_ref"], kd, schedule="cosine", steps=steps,
                                         warmup_steps=cell["warmup_steps"], mu=cell["mu"], lag="periodic",
                                         k_instant=k0, batch_reuse=reuse, **kw).escape_probability)
    else:
        def prob(eta, reuse):
            return float(escape_probability(eta, cell["mu"], cell["k_ref"], kd, steps=steps, lag="periodic",
                                            k_instant=k0, batch_reuse=reuse, **kw).probability)
    return prob


def _onset(prob, crit):
    """The peak lr where prob = 1/2 (bisection in log lr on [1e-4, 10] x crit; prob increases with lr)."""
    lo, hi = 1e-4 * crit, 10 * crit
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if prob(mid) >= 0.5 else (mid, hi)
    return math.sqrt(lo * hi)


def predict(out: pathlib.Path, log=print, seeds=SEEDS, seed_offset=SEED_OFFSET):
    from grpojax.dynamics import escape_onset

    atlas = json.loads((ATLAS / "predictions.json").read_text())
    steps = atlas["steps"]
    cells, runs = [], []
    for name, p in atlas["prompt_sets"].items():
        kd, k0 = p["stiffness"]["k_stale"], p["stiffness"]["k_instant"]
        for c in p["cells"]:
            if c["k_ref"] == 1:
                continue
            prob = _predictors(p, c, steps)
            crit = c["eta_star"]
            if c["schedule"] == "cosine":
                step_on = _onset(lambda e: prob(e, False), crit)
                reuse_on = _onset(lambda e: prob(e, True), crit)
            else:
                kw = dict(noise=p["noise_per_group"], basin=p["basin"], steps=steps, lag="periodic", k_instant=k0,
                          samples_per_step=p["groups_per_step"])
                step_on = float(escape_onset(c["mu"], c["k_ref"], kd, **kw))
                reuse_on = float(escape_onset(c["mu"], c["k_ref"], kd, batch_reuse=True, **kw))
            cell = dict(prompt_set=name, schedule=c["schedule"], mu=c["mu"], k_ref=c["k_ref"],
                        warmup_steps=c.get("warmup_steps", 0), eta_star=crit,
                        onset_rel=dict(per_step=step_on / crit, batch_reuse=reuse_on / crit, eta_star=1.0),
                        atlas_committed_onset_rel=c["escape_onset_rel"])
            cells.append(cell)
            log(f"{name} {c['schedule']} mu={c['mu']} K_ref={c['k_ref']}: onset/eta* per-step {step_on / crit:.4g} "
                f"(atlas {c['escape_onset_rel']:.4g}), batch reuse {reuse_on / crit:.4g}")
            on = [step_on / crit, reuse_on / crit]
            for rel in np.geomspace(min(on) / 3, max(on) * 3, RELS):
                eta = float(rel * crit)
                pr = dict(per_step=prob(eta, False), batch_reuse=prob(eta, True), eta_star=float(rel >= 1))
                for sd in range(seeds):
                    runs.append(dict(prompt_set=name, schedule=c["schedule"], mu=c["mu"], k_ref=c["k_ref"],
                                     eta_rel=float(rel), eta=eta, eta_star=crit, seed=int(sd), p_escape=pr))
    pred = dict(experiment=NAME, commit=ta.atlas.git_head(), written_before_runs=True, steps=steps,
                seed_offset=seed_offset, rels_per_cell=RELS, seeds_per_rel=seeds, cells=cells, runs=runs,
                inputs="K_0, K_d, noise per group, basin, groups per step from the atlas's committed predictions.json",
                regime_rule=atlas["regime_rule"],
                criterion=("Pre-registered comparison: per cell, the measured onset (logistic fit, bootstrap 95% "
                           "interval) against each rule's onset; the held-noise model is better if its onset lies "
                           "within +-25% of the measured one (or inside its interval) in more cells than the per-step "
                           "model's, and its Brier score over all runs is lower."))
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    log(f"{len(runs)} planned runs written to {out / 'predictions.json'}")
    return pred


def run(pred, out: pathlib.Path, log=print):
    atlas, arrays = ta.committed(ATLAS)
    runs = [dict(r) for r in pred["runs"]]
    walls = {}
    for name in atlas["prompt_sets"]:
        for sch in ("constant", "cosine"):
            sel = [r for r in runs if r["prompt_set"] == name and r["schedule"] == sch]
            if sel:
                walls[f"{name}/{sch}"] = ta.run_population(atlas, arrays, name, sel, sch, log,
                                                           seed_offset=pred["seed_offset"])
                for i, r in enumerate(sel):
                    r["member_seed"] = pred["seed_offset"] + i
    return runs, walls


def score(pred, runs):
    def rules_scores(rs, onsets):
        y = np.array([r["escaped"] for r in rs], float)
        rel = np.array([r["eta_rel"] for r in rs])
        res = {}
        for k in RULES:
            p = np.array([r["p_escape"][k] for r in rs])
            o = np.array([onsets(r)[k] for r in rs])
            far = np.abs(np.log(rel / o)) > np.log(1.25)
            res[k] = dict(brier=float(np.mean((p - y) ** 2)),
                          agreement=float(np.mean((p[far] >= 0.5) == y[far])) if far.any() else math.nan,
                          n_far=int(far.sum()))
        return res

    key = lambda r: (r["prompt_set"], r["schedule"], r["mu"], r["k_ref"])  # noqa: E731
    cells = {key(c): c for c in pred["cells"]}
    table = []
    for k, c in cells.items():
        rs = [r for r in runs if key(r) == k]
        rel = np.array([r["eta_rel"] for r in rs])
        y = np.array([r["escaped"] for r in rs], bool)
        onset, lo, hi = ta.logistic_onset(np.log(rel), y, n_boot=1000)
        row = dict(prompt_set=k[0], schedule=k[1], mu=k[2], k_ref=k[3], n=len(rs), escaped=int(y.sum()),
                   diverged=int(sum(r["diverged"] for r in rs)), measured_onset_rel=onset, ci=[lo, hi],
                   predicted_onset_rel=c["onset_rel"], scores=rules_scores(rs, lambda r, c=c: c["onset_rel"]))
        row["within_25pct"] = {r_: bool(abs(math.log(max(onset, 1e-300) / o)) <= math.log(1.25))
                               for r_, o in c["onset_rel"].items()}
        row["inside_ci"] = {r_: bool(lo <= o <= hi) for r_, o in c["onset_rel"].items()}
        row["measured_over_predicted"] = {r_: onset / o for r_, o in c["onset_rel"].items()}
        table.append(row)
    overall = rules_scores(runs, lambda r: cells[key(r)]["onset_rel"])
    return table, overall


def write_markdown(out, pred, table, overall, walls, total_s, load0, load1, committed):
    L = ["# One batch per refresh period: the held-noise escape model on the transformer atlas's K_ref = 4 cells", "",
         "Command: `python experiments/transformer_atlas_batch_reuse.py --out experiments/results/transformer_atlas/"
         f"batch_reuse{'' if out.name == 'batch_reuse' else '/' + out.name}` "
         f"(`--stage predict`, committed in {committed}, then `--stage run`). Inputs: the atlas's committed K_0, K_d, "
         f"noise, basin (`../predictions.json`, `../predictions.npz`); {pred['rels_per_cell']} learning rates x "
         f"{pred['seeds_per_rel']} seeds per cell, member seeds from {pred['seed_offset']} (never run before). Run stage "
         f"{total_s:.0f} s wall; load before: {load0}; after: {load1}. Populations: " + "; ".join(
             f"{k}: {v['n']} members, {v['wall_s']:.0f} s wall, {v['cpu_s']:.0f} s CPU" for k, v in walls.items()) + ".",
         "", "Onsets as eta/eta* (cosine: peak lr / critical peak lr). Measured: the atlas's logistic fit of P(escaped) "
         "in log eta, 95% bootstrap interval over runs (1,000 resamples).", "",
         "| prompt set | schedule | mu | K_ref | runs | escaped | measured onset [95% CI] | per-step model | held-noise model "
         "| measured / per-step | measured / held-noise | Brier per-step / held-noise / eta*-only | agreement per-step / "
         "held-noise / eta*-only |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        s, o = t["scores"], t["predicted_onset_rel"]
        L.append(f"| {t['prompt_set']} | {t['schedule']} | {t['mu']} | {t['k_ref']} | {t['n']} | {t['escaped']} | "
                 f"{t['measured_onset_rel']:.3g} [{t['ci'][0]:.3g}, {t['ci'][1]:.3g}] | {o['per_step']:.3g} | "
                 f"{o['batch_reuse']:.3g} | {t['measured_over_predicted']['per_step']:.2f} | "
                 f"{t['measured_over_predicted']['batch_reuse']:.2f} | " + " / ".join(
                     f"{s[k]['brier']:.3f}" for k in RULES) + " | " + " / ".join(
                     f"{s[k]['agreement']:.2f} ({s[k]['n_far']})" for k in RULES) + " |")
    L += ["", "All runs: Brier " + ", ".join(f"{k} {overall[k]['brier']:.3f}" for k in RULES) +
          "; agreement outside +-25% of the rule's own onset " +
          ", ".join(f"{k} {overall[k]['agreement']:.1%} of {overall[k]['n_far']}" for k in RULES) + ".", "",
          "Cells whose measured onset is within +-25% of the predicted one: " + ", ".join(
              f"{k} {sum(t['within_25pct'][k] for t in table)} of {len(table)}" for k in ("per_step", "batch_reuse"))
          + "; predicted onset inside the measured 95% interval: " + ", ".join(
              f"{k} {sum(t['inside_ci'][k] for t in table)} of {len(table)}" for k in ("per_step", "batch_reuse"))
          + ".", "", "Note: the learning-rate grid spans the two escape models' onsets (min/3 to max x 3), below "
          "eta* in every cell, so the eta*-only rule predicts no escape at any planned run here.", "",
          "## Pre-registered criterion", "", pred["criterion"], "", "## Regime rule (the atlas's, unchanged)", "",
          pred["regime_rule"], "", "(Its last sentence is the atlas's own grid; this experiment's grid is stated "
          "above.)", ""]
    (out / "batch_reuse.md").write_text("\n".join(L))


def pool(out: pathlib.Path) -> int:
    """Score every run of ``out/runs.json`` and ``out/*/runs.json`` together (the same cells and onsets)."""
    pred = json.loads((out / "predictions.json").read_text())
    files = [out / "runs.json"] + sorted(out.glob("*/runs.json"))
    runs = [r for f in files for r in json.loads(f.read_text())]
    table, overall = score(pred, runs)
    (out / "pooled.json").write_text(json.dumps(dict(files=[f.relative_to(out).as_posix() for f in files],
                                                     n=len(runs), cells=table, scores=overall), indent=1))
    L = [f"# Pooled: {len(runs)} runs ({', '.join(f.relative_to(out).as_posix() for f in files)})", "",
         "| prompt set | schedule | mu | runs | measured onset [95% CI] | per-step | held-noise | measured / per-step | "
         "measured / held-noise | Brier per-step / held-noise / eta*-only |", "|---|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        o, m = t["predicted_onset_rel"], t["measured_over_predicted"]
        L.append(f"| {t['prompt_set']} | {t['schedule']} | {t['mu']} | {t['n']} | {t['measured_onset_rel']:.3g} "
                 f"[{t['ci'][0]:.3g}, {t['ci'][1]:.3g}] | {o['per_step']:.3g} | {o['batch_reuse']:.3g} | "
                 f"{m['per_step']:.2f} | {m['batch_reuse']:.2f} | "
                 + " / ".join(f"{t['scores'][k]['brier']:.3f}" for k in RULES) + " |")
    L += ["", "All runs: Brier " + ", ".join(f"{k} {overall[k]['brier']:.3f}" for k in RULES) + "; agreement "
          "outside +-25% of the rule's own onset " + ", ".join(
              f"{k} {overall[k]['agreement']:.1%} of {overall[k]['n_far']}" for k in RULES) + ".", ""]
    (out / "pooled.md").write_text("\n".join(L))
    print("\n".join(L))
    return 0


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="(no quick mode: the full plan is 200 runs)")
    ap.add_argument("--stage", choices=("predict", "run", "pool"), default="predict",
                    help="predict: write predictions.json and stop; run: run and score against the committed ones; "
                         "pool: score the runs of --out and of its subfolders (replicates) together")
    ap.add_argument("--seeds", type=int, default=SEEDS, help=f"predict stage: seeds per learning rate (default {SEEDS})")
    ap.add_argument("--seed-offset", type=int, default=SEED_OFFSET,
                    help=f"predict stage: the first member seed (default {SEED_OFFSET}; a replicate takes another)")
    args = parse_args(ap, argv)
    out = args.out
    if args.seeds < 1 or args.seed_offset < 20_000:
        ap.error(f"--seeds must be >= 1 and --seed-offset >= 20000 (seeds below were run by the atlas), got "
                 f"{args.seeds} and {args.seed_offset}")
    if args.stage == "predict":
        predict(out, seeds=args.seeds, seed_offset=args.seed_offset)
        return 0
    if args.stage == "pool":
        return pool(out)
    pred = json.loads((out / "predictions.json").read_text())
    t0, load0 = time.perf_counter(), load_average()
    runs, walls = run(pred, out)
    total_s, load1 = time.perf_counter() - t0, load_average()
    table, overall = score(pred, runs)
    try:
        committed = subprocess.run(["git", "log", "--diff-filter=A", "--format=%h", "-1", "--", "predictions.json"],
                                   capture_output=True, text=True, cwd=out).stdout.strip() or "not committed"
    except OSError:
        committed = "not committed"
    n_new = sum(t["within_25pct"]["batch_reuse"] for t in table)
    n_old = sum(t["within_25pct"]["per_step"] for t in table)
    claims = [Claim(
        "With the sampling noise held over the refresh period (one batch for the K_ref updates), the escape model "
        "predicts the measured onset of the transformer's K_ref = 4 cells (new seeds) better than with a fresh draw "
        "every step",
        f"onset within +-25%: held noise {n_new} of {len(table)} cells, per step {n_old}; Brier "
        f"{overall['batch_reuse']['brier']:.3f} vs {overall['per_step']['brier']:.3f}",
        "confirmed" if n_new > n_old and overall["batch_reuse"]["brier"] < overall["per_step"]["brier"] else
        ("partial" if overall["batch_reuse"]["brier"] < overall["per_step"]["brier"] else "refuted"))]
    write_summary(out, NAME, quick=False, claims=claims, figures=[], cells=table, scores=overall, populations=walls,
                  total_wall_s=total_s, load_before=load0, load_after=load1, predictions_commit=committed)
    (out / "runs.json").write_text(json.dumps(runs, indent=0))
    write_markdown(out, pred, table, overall, walls, total_s, load0, load1, committed)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
