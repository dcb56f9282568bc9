"""The collapse finding scored on runs whose fate is known: the stability atlas, bandit sweeps, simulated families.

Usage::

    python benchmarks/collapse/score_simulated.py [--quick] [--out DIR] [--keep-logs DIR]

The rule (``simulated_rule.md``, in code in ``simulated_runs.py``; committed before this script scored
anything): a collapse is a reward that loses more than half of its rise within a short stretch and does
not come back.

- atlas (``experiments/network_stability_atlas.py``, 1,080 runs started at the plateau): measured regime
  ``diverged`` = collapse (the policy left the plateau's basin and did not come back), ``stable`` = control,
  ``oscillating`` / ``drifting`` = not scored; onset: the step from which the policy's TV distance to the
  plateau policy stays above 0.25. Beside it, the rule of ``README.md`` (``label_rule.py``) on each log's
  reward, which needs a rise the plateau-started runs do not log;
- bandit (``grpojax.bandit`` rows of a ``grpojax.sweep`` grid, 192 runs started below the plateau): measured
  regime ``collapsed`` to p -> 0 = collapse, ``collapsed`` to p -> 1 and the bounded regimes = controls,
  ``diverged`` (non-finite) = not scored;
- simulated (``tests/test_collapse.py``'s simulator): 240 collapses (a loss of 0.6-1.0 of the rise within
  0.5-5 % of the run, staying down) and 240 controls with the same noise (flat, a small drop of 0.2-0.35,
  a slow decline over 35 % of the run, a collapse that recovers).

Every run is written as a canonical JSONL log, read back with ``grpojax.logs.read_log`` and diagnosed with
``grpojax.diagnose.diagnose`` (what ``grpojax diagnose`` calls; the mean-field validity fit is off: it does not
enter the collapse finding). Scores per family and per cell: recall and false-positive rate with 95 %
Clopper-Pearson intervals, the onset error in % of the run's step span (the goal: within +-5 % for >= 80 %
of the detected collapses), and how often a labelled collapse has the learning plateau as its main finding
(the goal: never). Writes ``results_simulated.json`` and ``results_simulated.md`` beside this file (``--out``
elsewhere). ``--quick``: the atlas's quick grid (360 runs x 200 steps), one bandit replica of 500 steps,
40 + 40 simulated runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from label_rule import label_run  # noqa: E402
from score import per_repo  # noqa: E402

ONSET_TOL = 0.05
RUN_COLUMNS = ("run", "family", "cell", "regime", "label", "label_onset", "detected", "onset", "span", "main",
               "first_precursor", "rule_label", "rule_onset", "error")


def binom_ci(k: int, n: int) -> tuple[float, float]:
    """95 % Clopper-Pearson interval of k successes in n trials ((nan, nan) when n = 0)."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=0.95, method="exact")
    return float(ci.low), float(ci.high)


def _order(g: str):
    try:
        return (0, float(g), "")
    except ValueError:
        return (1, 0.0, g)


