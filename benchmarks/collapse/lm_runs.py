"""The collapse finding and the early warning on GRPO runs of the tiny transformer LM (``lm_rule.md``).

Usage::

    python benchmarks/collapse/lm_runs.py [--quick] [--out DIR] [--keep-logs DIR]

Trains the 96 runs of ``lm_rule.md`` as one population (``grpojax.grpo.train_population``: one compiled
program), labels each run's ``reward_mean`` by the committed rule of ``README.md``, diagnoses every log, and
replays every log through the watch engine row by row (``early_warning.py``). Writes ``results_lm.md``,
``results_lm.json`` and ``results_lm.png`` (six runs drawn) beside this file (``--out`` elsewhere). ``--quick``: 8 runs of 60 steps (a smoke run;
not the reported numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "experiments"))
from early_warning import score_run  # noqa: E402
from label_rule import label_run  # noqa: E402
from score_simulated import diagnose_log, onset_part, table, tally  # noqa: E402

WARMSTART, EVERY = 60, 10
MUS = (0.0, 0.9)
_MAIN = dict(steps=300, lrs=tuple(float(x) for x in np.geomspace(1.0, 5.0, 6)), k_refs=(1, 4), seeds=(0, 1, 2, 3),
             suffix="")
FAMILIES = {  # lm_rule.md: the first family, and the second aimed at late collapses
    "main": _MAIN,
    "late": dict(steps=500, lrs=tuple(float(x) for x in np.geomspace(1.5, 4.0, 4)), k_refs=(4,),
                 seeds=tuple(range(20, 28)), suffix="_late"),
    # the main grid again with seeds never run before, to check a change held out: quantised_noise_rule.md ...
    "heldout": {**_MAIN, "seeds": (30, 31, 32, 33), "suffix": "_heldout"},
    # ... and material_rise_rule.md
    "heldout2": {**_MAIN, "seeds": (40, 41, 42, 43), "suffix": "_heldout2"},
    # ... and recovery_rule.md
    "heldout3": {**_MAIN, "seeds": (50, 51, 52, 53), "suffix": "_heldout3"},
}


def grid(quick: bool, family: str = "main"):
    from grpojax.grpo import Member

    f = FAMILIES[family]
    if quick:
        cells = [(lr, mu, 1, 0) for lr in (1.0, 5.0) for mu in MUS] + [(lr, 0.9, 4, 1) for lr in (1.0, 2.0, 3.0, 5.0)]
    else:
        cells = [(lr, mu, k, s) for mu in MUS for k in f["k_refs"] for lr in f["lrs"] for s in f["seeds"]]
    return [Member(lr=lr, momentum=mu, k_ref=k, beta=0.0, clip_eps=0.2, seed=s,
                   name=f"lr{lr:.3f}-mu{mu:g}-k{k}-s{s}") for lr, mu, k, s in cells]


def train(folder: pathlib.Path, quick: bool, family: str = "main"):
    import transformer_atlas as atlas

    from grpojax.grpo import train_population

    steps = 60 if quick else FAMILIES[family]["steps"]
    cfg = atlas.make_config(1, steps=steps, warmstart=30 if quick else WARMSTART)
    members = grid(quick, family)
    res = train_population(cfg, members, folder / "pop", kl_reference="initial", chunk=20, show_progress=True)
    return members, res.wall_s


def figure(rows: list[dict], logs: pathlib.Path, out: pathlib.Path, suffix: str = "") -> pathlib.Path:
    """Six runs' reward curves: the first three labelled collapses the finding detected (its onset and the
    first precursor's step marked), then the first three flagged controls (falls from the warm start's level
    the label rule does not call collapses) -- what the tables count, drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpojax._io import save_figure
    from grpojax.logs import read_log

    pick = ([r for r in rows if r["label"] == "collapse" and r["detected"]][:3]
            + [r for r in rows if r["label"] == "control" and r["detected"]][:3])
    fig, axes = plt.subplots(2, 3, figsize=(11, 5.6), squeeze=False, sharey=True)
    for ax in axes.ravel()[len(pick):]:
        ax.axis("off")
    for ax, r in zip(axes.ravel(), pick):
        run = read_log(logs / "pop" / "members" / r["run_name"] / "metrics.jsonl")
        s, y = run.series("reward_mean")
        ax.plot(s, y, lw=0.8, color="C0", label="reward_mean")
        if r["label_onset"] is not None and np.isfinite(r["label_onset"]):
            ax.axvline(r["label_onset"], color="k", ls=":", lw=1, label="labelled onset")
        ax.axvline(r["onset"], color="C3", ls="--", lw=1, label="detected onset")
        if r["first_precursor"] and run.count(r["first_precursor"]):
            ps, pv = run.series(r["first_precursor"])
            tw = ax.twinx()
            tw.plot(ps, pv, lw=0.6, color="C2", alpha=0.7)
            tw.set_yticks([])
        ax.set_title(f"{r['run_name']}\n{r['label']}; first precursor: {r['first_precursor'] or 'none'}", fontsize=8)
        ax.set_xlabel("step", fontsize=8)
    axes[0, 0].set_ylabel("reward_mean")
    axes[1, 0].set_ylabel("reward_mean")
    axes[0, 0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Tiny-LM GRPO runs: detected collapses (top) and flagged controls (bottom); green: first "
                 "precursor's series", fontsize=9)
    fig.tight_layout()
    path = save_figure(fig, out / f"results_lm{suffix}.png", dpi=110)
    plt.close(fig)
    return path


