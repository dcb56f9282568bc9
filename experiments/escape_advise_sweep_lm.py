"""Does advise keep its escape level on the transformer LM, with the escape model alone and with a measured sweep?

The policy network's check (``escape_advise_sweep.py``) found the model's advice over the level in 52 of 90 cells
and the sweep's in none. This experiment asks the same of the transformer atlas's LM (13,536 parameters, trained by
the population trainer from the atlas's committed plateau θ*, regime rule and inputs, all in
``results/transformer_atlas/predictions.{json,npz}``), a network neither the escape model's constants nor the
sweep's rule were set on.

Design, fixed before any run:

- cells: the first prompt set (difficulty 1), constant lr, momentum 0 and 0.9 × K_ref 1 and 4 (4 cells), T = 160
  steps (the atlas's planned length);
- the model's advice: η_model = min(η05, 0.8 η*), η05 = the escape model's η with P(escape within T) = 0.05
  (``escape_onset`` at level 0.05 with the atlas's K_0, K_d, σ² per group, 4 groups per step and basin w: the
  advisor's own escape cap, additive noise);
- the sweep (stage ``probe``): 12 learning rates per cell, η_model × 1.25^k for k = 2 .. −9, 20 member seeds per rate
  (5,000,000 + i), one population program; escaped = the atlas's pre-registered rule (diverged, or max |e_t| > w);
- the advice (stage ``predict``, committed before the check): the sweep's certified rate at level 0.05 and
  confidence 0.95 (``grpojax.monitor.escape_sweep_bound``); advised η = min(η_model, certified η);
- the check (stage ``run``): 30 new member seeds (6,000,000 + i) at η_model and 30 at the sweep's advised η per
  cell, one population program; the measured escape rate with its exact 95% interval.

``--quick``: the cell momentum 0.9, K_ref 1 only, 4 rates × 4 seeds and 4 seeds in the check, 40 steps (a test of
the pipeline, not of the level).
"""

from __future__ import annotations

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import escape_advise_check as chk  # noqa: E402
import escape_advise_sweep as eas  # noqa: E402
import network_stability_atlas as atlas  # noqa: E402
import transformer_atlas as ta  # noqa: E402

from grpojax._experiment import (Claim, experiment_parser, load_average, parse_args,  # noqa: E402
                                 print_claims, write_summary)
from grpojax._io import write_json  # noqa: E402
from grpojax.monitor import escape_sweep_bound  # noqa: E402

NAME = "escape_advise_sweep_lm"
ATLAS = pathlib.Path(__file__).resolve().parent / "results" / "transformer_atlas"
PROMPT_SET = "difficulty1"
RATIO, POWERS, QUICK_POWERS = 1.25, tuple(range(2, -10, -1)), (2, 1, 0, -1)
PROBE_SEEDS, QUICK_PROBE_SEEDS = 20, 4
CHECK_SEEDS, QUICK_CHECK_SEEDS = 30, 4
PROBE_OFFSET, CHECK_OFFSET = 5_000_000, 6_000_000
LEVEL, CONFIDENCE, MARGIN = 0.05, 0.95, 0.2


def cells(pred, quick: bool):
    """The cells and the model's advice: min(η05, (1 − margin) η*) from the atlas's committed inputs."""
    from grpojax.dynamics import escape_onset

    s = pred["prompt_sets"][PROMPT_SET]
    k0, kd = s["stiffness"]["k_instant"], s["stiffness"]["k_stale"]
    steps = 40 if quick else pred["steps"]
    out = []
    for c in s["cells"]:
        if c["schedule"] != "constant" or (quick and (c["mu"], c["k_ref"]) != (0.9, 1)):
            continue
        eta05 = float(escape_onset(c["mu"], c["k_ref"], kd, level=LEVEL, noise=s["noise_per_group"], basin=s["basin"],
                                   steps=steps, lag="periodic", k_instant=k0, samples_per_step=s["groups_per_step"]))
        eta_model = min(eta05, (1 - MARGIN) * c["eta_star"])
        out.append(dict(cell=f"mu{c['mu']:g}-k{c['k_ref']}", mu=c["mu"], k_ref=c["k_ref"], eta_star=c["eta_star"],
                        eta05=eta05, eta_model=eta_model, binding_model="escape" if eta05 <= eta_model else "margin"))
    return out, steps


