"""Early warning of a collapse: real runs replayed through the watch engine as a growing log.

Usage:
    python benchmarks/collapse/early_warning.py [--dev FOLDER] [--corpus] [--every N] [--runs SUBSTR]

Each run is fed to :func:`grpojax.monitor.update` one logged row at a time, with the configuration of the
engine behind ``grpojax watch`` (``MonitorConfig(forecast=False, every=N)``, the default ``--every 10``):
the engine sees only the rows logged so far, exactly as ``watch`` does after each append. The engine's
collapse-risk alerts (``new_alerts`` of each report) are recorded with their step and level; alerts of level
``warning`` or ``critical`` count.

Labels: the committed rule of ``README.md`` (``label_rule.py``) on the whole log. For a collapsed run,
``t_half`` is the first step where the rule's smoothed reward has lost half its rise. Scores:

- **lead**: ``t_half`` minus the step of the first counted alert raised within the quarter of the run
  before ``t_half`` (``[t_half - 0.25 span, t_half]``), in % of the run's step span; no such alert is a
  miss, which enters the median as a lead of 0 %;
- **false alarms per 1,000 steps** on the healthy controls: counted alerts over the controls' summed step
  spans;
- **what there was to read**: for each collapse, the events of the whole log (offline) of every metric but
  the reward that an alert in that quarter could read (the quarter and the alert's recent stretch before
  it: 35 % of the run before ``t_half``; "with events"), and among them those the alert counts as
  precursors ("precursors": its metrics, in their harmful direction, of at least its event size). A collapse
  without either can be warned by no alert that reads precursors; the table counts such collapses, and the
  per-run line gives how long before ``t_half`` the labelled onset lies (% of the run).

The alert thresholds (:class:`grpojax.monitor.AlertConfig`) were set on the development runs only; the
external corpus (``benchmarks/collapse_corpus/MANIFEST.tsv``, cached in ``data/collapse-corpus-cache``)
is scored with them unchanged.
"""

from __future__ import annotations

import argparse
import csv
import math
import pathlib
import statistics
import sys
import time
import warnings

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "collapse_corpus"))
from label_rule import _smooth, label_run  # noqa: E402

COUNTED = ("warning", "critical")
LOOKBACK = 0.25


def half_step(run, lab: dict) -> float:
    """The first step where the labelled curve's smoothed value has lost half of its rise (the rule's q)."""
    s, y = run.series(lab["curve"])
    keep = np.isfinite(y)
    s, y = s[keep].astype(float), y[keep]
    sm = _smooth(y, max(3, int(round(0.05 * y.size))))
    p = int(np.argmax(sm))
    below = np.flatnonzero(sm[p + 1:] <= sm[p] - 0.5 * lab["rise"])
    return float(s[p + 1 + int(below[0])])


def prefix(run, i: int):
    """The run as logged up to its ``i``-th row (rows ``0..i-1``)."""
    from grpojax.logs import RunLog

    return RunLog(run.name, run.source, run.format, run.steps[:i], {k: v[:i] for k, v in run.columns.items()},
                  dict(run.meta))


def replay(run, every: int) -> tuple[list[dict], float]:
    """Feed the run row by row to the watch engine; ``(alerts raised, seconds)``."""
    from grpojax.monitor import MonitorConfig, init_state, update

    config = MonitorConfig(forecast=False, every=every)
    state, alerts = init_state(), []
    t0 = time.perf_counter()
    for i in range(1, run.steps.size + 1):
        state, rep = update(state, prefix(run, i), config)
        alerts.extend(rep.new_alerts)
    return alerts, time.perf_counter() - t0


def events_before(run, t_half: float, span: float) -> tuple[int, int]:
    """What any warning could have read: the events of the whole log (offline, so a bound for a causal
    alert) of every metric but the reward that an alert counted in the quarter before ``t_half`` could
    read (from the quarter and the alert's recent stretch, ``AlertConfig.recent`` of the run, before ``t_half``),
    as ``(all events, events the alert counts as precursors: its metrics, directions and size)``."""
    from grpojax.diagnose import DEFAULT_CONFIG
    from grpojax.diagnose._events import detect_events
    from grpojax.monitor import AlertConfig
    from grpojax.monitor._alerts import is_precursor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        events = detect_events(run, DEFAULT_CONFIG)
    cfg = AlertConfig()
    since = t_half - (LOOKBACK + cfg.recent) * span
    found = [(m, e) for m, se in events.items() if m not in ("reward_mean", "eval_reward") for e in se.events
             if since <= e.step < t_half]
    return len(found), sum(is_precursor(m, e, cfg) for m, e in found)


