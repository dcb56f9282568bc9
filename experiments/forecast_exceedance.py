"""Interval coverage and P(final ≥ target) of the window forecast on real GRPO runs, leave one repository out.

Question. From the first 25% and 50% of a run, does the 90% interval of the forecast of the final reward
(the mean over the last 10% of the steps) hold it about 90% of the time, pooled over series? And is the
probability the forecast gives that the final reward reaches a target (``WindowForecast.prob_at_least``)
better, by the Brier score, than the same probability from persistence and from the sigmoid law?

Corpus. Every train and eval reward series of at least 40 points in the real corpora present here: the
development corpus of real runs and logs beside the repository (when present), the public runs of
``benchmarks/corpus`` whose files are cached, and the collapse corpus (``benchmarks/collapse_corpus``,
files in ``data/collapse-corpus-cache``; 58 of its 65 files are also pinned by the held-out forecast
manifests). Repositories kept for the independent evaluation (``_loro.RESERVED_REPOS``) are never read.

Forecasts. For each series and prefix, the four forecasters of ``forecast_window(method="combined")``
(creep posterior, persistence, exponential, sigmoid) with their own 90% intervals and the features the
calibration uses (``forecast_real_runs.forecast_records``). The combined forecast is re-made in every fold.

Protocol (``experiments/_loro.py``), fixed before any score was computed. For each repository in turn:

1. the calibration (median of the forecasters that vouch for their fit, error unit the prefix's sd or their
   disagreement, split-conformal quantiles at finite-sample levels: the shipped rule) is learned from the
   other repositories' series, plus the committed forecast records of repositories not in this corpus
   (``forecast_real_runs.TRAIN_RECORDS``; training only, never scored);
2. the held-out repository's series are forecast with it: the 90% interval and the predictive quantiles.

Also reported, learned on the training side only:

- **inflated**: the combined predictive distribution stretched about its median by a factor ``c`` per
  prefix, ``c`` the 90% quantile, pooled over the training series (each series weighing the same), of
  ``|error| / half-width of the 90% interval`` of forecasts made for each training repository with a
  calibration learned without it (nested leave one repository out). The shipped rule weighs every
  repository the same; this factor aims at the pooled coverage instead;
- **persistence, widened** and **sigmoid, widened**: each baseline's own distribution stretched about its
  point by the same kind of factor, learned on the training series' errors (no nesting: nothing else is
  fitted), so that the comparison is not won only because a baseline's own interval is too narrow.

Targets (the rule, fixed before any score was computed). For every record, five targets
``target = L + k·s``, ``k ∈ {−1, 0, 1, 2, 3}``: ``L`` the prefix level (persistence's point, the mean of
the prefix's last window, as wide as the forecast window) and ``s`` the prefix's noise sd (the AR(1)
marginal sd from first differences, ``features["noise_sd"]``). A record whose noise sd is not positive gets
no targets. The outcome is ``1{final ≥ target}``.

Probabilities of the same event from:

- **combined**: ``prob_at_least`` of the fold's calibrated quantiles (normal tails beyond the outermost);
- **persistence**: the normal of persistence's own interval (the mean of the prefix's last window and the
  noise of that mean and of the window mean, AR(1));
- **sigmoid**: the split normal through the least-squares sigmoid's point and its own 90% interval (moving-
  block residual bootstrap plus the noise of the window mean); a sigmoid that could not be fitted is
  scored as persistence (counted).

Also: the calibration that ships, on the series of the repositories it was not learned from (no fold).

Scores: coverage of the 90% interval pooled over series, per repository and averaged over repositories;
the Brier score ``mean (p − outcome)²`` pooled over series and targets, per ``k``, per repository; the
difference to each baseline with a 90% interval from a bootstrap over repositories (2,000 resamples,
series of a repository resampled together). Acceptance: pooled coverage within 0.85–0.95 from 25% and from
50% of the run; the combined Brier score below persistence's and the sigmoid's at both prefixes.

Usage::

    python experiments/forecast_exceedance.py [--out experiments/results/forecast_exceedance]
        [--reuse-records JSON] [--train-records JSON ...|none]

``--reuse-records``: take the forecasts from an earlier run's ``forecast_exceedance.json`` (redo the scoring).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import warnings

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))
sys.path.insert(0, str(ROOT / "benchmarks" / "collapse_corpus"))

NAME = "forecast_exceedance"
PREFIXES = (0.25, 0.5)
KS = (-1.0, 0.0, 1.0, 2.0, 3.0)
LEVEL = 0.9
BAND = (0.85, 0.95)
N_BOOT = 2000
BOOT_SEED = 35
PROB_METHODS = ("combined", "combined, inflated", "persistence", "sigmoid", "persistence, widened",
                "sigmoid, widened")
COLLAPSE_CORPUS = ROOT / "benchmarks" / "collapse_corpus"


def load_items():
    """``([(run_id, repo, metric, steps, values)], [skips], [corpus names])`` over every real corpus present."""
    import forecast_real_runs as frr

    items, skipped, names = [], [], []
    for c in frr.DEFAULT_CORPORA:
        if c.is_dir():
            it, sk = frr.load_corpus(c)
            items += it
            skipped += sk
            names.append(f"development runs ({c.name}): {len(it)} series")
    it, sk = frr.load_public_corpus()
    items += it
    skipped += sk
    names.append(f"benchmarks/corpus (cached files): {len(it)} series")
    if (COLLAPSE_CORPUS / "MANIFEST.tsv").is_file():
        from corpus import load_runs

        runs, absent = load_runs(COLLAPSE_CORPUS)
        it, sk = frr._runs_items([(row["id"], row["repo"], run) for row, run in runs])
        items += it
        skipped += sk + [(rid, "?", f"absent: {why[-120:]}") for rid, why in absent]
        names.append(f"benchmarks/collapse_corpus (cached files): {len(it)} series")
    seen, out = set(), []
    for x in items:  # a run pinned by two corpora is scored once
        key = (x[1].lower(), x[0], x[2])
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out, skipped, names


# ------------------------------------------------------------------------------------------------ scoring


def targets(record) -> np.ndarray:
    """The record's targets ``L + k·s`` (:data:`KS`); empty when the prefix's noise sd is not positive."""
    level = float(record.get("raw_components", record["components"])["persistence"])
    s = float(record["noise_sd"])
    if not (np.isfinite(s) and s > 0 and np.isfinite(level)):
        return np.array([])
    return level + np.asarray(KS) * s


def brier(p, outcome) -> float:
    """``mean (p − outcome)²``."""
    p, o = np.asarray(p, float), np.asarray(outcome, float)
    return float(np.mean((p - o) ** 2))


def _stretch(quantiles, centre, c):
    return centre + c * (np.asarray(quantiles, float) - centre)


def _baseline(r, m):
    """``(point, lo, hi, failed)`` of baseline ``m`` in record ``r`` (a failed fit: persistence's)."""
    comps = r.get("raw_components", r["components"])
    pt, (lo, hi) = comps[m], r["intervals"][m]
    if not all(np.isfinite([pt, lo, hi])) or not lo <= pt <= hi:
        return (comps["persistence"], *r["intervals"]["persistence"], True)
    return pt, lo, hi, False


def baseline_widening(train, m) -> float:
    """The factor by which baseline ``m``'s own 90% interval must be stretched about its point to hold 90% of
    the training series' outcomes (pooled; each side scaled by its own half-width)."""
    ratios = []
    for r in train:
        pt, lo, hi, _ = _baseline(r, m)
        half = (hi - pt) if r["truth"] >= pt else (pt - lo)
        err = abs(r["truth"] - pt)
        ratios.append(err / half if half > 0 else (0.0 if err == 0 else np.inf))
    return _quantile(ratios)


def _quantile(ratios) -> float:
    """The :data:`LEVEL` quantile of ``ratios`` (1 when there are none; an infinite ratio, an error against a
    zero-width interval, counts as a very large one)."""
    if not len(ratios):
        return 1.0
    return float(np.quantile(np.minimum(np.asarray(ratios, float), 1e6), LEVEL))


def _combined(r, cal):
    from grpojax.fit import calibrated_forecast

    return calibrated_forecast(r["components"], horizon=r["horizon"], noise_ratio=r["noise_ratio"], scale=r["scale"],
                               level=LEVEL, cal=cal)


def _fit(train, prefixes):
    from grpojax.fit import fit_calibration

    horizons = sorted({round((1 - f) / f, 6) for f in prefixes})
    return fit_calibration(train, horizons=horizons)


def inflation(train, extra, prefixes) -> dict:
    """``{prefix: c}``: the pooled 90% quantile of ``|error| / half-width`` of the combined forecasts of each
    training repository made with a calibration learned without it (nested leave one repository out)."""
    from _loro import folds

    ratios = {f: [] for f in prefixes}
    for _, inner_train, inner_test in folds(train, lambda r: r["repo"]):
        cal = _fit(inner_train + extra, prefixes)
        for r in inner_test:
            cf = _combined(r, cal)
            half = 0.5 * (cf["hi"] - cf["lo"])
            err = abs(r["truth"] - cf["mean"])
            ratios[r["prefix"]].append(err / half if half > 0 else (0.0 if err == 0 else np.inf))
    return {f: _quantile(v) for f, v in ratios.items()}


def score_fold(train, test, extra, prefixes):
    """Rows for the held-out ``test`` records: coverage and the probability of each method for each target."""
    from grpojax._exceedance import prob_at_least

    cal = _fit(train + extra, prefixes)
    infl = inflation(train, extra, prefixes)
    widen = {m: {f: baseline_widening([r for r in train + extra if r["prefix"] == f], m) for f in prefixes}
             for m in ("persistence", "sigmoid")}
    rows = []
    for r in test:
        f = r["prefix"]
        cf = _combined(r, cal)
        c = infl[f]
        q = np.asarray(cf["quantiles"], float)
        lo_i, hi_i = _stretch([cf["lo"], cf["hi"]], cf["mean"], c)
        dists = {"combined": {"quantiles": {"taus": cf["taus"], "values": q}},
                 "combined, inflated": {"quantiles": {"taus": cf["taus"], "values": _stretch(q, cf["mean"], c)}}}
        failed = {}
        for m in ("persistence", "sigmoid"):
            pt, lo, hi, failed[m] = _baseline(r, m)
            w = widen[m][f]
            dists[m] = {"mean": pt, "lo": lo, "hi": hi, "level": LEVEL}
            dists[f"{m}, widened"] = {"mean": pt, "lo": pt - w * (pt - lo), "hi": pt + w * (hi - pt), "level": LEVEL}
        ts = targets(r)
        row = {k: r[k] for k in ("run", "repo", "metric", "prefix", "truth", "sd", "noise_sd")}
        row.update({"level": float(r.get("raw_components", r["components"])["persistence"]),
                    "forecast": cf["mean"], "lo": cf["lo"], "hi": cf["hi"],
                    "covered": bool(cf["lo"] <= r["truth"] <= cf["hi"]),
                    "covered_inflated": bool(lo_i <= r["truth"] <= hi_i), "inflation": c,
                    "persistence_covered": bool(dists["persistence"]["lo"] <= r["truth"] <= dists["persistence"]["hi"]),
                    "sigmoid_covered": bool(dists["sigmoid"]["lo"] <= r["truth"] <= dists["sigmoid"]["hi"]),
                    "sigmoid_failed": failed["sigmoid"], "targets": ts.tolist(),
                    "outcomes": [bool(r["truth"] >= t) for t in ts],
                    "p": {m: np.atleast_1d(prob_at_least(d, ts)).tolist() if ts.size else [] for m, d in dists.items()}})
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------ summary


def _pairs(rows, m, k=None):
    """``(p, outcome, repo)`` arrays over the rows' targets (only target index ``k`` of :data:`KS` if given)."""
    p, o, g = [], [], []
    for r in rows:
        idx = range(len(r["targets"])) if k is None else ([k] if r["targets"] else [])
        for i in idx:
            p.append(r["p"][m][i])
            o.append(float(r["outcomes"][i]))
            g.append(r["repo"])
    return np.array(p), np.array(o), np.array(g)


def _boot_diff(rows, m, base, seed=BOOT_SEED):
    """90% interval of ``Brier(m) − Brier(base)`` pooled, from a bootstrap over repositories."""
    pm, o, g = _pairs(rows, m)
    pb, _, _ = _pairs(rows, base)
    repos = np.unique(g)
    if repos.size < 2:
        return [float("nan"), float("nan")]
    d = (pm - o) ** 2 - (pb - o) ** 2
    by = [np.nonzero(g == rp)[0] for rp in repos]
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(N_BOOT):
        pick = rng.integers(0, repos.size, repos.size)
        idx = np.concatenate([by[i] for i in pick])
        stats.append(d[idx].mean())
    return [float(np.quantile(stats, 0.05)), float(np.quantile(stats, 0.95))]


def summarise(rows, prefixes):
    out = {}
    for f in prefixes:
        sel = [r for r in rows if r["prefix"] == f]
        repos = sorted({r["repo"] for r in sel}, key=str.lower)
        per = {}
        for rp in repos:
            q = [r for r in sel if r["repo"] == rp]
            per[rp] = {"n_series": len(q), "coverage": float(np.mean([r["covered"] for r in q])),
                       "coverage_inflated": float(np.mean([r["covered_inflated"] for r in q])),
                       **{f"brier_{m}": brier(*_pairs(q, m)[:2]) if any(r["targets"] for r in q) else None
                          for m in PROB_METHODS}}
        brier_all = {m: brier(*_pairs(sel, m)[:2]) for m in PROB_METHODS}
        by_k = {str(k): {m: brier(*_pairs(sel, m, i)[:2]) for m in PROB_METHODS} for i, k in enumerate(KS)}
        base_rate = {str(k): float(np.mean(_pairs(sel, "combined", i)[1])) for i, k in enumerate(KS)}
        out[str(f)] = {
            "n_series": len(sel), "n_repos": len(repos), "n_targets": int(_pairs(sel, "combined")[0].size),
            "coverage_pooled": float(np.mean([r["covered"] for r in sel])),
            "coverage_repo_mean": float(np.mean([p["coverage"] for p in per.values()])),
            "coverage_inflated_pooled": float(np.mean([r["covered_inflated"] for r in sel])),
            "coverage_inflated_repo_mean": float(np.mean([p["coverage_inflated"] for p in per.values()])),
            "coverage_persistence_pooled": float(np.mean([r["persistence_covered"] for r in sel])),
            "coverage_sigmoid_pooled": float(np.mean([r["sigmoid_covered"] for r in sel])),
            "inflation_median": float(np.median([r["inflation"] for r in sel])),
            "inflation_range": [float(min(r["inflation"] for r in sel)), float(max(r["inflation"] for r in sel))],
            "sigmoid_failed": int(sum(r["sigmoid_failed"] for r in sel)),
            "brier": brier_all, "brier_by_k": by_k, "outcome_rate_by_k": base_rate,
            "brier_diff_ci90": {f"{m} - {b}": _boot_diff(sel, m, b) for m in ("combined", "combined, inflated")
                                for b in ("persistence", "sigmoid", "persistence, widened", "sigmoid, widened")},
            "per_repo": per,
        }
    return out


def shipped_check(real, prefixes) -> dict:
    """What ships, on what it was not learned from: the shipped calibration (``default_calibration()``, learned
    from the committed records of ``forecast_real_runs.TRAIN_RECORDS``) on the series of the repositories
    those records do not hold. ``{prefix: {n_series, n_repos, repos, coverage_pooled, brier}}``."""
    import forecast_real_runs as frr

    from grpojax._exceedance import prob_at_least
    from grpojax.fit._calibration import default_calibration

    seen = set()
    for path in frr.TRAIN_RECORDS:
        if pathlib.Path(path).is_file():
            seen |= {r["repo"].lower() for r in json.loads(pathlib.Path(path).read_text())["records"]}
    cal = default_calibration()
    out = {}
    for f in prefixes:
        sel = [r for r in real if r["prefix"] == f and r["repo"].lower() not in seen]
        cov, p, o = [], [], []
        for r in sel:
            cf = _combined(r, cal)
            cov.append(cf["lo"] <= r["truth"] <= cf["hi"])
            ts = targets(r)
            if ts.size:
                p += np.atleast_1d(prob_at_least({"quantiles": {"taus": cf["taus"], "values": cf["quantiles"]}},
                                                 ts)).tolist()
                o += [float(r["truth"] >= t) for t in ts]
        out[str(f)] = {"n_series": len(sel), "n_repos": len({r["repo"] for r in sel}),
                       "repos": sorted({r["repo"] for r in sel}, key=str.lower),
                       "coverage_pooled": float(np.mean(cov)) if cov else None,
                       "brier": brier(p, o) if p else None}
    return out


def verdicts(summary, prefixes) -> dict:
    out = {}
    for f in prefixes:
        s = summary[str(f)]
        b = s["brier"]
        out[str(f)] = {"coverage_in_band": BAND[0] <= s["coverage_pooled"] <= BAND[1],
                       "inflated_coverage_in_band": BAND[0] <= s["coverage_inflated_pooled"] <= BAND[1],
                       "brier_below_persistence": b["combined"] < b["persistence"],
                       "brier_below_sigmoid": b["combined"] < b["sigmoid"]}
    return out


def _f(x, d=3):
    return "-" if x is None or not np.isfinite(x) else f"{x:.{d}f}"


def markdown(res) -> str:
    prefixes = res["prefixes"]
    L = [f"# {NAME}: 90% coverage and P(final ≥ target), leave one repository out", "",
         f"Command: `{res['command']}`; {res['runtime_s']:.0f} s ({res['forecast_s']:.0f} s of forecasts, "
         f"{res['load']} at the start)" + (f"; {res['earlier']}" if res.get("earlier") else "") + ".", "",
         f"Corpus: {res['n_series']} series from {res['n_repos']} repositories "
         f"({'; '.join(res['corpora'])}); training-only records of {len(res['train_only']['repos'])} more "
         f"repositories. Final reward = the mean over the last {res['window']:.0%} of the steps. Targets "
         f"L + k·s, k in {list(KS)} (L: the prefix's last-window mean; s: its noise sd).", "",
         "## Coverage of the 90% interval (pooled over series)", "",
         "| prefix | series | repositories | combined | combined, inflated (factor, median) | persistence | sigmoid | "
         "combined, repository mean |", "|---|---|---|---|---|---|---|---|"]
    for f in prefixes:
        s = res["summary"][str(f)]
        L.append(f"| {f:.0%} | {s['n_series']} | {s['n_repos']} | {_f(s['coverage_pooled'], 2)} | "
                 f"{_f(s['coverage_inflated_pooled'], 2)} ({_f(s['inflation_median'], 2)}) | "
                 f"{_f(s['coverage_persistence_pooled'], 2)} | {_f(s['coverage_sigmoid_pooled'], 2)} | "
                 f"{_f(s['coverage_repo_mean'], 2)} |")
    L += ["", "## Brier score of P(final ≥ target) (pooled over series and targets; lower is better)", "",
          "| prefix | targets | " + " | ".join(PROB_METHODS) + " |", "|---|---|" + "---|" * len(PROB_METHODS)]
    for f in prefixes:
        s = res["summary"][str(f)]
        L.append(f"| {f:.0%} | {s['n_targets']} | " + " | ".join(_f(s["brier"][m], 4) for m in PROB_METHODS) + " |")
    L += ["", "Difference of Brier scores, 90% interval from a bootstrap over repositories (negative: combined "
          "better):", "", "| prefix | comparison | interval |", "|---|---|---|"]
    for f in prefixes:
        for k, ci in res["summary"][str(f)]["brier_diff_ci90"].items():
            L.append(f"| {f:.0%} | {k} | [{_f(ci[0], 4)}, {_f(ci[1], 4)}] |")
    L += ["", "By target (k), with the share of outcomes at or above the target:", "",
          "| prefix | k | reached | " + " | ".join(PROB_METHODS) + " |", "|---|---|---|" + "---|" * len(PROB_METHODS)]
    for f in prefixes:
        s = res["summary"][str(f)]
        for k in KS:
            L.append(f"| {f:.0%} | {k:g} | {_f(s['outcome_rate_by_k'][str(k)], 2)} | "
                     + " | ".join(_f(s["brier_by_k"][str(k)][m], 4) for m in PROB_METHODS) + " |")
    L += ["", "## Verdicts", "", "| prefix | coverage in 0.85–0.95 | inflated coverage in 0.85–0.95 | "
          "Brier below persistence | Brier below sigmoid |", "|---|---|---|---|---|"]
    for f in prefixes:
        v = res["verdicts"][str(f)]
        L.append(f"| {f:.0%} | " + " | ".join("yes" if v[k] else "**no**" for k in
                                               ("coverage_in_band", "inflated_coverage_in_band",
                                                "brier_below_persistence", "brier_below_sigmoid")) + " |")
    sc = res.get("shipped_check")
    if sc:
        s0 = sc[str(prefixes[0])]
        L += ["", "## The shipped calibration on repositories it was not learned from", "",
              f"{s0['n_series']} series from {s0['n_repos']} repositories ({', '.join(s0['repos'])}), forecast with "
              "the calibration that ships (learned from the committed records of the other repositories):", "",
              "| prefix | series | 90% coverage (pooled) | Brier of P(final ≥ target) |", "|---|---|---|---|"]
        for f in prefixes:
            x = sc[str(f)]
            L.append(f"| {f:.0%} | {x['n_series']} | {_f(x['coverage_pooled'], 2)} | {_f(x['brier'], 4)} |")
    L += ["", "## Per repository", ""]
    for f in prefixes:
        s = res["summary"][str(f)]
        L += [f"From {f:.0%} of the run (sigmoid fits that failed, scored as persistence: {s['sigmoid_failed']}):", "",
              "| repository | series | coverage | inflated | Brier combined | persistence | sigmoid |",
              "|---|---|---|---|---|---|---|"]
        for rp, p in s["per_repo"].items():
            L.append(f"| {rp} | {p['n_series']} | {_f(p['coverage'], 2)} | {_f(p['coverage_inflated'], 2)} | "
                     f"{_f(p['brier_combined'], 4)} | {_f(p['brier_persistence'], 4)} | {_f(p['brier_sigmoid'], 4)} |")
        L.append("")
    if res["skipped"]:
        L += [f"Skipped: {len(res['skipped'])} series or runs (too short, constant, absent or reserved; listed in "
              "the JSON).", ""]
    return "\n".join(L)


def score(records, train_records=None) -> dict:
    """Everything scored from the forecast records (no log is read): ``{"train_only", "summary", "verdicts",
    "shipped_check", "rows"}``; ``train_records``: :func:`forecast_real_runs.train_only_records`' paths."""
    import forecast_real_runs as frr
    from _loro import folds

    frr.rescale(records)
    for r in records:
        r["for_weights"], r["group"] = True, r["repo"]
    real = frr.voting(records)
    extra, extra_repos = frr.train_only_records(train_records, {r["repo"] for r in real})
    frr.rescale(extra)
    extra = [r for r in frr.voting(extra) if r["prefix"] in PREFIXES]
    rows = []
    for _, train, test in folds(real, lambda r: r["repo"]):
        rows += score_fold(train, test, extra, PREFIXES)
    summary = summarise(rows, PREFIXES)
    return {"train_only": {"records": len(extra), "repos": extra_repos}, "summary": summary,
            "verdicts": verdicts(summary, PREFIXES), "shipped_check": shipped_check(real, PREFIXES), "rows": rows}


def run(out: pathlib.Path, reuse=None, train_records=None) -> dict:
    import forecast_real_runs as frr

    from grpojax._experiment import load_average
    from grpojax._io import write_json, write_text_atomic

    t0 = time.perf_counter()
    load = load_average()
    items, skipped, names = load_items()
    if not items:
        raise SystemExit("no real-run series found: nothing to score")
    records = []
    todo = items
    earlier = None
    if reuse:
        old = json.loads(pathlib.Path(reuse).read_text())
        earlier = old.get("earlier") or (f"forecasts made in an earlier run in {old['forecast_s']:.0f} s "
                                         f"({old['load']} at its start)")
        have = {(r["run"], r["repo"], r["metric"], r["prefix"]): r for r in old["records"]}
        keys = [[(it[0], it[1], it[2], f) for f in PREFIXES] for it in items]
        records = [have[k] for ks in keys if all(k in have for k in ks) for k in ks]
        todo = [it for it, ks in zip(items, keys) if not all(k in have for k in ks)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if todo:
            records += frr.forecast_records(todo, PREFIXES)
    t_fc = time.perf_counter() - t0
    scored = score(records, train_records)
    res = {"name": NAME, "prefixes": list(PREFIXES), "ks": list(KS), "window": frr.WINDOW, "level": LEVEL,
           "corpora": names, "n_series": len(items), "n_repos": len({it[1] for it in items}), **scored,
           "records": records,
           "skipped": [list(s) for s in skipped], "runtime_s": time.perf_counter() - t0, "forecast_s": t_fc,
           "load": load, "earlier": earlier, "command": "python experiments/forecast_exceedance.py" + "".join(
               f" {pathlib.Path(a).name if '/' in a else a}" for a in sys.argv[1:])}
    out.mkdir(parents=True, exist_ok=True)
    write_json(out, f"{NAME}.json", res)
    write_text_atomic(out / f"{NAME}.md", markdown(res) + "\n")
    return res


def main(argv=None):
    import forecast_real_runs as frr

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "experiments" / "results" / NAME), help="output folder")
    p.add_argument("--reuse-records", default=None, metavar="JSON",
                   help="take the forecasts from an earlier run's forecast_exceedance.json (redo the scoring)")
    p.add_argument("--train-records", action="append", default=None, metavar="JSON",
                   help="forecast_real_runs.json files whose repositories not in this corpus join every fold's "
                        "training side (default: the committed ones; 'none': leave out)")
    a = p.parse_args(argv)
    tr = a.train_records or [str(x) for x in frr.TRAIN_RECORDS]
    train = None if [t.lower() for t in tr] == ["none"] else tr
    res = run(pathlib.Path(a.out), a.reuse_records, train)
    print(markdown(res))


if __name__ == "__main__":
    main()
