"""An escape cap from the exact first passage of the whole-displacement model with noise growth. Pre-registered.

At the advised η = min(η05, (1 − 0.2) η*), η05 from the whole-displacement model with noise growth as committed
(its exits counted from the Gaussian of the exact moments, as a Poisson process), 40 new seeds per cell left more
often than the level L = 0.05 in 17 of its 24 cells (``escape_advise_full``). Two approximations sit between
that model and its own recurrence: the Gaussian law (with noise that grows with the state the law is a scale
mixture with heavier tails) and the Poisson count of exits. This experiment removes both: η05 is where the
first passage of the same recurrence, simulated path by path with each path's noise drawn at its own state
(``grpojax.dynamics._escape_full.escape_simulated``), reaches L, and it asks the advisor's question again on new
seeds.

The model is the committed one, rebuilt the same way (``escape_whole_displacement --growth``): the step-noise
covariance measured at θ* (the same key and draws), the invariant subspace of the dense K_0, K_d per rule, the
policy's Fisher metric, the growth c committed with its predictions, the basin TV ≤ 0.15 on the real network.

Stages (``--stage predict`` writes ``predictions.json`` and stops; it is committed before ``--stage run``):

1. predict: per cell, P_sim(η) from ``PATHS`` simulated paths of ``STEPS`` steps (common random numbers across η);
   start at min(committed Gaussian-moment η05, 0.8 η*), step by a factor 1.5 until P_sim brackets L, then
   ``ROUNDS`` bisections in log η; η05_exact is the bracket's lower end (the largest rate evaluated with
   P_sim < L); if P_sim(0.8 η*) < L the margin binds. Also recorded: P_sim at the committed Gaussian-moment η05.
2. run: every cell x seed (``SEEDS``, never run before: earlier runs used 0-3, 10-17, 100-169, 300-315, 400-439)
   at its advised η, 400 steps, the atlas's program and regime rule (``escape_advise_full.run``).

Scores, fixed before the runs (``escape_advise_full.score``): per cell the measured rate with its 95%
Clopper-Pearson interval; cells over L, cells whose lower bound is over L, the pooled rate; beside them the
Gaussian-moment cap's counts (``escape_advise_full/summary.json``, seeds 400-439).

Usage::

    python experiments/escape_advise_exact.py --stage predict|run --out experiments/results/escape_advise_exact
"""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import escape_advise_full as eaf  # noqa: E402
import escape_validation as ev  # noqa: E402
import escape_whole_displacement as ewd  # noqa: E402
import network_stability_atlas as atlas  # noqa: E402

from grpojax._defaults import ADVICE_MARGIN, ESCAPE_LEVEL  # noqa: E402
from grpojax._experiment import committed_predictions, experiment_parser, load_average, parse_args  # noqa: E402

NAME = "escape_advise_exact"
RESULTS = pathlib.Path(__file__).resolve().parent / "results"
GAUSSIAN_CHECK = RESULTS / "escape_advise_full" / "summary.json"
SEEDS = tuple(range(440, 480))  # 40 seeds never run before
STEPS = 400
PATHS = 3000  # simulated paths per rate: s.e. of P about 0.004 at P = 0.05
SIM_SEED = 0
STEP = 1.5  # factor per bracketing step
ROUNDS = 5  # bisections in log eta inside a factor 1.5: the bracket ends within 1.3%
LOWEST = 1e-3  # eta / eta* below which the search stops (P_sim >= L there: eta05 reported as 0)


def exact_eta05(p_of, start: float, cap: float, level: float):
    """η05/η* of a (nearly) increasing P: the largest evaluated rate with P < level after bracketing and
    bisection, or None where P(cap) < level (the margin binds). Returns (eta05 or None, evaluations)."""
    evals = {}

    def p(rel):
        if rel not in evals:
            evals[rel] = p_of(rel)
        return evals[rel]

    r = min(start, cap)
    if p(r) >= level:
        hi = r
        lo = r / STEP
        while p(lo) >= level:
            hi, lo = lo, lo / STEP
            if lo < LOWEST:
                return 0.0, evals
    else:
        if r >= cap:
            return None, evals
        lo, hi = r, min(r * STEP, cap)
        while p(hi) < level:
            if hi >= cap:
                return None, evals
            lo, hi = hi, min(hi * STEP, cap)
    for _ in range(ROUNDS):
        mid = math.exp(0.5 * (math.log(lo) + math.log(hi)))
        lo, hi = (lo, mid) if p(mid) >= level else (mid, hi)
    return lo, evals


