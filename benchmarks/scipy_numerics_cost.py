"""What the library numerics (SciPy, arviz) cost the command-line paths: import and run time in fresh processes.

Each repeat starts a new Python process that imports ``grpojax.diagnose``, diagnoses a simulated 1,000-step
run (with and without eval points), and reports the wall times and which of scipy.special, scipy.ndimage,
scipy.optimize, scipy.stats, arviz and jax the diagnosis imported; a second process times the first Pareto
smoothing of the forecasts (``grpojax.fit._psis``) after ``import grpojax.fit``; a third set of processes times
the import, after NumPy, of each library a command-line path could use instead of its NumPy code
(scipy.special, scipy.ndimage, scipy.stats, arviz, mpmath, matplotlib.pyplot): the measure of what each would
add to a report whose whole budget is a few tenths of a second.

    python benchmarks/scipy_numerics_cost.py [--repeats 5] [--tree DIR]

``--tree`` runs another checkout's ``grpojax`` (e.g. an exported older revision) to compare. Medians are
printed with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

DIAGNOSE = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from grpojax.diagnose import diagnose
t1 = time.perf_counter()
rng = np.random.default_rng(0)
t = np.arange(1000.0)
run = {"reward_mean": 0.2 + 0.5 * (1 - np.exp(-t / 200)) + 0.02 * rng.standard_normal(1000),
       "entropy": 0.5 * np.exp(-t / 500), "grad_norm": 0.3 * np.exp(0.1 * rng.standard_normal(1000)),
       "kl": 1e-4 * t, "clip_frac": 0.05 + 0 * t}
if EVAL:
    run["eval_reward"] = np.where(t % 50 == 0, 0.2 + 0.4 * (1 - np.exp(-t / 200)), np.nan)
diagnose(run)
t2 = time.perf_counter()
mods = [m for m in ("scipy.special", "scipy.ndimage", "scipy.optimize", "scipy.stats", "arviz", "jax") if m in sys.modules]
import grpojax
print(json.dumps({"import": t1 - t0, "diagnose": t2 - t1, "modules": mods, "from": grpojax.__file__}))
"""

PSIS = r"""
import json, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import grpojax.fit
from grpojax.fit._psis import psis_log_weights
t0 = time.perf_counter()
psis_log_weights(np.random.default_rng(0).standard_t(3, 2000))
print(json.dumps({"first_psis": time.perf_counter() - t0}))
"""


IMPORT = r"""
import json, sys, time
import numpy as np
t0 = time.perf_counter()
__import__(MOD)
print(json.dumps({"import": time.perf_counter() - t0}))
"""
LIBRARIES = ("scipy.special", "scipy.ndimage", "scipy.stats", "arviz", "mpmath", "matplotlib.pyplot")


def _run(code: str, tree: str | None) -> dict:
    env = dict(os.environ)
    if tree:  # run from that folder: `python -c` puts the working folder first on sys.path
        env["PYTHONPATH"] = tree
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         cwd=tree or pathlib.Path(__file__).resolve().parents[1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tree", default=None, help="folder holding the grpojax package to time (default: this one)")
    args = ap.parse_args()
    tree = str(pathlib.Path(args.tree).resolve()) if args.tree else None
    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}; tree: {tree or 'this checkout'}")
    for label, ev in (("diagnose, no eval", False), ("diagnose, eval points", True)):
        rows = [_run(f"EVAL = {ev}\n" + DIAGNOSE, tree) for _ in range(args.repeats)]
        print(f"{label}: import {_median([r['import'] for r in rows]):.3f} s, diagnose "
              f"{_median([r['diagnose'] for r in rows]):.3f} s (medians of {args.repeats}); imported {rows[-1]['modules']}"
              f" (grpojax from {pathlib.Path(rows[-1]['from']).parent.parent})")
    rows = [_run(PSIS, tree) for _ in range(args.repeats)]
    print(f"first Pareto smoothing after import grpojax.fit: {_median([r['first_psis'] for r in rows]):.3f} s")
    for mod in LIBRARIES:  # each in fresh processes, after numpy (which every path imports anyway)
        rows = [_run(f"MOD = {mod!r}\n" + IMPORT, tree) for _ in range(args.repeats)]
        print(f"import {mod} after numpy: {_median([r['import'] for r in rows]):.3f} s (median of {args.repeats})")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
