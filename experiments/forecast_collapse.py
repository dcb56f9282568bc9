"""P(collapse before the planned end) and the window forecast mixed with a collapse branch, leave one repository out.

Question. From the first 25% and 50% of a run, how well does the probability that the reward collapses
before the end (``WindowForecast.p_collapse``) score against what the run then did? And does mixing the
collapse branch into the forecast (``collapse_mixture=True``) keep the 90% interval's coverage of the final
reward (the mean over the last 10% of the steps) within 0.85-0.95 and lower the Brier score of
P(final >= target)?

Model (``grpojax.fit._collapse_hazard``, written before any score here was computed): a constant hazard per
unit of run fraction with a Jeffreys posterior ``Gamma(k + 1/2, E)`` from labelled series (``k`` collapses,
``E`` run fractions at risk: each series from its start to its collapse onset or its end); P(collapse in the
``h`` run fractions from the prefix's end to the run's end) ``= 1 - (E / (E + h))^(k + 1/2)``. The collapse
branch loses a fraction uniform on [0.5, 1] of the rise from the start level; the mixture is
``(1 - p)·forecast + p·branch``. A prefix that already holds a collapse (the collapse finding of
``grpojax.diagnose`` on the prefix, as ``grpojax fit --prefix`` looks for it) is forecast from the level after
its onset.

Labels. The collapse rule of ``benchmarks/collapse/label_rule.py`` (written before any detector ran) on each
whole series; its onset as a fraction of the series' step span. For a prefix, the outcome is 1 when the
onset lies after the prefix's last step, 0 when the series does not collapse; a series whose onset lies in
the prefix is not at risk of a collapse *before the end* and is left out of the P(collapse) scores (counted).

Corpus and forecasts. Those of ``forecast_exceedance.py``: every train and eval reward series of at least 40
points of the development runs beside the repository (when present), the cached public corpus and the
collapse corpus; the forecasters' records are taken from its committed ``forecast_exceedance.json``
(``--reuse-records``) and the series it lacks are forecast here (the four raw forecasters: the
prefix-collapse rule is applied at scoring, below, to every record alike). Reserved repositories
(``_loro.RESERVED_REPOS``) are never read.

Protocol (``experiments/_loro.py``). For each repository in turn, learned on the other repositories only
(plus, for the calibration, the committed training-only records of repositories not in this corpus):

- the hazard (from the labels of their series) -> ``p_collapse`` of the held-out series;
- the **base rate**: the Jeffreys mean ``(x + 1/2)/(n + 1)`` of the share of their at-risk series that
  collapse after the same prefix (a per-prefix frequency: no hazard, no horizon);
- the combined forecast's calibration, learned on records **as before** (no prefix-collapse rule) and **with
  the rule** (the shipped forecast); the mixture is built on the latter with the fold's ``p_collapse``.

Scores, pooled over series and per repository: (a) the Brier score of P(collapse before the end) of the
hazard model, the base rate and always-0, with a 90% interval of the differences from a bootstrap over
repositories; (b) the 90% coverage and the Brier score of P(final >= target) (targets of
``forecast_exceedance.py``: ``L + k·s``, ``k`` in -1..3) of the forecast as before, with the prefix rule,
and with the rule and the mixture.

Usage::

    python experiments/forecast_collapse.py [--out experiments/results/forecast_collapse]
        [--reuse-records JSON]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
import time
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
sys.path.insert(0, str(ROOT / "benchmarks" / "collapse"))
sys.path.insert(0, str(ROOT / "benchmarks" / "collapse_corpus"))

import forecast_exceedance as fe  # noqa: E402

NAME = "forecast_collapse"
PREFIXES = fe.PREFIXES
LEVEL = fe.LEVEL
BAND = fe.BAND
N_BOOT = 2000
BOOT_SEED = 36
VARIANTS = ("as before", "prefix rule", "prefix rule + mixture")
P_METHODS = ("hazard", "base rate", "always 0")
DEFAULT_RECORDS = ROOT / "experiments" / "results" / "forecast_exceedance" / "forecast_exceedance.json"


# ------------------------------------------------------------------------------------------------ data


def label(steps, values):
    """``(onset fraction, onset step, lost fraction)`` of the label rule on the whole series, or Nones."""
    from label_rule import label_curve

    lab = label_curve(steps, values)
    if lab is None:
        return None, None, None
    s, y = np.asarray(steps, float), np.asarray(values, float)
    tail = max(2, math.ceil(0.1 * y.size))
    return (lab["onset"] - s[0]) / (s[-1] - s[0]), float(lab["onset"]), lost_fraction(y, lab["rise"], tail)


def lost_fraction(y, rise, tail) -> float:
    """The fraction of the rise a labelled collapse lost by the end: (smoothed peak - mean of the last
    ``tail`` points) / rise, the smoothing of the label rule."""
    from label_rule import _smooth

    sm = _smooth(np.asarray(y, float), max(3, int(round(0.05 * len(y)))))
    return float((sm.max() - np.mean(y[-tail:])) / rise)


def make_records(items, reuse):
    """The forecasters' records of ``items`` at :data:`PREFIXES`: from ``reuse`` where it has them, the others
    forecast here (raw forecasters, no collapse onset given: as the reused ones). ``(records, n_new, earlier)``."""
    import forecast_real_runs as frr

    records, todo, earlier = [], list(items), None
    if reuse and pathlib.Path(reuse).is_file():
        old = json.loads(pathlib.Path(reuse).read_text())
        earlier = old.get("earlier") or f"forecasts made in {old['forecast_s']:.0f} s ({old['load']} at its start)"
        have = {(r["run"], r["repo"], r["metric"], r["prefix"]): r for r in old["records"]}
        keys = [[(it[0], it[1], it[2], f) for f in PREFIXES] for it in items]
        records = [have[k] for ks in keys if all(k in have for k in ks) for k in ks]
        todo = [it for it, ks in zip(items, keys) if not all(k in have for k in ks)]
    if todo:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            records += frr.forecast_records(todo, PREFIXES)
    return records, len(todo), earlier


def cases(items, records):
    """One case per record: the record as before, the record with the prefix-collapse rule, its targets and
    what the collapse scores need (horizon, start level, outcome, at risk)."""
    import forecast_real_runs as frr

    from grpojax.diagnose import collapse_onset
    from grpojax.fit._collapse_hazard import start_level
    from grpojax.fit._window_forecast import _persistence

    series = {(it[0], it[1], it[2]): it for it in items}
    labels = {k: label(it[3], it[4]) for k, it in series.items()}
    out = []
    for r in records:
        key = (r["run"], r["repo"], r["metric"])
        if key not in series:
            continue
        _, _, _, s, y = series[key]
        t0, end = float(s[0]), float(s[-1])
        span = end - t0
        pre = s <= t0 + r["prefix"] * span
        sp, yp = s[pre], y[pre]
        u, onset_step, lost = labels[key]
        w = (end - frr.WINDOW * span, end)
        p_onset = collapse_onset(sp, yp)
        ruled = json.loads(json.dumps(r))
        if p_onset is not None:
            ruled["components"]["persistence"] = _persistence(sp, yp, w, 1, LEVEL, w[1] - w[0], since=p_onset)[0]
            ruled["component_status"] = {m: ("ok" if m == "persistence" else "collapse")
                                         for m in ruled["components"]}
        out.append({"repo": r["repo"], "run": r["run"], "metric": r["metric"], "prefix": r["prefix"],
                    "old": r, "new": ruled, "targets": fe.targets(r), "truth": r["truth"],
                    "horizon": (end - float(sp[-1])) / span, "start": start_level(yp),
                    "onset_fraction": u, "label_onset": onset_step, "lost": lost,
                    "at_risk": onset_step is None or onset_step > float(sp[-1]),
                    "outcome": onset_step is not None and onset_step > float(sp[-1]),
                    "prefix_onset": p_onset, "series_key": key})
    return out


# ------------------------------------------------------------------------------------------------ scoring


def _prep(recs):
    import forecast_real_runs as frr

    frr.rescale(recs)
    for r in recs:
        r["for_weights"], r["group"] = True, r["repo"]
    return frr.voting(recs)


def score(cs, extra):
    """The rows of every held-out case, each fold learned on the other repositories."""
    from _loro import folds

    from grpojax._exceedance import prob_at_least
    from grpojax.fit._collapse_hazard import hazard_from_onsets
    from grpojax.fit._window_forecast import _mixed

    rows = []
    for repo, train, test in folds(cs, lambda c: c["repo"]):
        seen, onsets = set(), []
        for c in train:  # one label per series
            if c["series_key"] not in seen:
                seen.add(c["series_key"])
                onsets.append(c["onset_fraction"])
        hz = hazard_from_onsets(onsets)
        base = {}
        for f in PREFIXES:
            risk = [c for c in train if c["prefix"] == f and c["at_risk"]]
            base[f] = (sum(c["outcome"] for c in risk) + 0.5) / (len(risk) + 1.0)
        cal = {v: fe._fit(_prep([c[key] for c in train]) + extra, PREFIXES)
               for v, key in (("as before", "old"), ("prefix rule", "new"))}
        for c in test:
            p_c = hz.p_collapse(c["horizon"])
            cfs = {"as before": fe._combined(_prep([c["old"]])[0], cal["as before"]),
                   "prefix rule": fe._combined(_prep([c["new"]])[0], cal["prefix rule"])}
            cf = cfs["prefix rule"]
            m, lo, hi, ex = _mixed(cf["mean"], cf["lo"], cf["hi"], LEVEL,
                                   {"quantiles": {"taus": cf["taus"], "values": cf["quantiles"]}}, p_c, c["start"], None)
            dists = {v: {"quantiles": {"taus": d["taus"], "values": d["quantiles"]}} for v, d in cfs.items()}
            dists["prefix rule + mixture"] = {"quantiles": ex["quantiles"]}
            ivals = {"as before": (cfs["as before"]["lo"], cfs["as before"]["hi"]), "prefix rule": (cf["lo"], cf["hi"]),
                     "prefix rule + mixture": (lo, hi)}
            ts = c["targets"]
            rows.append({"repo": repo, "run": c["run"], "metric": c["metric"], "prefix": c["prefix"],
                         "truth": c["truth"], "at_risk": c["at_risk"], "outcome": bool(c["outcome"]),
                         "prefix_onset": c["prefix_onset"], "label_onset": c["label_onset"],
                         "status": c["old"].get("status", "?"),
                         "p": {"hazard": p_c, "base rate": base[c["prefix"]], "always 0": 0.0},
                         "hazard_rate": hz.mean_rate(),
                         "points": {"as before": cfs["as before"]["mean"], "prefix rule": cf["mean"],
                                    "prefix rule + mixture": m},
                         "covered": {v: bool(a <= c["truth"] <= b) for v, (a, b) in ivals.items()},
                         "targets": ts.tolist(), "outcomes": [bool(c["truth"] >= t) for t in ts],
                         "p_target": {v: np.atleast_1d(prob_at_least(d, ts)).tolist() if ts.size else []
                                      for v, d in dists.items()}})
    return rows


def _boot(groups, values, seed=BOOT_SEED):
    """90% interval of the pooled mean of ``values`` from a bootstrap over the groups (repositories)."""
    groups, values = np.asarray(groups), np.asarray(values, float)
    reps = np.unique(groups)
    if reps.size < 2 or not values.size:
        return [float("nan"), float("nan")]
    by = [np.nonzero(groups == g)[0] for g in reps]
    rng = np.random.default_rng(seed)
    st = []
    for _ in range(N_BOOT):
        idx = np.concatenate([by[i] for i in rng.integers(0, reps.size, reps.size)])
        st.append(values[idx].mean())
    return [float(np.quantile(st, 0.05)), float(np.quantile(st, 0.95))]


def _target_pairs(rows, v):
    p, o, g = [], [], []
    for r in rows:
        p += r["p_target"][v]
        o += [float(x) for x in r["outcomes"]]
        g += [r["repo"]] * len(r["outcomes"])
    return np.array(p), np.array(o), np.array(g)


def summarise(rows):
    out = {}
    for f in PREFIXES:
        sel = [r for r in rows if r["prefix"] == f]
        risk = [r for r in sel if r["at_risk"]]
        o = np.array([float(r["outcome"]) for r in risk])
        g = np.array([r["repo"] for r in risk])
        sq = {m: (np.array([r["p"][m] for r in risk]) - o) ** 2 for m in P_METHODS}
        a = {"n_series": len(sel), "n_at_risk": len(risk), "n_collapsed_in_prefix": len(sel) - len(risk),
             "events": int(o.sum()), "event_repos": sorted({r["repo"] for r in risk if r["outcome"]}),
             "n_repos": len({r["repo"] for r in sel}),
             "brier": {m: float(sq[m].mean()) for m in P_METHODS},
             "mean_p": {m: float(np.mean([r["p"][m] for r in risk])) for m in P_METHODS},
             "brier_diff_ci90": {"hazard - always 0": _boot(g, sq["hazard"] - sq["always 0"]),
                                 "hazard - base rate": _boot(g, sq["hazard"] - sq["base rate"])},
             "per_repo": {}, "by_status": {}}
        for r in risk:  # what the prefix shows (the creep posterior's status) against a later collapse
            n_e = a["by_status"].setdefault(r["status"], [0, 0])
            n_e[0] += 1
            n_e[1] += int(r["outcome"])
        for rp in sorted({r["repo"] for r in risk}, key=str.lower):
            k = g == rp
            a["per_repo"][rp] = {"n": int(k.sum()), "events": int(o[k].sum()),
                                 **{m: float(sq[m][k].mean()) for m in P_METHODS}}
        b = {"coverage": {v: float(np.mean([r["covered"][v] for r in sel])) for v in VARIANTS},
             "brier": {v: fe.brier(*_target_pairs(sel, v)[:2]) for v in VARIANTS},
             "n_targets": int(_target_pairs(sel, VARIANTS[0])[0].size)}
        pm, ot, gt = _target_pairs(sel, "prefix rule + mixture")
        pr, _, _ = _target_pairs(sel, "prefix rule")
        po, _, _ = _target_pairs(sel, "as before")
        b["brier_diff_ci90"] = {"mixture - prefix rule": _boot(gt, (pm - ot) ** 2 - (pr - ot) ** 2),
                                "prefix rule - as before": _boot(gt, (pr - ot) ** 2 - (po - ot) ** 2)}
        fired = [r for r in sel if r["prefix_onset"] is not None]
        b["prefix_rule"] = {"fired": len(fired), "labelled_collapsed_in_prefix": len(sel) - len(risk),
                            "fired_and_labelled": sum(not r["at_risk"] for r in fired),
                            "abs_err": {v: float(np.mean([abs(r["points"][v] - r["truth"]) for r in fired]))
                                        if fired else None for v in ("as before", "prefix rule")},
                            "covered": {v: int(sum(r["covered"][v] for r in fired)) for v in VARIANTS},
                            "series": [f"{r['repo']}/{r['run']} {r['metric']}" for r in fired]}
        b["per_repo"] = {}
        for rp in sorted({r["repo"] for r in sel}, key=str.lower):
            q = [r for r in sel if r["repo"] == rp]
            b["per_repo"][rp] = {"n": len(q), **{f"coverage {v}": float(np.mean([r["covered"][v] for r in q]))
                                                 for v in VARIANTS},
                                 **{f"brier {v}": fe.brier(*_target_pairs(q, v)[:2]) if any(r["targets"] for r in q)
                                    else None for v in VARIANTS}}
        out[str(f)] = {"collapse": a, "forecast": b}
    return out


def _f(x, d=3):
    return "-" if x is None or not np.isfinite(x) else f"{x:.{d}f}"


def markdown(res) -> str:
    L = [f"# {NAME}: P(collapse before the end) and the forecast with a collapse branch, leave one repository out",
         "", f"Command: `{res['command']}`; {res['runtime_s']:.0f} s ({res['n_new']} series forecast here; "
         f"{res['load']} at the start; {res['threads']}); the other records: {res['earlier']}.", "",
         f"Corpus: {res['n_series']} series from {res['n_repos']} repositories ({'; '.join(res['corpora'])}). "
         f"Labelled collapses (label rule on the whole series): {res['labels']['events']} series in "
         f"{len(res['labels']['repos'])} repositories ({', '.join(res['labels']['repos'])}); "
         f"{res['labels']['exposure']:.1f} run fractions at risk. Hazard on every series: "
         f"{res['labels']['rate']:.4f} per run fraction (Jeffreys posterior mean). Fraction of the rise lost by the "
         f"end in the labelled collapses: {', '.join(f'{x:.2f}' for x in res['labels']['lost'])} (the branch assumes "
         "uniform on [0.5, 1]).", "",
         "## (a) P(collapse before the end): Brier score (at-risk series; lower is better)", "",
         "| prefix | at risk | collapses after the prefix (repositories) | collapsed in the prefix | hazard | base rate | "
         "always 0 | mean p (hazard) | hazard - always 0 [90%] | hazard - base rate [90%] |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for f in res["prefixes"]:
        a = res["summary"][str(f)]["collapse"]
        d = a["brier_diff_ci90"]
        L.append(f"| {f:.0%} | {a['n_at_risk']} | {a['events']} ({len(a['event_repos'])}) | "
                 f"{a['n_collapsed_in_prefix']} | " + " | ".join(_f(a["brier"][m], 4) for m in P_METHODS)
                 + f" | {_f(a['mean_p']['hazard'])} | [{_f(d['hazard - always 0'][0], 4)}, "
                   f"{_f(d['hazard - always 0'][1], 4)}] | [{_f(d['hazard - base rate'][0], 4)}, "
                   f"{_f(d['hazard - base rate'][1], 4)}] |")
    L += ["", "What the prefix shows (the creep posterior's status at the prefix's end) against a collapse after it "
          "(at-risk series: series / collapses):", "", "| prefix | " + " | ".join(
              sorted({s for f in res["prefixes"] for s in res["summary"][str(f)]["collapse"]["by_status"]})) + " |",
          "|---|" + "---|" * len({s for f in res["prefixes"] for s in res["summary"][str(f)]["collapse"]["by_status"]})]
    for f in res["prefixes"]:
        bs = res["summary"][str(f)]["collapse"]["by_status"]
        L.append(f"| {f:.0%} | " + " | ".join(f"{bs[s][0]} / {bs[s][1]}" if s in bs else "-" for s in sorted(
            {s for g in res["prefixes"] for s in res["summary"][str(g)]["collapse"]["by_status"]})) + " |")
    L += ["", "Per repository (those with a collapse after the prefix):", "",
          "| prefix | repository | at risk | collapses | hazard | base rate | always 0 |", "|---|---|---|---|---|---|---|"]
    for f in res["prefixes"]:
        for rp, x in res["summary"][str(f)]["collapse"]["per_repo"].items():
            if x["events"]:
                L.append(f"| {f:.0%} | {rp} | {x['n']} | {x['events']} | " + " | ".join(_f(x[m], 4) for m in P_METHODS)
                         + " |")
    L += ["", "## (b) The forecast: 90% coverage and Brier score of P(final >= target) (pooled over series)", "",
          "| prefix | series | targets | " + " | ".join(f"coverage, {v}" for v in VARIANTS) + " | "
          + " | ".join(f"Brier, {v}" for v in VARIANTS) + " | mixture - prefix rule [90%] | prefix rule - as before [90%] |",
          "|---|---|---|" + "---|" * (2 * len(VARIANTS) + 2)]
    for f in res["prefixes"]:
        b = res["summary"][str(f)]["forecast"]
        n = res["summary"][str(f)]["collapse"]["n_series"]
        d = b["brier_diff_ci90"]
        L.append(f"| {f:.0%} | {n} | {b['n_targets']} | " + " | ".join(_f(b["coverage"][v], 2) for v in VARIANTS)
                 + " | " + " | ".join(_f(b["brier"][v], 4) for v in VARIANTS)
                 + f" | [{_f(d['mixture - prefix rule'][0], 4)}, {_f(d['mixture - prefix rule'][1], 4)}] | "
                   f"[{_f(d['prefix rule - as before'][0], 4)}, {_f(d['prefix rule - as before'][1], 4)}] |")
    L += ["", "## Prefixes that already hold a collapse (the prefix rule fired)", "",
          "| prefix | fired | of them labelled collapsed in the prefix | labelled collapsed in the prefix | "
          "mean abs error, as before | with the rule | covered: as before / rule / rule + mixture |",
          "|---|---|---|---|---|---|---|"]
    for f in res["prefixes"]:
        x = res["summary"][str(f)]["forecast"]["prefix_rule"]
        L.append(f"| {f:.0%} | {x['fired']} | {x['fired_and_labelled']} | {x['labelled_collapsed_in_prefix']} | "
                 f"{_f(x['abs_err']['as before'])} | {_f(x['abs_err']['prefix rule'])} | "
                 + " / ".join(str(x["covered"][v]) for v in VARIANTS) + " |")
    for f in res["prefixes"]:
        x = res["summary"][str(f)]["forecast"]["prefix_rule"]
        if x["series"]:
            L.append(f"\nFired from {f:.0%}: " + "; ".join(x["series"]) + ".")
    L += ["", "## Verdicts", "", "| prefix | coverage with the mixture in 0.85-0.95 | mixture Brier below the "
          "prefix rule's | hazard Brier below always 0 | hazard Brier below the base rate |", "|---|---|---|---|---|"]
    for f in res["prefixes"]:
        v = res["verdicts"][str(f)]
        L.append(f"| {f:.0%} | " + " | ".join("yes" if v[k] else "**no**" for k in
                                               ("mixture_coverage_in_band", "mixture_brier_lower",
                                                "hazard_below_zero", "hazard_below_base")) + " |")
    L += ["", "## Per repository: coverage and Brier of P(final >= target)", ""]
    for f in res["prefixes"]:
        L += [f"From {f:.0%} of the run:", "", "| repository | series | " + " | ".join(f"coverage, {v}" for v in VARIANTS)
              + " | " + " | ".join(f"Brier, {v}" for v in VARIANTS) + " |", "|---|---|" + "---|" * (2 * len(VARIANTS))]
        for rp, x in res["summary"][str(f)]["forecast"]["per_repo"].items():
            L.append(f"| {rp} | {x['n']} | " + " | ".join(_f(x[f"coverage {v}"], 2) for v in VARIANTS) + " | "
                     + " | ".join(_f(x[f"brier {v}"], 4) for v in VARIANTS) + " |")
        L.append("")
    return "\n".join(L)


def verdicts(summary) -> dict:
    out = {}
    for f in PREFIXES:
        a, b = summary[str(f)]["collapse"], summary[str(f)]["forecast"]
        out[str(f)] = {"mixture_coverage_in_band": BAND[0] <= b["coverage"]["prefix rule + mixture"] <= BAND[1],
                       "rule_coverage_in_band": BAND[0] <= b["coverage"]["prefix rule"] <= BAND[1],
                       "mixture_brier_lower": b["brier"]["prefix rule + mixture"] < b["brier"]["prefix rule"],
                       "hazard_below_zero": a["brier"]["hazard"] < a["brier"]["always 0"],
                       "hazard_below_base": a["brier"]["hazard"] < a["brier"]["base rate"]}
    return out


def run(out: pathlib.Path, reuse) -> dict:
    import forecast_real_runs as frr

    from grpojax._experiment import load_average
    from grpojax._io import write_json, write_text_atomic
    from grpojax.fit._collapse_hazard import hazard_from_onsets

    t0 = time.perf_counter()
    load = load_average()
    items, skipped, names = fe.load_items()
    if not items:
        raise SystemExit("no real-run series found: nothing to score")
    records, n_new, earlier = make_records(items, reuse)
    cs = cases(items, records)
    extra, extra_repos = frr.train_only_records([str(x) for x in frr.TRAIN_RECORDS], {c["repo"] for c in cs})
    frr.rescale(extra)
    extra = [r for r in frr.voting(extra) if r["prefix"] in PREFIXES]
    labs = {}
    for c in cs:
        labs[c["series_key"]] = (c["onset_fraction"], c["lost"], c["repo"])
    hz = hazard_from_onsets([v[0] for v in labs.values()])
    rows = score(cs, extra)
    summary = summarise(rows)
    res = {"name": NAME, "prefixes": list(PREFIXES), "level": LEVEL, "corpora": names, "n_series": len(items),
           "n_repos": len({it[1] for it in items}), "n_new": n_new, "earlier": earlier,
           "train_only": {"records": len(extra), "repos": extra_repos},
           "labels": {"events": hz.events, "exposure": hz.exposure, "rate": hz.mean_rate(),
                      "repos": sorted({v[2] for v in labs.values() if v[0] is not None}, key=str.lower),
                      "lost": sorted(v[1] for v in labs.values() if v[0] is not None),
                      "series": len(labs)},
           "summary": summary, "verdicts": verdicts(summary), "rows": rows, "records": records,
           "skipped": [list(s) for s in skipped], "runtime_s": time.perf_counter() - t0, "load": load,
           "threads": _threads(),
           "command": "python experiments/forecast_collapse.py" + "".join(
               f" {pathlib.Path(a).name if '/' in a else a}" for a in sys.argv[1:])}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out, f"{NAME}.json", res)
    write_text_atomic(out / f"{NAME}.md", markdown(res) + "\n")
    return res


def _threads() -> str:
    import os

    return f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} on {os.cpu_count()} CPUs"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "experiments" / "results" / NAME), help="output folder")
    p.add_argument("--reuse-records", default=str(DEFAULT_RECORDS), metavar="JSON",
                   help="the forecasters' records of an earlier forecast_exceedance.py or forecast_collapse.py run "
                        "(default: the committed forecast_exceedance.json)")
    a = p.parse_args(argv)
    res = run(pathlib.Path(a.out), a.reuse_records)
    print(markdown(res))


if __name__ == "__main__":
    main()
