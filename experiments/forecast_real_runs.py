"""Window-mean forecasts on real GRPO runs: the creep model against persistence and two laws.

For every series (train reward, and eval reward where logged) with at least 40 points: forecast the
mean over the last 10% of the run from the first 25% and 50% of the steps, with a 90% interval, by

- ``creep`` (the default forecaster, :func:`grpojax.fit.forecast_window`): posterior predictive;
- ``persistence``: mean of the prefix's last window, interval from the prefix's own noise;
- ``exponential`` and ``sigmoid`` (ScaleRL, in steps): least squares, interval by a moving-block
  residual bootstrap (100 refits) plus the noise of the window mean.

Scores: absolute error of the point forecast (raw, and in units of the run's full-curve standard
deviation) and whether the interval holds the realised window mean. Runs are averaged per source
repository first, then over repositories.

Hold-out rule (fixed before any tuning): sort the source repositories' names with Python's
``sorted``; positions 0, 2, 4, ... are *tuned* (the only ones looked at while choosing priors and
settings), positions 1, 3, 5, ... are *held out*. Both groups are reported separately.

Usage::

    python experiments/forecast_real_runs.py --corpus DIR [--corpus DIR2] [--out DIR] [--quick]

A corpus folder is either a real-runs folder (``<id>/run.jsonl`` with ``INDEX.tsv`` naming each
run's source repository) or a folder of log files with a ``README.md`` table naming each file's
source repository. Without ``--corpus``, the development corpus folders next to the repository are
used when they exist; when none exists, the claims are reported as ``not_tested``. ``--quick``: the
first prefix (25%) only. Besides the table (``forecast_real_runs.md``/``.json``) it writes
``summary.json`` with its claims for ``grpojax reproduce``.
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
DEFAULT_CORPORA = (ROOT.parent / "shared" / "real-runs", ROOT.parent / "shared" / "real-logs")

NAME = "forecast_real_runs"
METHODS = ("creep", "persistence", "exponential", "sigmoid")
PREFIXES = (0.25, 0.5)
MIN_SERIES = 40
WINDOW = 0.1
LEVEL = 0.9


def load_corpus(root: pathlib.Path):
    """``[(run_id, repo, metric, steps, values)]`` for every series with ≥ MIN_SERIES points, and skips."""
    from grpojax.logs import LogFormatError, read_log, read_logs

    items, skipped = [], []
    index = root / "INDEX.tsv"
    entries = []
    if index.is_file():
        rows = [ln.split("\t") for ln in index.read_text().splitlines()[1:] if ln.strip()]
        entries = [(root / r[0] / "run.jsonl", r[0], r[1]) for r in rows]
    elif (root / "README.md").is_file():
        for ln in (root / "README.md").read_text().splitlines():
            if ln.startswith("| `"):
                cells = [c.strip() for c in ln.strip("|").split("|")]
                fname = cells[0].strip("`")
                repo = cells[1].split("@")[0].strip()
                entries.append((root / fname, fname.rsplit(".", 1)[0], repo))
    for path, rid, repo in entries:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                runs = read_logs(path) if path.suffix != ".jsonl" else [read_log(path)]
        except (LogFormatError, FileNotFoundError) as e:
            skipped.append((rid, repo, f"unreadable: {str(e)[-120:]}"))
            continue
        r = runs[0]
        for metric in ("reward_mean", "eval_reward"):
            if not r.has(metric):
                continue
            s, y = r.series(metric)
            s, y = np.asarray(s, float), np.asarray(y, float)
            ok = np.isfinite(y)
            s, y = s[ok], y[ok]
            if s.size < MIN_SERIES:
                skipped.append((rid, repo, f"{metric}: {s.size} points < {MIN_SERIES}"))
                continue
            if np.std(y) == 0:
                skipped.append((rid, repo, f"{metric}: constant"))
                continue
            items.append((rid, repo, metric, s, y))
    return items, skipped


def split_repos(repos):
    """The fixed hold-out rule: sorted names, even positions tuned, odd positions held out."""
    names = sorted(set(repos))
    return {n: ("tuned" if i % 2 == 0 else "held-out") for i, n in enumerate(names)}


def _portable(argv: list[str]) -> list[str]:
    """The command line with each corpus folder shown by its own name only (``CORPUS/real-runs``), so the
    recorded command says which corpus was read without naming the machine's folders."""
    out, prev = [], None
    for a in argv:
        out.append(f"CORPUS/{pathlib.Path(a).name}" if prev == "--corpus" else a)
        prev = a
    return out


