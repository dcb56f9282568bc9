"""Speed of grpojax.fit: vmapped LM point fits vs scipy.optimize.curve_fit, and NUTS.

1. ``N`` curves (default 10,000 × 200 steps, three-phase + noise) point-fitted by
   :func:`grpojax.fit.fit_laws_batched` in one call (compile reported separately: first call minus
   the median of the repeats), against ``scipy.optimize.curve_fit`` (same law, same starting value as
   our seed would have, on a subset, extrapolated linearly) in the same run.
2. One 500-point curve to a NUTS posterior of the state-space model with 4 chains × 1000 draws
   (500 warmup), chain_method ``vectorized`` and ``sequential``; wall time (compile included, and a
   5-draw run as the compile estimate), max r_hat, min ESS.

3. ``--quickstart``: the README's ``grpojax fit tests/fixtures/quickstart/trainer_state.json --bayes state_space``
   as a user runs it (a fresh process each time): wall and CPU time (user + system of the child) of a first
   run with an empty compilation cache, then the median of ``--repeats`` runs with that cache filled, the
   posterior's divergences / max r_hat / min ESS as printed, and the 1-minute load average around each run.
   ``--devices 1,2`` repeats that with the command's JAX host CPU devices set to each count
   (``JAX_NUM_CPU_DEVICES``; ``auto``, the default, leaves the choice to the command, which asks for one
   device per core, up to the number of chains): the chains are split between the devices, so ``1`` is
   the one-core baseline and ``2`` runs them on two cores, with the same draws.

Usage: ``python benchmarks/fit_speed.py [--curves N] [--scipy-subset K] [--skip-nuts] [--quickstart [--devices 1,2]]
[--append]``
(``--append`` adds a section to benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time
import warnings

import jax
import numpy as np

from _timing import machine_line, time_calls


def _curves(n, T, rng):
    from grpojax.dynamics import ThreePhase

    s = np.arange(1.0, T + 1.0)
    z = rng.uniform(0.3, 2.0, n)
    om = np.exp(rng.normal(np.log(8.0 / T), 0.3, n))
    r0 = rng.uniform(0.0, 0.3, n)
    ri = rng.uniform(0.6, 0.9, n)
    Y = np.asarray(jax.vmap(lambda a, b, c, d: ThreePhase(a, b, c, d)(s - 1.0))(r0, ri, om, z))
    return s, Y + 0.02 * rng.standard_normal(Y.shape), dict(r0=r0, r_inf=ri, omega0=om, zeta=z)


def bench_lsq(n, T, subset, repeats):
    from scipy.optimize import curve_fit

    from grpojax.dynamics import ThreePhase
    from grpojax.fit import fit_laws_batched

    rng = np.random.default_rng(0)
    s, Y, truth = _curves(n, T, rng)
    timing = time_calls(lambda: fit_laws_batched(s, Y, "three_phase"), repeats)
    fit = timing.result
    ok = np.mean(fit.status == "ok")
    rel = np.abs(fit.params["zeta"] - truth["zeta"]) / truth["zeta"]

    def f(t, r0, ri, om, z):
        return np.asarray(ThreePhase(r0, ri, om, z)(t))

    # scipy: same model (numpy evaluation through the same closed form), start at the data's ends and a
    # mid-grid (ω₀, ζ) -- the usual single-start practice.
    idx = rng.choice(n, subset, replace=False)
    r2_s, t_s, fails = [], 0.0, 0
    tt = s - 1.0
    for i in idx:
        y = Y[i]
        p0 = [y[:10].mean(), y[-10:].mean(), 8.0 / T, 1.0]
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p, _ = curve_fit(f, tt, y, p0=p0, maxfev=2000)
            pred = f(tt, *p)
            r2_s.append(1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2))
        except RuntimeError:
            fails += 1
            r2_s.append(np.nan)
        t_s += time.perf_counter() - t0
    per = t_s / subset
    ours = fit.r2[idx]
    return {
        "curves": n, "steps": T, "first_call_s": timing.first_s, "median_s": timing.median_s,
        "repeats": list(timing.walls), "compile_s_est": timing.compile_s,
        "frac_ok": float(ok), "median_rel_err_zeta": float(np.median(rel)),
        "scipy_subset": subset, "scipy_per_curve_s": per, "scipy_extrapolated_s": per * n, "scipy_failures": fails,
        "r2_ours_ge_scipy": float(np.nanmean(ours >= np.asarray(r2_s) - 1e-6)),
        "r2_median_ours": float(np.median(ours)), "r2_median_scipy": float(np.nanmedian(r2_s)),
    }


def bench_nuts(method):
    from grpojax.dynamics import OscillatorParams
    from grpojax.fit import ConvergenceWarning, fit_bayes
    from grpojax.sde import sample_exact

    T = 500
    s = np.arange(T, dtype=float)
    om, z = 0.02, 0.6
    p = OscillatorParams(1.0, 2 * z * om, om**2, 0.8, 4 * om**3 * 0.02**2)
    x = np.asarray(sample_exact(p, s, key=jax.random.key(1), n_paths=1, e0=-0.6))[0, :, 0]
    y = 0.8 + x + 0.03 * np.random.default_rng(0).standard_normal(T)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.perf_counter()
        fit_bayes(s, y, "state_space", key=jax.random.key(9), num_warmup=5, num_samples=5, num_chains=4, chain_method=method)
        compile_est = time.perf_counter() - t0
        t0 = time.perf_counter()
        f = fit_bayes(s, y, "state_space", key=jax.random.key(0), num_warmup=500, num_samples=1000, num_chains=4,
                      chain_method=method)
        wall = time.perf_counter() - t0
    return {"method": method, "wall_s": wall, "sampler_s": f.runtime_s, "compile_plus_overhead_s": compile_est,
            "max_r_hat": f.info["max_r_hat"], "min_ess_bulk": f.info["min_ess_bulk"], "divergences": f.divergences,
            "converged": f.converged, "zeta_q50": f.summary["zeta"]["q50"], "zeta_true": z}


def bench_quickstart(repeats, devices="auto", warmup=None):
    """The quickstart NUTS command in fresh processes: a cold compilation cache, then ``repeats`` warm runs, with
    ``devices`` JAX host CPU devices (``"auto"``: the command's own choice) and ``warmup`` NUTS warm-up
    iterations (None: the command's default)."""
    import json
    import re
    import resource
    import subprocess
    import tempfile

    root = pathlib.Path(__file__).resolve().parents[1]
    exe = pathlib.Path(sys.executable).with_name("grpojax")
    cmd = [str(exe), "fit", "tests/fixtures/quickstart/trainer_state.json", "--bayes", "state_space"]
    cmd += [] if warmup is None else ["--warmup", str(int(warmup))]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k not in ("JAX_NUM_CPU_DEVICES",)}
        env["GRPOJAX_JAX_CACHE"] = os.path.join(tmp, "jax-cache")
        if devices != "auto":
            env["JAX_NUM_CPU_DEVICES"] = str(int(devices))
        for i in range(1 + repeats):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            out = subprocess.run(cmd + ["--out", os.path.join(tmp, f"out{i}")], cwd=root, env=env, capture_output=True,
                                 text=True, check=True)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            m = re.search(r"\((\d+) divergent transitions, max r_hat ([0-9.]+), min ESS_bulk (\d+)", out.stdout)
            fit = json.loads(pathlib.Path(tmp, f"out{i}", "fit.json").read_text()) if pathlib.Path(tmp, f"out{i}", "fit.json").exists() else {}
            status = next(iter(fit.get("runs", {}).values()), {}).get("bayes", {}).get("status", "?")
            runs.append({"cache": "cold" if i == 0 else "warm", "wall_s": wall, "cpu_s": cpu, "load_before": load,
                         "load_after": os.getloadavg()[0], "status": status,
                         "divergences": int(m.group(1)) if m else None, "max_r_hat": float(m.group(2)) if m else None,
                         "min_ess_bulk": int(m.group(3)) if m else None})
            print("quickstart", f"devices={devices}", f"warmup={warmup or 'default'}", runs[-1], flush=True)
    warm = runs[1:]
    return {"command": " ".join(["grpojax"] + cmd[1:]), "devices": devices, "warmup": warmup, "runs": runs,
            "warm_wall_median_s": float(np.median([r["wall_s"] for r in warm])) if warm else float("nan"),
            "warm_cpu_median_s": float(np.median([r["cpu_s"] for r in warm])) if warm else float("nan")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curves", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--scipy-subset", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-nuts", action="store_true")
    ap.add_argument("--skip-lsq", action="store_true")
    ap.add_argument("--quickstart", action="store_true",
                    help="time the quickstart 'grpojax fit ... --bayes state_space' (cold cache, then --repeats warm runs)")
    ap.add_argument("--devices", default="auto",
                    help="with --quickstart: comma-separated JAX host CPU device counts to time the command with "
                         "(default auto: the command's own choice)")
    ap.add_argument("--warmups", default="default",
                    help="with --quickstart: comma-separated NUTS warm-up lengths to time the command with, e.g. "
                         "1000,default (default: the command's own)")
    ap.add_argument("--append", action="store_true", help="append a section to benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    jax.config.update("jax_enable_x64", True)  # a script: float64, as in the tests
    print(machine_line())
    load0 = os.getloadavg()[0]
    res = {}
    if not args.skip_lsq:
        res["lsq"] = bench_lsq(args.curves, args.steps, args.scipy_subset, args.repeats)
        print("lsq", res["lsq"])
    if not args.skip_nuts:
        res["nuts"] = [bench_nuts(m) for m in ("vectorized", "sequential")]
        for r in res["nuts"]:
            print("nuts", r)
    if args.quickstart:
        warmups = [None if w.strip() == "default" else int(w) for w in args.warmups.split(",")]
        res["quickstart"] = [bench_quickstart(max(1, args.repeats), d.strip(), w) for d in args.devices.split(",")
                             for w in warmups]
        for q in res["quickstart"]:
            print("quickstart devices={devices} warmup={warmup}: median of warm runs: wall {warm_wall_median_s:.1f} s, "
                  "cpu {warm_cpu_median_s:.1f} s".format(**q))
    load1 = os.getloadavg()[0]
    if args.append:
        _append(res, args, (load0, load1))
    return 0


def _append(res, args, loads):
    lines = ["", "## fit_speed (grpojax.fit)", "",
             f"Command: `python benchmarks/fit_speed.py --curves {args.curves} --steps {args.steps} --scipy-subset "
             f"{args.scipy_subset} --repeats {args.repeats}{' --skip-nuts' if args.skip_nuts else ''}"
             f"{' --skip-lsq' if args.skip_lsq else ''}{' --quickstart --devices ' + args.devices + ' --warmups ' + args.warmups if args.quickstart else ''}"
             " --append`",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
             f"(1-min load average {loads[0]:.1f} at start, {loads[1]:.1f} at end; above ~2 the timings are inflated), "
             f"jax {jax.__version__}, float64.", ""]
    if "lsq" in res:
        r = res["lsq"]
        lines += [
            f"- Point fits, three_phase law, {r['curves']} curves x {r['steps']} steps in ONE `fit_laws_batched` call: "
            f"median {r['median_s']:.1f} s over {len(r['repeats'])} repeats (first call incl. compile {r['first_call_s']:.1f} s, "
            f"compile ~{r['compile_s_est']:.1f} s); {100 * r['frac_ok']:.1f}% converged, median |Δζ|/ζ = {r['median_rel_err_zeta']:.3g}.",
            f"- Baseline `scipy.optimize.curve_fit` (same law, single start, same run): {r['scipy_per_curve_s'] * 1e3:.1f} ms/curve "
            f"on {r['scipy_subset']} curves -> {r['scipy_extrapolated_s']:.0f} s extrapolated to {r['curves']} "
            f"({r['scipy_failures']} failures); our R² ≥ scipy's on {100 * r['r2_ours_ge_scipy']:.0f}% of the subset "
            f"(median R² ours {r['r2_median_ours']:.4f}, scipy {r['r2_median_scipy']:.4f}).",
        ]
    for r in res.get("nuts", []):
        lines.append(
            f"- NUTS state-space, one 500-point curve, 4 chains x 1000 draws (500 warmup), chain_method={r['method']}: "
            f"{r['wall_s']:.0f} s wall end-to-end (of which ~{r['compile_plus_overhead_s']:.0f} s compile/overhead, "
            f"measured by a 5-draw run); max r_hat {r['max_r_hat']:.4f}, min ESS_bulk {r['min_ess_bulk']:.0f}, "
            f"{r['divergences']} divergences, converged={r['converged']} (ζ median {r['zeta_q50']:.3f}, truth {r['zeta_true']}).")
    for q in res.get("quickstart", []):
        lines.append(f"- `{q['command']}`, JAX host CPU devices: {q['devices']}, fresh processes: " + "; ".join(
            f"{r['cache']} cache {r['wall_s']:.0f} s wall / {r['cpu_s']:.0f} s CPU (load {r['load_before']:.1f}, {r['status']}, "
            f"{r['divergences']} divergences, max r_hat {r['max_r_hat']}, min ESS_bulk {r['min_ess_bulk']})" for r in q["runs"])
            + f"; warm median {q['warm_wall_median_s']:.0f} s wall / {q['warm_cpu_median_s']:.0f} s CPU.")
    path = pathlib.Path(__file__).parent / "RESULTS.md"
    with open(path, "a") as f:
        f.write("\n".join(lines) + "\n")
    print(f"appended to {path}")


if __name__ == "__main__":
    sys.exit(main())
