"""grpojax's detectors on the real-run corpus, scored against hand labels, side by side with rldoctor.

Every run of ``--corpus`` (folders with a canonical ``run.jsonl``) and of ``--logs`` (original log files
that grpojax reads directly) is diagnosed with :func:`grpojax.diagnose.diagnose` and compared with the
hand labels of ``benchmarks/real_run_labels.tsv`` (per run and detector: present / absent / unclear /
na, each with a one-line reason read off the curves). Scoring:

- per detector, recall = detected / labelled present and false-positive rate = detected / labelled
  absent; ``unclear`` and ``na`` are not scored;
- per *source repository*, then averaged over repositories (one sweep repository holds 26 runs and
  would otherwise decide every number);
- hold-out: the repositories in case-insensitive alphabetical order, the 1st, 3rd, 5th, ... are the
  tuning half (thresholds were set looking at these), the others are held out and reported apart.

When ``rldoctor`` (PyPI ``rldoctor==0.2.0``) is installed, each run is converted to its per-step
records and diagnosed by it too; a finding is its WARNING or CRITICAL verdict. The comparison table
(per run and detector: label, grpojax, rldoctor, who agrees with the label) is written to
``OUT/comparison.tsv`` (and, with ``--table PATH``, to PATH).

Usage:
  python experiments/diagnose_real_runs.py --corpus CORPUS/real-runs --logs CORPUS/real-logs
"""

from __future__ import annotations

import csv
import pathlib
import sys
import time
import warnings

import numpy as np

from grpojax._experiment import Claim, experiment_parser, parse_args, print_claims, write_summary

NAME = "diagnose_real_runs"
ROOT = pathlib.Path(__file__).resolve().parents[1]
LABELS = ROOT / "benchmarks" / "real_run_labels.tsv"
CLAIM_DETECTORS = ("grpojax's detectors reach recall >= 0.8 and false-positive rate <= 0.1 per detector on the "
                   "hand-labelled real runs (averaged over source repositories)")
CLAIM_PEER = "grpojax finds every true finding rldoctor finds"

# grpojax detector -> rldoctor detector answering the same question
RLDOCTOR = {
    "reward_hacking": "reward_hacking",
    "advantage_degeneracy": "advantage_collapse",
    "policy_concentration": "entropy_collapse",
    "length_pathology": "length_pathology",
    "learning_plateau": "plateau",
    "clip_saturation": "clip_saturation",
    "kl_drift": "kl_drift",
    "gradient_spikes": "gradient_pathology",
    "reward_imbalance": "reward_composition",
}
# grpojax canonical column -> rldoctor canonical field
RL_FIELDS = {
    "reward_mean": "reward_mean", "reward_std": "reward_std", "eval_reward": "eval_score",
    "frac_zero_std": "zero_var_group_frac", "entropy": "entropy", "kl": "kl", "clip_frac": "pg_clipfrac",
    "grad_norm": "grad_norm", "lr": "lr", "response_length": "response_len_mean",
    "response_clip_frac": "response_len_clip_ratio",
}


def load_runs(corpus: pathlib.Path | None, logs: pathlib.Path | None) -> list:
    from grpojax.logs import read_log, read_logs

    runs = []
    if corpus is not None:
        runs += [read_log(d / "run.jsonl") for d in sorted(corpus.iterdir()) if (d / "run.jsonl").is_file()]
    if logs is not None:
        for f in sorted(logs.iterdir()):
            if f.is_file() and f.suffix in (".json", ".log", ".jsonl", ".csv"):
                runs += read_logs(f)
    return runs


def read_labels(path: pathlib.Path) -> dict[str, dict]:
    """``{run: {"repo": repo, "labels": {mode: (label, reason)}}}`` from the labels TSV."""
    out: dict[str, dict] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["label"] not in ("present", "absent", "unclear", "na"):
                raise ValueError(f"{path}: label {row['label']!r} of {row['run']}/{row['mode']} is not "
                                 "present/absent/unclear/na")
            d = out.setdefault(row["run"], {"repo": row["repo"], "labels": {}})
            d["labels"][row["mode"]] = (row["label"], row["reason"])
    return out