def _population(apred, arrays, rows, steps, offset, log):
    """Run ``rows`` (dicts with eta, mu, k_ref) as one population from θ*; each row gets ``escaped``."""
    run_pred = dict(apred, steps=steps)
    wall = ta.run_population(run_pred, arrays, PROMPT_SET, rows, "constant", log=log, seed_offset=offset)
    return wall


def probe(out: pathlib.Path, quick: bool, log=print):
    apred, arrays = ta.committed(ATLAS)
    cs, steps = cells(apred, quick)
    powers, seeds = (QUICK_POWERS, QUICK_PROBE_SEEDS) if quick else (POWERS, PROBE_SEEDS)
    rows = [dict(cell=c["cell"], mu=c["mu"], k_ref=c["k_ref"], power=k, eta=c["eta_model"] * RATIO ** k, seed=sd)
            for c in cs for k in powers for sd in range(seeds)]
    t0 = time.perf_counter()
    load0 = load_average()
    wall = _population(apred, arrays, rows, steps, PROBE_OFFSET, log)
    sweep = dict(experiment=NAME, quick=quick, git_head=atlas.git_head(), steps=steps, ratio=RATIO, powers=list(powers),
                 seeds=seeds, member_seed_offset=PROBE_OFFSET, regime_rule=apred["regime_rule"], cells=cs,
                 program=wall, wall_s=time.perf_counter() - t0, load=load0,
                 runs=[{k: r[k] for k in ("cell", "power", "eta", "seed", "escaped", "diverged")} for r in rows])
    write_json(out, "probe.json", sweep)
    return sweep


def predict(out: pathlib.Path, quick: bool, sweep: dict, log=print):
    rows = []
    for c in sweep["cells"]:
        mine = [r for r in sweep["runs"] if r["cell"] == c["cell"]]
        b = escape_sweep_bound([r["eta"] for r in mine], [r["escaped"] for r in mine], level=LEVEL,
                               confidence=CONFIDENCE)
        eta = None if b.eta is None else min(c["eta_model"], b.eta)
        rows.append({**c, "eta_certified": b.eta, "bound": b.upper, "eta_advised": eta, "sweep": b.to_dict(),
                     "binding": None if eta is None else ("model" if eta == c["eta_model"] else "sweep")})
        log(f"{c['cell']}: model {c['eta_model'] / c['eta_star']:.3f} eta*, certified "
            + ("none" if b.eta is None else f"{b.eta / c['eta_star']:.3f} eta*"))
    pred = dict(experiment=NAME, quick=quick, written_before_runs=True, git_head=atlas.git_head(), steps=sweep["steps"],
                level=LEVEL, confidence=CONFIDENCE, seeds=QUICK_CHECK_SEEDS if quick else CHECK_SEEDS,
                member_seed_offset=CHECK_OFFSET, cells=rows)
    write_json(out, "predictions.json", pred)
    return pred


def run(pred, log=print):
    apred, arrays = ta.committed(ATLAS)
    rows = []
    for c in pred["cells"]:
        for which in ("model", "advised"):
            eta = c["eta_model"] if which == "model" else c["eta_advised"]
            if eta is not None:
                rows += [dict(cell=c["cell"], which=which, mu=c["mu"], k_ref=c["k_ref"], eta=eta, seed=sd)
                         for sd in range(pred["seeds"])]
    wall = _population(apred, arrays, rows, pred["steps"], CHECK_OFFSET, log)
    return score(pred, rows), wall


def score(pred, runs):
    """Per cell and learning rate (the model's advice, the sweep's) the measured escape rate; the counts."""
    lev, cells_out = pred["level"], []
    for c in pred["cells"]:
        m = {}
        for which in ("model", "advised"):
            sel = [r["escaped"] for r in runs if r["cell"] == c["cell"] and r["which"] == which]
            if sel:
                k, n = int(sum(sel)), len(sel)
                lo, hi = chk.binom_ci(k, n)
                m[which] = dict(n=n, escaped=k, rate=k / n, ci95=[lo, hi], over=k / n > lev, lower_over=lo > lev)
        cells_out.append({**c, "measured": m})

    def count(which):
        ms = [c["measured"][which] for c in cells_out if which in c["measured"]]
        k, n = sum(x["escaped"] for x in ms), sum(x["n"] for x in ms)
        return dict(cells=len(ms), over=sum(x["over"] for x in ms), lower_over=sum(x["lower_over"] for x in ms),
                    runs=n, escaped=k, pooled=k / n if n else float("nan"))

    return dict(cells=cells_out, model=count("model"), advised=count("advised"),
                not_advised=sum(c["eta_advised"] is None for c in cells_out))


