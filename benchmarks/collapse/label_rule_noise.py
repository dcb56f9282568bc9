"""The labelling rule and the collapse finding on curves that hold no collapse by construction.

Usage:
    python benchmarks/collapse/label_rule_noise.py [--curves N] [--quick]

A label is only as good as the rule that writes it. This draws reward curves that cannot collapse -- noise
about a flat level, or about a level that rises once by ``A`` noise sd over the first third of the run and
then holds -- and counts how often the committed labelling rule (``label_rule.py``) calls one a collapse,
and how often the collapse finding (:func:`grpojax.diagnose.collapse_onset`) does, on the same curves.
Every count is a false positive of its method; the intervals are exact binomial (Clopper-Pearson, 95 %).

``--corpus`` asks the same of each labelled collapse of the public corpus (``benchmarks/collapse_corpus``,
its cache filled): how often does the rule call the run's own values a collapse when their order is
shuffled (``--shuffles`` random orders)? A shuffled curve has the same values and no order in time, so no
rise and no fall; a label that the rule gives to many orders of the same values says little about the order
the run logged. The fraction is a permutation p-value of the label (with the logged order counted, as
``(k + 1) / (shuffles + 1)``).

The grid was fixed before the script was run: lengths 30, 50, 100, 200 and 400 points (the public corpus's
labelled collapses have 45-200), rises of 0, 3 and 10 noise sd, Gaussian noise; and a reward that is the
pass rate of 16 answers at p = 0.3 (flat), the shape of the tiny-LM runs. ``--curves`` per cell (default
400).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from label_rule import label_curve  # noqa: E402
from score_simulated import binom_ci  # noqa: E402

LENGTHS = (30, 50, 100, 200, 400)
RISES = (0.0, 3.0, 10.0)


def curve(rng: np.random.Generator, n: int, rise: float, kind: str) -> np.ndarray:
    """One curve without a collapse: a level that rises by ``rise`` noise sd over the first third, then holds."""
    t = np.arange(n, dtype=float)
    level = rise * np.clip(t / max(n / 3.0, 1.0), 0.0, 1.0)
    if kind == "gaussian":
        return level + rng.standard_normal(n)
    return rng.binomial(16, 0.3, n) / 16.0  # a pass rate of 16 answers (flat)


def cell(n: int, rise: float, kind: str, curves: int, seed: int) -> dict:
    from grpojax.diagnose import collapse_onset

    rng = np.random.default_rng(seed)
    lab = det = 0
    for _ in range(curves):
        y = curve(rng, n, rise, kind)
        s = np.arange(n)
        lab += label_curve(s, y) is not None
        det += collapse_onset(s, y) is not None

    def rate(k: int) -> tuple[float, float, float]:
        return (k / curves, *binom_ci(k, curves))

    return dict(n=n, rise=rise, kind=kind, curves=curves, label=lab, detector=det, label_rate=rate(lab),
                detector_rate=rate(det))


def permutation_p(steps, values, shuffles: int, seed: int = 0) -> tuple[int, float]:
    """``(k, p)``: ``k`` of ``shuffles`` random orders of ``values`` (at the same ``steps``) that the rule labels
    collapse, and the permutation p-value ``(k + 1) / (shuffles + 1)``."""
    rng = np.random.default_rng(seed)
    k = sum(label_curve(steps, rng.permutation(values)) is not None for _ in range(shuffles))
    return k, (k + 1) / (shuffles + 1)


def run_p_value(run, shuffles: int, seed: int = 0) -> tuple[int, int, float]:
    """``(points, k, p)`` of :func:`permutation_p` on the curve the rule labels collapse in ``run``."""
    from label_rule import label_run

    lab = label_run(run)
    s, y = run.series(lab["curve"])
    keep = np.isfinite(y)
    return (int(np.count_nonzero(keep)), *permutation_p(s[keep], y[keep], shuffles, seed))


def corpus_p_values(shuffles: int, seed: int = 0) -> list[dict]:
    """Permutation p-values of the labelled collapses of the public corpus (the labelled curve's values)."""
    sys.path.insert(0, str(HERE.parent / "collapse_corpus"))
    from corpus import load_runs

    runs, _ = load_runs()
    out = []
    for row, run in runs:
        if row["label"] != "collapse":
            continue
        n, k, p = run_p_value(run, shuffles, seed)
        out.append(dict(id=row["id"], repo=row["repo"], n=n, shuffled_labelled=k, p=p))
    return out


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 1")
    return v


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--curves", type=_positive, default=400, help="curves per cell (default 400)")
    ap.add_argument("--quick", action="store_true", help="20 curves per cell and two lengths (a smoke run)")
    ap.add_argument("--corpus", action="store_true", help="permutation p-values of the corpus's labelled collapses")
    ap.add_argument("--shuffles", type=_positive, default=2000, help="random orders per run with --corpus (default 2000)")
    a = ap.parse_args(argv)
    if a.corpus:
        rows = corpus_p_values(a.shuffles)
        print("| run | repository | points | shuffled orders labelled collapse | p |\n|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['id']} | {r['repo']} | {r['n']} | {r['shuffled_labelled']} of {a.shuffles} | {r['p']:.4f} |")
        return 0
    curves, lengths = (20, (30, 100)) if a.quick else (a.curves, LENGTHS)
    cells = [(n, r, "gaussian") for r in RISES for n in lengths] + [(n, 0.0, "pass rate of 16") for n in (50, 200)]
    t0 = time.perf_counter()
    print("| curve | points | rise (noise sd) | curves | label rule: collapse [95 %] | collapse finding [95 %] |")
    print("|---|---|---|---|---|---|")
    rows = []
    for i, (n, r, kind) in enumerate(cells):
        row = cell(n, r, kind, curves, seed=1000 + i)
        rows.append(row)
        fl, fd = row["label_rate"], row["detector_rate"]
        print(f"| {kind} | {n} | {r:g} | {curves} | {row['label']} = {fl[0]:.3f} [{fl[1]:.3f}, {fl[2]:.3f}] | "
              f"{row['detector']} = {fd[0]:.3f} [{fd[1]:.3f}, {fd[2]:.3f}] |", flush=True)
    tl, td, tn = sum(r["label"] for r in rows), sum(r["detector"] for r in rows), sum(r["curves"] for r in rows)
    print(f"| all | | | {tn} | {tl} = {tl / tn:.3f} | {td} = {td / tn:.3f} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
