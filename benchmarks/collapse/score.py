"""The collapse finding against the labelling rule of ``README.md``, per source repository.

Usage::

    python benchmarks/collapse/score.py [REAL_RUNS_FOLDER]           # default: the development corpus beside the repository
    python benchmarks/collapse/score.py benchmarks/collapse_corpus   # a manifest folder and its cache
    python benchmarks/collapse/score.py benchmarks/collapse_corpus --since COMMIT   # rows added after COMMIT
    python benchmarks/collapse/score.py benchmarks/collapse_corpus --strong   # strong labels only

Prints one line per run (label, onset, detector verdict, onset, precursors) and per repository: collapsed
runs, recall, controls, false-positive rate, and the share of detected collapses whose onset is within
+-5 % of the run's step span of the labelled onset. The detector fits no constant to data, so leaving one
repository out changes nothing it uses: the per-repository lines are its leave-one-repository-out scores.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import subprocess
import sys
import warnings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from label_rule import label_run  # noqa: E402


def _runs(folder: pathlib.Path):
    """``(name, repository, RunLog)`` of every run of ``folder``: a manifest folder (``MANIFEST.tsv``, its files
    in its cache) or a folder of ``<run>/run.jsonl`` with an ``INDEX.tsv`` naming each run's repository."""
    if (folder / "MANIFEST.tsv").is_file():
        sys.path.insert(0, str(folder))
        from corpus import load_runs

        runs, absent = load_runs(folder)
        for i, why in absent:
            print(f"absent {i}: {why}")
        for row, run in runs:
            yield row["id"], row["repo"], run
        return
    from grpojax.logs import read_log

    index = {r["id"]: r for r in csv.DictReader(open(folder / "INDEX.tsv"), delimiter="\t")}
    for d in sorted(folder.iterdir()):
        if (d / "run.jsonl").is_file():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run = read_log(d / "run.jsonl")
            yield d.name, index.get(d.name, {}).get("repo", "?"), run


def rows(folder: pathlib.Path) -> list[dict]:
    from grpojax.diagnose import diagnose

    out = []
    for name, repo, run in _runs(folder):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lab = label_run(run)
            res = diagnose(run, validity=False)
        c = res["collapse"]
        info = (c.panel_data or {}).get("collapse") or {}
        span = float(run.steps[-1] - run.steps[0]) or 1.0
        out.append({"run": name, "repo": repo, "label": lab is not None,
                    "label_onset": lab["onset"] if lab else None, "detected": c.detected,
                    "onset": info.get("onset"), "span": span,
                    "precursors": [(p["metric"], p["lead"]) for p in info.get("precursors", [])],
                    "main": res.main_finding, "log": run})
    return out


def per_repo(table: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in table:
        o = out.setdefault(r["repo"], {"pos": 0, "tp": 0, "neg": 0, "fp": 0, "onset_ok": 0, "onset_err": []})
        if r["label"]:
            o["pos"] += 1
            if r["detected"]:
                o["tp"] += 1
                err = abs(r["onset"] - r["label_onset"]) / r["span"]
                o["onset_err"].append(err)
                o["onset_ok"] += err <= 0.05
        else:
            o["neg"] += 1
            o["fp"] += r["detected"]
    return out


def ids_at(folder: pathlib.Path, commit: str) -> set[str]:
    """The run ids of ``folder``'s manifest as committed at ``commit``."""
    root = HERE.parents[1]
    rel = (folder.resolve() / "MANIFEST.tsv").relative_to(root)
    text = subprocess.run(["git", "-C", str(root), "show", f"{commit}:{rel.as_posix()}"], check=True,
                          capture_output=True, text=True).stdout
    return {r["id"] for r in csv.DictReader(text.splitlines(), delimiter="\t")}


def strong(table: list[dict], shuffles: int = 2000, level: float = 0.05) -> list[dict]:
    """The table (of :func:`rows`) with the weak labels left out: collapses whose permutation p-value
    (``label_rule_noise.py``) is at or above ``level``. Controls are kept."""
    from label_rule_noise import run_p_value  # noqa: PLC0415

    return [r for r in table if not r["label"] or run_p_value(r["log"], shuffles)[2] < level]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(HERE.parents[2] / "shared" / "real-runs"),
                    help="a manifest folder (MANIFEST.tsv and its cache) or a folder of <run>/run.jsonl")
    ap.add_argument("--since", metavar="COMMIT", default=None,
                    help="only the runs of a manifest folder that its manifest did not hold at COMMIT")
    ap.add_argument("--strong", action="store_true",
                    help="leave out the collapses whose label has a permutation p-value >= 0.05 (2,000 orders)")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    folder = pathlib.Path(a.folder)
    old = None
    if a.since:
        try:
            old = ids_at(folder, a.since)
        except (subprocess.CalledProcessError, OSError, ValueError) as exc:
            ap.error(f"--since {a.since!r}: expected a commit whose tree holds {folder / 'MANIFEST.tsv'} "
                     f"({exc.__class__.__name__})")
    table = rows(folder)
    if old is not None:
        table = [r for r in table if r["run"] not in old]
        print(f"runs added since {a.since}: {len(table)}")
    if a.strong:
        n = sum(r["label"] for r in table)
        table = strong(table)
        print(f"strong labels: {sum(r['label'] for r in table)} of {n} collapses")
    for r in table:
        print(f"{r['run'][:58]:58s} label={'collapse' if r['label'] else '-':8s} at {r['label_onset']!s:6s} "
              f"found={'yes' if r['detected'] else 'no':3s} at {r['onset']!s:6s} main={r['main']} "
              f"precursors={r['precursors']}")
    print("\nrepository                                   collapsed recall  controls  FP rate  onset within 5%  "
          "onset errors (% of run)")
    repos = per_repo(table)
    pooled = {k: sum(o[k] for o in repos.values()) for k in ("pos", "tp", "neg", "fp", "onset_ok")}
    pooled["onset_err"] = [e for o in repos.values() for e in o["onset_err"]]
    for repo, o in [*repos.items(), ("all runs pooled", pooled)]:
        rec = f"{o['tp'] / o['pos']:.2f}" if o["pos"] else "-"
        fpr = f"{o['fp'] / o['neg']:.2f}" if o["neg"] else "-"
        ons = f"{o['onset_ok']}/{o['tp']}" if o["tp"] else "-"
        errs = ", ".join(f"{100 * e:.1f}" for e in o["onset_err"]) or "-"
        print(f"{repo[:44]:44s} {o['pos']:9d} {rec:6s} {o['neg']:9d}  {fpr:7s}  {ons:15s}  {errs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
