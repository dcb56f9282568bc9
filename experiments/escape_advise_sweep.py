"""Does a measured sweep keep ``advise``'s escape level where the escape model does not?

The advisor's escape cap with noise growth (``escape_advise_check.py --noise-growth-from``) advised, on the 90
cells of the policy network's stability atlas, learning rates whose measured escape rate was above the level
(0.05) in 52 cells. ``advise --escape-sweep FILE`` adds a measured bound: a sweep of runs as long as the planned
one, at several learning rates, marked escaped or not, turned into the largest learning rate whose escape
probability is ≤ the level at 95% confidence (``grpojax.monitor.escape_sweep_bound``: runs pooled upward to
the fewest that can certify a rate, one-sided Clopper-Pearson bounds, rates tested in ascending order; the only
assumption is that P(escape) does not fall as η grows). The advised η is the smaller of the model's advice and
the certified η: a sweep can only lower the advice.

Design, fixed before any probe run:

- cells: the 90 atlas cells (rule × momentum 0 / 0.9 × K_ref 1-16 × 72 / 288 / 1,152 samples per step);
- the sweep (stage ``probe``): 15 learning rates per cell, η_adv × 1.25^k for k = 2, 1, 0, -1, ..., -12, where
  η_adv is the cell's committed advised η of the model with noise growth
  (``escape_advise_check/growth/predictions.json``); 20 new seeds per rate (700-719); 400 steps, the planned
  length; escaped = unstable by the atlas's regime rule (the label of every earlier check);
- the advice (stage ``predict``, written to ``predictions.json`` and committed before the check): per cell,
  η = min(η_adv, certified η) at level 0.05 and confidence 0.95; where no rate is certified the cell gets no
  advice and is counted as such;
- the check (stage ``run``): 30 new seeds (800-829) at each advised η; the measured escape rate with its exact
  95% interval; the counts of cells over the level and of cells whose lower 95% bound is over it.

With 20 seeds per rate a rate is certified only when the 59 or more pooled runs from it upward (3 rates) have
no escape, so the certified η sits a factor 1.25³ ≈ 1.95 below the smallest rate at which a run escaped:
the price of a bound that assumes no shape of the escape curve. A finer grid or more seeds per rate lowers it.

Stages: ``probe`` (the sweep, ``probe.json``), ``predict`` (``predictions.json`` from the committed sweep),
``run`` (the check), ``all``. ``--quick``: rule none with momentum 0.9, K_ref 1 and 4, 8 seeds per rate, 10 seeds
in the check (the same program, far from the counts a certificate needs: a test of the pipeline, not of the
level).
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import escape_advise_check as chk  # noqa: E402
import escape_validation as ev  # noqa: E402
import network_stability_atlas as atlas  # noqa: E402

from grpojax._experiment import (Claim, committed_predictions, experiment_parser, load_average, parse_args,  # noqa: E402
                                 print_claims, write_summary)
from grpojax._io import write_json  # noqa: E402
from grpojax.monitor import escape_sweep_bound  # noqa: E402

NAME = "escape_advise_sweep"
GROWTH = pathlib.Path(__file__).resolve().parent / "results" / "escape_advise_check" / "growth" / "predictions.json"
RATIO, POWERS = 1.25, tuple(range(2, -13, -1))  # the sweep's rates: eta_adv * 1.25**k, k = 2 .. -12
PROBE_SEEDS, QUICK_PROBE_SEEDS = tuple(range(700, 720)), tuple(range(700, 708))
CHECK_SEEDS, QUICK_CHECK_SEEDS = tuple(range(800, 830)), tuple(range(800, 810))
LEVEL, CONFIDENCE = 0.05, 0.95


def cells(quick: bool):
    """The model's committed advice per cell (the growth check's predictions), in the atlas's order."""
    cs = json.loads(GROWTH.read_text())["cells"]
    if quick:
        cs = [c for c in cs if c["rule"] == "none" and c["mu"] == 0.9 and c["k_ref"] in (1, 4)]
    return cs


def _members(rows, seeds, key0):
    """One member per (row, seed); the random stream 1000 * index + seed (+ ``key0``): streams no earlier run used."""
    out = []
    for r in rows:
        for sd in seeds:
            out.append({**r, "seed": sd, "key": key0 + 1000 * len(out) + sd})
    return out