def _collapse_lines(rows: list[dict], warn: list[dict]) -> list[str]:
    """One table row per labelled collapse: its onset, the part of the run, t_half, the first counted alert
    within the quarter of the run before t_half and the lead (a miss: none)."""
    out = []
    for r, w in zip(rows, warn):
        if r["label"] != "collapse":
            continue
        if w["lead"] is None:
            alert, lead = "-", "miss"
        else:
            alert, lead = f"step {w['t_half'] - w['lead'] * w['span'] / 100:.0f}", f"{w['lead']:.1f}"
        out.append(f"| {w['run']} | {r['label_onset']:g} | {r['part']} | {w['t_half']:g} | {alert} | {lead} | "
                   f"{r['detected']} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="8 runs of 60 steps (a smoke run)")
    ap.add_argument("--out", type=pathlib.Path, default=HERE, help="folder for results_lm.{md,json}")
    ap.add_argument("--keep-logs", type=pathlib.Path, default=None, help="keep the run logs here")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="main",
                    help="main: the 96 runs of lm_rule.md; late: the 64 runs aimed at late collapses")
    args = ap.parse_args(argv)
    tmp = None
    if args.keep_logs is None:
        tmp = tempfile.TemporaryDirectory()
        folder = pathlib.Path(tmp.name)
    else:
        folder = args.keep_logs
        folder.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    members, train_wall = train(folder, args.quick, args.family)
    suffix = FAMILIES[args.family]["suffix"]
    rows, warn = [], []
    from grpojax.logs import read_log

    for m in members:
        path = folder / "pop" / "members" / m.name / "metrics.jsonl"
        run = read_log(path)
        lab = label_run(run)
        info = dict(family="lm", cell=f"mu{m.momentum:g}/K{m.k_ref}", lr=m.lr, seed=m.seed,
                    label="collapse" if lab else "control", label_onset=lab["onset"] if lab else None)
        row = diagnose_log(path, info)
        row["part"] = onset_part(lab["onset"], row["span"]) if lab else "-"
        row["run_name"] = m.name
        rows.append(row)
        w = score_run(m.name, info["cell"], run, EVERY)
        w["first_alert"] = w["alerts"][0] if w["alerts"] else None
        w["alerts"] = [dict(step=a["step"], level=a["level"]) for a in w["alerts"]]
        warn.append(w)
        print(f"{m.name:26s} label={info['label']:8s} onset={info['label_onset']} detected={row['detected']} "
              f"onset={row['onset']} main={row['main']} first={row['first_precursor']} "
              f"lead={w['lead']} alerts={len(w['alerts'])}", flush=True)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    by_cell, by_part = tally(rows, "cell", sort=True), tally(rows, "part")
    pos = [w for w in warn if w["label"]]
    neg = [w for w in warn if not w["label"]]
    leads = [w["lead"] if w["lead"] is not None else 0.0 for w in pos]
    steps = sum(w["span"] for w in neg)
    alarms = sum(len(w["alerts"]) for w in neg)
    firsts: dict[str, int] = {}
    for r in rows:
        if r["label"] == "collapse" and r["detected"]:
            firsts[str(r["first_precursor"])] = firsts.get(str(r["first_precursor"]), 0) + 1
    ew = dict(collapses=len(pos), warned=sum(w["lead"] is not None for w in pos),
              median_lead_pct=statistics.median(leads) if leads else None, controls=len(neg), control_steps=steps,
              false_alarms=alarms, per_1000=1000 * alarms / steps if steps else None)
    load1 = os.getloadavg()
    lead = "-" if ew["median_lead_pct"] is None else f"{ew['median_lead_pct']:.1f}"
    rate = "-" if ew["per_1000"] is None else f"{ew['per_1000']:.2f}"
    flags = (" --quick" if args.quick else "") + (f" --family {args.family}" if args.family != "main" else "")
    head = (f"Command: `python benchmarks/collapse/{pathlib.Path(__file__).name}{flags}`. "
            f"Runs, labels and scores: `lm_rule.md` (committed before the runs). {len(rows)} runs; population "
            f"training {train_wall:.0f} s wall; whole script {wall:.0f} s wall, {cpu:.0f} s CPU; load average "
            f"{load0[0]:.1f} before, {load1[0]:.1f} after (2 shared cores).")
    md = ["# The collapse finding and the early warning on GRPO runs of the tiny transformer LM", "", head, "",
          "## The collapse finding, per cell (momentum / K_ref)", "", *table(by_cell, "cell"), "",
          "## By where the labelled collapse starts (controls in the row '-')", "", *table(by_part, "onset in the run"),
          "", "## Early warning (watch engine, one row at a time, refresh every 10 rows)", "",
          "| collapses | warned before t_half | median lead (% of run; a miss counts 0) | controls | control steps | "
          "false alarms | per 1,000 steps |", "|---|---|---|---|---|---|---|",
          f"| {ew['collapses']} | {ew['warned']} | {lead} | {ew['controls']} | {ew['control_steps']:.0f} | "
          f"{ew['false_alarms']} | {rate} |",
          "", "Each collapse: labelled onset (where in the run), `t_half`, the first warning or critical alert in the "
          "quarter of the run before `t_half`, and the lead:", "",
          "| run | labelled onset | part of the run | t_half | first counted alert | lead (% of run) | detected |",
          "|---|---|---|---|---|---|---|",
          *_collapse_lines(rows, warn),
          "", "First precursor of each detected collapse: " + (", ".join(f"{k} {v}" for k, v in sorted(firsts.items()))
                                                             or "none detected"), ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"results_lm{suffix}.md").write_text("\n".join(md))
    (args.out / f"results_lm{suffix}.json").write_text(json.dumps(dict(rows=rows, early_warning=ew, warn=warn, by_cell=by_cell,
                                                              by_part=by_part, first_precursor=firsts), indent=1,
                                                         default=float))
    figure(rows, folder, args.out, suffix)
    print("\n".join(md))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