def write_markdown(out, pred, sweep, sc, wall, total_s, cmd):
    lev = pred["level"]
    n_sweep = len(sweep["runs"])
    L = [f"# advise's escape level on the transformer LM: the model alone and with a measured sweep "
         f"({'quick' if pred['quick'] else 'full'})", "",
         f"Command: `{cmd}`. The sweep: {n_sweep} runs of {sweep['steps']} steps ({sweep['seeds']} seeds x "
         f"{len(sweep['powers'])} rates per cell, eta_model x {sweep['ratio']:g}^k, k = {sweep['powers'][0]} .. "
         f"{sweep['powers'][-1]}), one population program, {sweep['wall_s']:.0f} s ({sweep['load']} before). The check: "
         f"{pred['seeds']} new seeds per cell and learning rate, one population program, {wall['wall_s']:.0f} s; whole "
         f"stage {total_s:.0f} s.",
         "`probe.json` (the sweep) and `predictions.json` (the advice) were committed before the check's runs.", "",
         f"eta_model = min(eta05, {1 - MARGIN:g} eta*) (the advisor's escape cap, additive noise, the atlas's inputs); "
         f"advised = min(eta_model, the sweep's certified eta at level {lev:g}, confidence {pred['confidence']:g}). "
         "Escaped = the transformer atlas's pre-registered rule (diverged, or the projection on the stiffest direction "
         "beyond the basin w). Exact 95% binomial intervals.", "",
         "| cell | eta* | eta_model / eta* | measured at eta_model [95%] | certified / eta* [bound] | advised / eta* | "
         "measured at advised [95%] |", "|---|---|---|---|---|---|---|"]

    def meas(m):
        if m is None:
            return "-"
        return (f"{m['escaped']}/{m['n']} = {m['rate']:.2f} [{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]"
                + (" **over**" if m["lower_over"] else (" over" if m["over"] else "")))

    for c in sc["cells"]:
        s = c["eta_star"]
        cert = "none" if c["eta_certified"] is None else f"{c['eta_certified'] / s:.4f} [{c['bound']:.3f}]"
        adv = "-" if c["eta_advised"] is None else f"{c['eta_advised'] / s:.4f}"
        L.append(f"| mu {c['mu']:g}, K_ref {c['k_ref']} | {s:.4g} | {c['eta_model'] / s:.4f} ({c['binding_model']}) | "
                 f"{meas(c['measured'].get('model'))} | {cert} | {adv} | {meas(c['measured'].get('advised'))} |")
    L += ["", "| advice | cells | over L | lower 95% bound over L | escaped / runs |", "|---|---|---|---|---|"]
    for which, label in (("model", "the escape model alone"), ("advised", "with the measured sweep")):
        x = sc[which]
        L.append(f"| {label} | {x['cells']} | {x['over']} | {x['lower_over']} | {x['escaped']} / {x['runs']} |")
    L += ["", "over: measured rate above L; **over**: its lower 95% bound above L too.", ""]
    (out / f"{NAME}.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="one cell, few rates and seeds, 40 steps")
    ap.add_argument("--stage", choices=("all", "probe", "predict", "run"), default="all",
                    help="probe: the sweep; predict: the advice from the committed sweep; run: the check")
    done = eas.stages(parse_args(ap, argv), NAME, probe, predict, run)
    if done is None:
        return 0
    args, out, sweep, pred, (sc, wall), total_s, cmd = done
    m, a = sc["model"], sc["advised"]
    claims = [Claim(
        f"on the transformer LM, advise with a measured sweep keeps its escape level ({LEVEL:g})",
        f"with the sweep: {a['over']} of {a['cells']} cells measured above {LEVEL:g} ({a['lower_over']} with the lower "
        f"95% bound above it), {a['escaped']} of {a['runs']} runs escaped; the model alone: {m['over']} of {m['cells']} "
        f"({m['lower_over']}), {m['escaped']} of {m['runs']}",
        "confirmed" if a["lower_over"] == 0 and sc["not_advised"] == 0 else
        ("partial" if a["lower_over"] == 0 else "refuted"))]
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=[],
                  scores={k: v for k, v in sc.items() if k != "cells"}, cells=sc["cells"], program=wall,
                  total_wall_s=total_s, load_after=load_average(), command=cmd)
    write_markdown(out, pred, sweep, sc, wall, total_s, cmd)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