def split_repos(repos) -> tuple[list[str], list[str]]:
    """Fixed hold-out rule: case-insensitive alphabetical order, odd positions tune, even are held out."""
    order = sorted(set(repos), key=str.lower)
    return order[0::2], order[1::2]


def score(rows: list[dict], modes, repos: list[str], key: str = "grpojax") -> dict:
    """Per mode: recall and false-positive rate averaged over repositories (runs pooled inside each).

    ``rows``: dicts with ``run, repo, mode, label`` and a boolean ``key`` (detected). Repositories with no
    scored run for a mode do not enter its average.
    """
    out = {}
    for m in modes:
        rec, fpr, n_pos, n_neg = [], [], 0, 0
        for repo in repos:
            rr = [r for r in rows if r["repo"] == repo and r["mode"] == m and r[key] is not None]
            pos = [r for r in rr if r["label"] == "present"]
            neg = [r for r in rr if r["label"] == "absent"]
            n_pos, n_neg = n_pos + len(pos), n_neg + len(neg)
            if pos:
                rec.append(np.mean([r[key] for r in pos]))
            if neg:
                fpr.append(np.mean([r[key] for r in neg]))
        out[m] = {"recall": float(np.mean(rec)) if rec else float("nan"),
                  "fpr": float(np.mean(fpr)) if fpr else float("nan"),
                  "n_present": n_pos, "n_absent": n_neg, "repos_present": len(rec), "repos_absent": len(fpr)}
    return out


def to_rldoctor_records(run) -> tuple[list[dict], dict]:
    """Per-step records in rldoctor's canonical names (NaN entries left out) and its config."""
    from grpojax.diagnose import reward_components

    cols = {RL_FIELDS[c]: run.columns[c] for c in RL_FIELDS if c in run.columns}
    for c in reward_components(run):
        name = c.removeprefix("rewards/").removesuffix("/mean").removeprefix("reward_")
        cols[f"rewards/{name}"] = run.columns[c]
    records = []
    for i, s in enumerate(run.steps):
        rec = {"step": int(s)}
        rec.update({k: float(v[i]) for k, v in cols.items() if np.isfinite(v[i])})
        records.append(rec)
    cfg = {}
    if isinstance(run.meta.get("group_size"), (int, float)):
        cfg["group_size"] = int(run.meta["group_size"])
    return records, cfg


def rldoctor_findings(run) -> dict[str, str] | None:
    """``{rldoctor detector: severity name}`` or None when rldoctor is not installed / cannot read it."""
    try:
        import rl_doctor
    except ImportError:
        return None
    records, cfg = to_rldoctor_records(run)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = rl_doctor.diagnose(rl_doctor.run_from_records(records, config=cfg, name=run.name))
    except ValueError:
        return None
    return {f.detector: f.severity.name for f in d.findings}


def label_rows(runs, labels: dict, *, with_rldoctor: bool = True) -> tuple[list[dict], dict]:
    """One row per (labelled run, detector): the hand label, grpojax's verdict and rldoctor's (when it is
    installed and ``with_rldoctor``); and per run the lists of findings."""
    from grpojax.diagnose import ALL_MODES, diagnose

    rows, per_run = [], {}
    for run in runs:
        if run.name not in labels:
            print(f"warning: no labels for run {run.name!r}; skipped", file=sys.stderr)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d = diagnose(run, validity=False)
        rl = rldoctor_findings(run) if with_rldoctor else None
        lab = labels[run.name]
        per_run[run.name] = {"findings": list(d.findings), "rldoctor": rl}
        for m in ALL_MODES:
            label, reason = lab["labels"].get(m, ("na", "not labelled"))
            res = d[m]
            g = None if res.verdict == "insufficient_data" else res.verdict == "detected"
            r_sev = (rl or {}).get(RLDOCTOR.get(m, ""), None)
            r = None if r_sev in (None, "SKIPPED") else r_sev in ("WARNING", "CRITICAL")
            rows.append({"run": run.name, "repo": lab["repo"], "mode": m, "label": label, "reason": reason,
                         "grpojax": g, "grpojax_verdict": res.verdict, "rldoctor": r,
                         "rldoctor_severity": r_sev or ("n/a" if m not in RLDOCTOR else "not run")})
    return rows, per_run