def run(corpora, out: pathlib.Path, quick: bool) -> dict:
    import jax

    from grpojax._experiment import load_average
    from grpojax._progress import progress
    from grpojax.fit import forecast_windows

    items = []
    skipped = []
    for c in corpora:
        it, sk = load_corpus(pathlib.Path(c))
        items += it
        skipped += sk
    if not items:
        raise SystemExit(f"no series with >= {MIN_SERIES} points under {', '.join(map(str, corpora))}")
    groups = split_repos([it[1] for it in items])
    prefixes = PREFIXES[:1] if quick else PREFIXES
    rows = []
    t_start = time.perf_counter()
    load_at_start = load_average()
    timings = {}
    curves = [(s, y) for (_, _, _, s, y) in items]
    with progress() as bar:
        task = bar.add_task("forecasts", total=len(prefixes) * len(METHODS))
        for f in prefixes:
            for m in METHODS:
                t0 = time.perf_counter()
                fcs = forecast_windows(curves, prefix=f, window=WINDOW, level=LEVEL, method=m,
                                       key=jax.random.PRNGKey(int(f * 100)))
                timings[f"{m}@{f}"] = time.perf_counter() - t0
                for (rid, repo, metric, s, y), fc in zip(items, fcs):
                    truth = float(np.mean(y[s > fc.window[0]]))
                    sd = float(np.std(y))
                    rows.append({"run": rid, "repo": repo, "group": groups[repo], "metric": metric, "prefix": f,
                                 "method": m, "truth": truth, "forecast": fc.mean, "lo": fc.lo, "hi": fc.hi,
                                 "status": fc.status, "abs_err": abs(fc.mean - truth), "scaled_err": abs(fc.mean - truth) / sd,
                                 "covered": bool(fc.lo <= truth <= fc.hi), "width_scaled": (fc.hi - fc.lo) / sd,
                                 "params": {k: list(v) for k, v in fc.params.items()}})
                bar.advance(task)
    runtime = time.perf_counter() - t_start
    table = summarise(rows, prefixes)
    result = {"name": NAME, "quick": quick, "corpora": [pathlib.Path(c).name for c in corpora], "window": WINDOW, "level": LEVEL,
              "holdout_rule": "sorted(repo names): even positions tuned, odd positions held out",
              "groups": groups, "runtime_s": runtime, "load_at_start": load_at_start,
              "timings_s": timings, "summary": table, "rows": rows,
              "skipped": skipped, "n_series": len(items),
              "command": "python experiments/forecast_real_runs.py " + " ".join(_portable(sys.argv[1:]))}
    out.mkdir(parents=True, exist_ok=True)
    from grpojax._io import write_json, write_text_atomic

    write_json(out, f"{NAME}.json", result)
    write_text_atomic(out / f"{NAME}.md", markdown(result, prefixes))
    figure(items, out, prefixes[-1])
    write_claims(out, quick, table, prefixes, len(items), len({it[1] for it in items}))
    return result


def write_claims(out: pathlib.Path, quick: bool, table: dict | None, prefixes, n_series: int, n_repos: int):
    """``summary.json`` for the reproduction report: coverage and the MAE goal per prefix (all repositories)."""
    from grpojax._experiment import Claim, write_summary

    claims = []
    for f in PREFIXES:
        cov_claim = f"90% window intervals of the default forecaster cover 80-97% of real outcomes (prefix {f:g})"
        mae_claim = f"default forecaster's MAE >= 20% below every baseline's on real runs (prefix {f:g})"
        if table is None or f"all|{f}|creep" not in table:
            why = "no real-run corpus here" if table is None else "not run in quick mode"
            claims += [Claim(cov_claim, why, "not_tested"), Claim(mae_claim, why, "not_tested")]
            continue
        c = table[f"all|{f}|creep"]
        base = {m: table[f"all|{f}|{m}"]["mae_scaled"] for m in METHODS if m != "creep"}
        best = min(base, key=base.get)
        gain = 1.0 - c["mae_scaled"] / base[best]
        scope = f"{n_series} series, {n_repos} repositories"
        claims.append(Claim(cov_claim, f"coverage {c['coverage']:.2f} ({scope})",
                            "confirmed" if 0.8 <= c["coverage"] <= 0.97 else "refuted"))
        claims.append(Claim(mae_claim, f"MAE/sd {c['mae_scaled']:.3f} vs best baseline {best} {base[best]:.3f} "
                                       f"({gain:+.0%}; {scope})", "confirmed" if gain >= 0.2 else "refuted"))
    write_summary(out, NAME, quick=quick, claims=claims, figures=[f"{NAME}.png"] if table is not None else [])


def summarise(rows, prefixes):
    """Per group × prefix × method: repo-averaged MAE (raw and scaled) and coverage."""
    out = {}
    for grp in ("tuned", "held-out", "all"):
        for f in prefixes:
            for m in METHODS:
                sel = [r for r in rows if r["prefix"] == f and r["method"] == m and (grp == "all" or r["group"] == grp)]
                repos = sorted({r["repo"] for r in sel})
                if not repos:
                    continue
                per = [[r for r in sel if r["repo"] == p] for p in repos]
                out[f"{grp}|{f}|{m}"] = {
                    "n_repos": len(repos), "n_series": len(sel),
                    "mae": float(np.mean([np.mean([r["abs_err"] for r in q]) for q in per])),
                    "mae_scaled": float(np.mean([np.mean([r["scaled_err"] for r in q]) for q in per])),
                    "coverage": float(np.mean([np.mean([r["covered"] for r in q]) for q in per])),
                    "width_scaled": float(np.mean([np.median([r["width_scaled"] for r in q]) for q in per])),
                    "coverage_per_series": float(np.mean([r["covered"] for r in sel])),
                }
    return out