def predict(out: pathlib.Path, log=print, only=None) -> dict:
    from grpojax.dynamics._escape_full import escape_simulated

    t0 = time.perf_counter()
    g = json.loads(eaf.GROWTH_PREDICTIONS.read_text())
    c_full, metric = float(g["growth"]["c"]), g["growth"]["metric"]
    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    C = ewd.measure_noise(ctx, log)
    F = ewd.fisher_metric(ctx) if metric == "fisher" else None
    onsets = [o for o in g["onsets"] if only is None or eaf._name(eaf._cell(o)) in only]
    reds, nets = {}, {}
    for rule in sorted({o["rule"] for o in onsets}):
        red = ewd.reduce_rule(ctx, rule, C)
        red["M"] = red["U"].T @ F @ red["U"] if F is not None else np.eye(red["U"].shape[1])
        reds[rule], nets[rule] = red, ewd.Network(ctx, red["U"])
    cap, L = 1.0 - ADVICE_MARGIN, ESCAPE_LEVEL
    cells = []
    for o in onsets:
        t1 = time.perf_counter()
        red, net, es = reds[o["rule"]], nets[o["rule"]], float(o["eta_exact"])

        def p_of(rel, o=o, red=red, net=net, es=es):
            return escape_simulated(red["k0"], red["kd"], red["C"] / o["repeats"], rel * es, o["mu"], o["k_ref"],
                                    STEPS, net.outside_or_overflow, paths=PATHS, seed=SIM_SEED,
                                    noise_growth=c_full, growth_metric=red["M"]).probability

        gauss05 = float(o["onset05_rel"])
        p_gauss05 = p_of(gauss05)
        e05, evals = exact_eta05(p_of, gauss05, cap, L)
        evals.setdefault(gauss05, p_gauss05)
        rel = cap if e05 is None else min(e05, cap)
        cells.append(dict(rule=o["rule"], optimizer=o["optimizer"], mu=o["mu"], k_ref=o["k_ref"], repeats=o["repeats"],
                          samples_per_step=o["samples_per_step"], eta_exact=o["eta_exact"], eta05_rel=e05,
                          eta05_gaussian_rel=gauss05, p_exact_at_gaussian_eta05=p_gauss05, advised_rel=rel,
                          eta=rel * float(o["eta_exact"]), binding="escape" if e05 is not None and e05 <= cap else "margin",
                          p_exact_at_advised=evals.get(rel), evaluations={f"{k:.6g}": v for k, v in sorted(evals.items())},
                          seconds=time.perf_counter() - t1))
        x = cells[-1]
        log(f"{eaf._name(eaf._cell(x))}: P_exact at the Gaussian eta05 ({gauss05:.3g} eta*) {p_gauss05:.4f}; exact eta05 "
            f"{'> cap' if e05 is None else f'{e05:.3g}'} eta*, advised {rel:.3g} ({x['binding']}); {len(evals)} "
            f"evaluations, {x['seconds']:.0f} s")
    pred = dict(experiment=NAME, quick=False, written_before_runs=True, git_head=atlas.git_head(), steps=STEPS,
                seeds=list(SEEDS), level=L, margin=ADVICE_MARGIN, paths=PATHS, sim_seed=SIM_SEED, growth_c=c_full,
                growth_metric=metric, source=str(eaf.GROWTH_PREDICTIONS.relative_to(RESULTS.parent)), cells=cells,
                model=("the whole-displacement model with noise growth as committed (invariant subspace of the dense K_0, "
                       "K_d at theta*, step noise Sigma_72 / R measured at theta*, growth 1 + c e^T M e with M the policy's "
                       f"{metric} metric, c = {c_full:.4g}, basin TV <= 0.15 on the real network), its first passage "
                       f"within {STEPS} steps simulated path by path ({PATHS} paths, each path's noise drawn at its own "
                       "state; grpojax.dynamics._escape_full.escape_simulated): no Gaussian law, no Poisson count"),
                rule=("advised eta = min(eta05_exact, (1 - margin) eta*), eta05_exact the largest evaluated rate with "
                      "simulated P(escape within 400 steps) < level after bracketing and bisection; measured: the "
                      "fraction of runs the atlas's regime rule does not call stable; over the level: that fraction > "
                      "level; also counted: the 95% Clopper-Pearson lower bound > level"),
                seconds=time.perf_counter() - t0)
    out.mkdir(parents=True, exist_ok=True)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    return pred


