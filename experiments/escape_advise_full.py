"""Would an escape cap from the whole-displacement model with noise growth keep the escape level? Pre-registered.

``advise`` caps the learning rate at η05, the largest η whose P(escape within the planned run) is at most the
level L = 0.05 (and keeps a margin of 0.2 from η*). With the one-direction escape model that cap lets runs of
the policy network's atlas escape far more often than L (``escape_advise_check``: 52 of 90 cells over L, also
with noise growth). The whole-displacement model with noise that grows with the state
(``escape_whole_displacement --growth``) predicted the measured regimes of 960 new runs (98.3% agreement);
its η05 per cell was committed with its predictions before those runs. This experiment asks the advisor's
question of that model on new seeds: at the advised η = min(η05, (1 − 0.2) η*) of each of its 24 cells, how
many runs leave?

Stages (``--stage predict`` writes ``predictions.json`` and stops; it is committed before ``--stage run``):

1. predict: the advised η per cell from the committed growth predictions
   (``results/escape_whole_displacement_growth/predictions.json``: ``onset05_rel``), the binding cap (escape or
   margin), the model's P(escape) there (0.05 where escape binds), seeds ``SEEDS`` (never run before: earlier
   runs used 0-3, 10-17, 100-169, 300-315);
2. run: every cell x seed at its advised η, 400 steps, the atlas's own program and regime rule
   (``escape_advise_check.run_members``); unstable = not stable.

Scores, fixed before the runs: per cell the measured rate with its 95% Clopper-Pearson interval; cells whose
rate is over L, and cells whose interval's lower end is over L (the count the advisor's check reports); the
same counts of the one-direction growth check (``escape_advise_check/growth``) on the same 24 cells, for
comparison (its own advised η and seeds).

Usage::

    python experiments/escape_advise_full.py --stage predict|run --out experiments/results/escape_advise_full

The model is not in ``advise``: it needs the network's full K_0, K_d, step-noise covariance, Fisher metric and
noise growth, which only a small network gives.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import escape_advise_check as eac  # noqa: E402
import escape_validation as ev  # noqa: E402
import network_stability_atlas as atlas  # noqa: E402

from grpojax._defaults import ADVICE_MARGIN, ESCAPE_LEVEL  # noqa: E402
from grpojax._experiment import committed_predictions, experiment_parser, load_average, parse_args  # noqa: E402

NAME = "escape_advise_full"
RESULTS = pathlib.Path(__file__).resolve().parent / "results"
GROWTH_PREDICTIONS = RESULTS / "escape_whole_displacement_growth" / "predictions.json"
ONE_DIRECTION_CHECK = RESULTS / "escape_advise_check" / "growth" / "summary.json"
SEEDS = tuple(range(400, 440))  # 40 seeds never run before
STEPS = 400


def _cell(r) -> tuple:
    return r["rule"], r["optimizer"], int(r["k_ref"]), int(r["repeats"])


def _name(c) -> str:
    return "/".join(str(x) for x in c)


def predict(out: pathlib.Path, log=print) -> dict:
    g = json.loads(GROWTH_PREDICTIONS.read_text())
    cap = 1.0 - ADVICE_MARGIN
    cells = []
    for o in g["onsets"]:
        rel05 = float(o["onset05_rel"])
        rel = min(rel05, cap)
        cells.append(dict(rule=o["rule"], optimizer=o["optimizer"], mu=o["mu"], k_ref=o["k_ref"], repeats=o["repeats"],
                          samples_per_step=o["samples_per_step"], eta_exact=o["eta_exact"], eta05_rel=rel05,
                          advised_rel=rel, eta=rel * float(o["eta_exact"]),
                          binding="escape" if rel05 <= cap else "margin"))
        log(f"{_name(_cell(cells[-1]))}: eta05 {rel05:.3g} eta*, advised {rel:.3g} eta* ({cells[-1]['binding']})")
    pred = dict(experiment=NAME, quick=False, written_before_runs=True, git_head=atlas.git_head(), steps=STEPS, seeds=list(SEEDS),
                level=ESCAPE_LEVEL, margin=ADVICE_MARGIN, source=str(GROWTH_PREDICTIONS.relative_to(RESULTS.parent)),
                growth_c=g.get("growth_c"), cells=cells,
                rule=("advised eta = min(eta05, (1 - margin) eta*), eta05 the whole-displacement growth model's (P(escape "
                      "within 400 steps) = level); measured: the fraction of runs the atlas's regime rule does not call "
                      "stable; over the level: that fraction > level; also counted: the 95% Clopper-Pearson lower bound "
                      "> level"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    return pred


def run(pred, log=print):
    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    rows, wall = [], 0.0
    for R in sorted({c["repeats"] for c in pred["cells"]}):
        members = []
        for c in (c for c in pred["cells"] if c["repeats"] == R):
            for sd in pred["seeds"]:
                members.append(dict(c, seed=sd, key=1000 * len(members) + sd))  # streams no earlier run used
        regimes, w = eac.run_members(members, ctx, apred, R, pred["steps"], log=log)
        wall += w
        rows += [dict(cell=_name(_cell(m)), seed=m["seed"], measured=g, unstable=g != "stable")
                 for m, g in zip(members, regimes)]
    return rows, wall


def score(pred, rows) -> dict:
    L = pred["level"]
    one = {}
    if ONE_DIRECTION_CHECK.is_file():
        for c in json.loads(ONE_DIRECTION_CHECK.read_text())["cells"]:
            m = c.get("measured_advised") or {}
            if m.get("n"):
                one[_name(_cell(c))] = (m["unstable"], m["n"], c["eta_advised"] / c["eta_exact_multi"])
    cells = []
    for c in pred["cells"]:
        name = _name(_cell(c))
        rs = [r for r in rows if r["cell"] == name]
        k, n = sum(r["unstable"] for r in rs), len(rs)
        lo, hi = eac.binom_ci(k, n)
        o = one.get(name)
        cells.append(dict(cell=name, mu=c["mu"], samples=c["samples_per_step"], advised_rel=c["advised_rel"],
                          binding=c["binding"], unstable=k, n=n, rate=k / n, lo=lo, hi=hi, over=k / n > L, lower_over=lo > L,
                          one_direction=None if o is None else dict(unstable=o[0], n=o[1], advised_rel=o[2],
                                                                    rate=o[0] / o[1], lower_over=eac.binom_ci(*o[:2])[0] > L)))
    with_one = [c for c in cells if c["one_direction"] is not None]
    return dict(cells=cells, over=sum(c["over"] for c in cells), lower_over=sum(c["lower_over"] for c in cells),
                n_cells=len(cells), pooled=sum(c["unstable"] for c in cells) / max(sum(c["n"] for c in cells), 1),
                one_direction=dict(cells=len(with_one), over=sum(c["one_direction"]["rate"] > L for c in with_one),
                                   lower_over=sum(c["one_direction"]["lower_over"] for c in with_one)))


def measured_cell(c: dict) -> str:
    """A scored cell's measured rate with its 95% interval, marked ``over`` (rate above the level) or ``**over**``
    (the interval's lower end above it)."""
    flag = " **over**" if c["lower_over"] else (" over" if c["over"] else "")
    return f"{c['unstable']}/{c['n']} = {c['rate']:.2f} [{c['lo']:.2f}, {c['hi']:.2f}]{flag}"


def write_markdown(out, pred, sc, wall, total, load0, load1, cmd):
    L = pred["level"]
    lines = ["# An escape cap from the whole-displacement model with noise growth, tested on new seeds", "",
             f"Command: `{cmd}`; {len(pred['cells'])} cells x {len(pred['seeds'])} new seeds (seeds {pred['seeds'][0]}-"
             f"{pred['seeds'][-1]}) x {pred['steps']} steps at the advised eta; vmapped programs {wall:.0f} s, whole "
             f"stage {total:.0f} s. Load: {load0} (before), {load1} (after). Advised rates: `predictions.json`, "
             f"committed before these runs, from the growth model's eta05 committed with its own predictions.", "",
             f"Rule: {pred['rule']}. Level L = {L:g}, margin {pred['margin']:g}.", "",
             "| | cells | cells with measured rate > L | cells with lower 95% bound > L | pooled rate |",
             "|---|---|---|---|---|",
             f"| whole displacement, noise growth (this cap) | {sc['n_cells']} | {sc['over']} | {sc['lower_over']} | "
             f"{sc['pooled']:.3f} |",
             f"| one direction, noise growth (`escape_advise_check/growth`, same cells) | {sc['one_direction']['cells']} | "
             f"{sc['one_direction']['over']} | {sc['one_direction']['lower_over']} | - |", "",
             "| cell (rule/optimizer/K_ref/groups per prompt) | samples | advised / eta* | binding | measured [95%] | "
             "one direction: advised / eta*, measured |", "|---|---|---|---|---|---|"]
    for c in sc["cells"]:
        o = c["one_direction"]
        od = "-" if o is None else f"{o['advised_rel']:.3g}, {o['unstable']}/{o['n']} = {o['rate']:.2f}"
        lines.append(f"| {c['cell']} | {c['samples']} | {c['advised_rel']:.3g} | {c['binding']} | "
                     f"{measured_cell(c)} | {od} |")
    (out / f"{NAME}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="(not used: the experiment is small)")
    ap.add_argument("--stage", choices=("predict", "run"), required=True)
    args = parse_args(ap, argv)
    out = pathlib.Path(args.out)
    if args.stage == "predict":
        predict(out)
        return 0
    pred = committed_predictions(out, False)
    load0, t0 = load_average(), time.perf_counter()
    rows, wall = run(pred)
    sc = score(pred, rows)
    total = time.perf_counter() - t0
    (out / "runs.json").write_text(json.dumps(rows, indent=1))
    (out / "summary.json").write_text(json.dumps(dict(scores=sc, program_wall_s=wall, total_wall_s=total,
                                                      load_before=load0, load_after=load_average()), indent=1))
    write_markdown(out, pred, sc, wall, total, load0, load_average(),
                   f"python experiments/{NAME}.py --stage run --out experiments/results/{NAME}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
