"""The command-line paths that answer in seconds stay free of JAX.

``grpojax diagnose`` (report, diagnosis.json and the SVG dashboard) and the first report of
``grpojax watch`` (the NumPy engine, ``MonitorConfig(forecast=False)``) need no JAX, no SciPy and no
matplotlib: importing JAX costs 1-2.5 s on a 2-core machine, matplotlib 0.4 s and even ``scipy.special``
0.15 s, against a budget of a few tenths of a second. A fresh interpreter runs both on a small log and
lists the heavy modules it imported; an import added anywhere on these paths (a package ``__init__``,
a module-level import, an import inside a detector) fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

SCRIPT = textwrap.dedent("""
    import json, pathlib, sys
    log, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    from grpojax.cli import main
    rc = main(["diagnose", str(log), "--out", str(out / "d"), "--no-validity"])
    from grpojax.cli._follow import read_growing
    from grpojax.monitor import MonitorConfig, init_state, update
    cfg = MonitorConfig(every=10, forecast=False, method="combined", bounds=(0.0, 1.0))
    state, report = update(init_state(), read_growing(log), cfg)
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("jax", "jaxlib", "equinox", "numpyro", "optax",
                                                                 "diffrax", "flax", "torch", "scipy", "matplotlib"))
    print(json.dumps({"rc": rc, "heavy": heavy, "panels": (out / "d" / "dashboard.svg").read_text().count('<g class="panel"'),
                      "forecast": report.forecast, "findings": [f["mode"] for f in report.findings],
                      "best": report.best}))
""")


def _log(path, n=120, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    m = 0.2 + 0.5 * (1 - np.exp(-t / 30))
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"step": int(t[i]), "reward_mean": float(rng.binomial(64, m[i]) / 64),
                                 "entropy": float(0.6 * np.exp(-t[i] / 400)), "kl": float(0.001 * t[i]),
                                 "grad_norm": float(0.3 * np.exp(0.1 * rng.standard_normal()))}) + "\n")


def test_diagnose_and_the_first_watch_report_import_no_jax(tmp_path):
    log = tmp_path / "run.jsonl"
    _log(log)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(log), str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "GRPOJAX_JAX_CACHE": "off"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["rc"] == 0 and got["panels"] == 4  # the dashboard was drawn: reward, entropy, KL, grad norm
    assert got["heavy"] == [], f"imported on the fast paths: {got['heavy']}"
    assert got["forecast"] is None  # forecast=False: the NumPy engine leaves it to the forecast engine
    assert got["best"] is not None and got["best"]["metric"] == "reward_mean"
