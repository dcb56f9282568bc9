"""Throughput of the SDE engines: 10,000 paths × 1,000 steps of the stochastic oscillator.

    .venv/bin/python benchmarks/sde_throughput.py [--paths 10000] [--steps 1000] [--repeats 5] [--x64] [--markdown]

Engines (same run, same parameters, float32 unless ``--x64``):

- ``diffrax Euler``: :func:`grpojax.sde.simulate` ``solver="euler"`` (``UnsafeBrownianPath``, the default);
- ``diffrax Euler + VirtualBrownianTree``: the same with ``brownian="virtual"`` (what strong-convergence
  studies and reverse-mode gradients need);
- ``diffrax ShARK``: the high-order additive-noise solver (``solver="shark"``, space-time Lévy area);
- ``lax.scan EM``: a hand-written Euler–Maruyama loop (the ceiling: no solver machinery);
- ``exact sampler``: :func:`grpojax.sde.sample_exact` (exact Gaussian transition per step; it saves every
  step, the others only the final time).

Reported: compile time (first call minus the median steady-state call), median and min wall time of
``--repeats`` steady-state calls (``block_until_ready``), median process CPU time, and path-steps per
second from the median wall time. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import itertools
from types import SimpleNamespace

import jax

from _timing import machine_line, time_calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=1_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--x64", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="print a RESULTS.md table")
    ap.add_argument("--skip", nargs="*", default=[], help="engine names to skip")
    ap.add_argument("--slow-repeats", type=int, default=1, help="repeats for the (slow) VirtualBrownianTree engine")
    args = ap.parse_args(argv)
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np

    from grpojax import sde

    n, steps, dt = args.paths, args.steps, 0.01
    T = steps * dt
    p = SimpleNamespace(M=1.0, C=0.5, K_eff=1.0, p_star=0.0, D=0.1)
    dtype = jnp.zeros(()).dtype
    ts_final = np.array([T])
    F = jnp.array([[0.0, 1.0], [-1.0, -0.5]], dtype)
    s = float(np.sqrt(0.1))

    @jax.jit
    def scan_em(key):
        def step(x, k):
            z = jr.normal(k, (n,), dtype)
            x = x + dt * x @ F.T + jnp.stack([jnp.zeros_like(z), s * np.sqrt(dt) * z], -1)
            return x, None

        x0 = jnp.broadcast_to(jnp.array([1.0, 0.0], dtype), (n, 2))
        x, _ = jax.lax.scan(step, x0, jr.split(key, steps))
        return x

    engines = {
        "diffrax Euler": lambda r: sde.simulate(p, ts_final, key=jr.key(r), n_paths=n, solver="euler", dt=dt).ys,
        "diffrax Euler + VirtualBrownianTree": lambda r: sde.simulate(
            p, ts_final, key=jr.key(r), n_paths=n, solver="euler", dt=dt, brownian="virtual").ys,
        "diffrax ShARK": lambda r: sde.simulate(p, ts_final, key=jr.key(r), n_paths=n, solver="shark", dt=dt).ys,
        "lax.scan EM (hand-written)": lambda r: scan_em(jr.key(r)),
        "exact sampler": lambda r: sde.sample_exact(p, dt * np.arange(1, steps + 1), key=jr.key(r), n_paths=n),
    }
    print(f"{n} paths × {steps} steps, dtype {dtype}; {machine_line()}")
    results = {}
    for name, fn in engines.items():
        if name in args.skip:
            continue
        seeds = itertools.count()  # a fresh key for every call
        r = time_calls(lambda: fn(next(seeds)), args.slow_repeats if "Virtual" in name else args.repeats).as_dict()
        r["path_steps_per_s"] = n * steps / r["median_s"]
        results[name] = r
        print(f"{name:38s} compile {r['compile_s']:6.2f} s | median {r['median_s']:7.3f} s (min {r['min_s']:.3f}, "
              f"CPU {r['cpu_median_s']:.3f}) | {r['path_steps_per_s']:.3g} path-steps/s")
    base = results.get("lax.scan EM (hand-written)")
    if base and "diffrax Euler" in results:
        ratio = results["diffrax Euler"]["median_s"] / base["median_s"]
        print(f"diffrax Euler / hand-written scan: {ratio:.2f}x (acceptance: within 2x)")
    if args.markdown:
        print("\n| engine | compile s | median s | min s | CPU s (median) | path-steps/s | vs scan EM |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, r in results.items():
            rel = r["median_s"] / base["median_s"] if base else float("nan")
            print(f"| {name} | {r['compile_s']:.2f} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['cpu_median_s']:.3f} | "
                  f"{r['path_steps_per_s']:.3g} | {rel:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