def markdown(res, prefixes) -> str:
    t = res["summary"]
    lines = [f"# Window-mean forecasts on real runs ({res['n_series']} series)", "",
             f"Target: mean over the last {int(WINDOW * 100)}% of the steps; {int(LEVEL * 100)}% intervals. "
             "MAE and coverage are averaged per source repository, then over repositories. `MAE/σ` is the error "
             "in units of each series' standard deviation (comparable across reward scales). "
             f"Hold-out rule: {res['holdout_rule']}. Runtime {res['runtime_s']:.0f} s "
             f"({res.get('load_at_start', 'load n/a')} at the start).", "",
             "Command: `" + res.get("command", "") + "`", ""]
    for grp in ("tuned", "held-out", "all"):
        lines += [f"## {grp}", "", "| prefix | method | repos | series | MAE | MAE/σ | coverage | width/σ | vs best baseline (MAE/σ) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for f in prefixes:
            base = [t[k]["mae_scaled"] for k in (f"{grp}|{f}|{m}" for m in METHODS[1:]) if k in t]
            for m in METHODS:
                k = f"{grp}|{f}|{m}"
                if k not in t:
                    continue
                r = t[k]
                gain = ""
                if m == "creep" and base:
                    gain = f"{100 * (1 - r['mae_scaled'] / min(base)):+.0f}%"
                lines.append(f"| {f} | {m} | {r['n_repos']} | {r['n_series']} | {r['mae']:.4f} | {r['mae_scaled']:.3f} | "
                             f"{r['coverage']:.2f} | {r['width_scaled']:.2f} | {gain} |")
        lines.append("")
    lines += ["Goal: creep MAE ≥ 20% below every baseline at both prefixes with coverage 0.80–0.97. "
              "A positive 'vs best baseline' is the creep model's MAE reduction against the best baseline.", "",
              "Repositories: " + ", ".join(f"{k} ({v})" for k, v in res["groups"].items()), "",
              "Skipped: " + "; ".join(f"{a} ({c})" for a, _, c in res["skipped"]), ""]
    return "\n".join(lines)


def figure(items, out, prefix):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpojax.fit import forecast_windows

    pick = [it for it in items if it[2] == "reward_mean"][:: max(1, len(items) // 4)][:4]
    fig, axes = plt.subplots(1, len(pick), figsize=(4 * len(pick), 3.2), squeeze=False)
    fcs = forecast_windows([(it[3], it[4]) for it in pick], prefix=prefix)
    pes = forecast_windows([(it[3], it[4]) for it in pick], prefix=prefix, method="persistence")
    for ax, (rid, repo, metric, s, y), fc, pe in zip(axes[0], pick, fcs, pes):
        ax.plot(s, y, ".", ms=2, color="0.6")
        b = fc.band
        ax.fill_between(b["steps"], b["lo"], b["hi"], alpha=0.3, label="creep mean-curve band")
        ax.axvline(fc.prefix_end, color="k", lw=0.8)
        w = fc.window
        ax.errorbar([w[1]], [fc.mean], yerr=[[fc.mean - fc.lo], [fc.hi - fc.mean]], fmt="o", color="C0", label="creep window")
        ax.errorbar([w[1] - 0.02 * (s[-1] - s[0])], [pe.mean], yerr=[[pe.mean - pe.lo], [pe.hi - pe.mean]], fmt="s", color="C1",
                    label="persistence")
        ax.hlines(float(np.mean(y[s > w[0]])), w[0], w[1], color="r", label="realised")
        ax.set_title(rid[:34], fontsize=8)
        ax.set_xlabel("step (vertical line: end of the prefix)", fontsize=7)
    axes[0][0].set_ylabel("train reward (mean per step)", fontsize=7)
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out / f"{NAME}.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", action="append", default=None,
                   help="corpus folder (repeatable; default: the development corpus next to the repository)")
    p.add_argument("--out", default="experiments/results", help="output folder")
    p.add_argument("--quick", action="store_true", help="the first prefix (25%%) only")
    a = p.parse_args(argv)
    for c in a.corpus or ():
        if not pathlib.Path(c).is_dir():
            p.error(f"--corpus {c!r} is not a folder")
    corpora = a.corpus or [str(c) for c in DEFAULT_CORPORA if c.is_dir()]
    if not corpora:
        out = pathlib.Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        write_claims(out, a.quick, None, PREFIXES, 0, 0)
        print("no real-run corpus found: claims not tested")
        return
    res = run(corpora, pathlib.Path(a.out), a.quick)
    print(markdown(res, PREFIXES[:1] if a.quick else PREFIXES))


if __name__ == "__main__":
    main()