def tally(rows: list[dict], key: str, label: str = "label", onset: str = "label_onset",
          sort: bool = False) -> dict[str, dict]:
    """Scores per value of ``rows[i][key]`` and pooled (``"all"``) against the label column ``label``
    (``"collapse"`` / ``"control"`` / None = not scored): collapses, found, recall [CI], controls, flagged,
    false-positive rate [CI], onset errors (fraction of the step span) and the share within ``ONSET_TOL``,
    labelled collapses whose main finding is the learning plateau, and not-scored runs flagged."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(str(r[key]), []).append(r)
    if sort:
        groups = {g: groups[g] for g in sorted(groups, key=_order)}
    groups["all"] = rows
    out = {}
    for g, rs in groups.items():
        scored = [dict(r, repo=g, label=r[label] == "collapse", label_onset=r[onset]) for r in rs if r[label]]
        o = per_repo(scored).get(g, {"pos": 0, "tp": 0, "neg": 0, "fp": 0, "onset_ok": 0, "onset_err": []})
        # a detected collapse without a labelled onset (a bandit fall the README rule does not time) has no error
        errs = [e for e in o["onset_err"] if np.isfinite(e)]
        free = [r for r in rs if r[label] is None]
        out[g] = dict(collapses=o["pos"], found=o["tp"], recall=o["tp"] / o["pos"] if o["pos"] else None,
                      recall_ci=binom_ci(o["tp"], o["pos"]), controls=o["neg"], flagged=o["fp"],
                      fpr=o["fp"] / o["neg"] if o["neg"] else None, fpr_ci=binom_ci(o["fp"], o["neg"]),
                      onset_timed=len(errs), onset_within=int(sum(e <= ONSET_TOL for e in errs)),
                      onset_err_median=float(np.median(errs)) if errs else None,
                      plateau_main_on_collapse=int(sum(r[label] == "collapse" and r["main"] == "learning_plateau"
                                                       for r in rs)),
                      not_scored=len(free), not_scored_flagged=int(sum(r["detected"] for r in free)),
                      diagnose_errors=int(sum(r.get("error") is not None for r in rs)))
    return out


def onset_part(onset: float, span: float) -> str:
    """Where an onset falls in a run that starts at step 1: the first 5 %, 5-25 % or after a quarter."""
    f = (onset - 1) / span
    return "first 5 %" if f < 0.05 else ("5-25 %" if f < 0.25 else "after 25 %")


def diagnose_log(path: pathlib.Path, info: dict) -> dict:
    """Read one log back, diagnose it and label it by the README rule too: one result row."""
    from grpojax.diagnose import diagnose
    from grpojax.logs import read_log

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = read_log(path)
        lab = label_run(run)
        try:
            d = diagnose(run, validity=False)
        except Exception as e:  # noqa: BLE001 -- a crash is a result: counted as not detected, and reported
            d, err = None, f"{type(e).__name__}: {e}"
    span = float(run.steps[-1] - run.steps[0]) or 1.0
    rule = dict(rule_label="collapse" if lab else "control", rule_onset=lab["onset"] if lab else None)
    if d is None:
        row = dict(info, run=path.stem, span=span, detected=False, onset=None, main=None, first_precursor=None,
                   error=err, **rule)
        if row["label"] == "collapse" and row["label_onset"] is None:
            row["label_onset"] = float("nan")
        return row
    c = d["collapse"]
    got = (c.panel_data or {}).get("collapse") or {}
    row = dict(info, run=path.stem, span=span, detected=bool(c.detected), onset=got.get("onset"),
               main=d.main_finding, first_precursor=(got.get("precursors") or [{}])[0].get("metric"), error=None,
               **rule)
    if row["label"] == "collapse" and row["label_onset"] is None:
        row["label_onset"] = float("nan")  # a collapse by its regime whose onset the rule could not time
    return row


def _fmt(x, ci=None):
    if x is None:
        return "-"
    s = f"{x:.2f}"
    if ci is not None and np.isfinite(ci[0]):
        s += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return s


def table(scores: dict[str, dict], title: str) -> list[str]:
    lines = [f"| {title} | collapses | found | recall [95 % CI] | controls | flagged | FP rate [95 % CI] | "
             "onsets within +-5 % | median onset error | plateau main on a collapse | not scored (flagged) | "
             "diagnose errors |", "|---" * 12 + "|"]
    for g, o in scores.items():
        ons = f"{o['onset_within']} of {o['onset_timed']}" if o["onset_timed"] else "-"
        med = f"{100 * o['onset_err_median']:.1f} %" if o["onset_err_median"] is not None else "-"
        ns = f"{o['not_scored']} ({o['not_scored_flagged']})" if o["not_scored"] else "-"
        lines.append(f"| {'**all**' if g == 'all' else g} | {o['collapses']} | {o['found']} | "
                     f"{_fmt(o['recall'], o['recall_ci'])} | {o['controls']} | {o['flagged']} | "
                     f"{_fmt(o['fpr'], o['fpr_ci'])} | {ons} | {med} | {o['plateau_main_on_collapse']} | {ns} | "
                     f"{o['diagnose_errors']} |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small grids (a smoke run; not the reported numbers)")
    ap.add_argument("--out", type=pathlib.Path, default=HERE, help="folder for results_simulated.{json,md}")
    ap.add_argument("--keep-logs", type=pathlib.Path, default=None,
                    help="write the generated logs here and keep them (default: a temporary folder)")
    args = ap.parse_args(argv)
    import simulated_runs as S

    load0 = os.getloadavg()
    t0, c0 = time.perf_counter(), time.process_time()
    tmp = None
    if args.keep_logs is None:
        tmp = tempfile.TemporaryDirectory(prefix="collapse-simulated-")
        folder = pathlib.Path(tmp.name)
    else:
        folder = args.keep_logs
        folder.mkdir(parents=True, exist_ok=True)
    gen, meta = [], {}
    for fam, fn in (("simulated", lambda: S.simulated_runs(folder, args.quick)),
                    ("bandit", lambda: S.bandit_runs(folder, args.quick)),
                    ("atlas", lambda: S.atlas_runs(folder, args.quick))):
        t = time.perf_counter()
        runs, m = fn()
        meta[fam] = dict(m, generate_wall_s=time.perf_counter() - t)
        gen += runs
        print(f"{fam}: {len(runs)} logs generated in {time.perf_counter() - t:.1f} s", flush=True)
    t_diag, c_diag = time.perf_counter(), time.process_time()
    rows = []
    for i, (p, info) in enumerate(gen):
        rows.append(diagnose_log(p, info))
        if (i + 1) % 200 == 0:
            print(f"diagnosed {i + 1} of {len(gen)}", flush=True)
    diag_wall, diag_cpu = time.perf_counter() - t_diag, time.process_time() - c_diag
    if tmp is not None:
        tmp.cleanup()
    fams = {f: [r for r in rows if r["family"] == f] for f in ("atlas", "bandit", "simulated")}
    for r in fams["atlas"]:  # where in the run an atlas collapse starts (a breakdown added after the scores)
        r["onset_part"] = onset_part(r["label_onset"], r["span"]) if r["label"] == "collapse" else "-"
    res = dict(
        rule="simulated_rule.md (simulated_runs.py)", quick=args.quick,
        families={f: tally(rs, "family")[f] for f, rs in fams.items()},
        atlas_cells=tally(fams["atlas"], "cell"), atlas_optimizers=tally(fams["atlas"], "optimizer"),
        atlas_onset_parts={k: v for k in ("first 5 %", "5-25 %", "after 25 %", "-", "all")
                           for g, v in tally(fams["atlas"], "onset_part").items() if g == k},
        atlas_readme_rule=tally(fams["atlas"], "optimizer", "rule_label", "rule_onset"),
        atlas_regime_vs_readme_rule={f"{a} / {b}": int(sum(r["regime"] == a and r["rule_label"] == b
                                                            for r in fams["atlas"]))
                                     for a in sorted({r["regime"] for r in fams["atlas"]})
                                     for b in ("collapse", "control")},
        bandit_cells=tally(fams["bandit"], "cell"), bandit_regimes=tally(fams["bandit"], "regime"),
        simulated_kinds=tally(fams["simulated"], "kind"),
        simulated_collapses_by={k: tally([r for r in fams["simulated"] if r["kind"] == "collapse"], k, sort=True)
                                for k in ("noise", "n", "fall_points", "lost", "precursor", "onset_frac")},
        simulated_readme_rule=tally(fams["simulated"], "kind", "rule_label", "rule_onset"),
        generation=meta, diagnose_wall_s=diag_wall, diagnose_cpu_s=diag_cpu, logs=len(rows),
        total_wall_s=time.perf_counter() - t0, total_cpu_s=time.process_time() - c0,
        load_before=load0, load_after=os.getloadavg(),
        command="python benchmarks/collapse/score_simulated.py" + (" --quick" if args.quick else ""),
        run_columns=RUN_COLUMNS, runs=[[r.get(k) for k in RUN_COLUMNS] for r in rows])
    args.out.mkdir(parents=True, exist_ok=True)
    runs = res.pop("runs")  # one line per run (its values in the order of run_columns)
    text = json.dumps(res, indent=1, default=float)
    text = text[:-2] + ',\n "runs": [\n' + ",\n".join(json.dumps(r, default=float) for r in runs) + "\n ]\n}\n"
    (args.out / "results_simulated.json").write_text(text)
    res["runs"] = runs
    md = markdown(res)
    (args.out / "results_simulated.md").write_text(md)
    print(md)
    return 0


def markdown(res: dict) -> str:
    errs = [dict(zip(res["run_columns"], r)) for r in res["runs"]]
    errs = [r for r in errs if r["error"]]
    L = ["# The collapse finding on the atlas, bandit and simulated runs", "",
         f"Command: `{res['command']}`. Labels: `simulated_rule.md` (committed before the detector was scored "
         f"on these runs). {res['logs']} logs, each written as canonical JSONL, read back and diagnosed "
         f"(`grpojax.diagnose.diagnose`, validity fit off): diagnose {res['diagnose_cpu_s']:.0f} s CPU "
         f"({res['diagnose_wall_s']:.0f} s wall); whole script {res['total_cpu_s']:.0f} s CPU, "
         f"{res['total_wall_s']:.0f} s wall; load average {res['load_before'][0]:.1f} before, "
         f"{res['load_after'][0]:.1f} after (2 shared cores, run under nice).", "",
         "Recall: labelled collapses the finding detects; FP rate: controls it flags; onset error: |detector "
         "onset - labelled onset| / the run's step span. Not scored: runs the rule calls neither (in brackets: "
         "how many the finding flags). Diagnose errors: logs on which `diagnose` raised (counted as not "
         "detected).", "",
         "## Per family", "", *table(res["families"], "family"), "",
         *([f"`diagnose` raised on {len(errs)} logs: " + "; ".join(f"{r['run']} ({r['regime']}): {r['error']}"
                                                              for r in errs) + ".", ""] if errs else []),
         "## Atlas per optimiser (label: measured regime)", "", *table(res["atlas_optimizers"], "optimiser"), "",
         "## Atlas collapses by where they start (added after the scores were seen; controls in the row '-')", "",
         *table(res["atlas_onset_parts"], "onset in the run"), "",
         "## Atlas per optimiser, labelled instead by the README rule on each log's reward", "",
         *table(res["atlas_readme_rule"], "optimiser"), "",
         "Measured regime against the README rule's label (runs): " + ", ".join(
             f"{k} {v}" for k, v in res["atlas_regime_vs_readme_rule"].items()) + ".", "",
         "## Atlas per cell (rule / optimiser / K_ref; label: measured regime)", "",
         *table(res["atlas_cells"], "cell"), "",
         "## Bandit per measured regime", "", *table(res["bandit_regimes"], "regime"), "",
         "## Bandit per cell (mu / K_ref / G)", "", *table(res["bandit_cells"], "cell"), "",
         "## Simulated per kind", "", *table(res["simulated_kinds"], "kind"), ""]
    for k, sc in res["simulated_collapses_by"].items():
        L += [f"### Simulated collapses by {k}", "", *table(sc, k), ""]
    L += ["## Simulated runs labelled by the README rule instead of by construction", "",
          *table(res["simulated_readme_rule"], "kind"), ""]
    return "\n".join(L)


if __name__ == "__main__":
    raise SystemExit(main())