def plateau_label_check(runs, labels: dict) -> list[str]:
    """A consistency check of the plateau labels: per repository, the runs labelled plateau-free whose
    monitored reward gained no more over the last half of the run than a run labelled with a plateau that
    was measured on at least as many points.

    The gain is the least-squares gain of ``eval_reward`` (>= 8 points) or else ``reward_mean`` over the
    second half of the logged steps; two runs with the same gain and opposite labels mean one label is wrong.
    Returns one line per such run (empty when the labels are consistent).
    """
    from scipy import stats

    gains: dict[str, dict[str, list[tuple[float, int, str]]]] = {}
    for run in runs:
        lab = labels.get(run.name, {"labels": {}})["labels"].get("learning_plateau", ("na", ""))[0]
        if lab not in ("present", "absent"):
            continue
        col = "eval_reward" if run.count("eval_reward") >= 8 else "reward_mean"
        ok = np.isfinite(run.columns[col])
        s, y = run.steps[ok].astype(float), run.columns[col][ok]
        half = s >= s[0] + (s[-1] - s[0]) / 2
        if half.sum() < 4:
            continue
        fit = stats.linregress(s[half], y[half])
        repo = gains.setdefault(labels[run.name]["repo"], {"present": [], "absent": []})
        repo[lab].append((float(fit.slope * np.ptp(s[half])), int(half.sum()), run.name))
    out = []
    for _, g in sorted(gains.items()):
        for v, k, name in sorted(g["absent"]):
            rival = [(w, who) for w, m, who in g["present"] if m >= k and w >= v]
            if rival:
                w, who = max(rival)
                out.append(f"{name}: labelled absent, last-half gain {v:+.3f} <= {w:+.3f} of {who} (present)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = experiment_parser(NAME, __doc__, quick_help="the same (the corpus run takes seconds)")
    ap.add_argument("--corpus", type=pathlib.Path, default=ROOT.parent / "shared" / "real-runs",
                    help="folder of run folders with run.jsonl")
    ap.add_argument("--logs", type=pathlib.Path, default=ROOT.parent / "shared" / "real-logs",
                    help="folder of original log files (optional; skipped when it does not exist)")
    ap.add_argument("--labels", type=pathlib.Path, default=LABELS, help="hand labels TSV")
    ap.add_argument("--table", type=pathlib.Path, default=None, help="also write the comparison table here")
    args = parse_args(ap, argv)
    from grpojax.diagnose import ALL_MODES

    if not args.corpus.is_dir():
        print(f"corpus folder {args.corpus} does not exist: claims not tested")
        claims = [Claim(c, "no real-run corpus here", "not_tested") for c in (CLAIM_DETECTORS, CLAIM_PEER)]
        write_summary(args.out, NAME, quick=args.quick, claims=claims, figures=[])
        return 0
    logs = args.logs if args.logs is not None and args.logs.is_dir() else None
    labels = read_labels(args.labels)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = load_runs(args.corpus, logs)
    rows, per_run = label_rows(runs, labels)
    elapsed = time.perf_counter() - t0
    repos = sorted({r["repo"] for r in rows}, key=str.lower)
    tune, held = split_repos(repos)
    sc = {"tuning": score(rows, ALL_MODES, tune), "held_out": score(rows, ALL_MODES, held),
          "all": score(rows, ALL_MODES, repos)}
    rl_sc = {"all": score(rows, ALL_MODES, repos, key="rldoctor")}
    # comparison: rldoctor true findings that grpojax misses, and the reverse
    rl_true = [r for r in rows if r["rldoctor"] and r["label"] == "present"]
    g_true = [r for r in rows if r["grpojax"] and r["label"] == "present"]
    missed = [f"{r['run']}:{r['mode']}" for r in rl_true if not r["grpojax"]]
    extra = [f"{r['run']}:{r['mode']}" for r in g_true if not r["rldoctor"]]
    table = ["run\tmode\tlabel\tgrpojax\trldoctor\tagree_with_label"]
    for r in rows:
        if r["label"] == "na" and r["grpojax"] is None and r["rldoctor"] is None:
            continue

        def mark(x):
            return "-" if x is None else ("detected" if x else "no")

        who = []
        if r["label"] in ("present", "absent"):
            truth = r["label"] == "present"
            who = [k for k in ("grpojax", "rldoctor") if r[k] is not None and r[k] == truth]
        table.append(f"{r['run']}\t{r['mode']}\t{r['label']}\t{mark(r['grpojax'])}\t"
                     f"{mark(r['rldoctor'])} ({r['rldoctor_severity']})\t{','.join(who) or '-'}")
    (args.out / "comparison.tsv").write_text("\n".join(table) + "\n")
    if args.table is not None:
        args.table.write_text("\n".join(table) + "\n")
    # report
    print(f"{len(per_run)} runs from {len(repos)} repositories in {elapsed:.1f} s; tuning repos: {len(tune)}, "
          f"held out: {len(held)}")
    print(f"{'detector':24s} {'tuning rec/FPR':>16s} {'held-out rec/FPR':>18s} {'rldoctor rec/FPR':>18s}")

    def f(x):
        return " nan" if not np.isfinite(x) else f"{x:4.2f}"

    for m in ALL_MODES:
        a, b, c = sc["tuning"][m], sc["held_out"][m], rl_sc["all"][m]
        print(f"{m:24s} {f(a['recall']):>7s}/{f(a['fpr']):<8s} {f(b['recall']):>9s}/{f(b['fpr']):<8s} "
              f"{f(c['recall']):>9s}/{f(c['fpr']):<8s}")
    print(f"true findings rldoctor makes and grpojax misses: {len(missed)} {missed[:10]}")
    print(f"true findings grpojax makes and rldoctor misses: {len(extra)}")
    clash = plateau_label_check(runs, labels)
    print(f"plateau labels contradicting a same-repository run with the opposite label: {len(clash)}")
    for line in clash:
        print(f"  {line}")
    goal = [m for m in ALL_MODES if np.isfinite(sc["all"][m]["recall"])]
    ok = [m for m in goal if sc["all"][m]["recall"] >= 0.8 and not (sc["all"][m]["fpr"] > 0.1)]
    claims = [
        Claim(CLAIM_DETECTORS, f"{len(ok)}/{len(goal)} detectors meet both: {', '.join(ok)}",
              "confirmed" if len(ok) == len(goal) else ("partial" if ok else "refuted")),
        Claim(CLAIM_PEER,
              f"{len(missed)} true rldoctor findings missed by grpojax; {len(extra)} true grpojax findings "
              f"rldoctor misses" if rl_true or extra else "rldoctor not installed",
              "not_tested" if not any(p["rldoctor"] is not None for p in per_run.values())
              else ("confirmed" if not missed else "partial")),
    ]
    print_claims(claims)
    write_summary(args.out, NAME, quick=args.quick, claims=claims, figures=[], scores=sc, rldoctor_scores=rl_sc,
                  tuning_repos=tune, held_out_repos=held, missed_by_grpojax=missed, missed_by_rldoctor=extra,
                  runs=per_run, plateau_label_clashes=clash, seconds=elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