def score_run(rid: str, repo: str, run, every: int) -> dict:
    lab = label_run(run)
    alerts, sec = replay(run, every)
    span = float(run.steps[-1] - run.steps[0]) or 1.0
    counted = [a for a in alerts if a["level"] in COUNTED]
    out = {"run": rid, "repo": repo, "label": lab is not None, "span": span, "alerts": counted, "seconds": sec,
           "lead": None, "t_half": None, "events_before": None}
    if lab is not None:
        th = half_step(run, lab)
        out["t_half"] = th
        out["onset_to_half"] = 100.0 * (th - lab["onset"]) / span
        out["events_before"] = events_before(run, th, span)
        hits = [a for a in counted if th - LOOKBACK * span <= a["step"] <= th]
        out["lead"] = 100.0 * (th - hits[0]["step"]) / span if hits else None
    return out


def dev_runs(folder: pathlib.Path):
    from grpojax.logs import read_log

    index = {r["id"]: r for r in csv.DictReader(open(folder / "INDEX.tsv"), delimiter="\t")}
    for d in sorted(folder.iterdir()):
        if (d / "run.jsonl").is_file():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                yield d.name, index.get(d.name, {}).get("repo", "?"), read_log(d / "run.jsonl")


def corpus_runs():
    from corpus import load_runs

    runs, absent = load_runs()
    for i, why in absent:
        print(f"absent {i}: {why}")
    for row, run in runs:
        yield row["id"], row["repo"], run


def table(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    print(f"{'repository':44s} {'collapsed':>9s} {'alerted':>7s} {'median lead %':>13s} {'with events':>11s} "
          f"{'precursors':>10s} {'controls':>8s} {'steps':>7s} {'alarms':>6s} {'per 1k':>6s}")
    repos = sorted({r["repo"] for r in rows})
    for repo in repos + ["ALL"]:
        rr = [r for r in rows if repo in ("ALL", r["repo"])]
        pos = [r for r in rr if r["label"]]
        neg = [r for r in rr if not r["label"]]
        leads = [r["lead"] if r["lead"] is not None else 0.0 for r in pos]
        steps = sum(r["span"] for r in neg)
        fa = sum(len(r["alerts"]) for r in neg)
        med = f"{statistics.median(leads):.1f}" if leads else "-"
        rate = f"{1000 * fa / steps:.2f}" if steps else "-"
        with_ev = sum(r["events_before"][0] > 0 for r in pos)
        with_pre = sum(r["events_before"][1] > 0 for r in pos)
        print(f"{repo[:44]:44s} {len(pos):9d} {sum(r['lead'] is not None for r in pos):7d} {med:>13s} "
              f"{with_ev:11d} {with_pre:10d} {len(neg):8d} {steps:7.0f} {fa:6d} {rate:>6s}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", default=str(ROOT.parent / "shared" / "real-runs"), help="development runs folder")
    ap.add_argument("--corpus", action="store_true", help="also score the cached external collapse corpus")
    ap.add_argument("--every", type=int, default=10, help="refresh every N points (watch's --every; default 10)")
    ap.add_argument("--runs", default=None, help="only runs whose id contains this")
    a = ap.parse_args(argv)
    sets = []
    dev = pathlib.Path(a.dev)
    if (dev / "INDEX.tsv").is_file():
        sets.append(("development runs", dev_runs(dev)))
    else:
        print(f"no development runs at {dev}")
    if a.corpus:
        sets.append(("external collapse corpus", corpus_runs()))
    t0 = time.perf_counter()
    for title, gen in sets:
        rows = []
        for rid, repo, run in gen:
            if a.runs and a.runs not in rid:
                continue
            r = score_run(rid, repo, run, a.every)
            rows.append(r)
            al = ", ".join(f"{x['level']}@{x['step']:g}" for x in r["alerts"]) or "-"
            print(f"{rid[:56]:56s} {'collapse' if r['label'] else 'control':8s} span {r['span']:6.0f} "
                  + (f"t_half {r['t_half']:g} (onset {r['onset_to_half']:.1f}% of the run before) "
                     f"lead {r['lead'] if r['lead'] is None else round(r['lead'], 1)}% "
                     f"events before {r['events_before'][0]} (precursors {r['events_before'][1]}) "
                     if r["label"] else "") + f"alerts {al}  ({r['seconds']:.1f} s)", flush=True)
        table(rows, title)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