def _run(rows, seeds, key0, steps, log):
    """Run every (row, seed) at its row's eta; returns the members with their regime, and the program wall times."""
    apred = json.loads(ev.ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    done, walls = [], {}
    for R in ev.REPEATS:
        members = _members([r for r in rows if r["repeats"] == R], seeds, key0)
        if not members:
            continue
        regimes, walls[R] = chk.run_members(members, ctx, apred, R, steps, log=log)
        done += [{**m, "regime": g, "escaped": g != "stable"} for m, g in zip(members, regimes)]
    return done, walls


def probe(out: pathlib.Path, quick: bool, log=print):
    """The sweep: every cell at eta_adv * RATIO**k, ``PROBE_SEEDS`` seeds each."""
    rows = [dict(cell=chk.cell_name(c), repeats=c["repeats"], rule=c["rule"], mu=c["mu"], k_ref=c["k_ref"],
                 eta=c["eta_advised"] * RATIO ** k, power=k) for c in cells(quick) for k in POWERS]
    seeds = QUICK_PROBE_SEEDS if quick else PROBE_SEEDS
    t0 = time.perf_counter()
    runs, walls = _run(rows, seeds, 0, 400, log)
    sweep = dict(experiment=NAME, quick=quick, git_head=atlas.git_head(), steps=400, ratio=RATIO, powers=list(POWERS),
                 seeds=list(seeds), label_rule=atlas.RULE_TEXT, program_wall_s=walls,
                 wall_s=time.perf_counter() - t0, load=load_average(),
                 rates=_compact(runs, seeds))
    write_json(out, "probe.json", sweep)
    return sweep


def _compact(runs, seeds):
    """One row per (cell, rate): its eta and the regime of each seed, in the order of ``seeds``."""
    rows = {}
    for m in runs:
        r = rows.setdefault((m["cell"], m["power"]), dict(cell=m["cell"], repeats=m["repeats"], power=m["power"],
                                                         eta=m["eta"], regimes={}))
        r["regimes"][m["seed"]] = m["regime"]
    return [{**r, "regimes": [r["regimes"][sd] for sd in seeds]} for r in rows.values()]


def sweep_runs(sweep, cell):
    """The (eta, escaped) pairs of one cell of a sweep: escaped = unstable by the atlas's regime rule."""
    pairs = [(r["eta"], g != "stable") for r in sweep["rates"] if r["cell"] == cell for g in r["regimes"]]
    return [e for e, _ in pairs], [x for _, x in pairs]


def predict(out: pathlib.Path, quick: bool, sweep: dict, log=print):
    """The advice per cell from the committed sweep: min(the model's advised eta, the certified eta)."""
    rows = []
    for c in cells(quick):
        name = chk.cell_name(c)
        b = escape_sweep_bound(*sweep_runs(sweep, name), level=LEVEL, confidence=CONFIDENCE)
        eta = None if b.eta is None else min(c["eta_advised"], b.eta)
        rows.append(dict(cell=name, rule=c["rule"], optimizer=c["optimizer"], mu=c["mu"], k_ref=c["k_ref"],
                         repeats=c["repeats"], eta_star=c["eta_star"], eta_model=c["eta_advised"],
                         eta_certified=b.eta, bound=b.upper, eta_advised=eta,
                         binding=None if eta is None else ("model" if eta == c["eta_advised"] else "sweep"),
                         sweep=b.to_dict()))
        log(f"{name:>22}: model {c['eta_advised'] / c['eta_star']:.3f} eta*, certified "
            + ("none" if b.eta is None else f"{b.eta / c['eta_star']:.3f} eta*"))
    pred = dict(experiment=NAME, quick=quick, written_before_runs=True, git_head=atlas.git_head(), steps=400,
                level=LEVEL, confidence=CONFIDENCE, seeds=list(QUICK_CHECK_SEEDS if quick else CHECK_SEEDS),
                advisor="min(the escape model's advised eta with noise growth, escape_sweep_bound's certified eta)",
                label_rule=atlas.RULE_TEXT, cells=rows)
    write_json(out, "predictions.json", pred)
    return pred


def run(pred, log=print):
    """The check: ``pred['seeds']`` new seeds at each advised eta; each cell gets ``measured`` (n, escaped, rate,
    95% interval)."""
    advised = [c for c in pred["cells"] if c["eta_advised"] is not None]
    runs, walls = _run([dict(cell=c["cell"], repeats=c["repeats"], rule=c["rule"], mu=c["mu"], k_ref=c["k_ref"],
                             eta=c["eta_advised"]) for c in advised], pred["seeds"], 5_000_000, pred["steps"], log)
    return score(pred, runs), walls


def score(pred, runs):
    """Per advised cell the measured escape rate at its advised eta; the counts over the level."""
    lev, out = pred["level"], []
    for c in pred["cells"]:
        if c["eta_advised"] is None:
            out.append({**c, "measured": None})
            continue
        sel = [r["escaped"] for r in runs if r["cell"] == c["cell"]]
        k, n = int(sum(sel)), len(sel)
        lo, hi = chk.binom_ci(k, n)
        out.append({**c, "measured": dict(n=n, escaped=k, rate=k / n, ci95=[lo, hi], over=k / n > lev,
                                          lower_over=lo > lev)})
    m = [c["measured"] for c in out if c["measured"] is not None]
    k, n = sum(x["escaped"] for x in m), sum(x["n"] for x in m)
    return dict(cells=out, advised=len(m), not_advised=len(out) - len(m), over=sum(x["over"] for x in m),
                lower_over=sum(x["lower_over"] for x in m), runs=n, escaped=k,
                pooled=k / n if n else float("nan"), pooled_ci95=list(chk.binom_ci(k, n)) if n else None)


def _group(sc, key):
    groups = {}
    for c in sc["cells"]:
        groups.setdefault(key(c), []).append(c)
    return groups


def _first_escape(c):
    """The smallest rate of a cell's sweep at which a run escaped (None: none did)."""
    return next((v["eta"] for v in c["sweep"]["levels"] if v["escaped"]), None)


def _cost(name, cs):
    adv = [c for c in cs if c["eta_advised"] is not None]
    r_model = [c["eta_advised"] / c["eta_model"] for c in adv]
    r_first = [c["eta_advised"] / f for c in adv if (f := _first_escape(c)) is not None]
    fmt = lambda r: f"{np.median(r):.2f} [{min(r):.2f}, {max(r):.2f}]" if r else "-"  # noqa: E731
    return (f"| {name} | {len(cs)} | {fmt(r_model)} | {fmt(r_first)} | "
            f"{sum(c['binding'] == 'sweep' for c in adv)} / {sum(c['binding'] == 'model' for c in adv)} |")


def write_markdown(out, pred, sweep, sc, walls, total_s, cmd):
    lev = pred["level"]
    L = [f"# A measured sweep under advise's escape cap: the policy network's atlas cells "
         f"({'quick' if pred['quick'] else 'full'})", "",
         f"Command: `{cmd}`. The sweep: {sum(len(r['regimes']) for r in sweep['rates'])} runs ({len(sweep['seeds'])} seeds x {len(sweep['powers'])} "
         f"rates per cell, eta_adv x {sweep['ratio']:g}^k, k = {sweep['powers'][0]} .. {sweep['powers'][-1]}), "
         f"{sweep['wall_s']:.0f} s ({sweep['load']} before). The check: {len(pred['seeds'])} new seeds per advised "
         f"cell, programs {', '.join(f'x{k}: {v:.0f} s' for k, v in walls.items())}; whole stage {total_s:.0f} s.",
         "`probe.json` (the sweep) and `predictions.json` (the advice) were committed before the check's runs.", "",
         f"Advised eta = min(the escape model's advice with noise growth, the sweep's certified eta at level {lev:g}, "
         f"confidence {pred['confidence']:g}). Escaped = unstable by the atlas's regime rule. Exact 95% binomial "
         "intervals.", "",
         "## Counts", "",
         "| | cells | advised | no rate certified | over L | lower 95% bound over L | runs | escaped | pooled rate [95%] |",
         "|---|---|---|---|---|---|---|---|---|"]

    def line(name, cs):
        m = [c["measured"] for c in cs if c["measured"] is not None]
        k, n = sum(x["escaped"] for x in m), sum(x["n"] for x in m)
        ci = chk.binom_ci(k, n) if n else (float("nan"), float("nan"))
        return (f"| {name} | {len(cs)} | {len(m)} | {len(cs) - len(m)} | {sum(x['over'] for x in m)} | "
                f"{sum(x['lower_over'] for x in m)} | {n} | {k} | "
                + (f"{k / n:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] |" if n else "- |"))

    L.append(line("all", sc["cells"]))
    for (mu, R), cs in sorted(_group(sc, lambda c: (c["mu"], c["repeats"])).items()):
        L.append(line(f"momentum {mu:g}, {72 * R} samples", cs))
    L += ["", "## What the guarantee costs", "",
          "The advised eta against the model's advice, and against the smallest rate of the sweep at which a run "
          "escaped (the certified rate sits at least 3 rates, a factor 1.25^3 = 1.95, below it by construction). "
          "Medians [range] over the cells:", "",
          "| | cells | advised / model's advice | advised / first rate with an escape | binding: sweep / model |",
          "|---|---|---|---|---|"]
    for (mu, R), cs in sorted(_group(sc, lambda c: (c["mu"], c["repeats"])).items()):
        L.append(_cost(f"momentum {mu:g}, {72 * R} samples", cs))
    L.append(_cost("all", sc["cells"]))
    L += ["", "## Per cell (rule/optimizer/K_ref/groups per prompt)", "",
          "| cell | model advised / eta* | first escape in the sweep / eta* | certified / eta* [bound] | advised / eta* | "
          "binding | measured at advised [95%] |", "|---|---|---|---|---|---|---|"]
    for c in sc["cells"]:
        s, a = c["eta_star"], c["measured"]
        first = _first_escape(c)
        cert = "none" if c["eta_certified"] is None else f"{c['eta_certified'] / s:.3f} [{c['bound']:.3f}]"
        meas = "not advised" if a is None else \
            (f"{a['escaped']}/{a['n']} = {a['rate']:.2f} [{a['ci95'][0]:.2f}, {a['ci95'][1]:.2f}]"
             + (" **over**" if a["lower_over"] else (" over" if a["over"] else "")))
        adv = "-" if c["eta_advised"] is None else f"{c['eta_advised'] / s:.3f}"
        L.append(f"| {c['cell']} | {c['eta_model'] / s:.3f} | {'none' if first is None else f'{first / s:.3f}'} | "
                 f"{cert} | {adv} | {c['binding'] or '-'} | {meas} |")
    L += ["", "over: measured rate above L; **over**: its lower 95% bound above L too.", ""]
    (out / f"{NAME}.md").write_text("\n".join(L) + "\n")


def stages(args, name, probe, predict, run):
    """The stages of a pre-registered sweep check: ``probe(out, quick)`` (the sweep, ``probe.json``),
    ``predict(out, quick, sweep)`` (``predictions.json``) and ``run(pred)`` (the check against the committed
    predictions), as far as ``args.stage`` asks. Returns None when it stops before the check, else
    ``(args, out, sweep, pred, run's result, the check's wall seconds, the command line)``."""
    out, t0 = args.out, time.perf_counter()
    if args.stage in ("all", "probe"):
        probe(out, args.quick)
        print(f"wrote {out / 'probe.json'}")
        if args.stage == "probe":
            return None
    sweep = json.loads((out / "probe.json").read_text())
    if sweep["quick"] != args.quick:
        raise SystemExit(f"{out / 'probe.json'} was written with quick={sweep['quick']}; pass the same --quick")
    if args.stage in ("all", "predict"):
        predict(out, args.quick, sweep)
        print(f"wrote {out / 'predictions.json'}")
        if args.stage == "predict":
            return None
    pred = committed_predictions(out, args.quick)
    t1 = time.perf_counter()
    result = run(pred)
    total_s = time.perf_counter() - (t1 if args.stage == "run" else t0)
    cmd = f"python experiments/{name}.py" + (" --quick" if args.quick else "") + \
        (f" --stage {args.stage}" if args.stage != "all" else "")
    return args, out, sweep, pred, result, total_s, cmd


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="rule none, momentum 0.9, K_ref 1 and 4, few seeds")
    ap.add_argument("--stage", choices=("all", "probe", "predict", "run"), default="all",
                    help="probe: the sweep; predict: the advice from the committed sweep; run: the check")
    done = stages(parse_args(ap, argv), NAME, probe, predict, run)
    if done is None:
        return 0
    args, out, sweep, pred, (sc, walls), total_s, cmd = done
    claims = [Claim(
        f"advise with a measured sweep never advises a learning rate whose measured escape rate over the planned "
        f"run exceeds its level ({LEVEL:g}) on the policy network's atlas cells",
        f"{sc['over']} of {sc['advised']} advised cells measured above {LEVEL:g}, {sc['lower_over']} with the lower 95% "
        f"bound above it ({len(pred['seeds'])} seeds per cell); {sc['not_advised']} cells with no certified rate; "
        f"pooled rate {sc['pooled']:.3f}",
        "confirmed" if sc["lower_over"] == 0 and sc["not_advised"] == 0 else
        ("partial" if sc["lower_over"] == 0 else "refuted"))]
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=[], scores={k: v for k, v in sc.items()
                                                                                   if k != "cells"},
                  cells=sc["cells"], program_wall_s=walls, total_wall_s=total_s, load_before=sweep["load"],
                  load_after=load_average(), command=cmd)
    write_markdown(out, pred, sweep, sc, walls, total_s, cmd)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