def gaussian_counts():
    """The Gaussian-moment cap's counts on the same cells (seeds 400-439), per cell and in all."""
    if not GAUSSIAN_CHECK.is_file():
        return None
    s = json.loads(GAUSSIAN_CHECK.read_text())["scores"]
    return dict(over=s["over"], lower_over=s["lower_over"], n_cells=s["n_cells"], pooled=s["pooled"],
                cells={c["cell"]: c for c in s["cells"]})


def write_markdown(out, pred, sc, gauss, wall, total, load0, load1, cmd):
    L = pred["level"]
    lines = ["# An escape cap from the exact first passage of the whole-displacement model, tested on new seeds", "",
             f"Command: `{cmd}`; {len(pred['cells'])} cells x {len(pred['seeds'])} new seeds (seeds {pred['seeds'][0]}-"
             f"{pred['seeds'][-1]}) x {pred['steps']} steps at the advised eta; vmapped programs {wall:.0f} s, whole "
             f"stage {total:.0f} s. Load: {load0} (before), {load1} (after). Advised rates: `predictions.json`, "
             "committed before these runs.", "", f"Model: {pred['model']}.", "",
             f"Rule: {pred['rule']}. Level L = {L:g}, margin {pred['margin']:g}.", "",
             "| cap | cells | cells with measured rate > L | cells with lower 95% bound > L | pooled rate |",
             "|---|---|---|---|---|",
             f"| exact first passage (this cap; seeds {pred['seeds'][0]}-{pred['seeds'][-1]}) | {sc['n_cells']} | "
             f"{sc['over']} | {sc['lower_over']} | {sc['pooled']:.3f} |"]
    if gauss:
        lines.append(f"| Gaussian moments, Poisson count (`escape_advise_full`, seeds 400-439) | {gauss['n_cells']} | "
                     f"{gauss['over']} | {gauss['lower_over']} | {gauss['pooled']:.3f} |")
    lines += ["", "| cell (rule/optimizer/K_ref/groups per prompt) | samples | exact eta05 / eta* | advised / eta* | "
              "binding | measured [95%] | Gaussian cap: advised / eta*, measured | exact P at the Gaussian eta05 |",
              "|---|---|---|---|---|---|---|---|"]
    pc = {eaf._name(eaf._cell(c)): c for c in pred["cells"]}
    for c in sc["cells"]:
        p = pc[c["cell"]]
        gc = (gauss or {}).get("cells", {}).get(c["cell"])
        gd = "-" if gc is None else f"{gc['advised_rel']:.3g}, {gc['unstable']}/{gc['n']} = {gc['rate']:.2f}"
        e05 = "> 0.8" if p["eta05_rel"] is None else f"{p['eta05_rel']:.3g}"
        lines.append(f"| {c['cell']} | {c['samples']} | {e05} | {c['advised_rel']:.3g} | {c['binding']} | "
                     f"{eaf.measured_cell(c)} | {gd} | {p['p_exact_at_gaussian_eta05']:.3f} |")
    (out / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="(not used: the experiment is small)")
    ap.add_argument("--stage", choices=("predict", "run"), required=True)
    ap.add_argument("--cells", nargs="*", default=None, help="predict only these cells (rule/optimizer/K_ref/groups)")
    args = parse_args(ap, argv)
    out = pathlib.Path(args.out)
    if args.stage == "predict":
        predict(out, only=args.cells)
        return 0
    pred = committed_predictions(out, False)
    load0, t0 = load_average(), time.perf_counter()
    rows, wall = eaf.run(pred)
    sc = eaf.score(pred, rows)
    gauss = gaussian_counts()
    total = time.perf_counter() - t0
    load1 = load_average()
    (out / "runs.json").write_text(json.dumps(rows, indent=1))
    (out / "summary.json").write_text(json.dumps(dict(scores=sc, gaussian_cap=gauss and {k: v for k, v in gauss.items()
                                                                                          if k != "cells"},
                                                      program_wall_s=wall, total_wall_s=total, load_before=load0,
                                                      load_after=load1), indent=1))
    write_markdown(out, pred, sc, gauss, wall, total, load0, load1,
                   f"python experiments/{NAME}.py --stage run --out experiments/results/{NAME}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
