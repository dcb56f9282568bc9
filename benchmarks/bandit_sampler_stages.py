"""Where the time of the exact count sampler goes at large G: stage-by-stage cost of the compacted BTRS.

Runs ``binomial_counter`` on N elements for T steps (one device, one jitted ``scan``), and the same work cut
off after each stage, so that differences of the per-element times are the cost of each stage:

0. first proposal + squeeze on every element (threefry hash included);
1. + compaction of the left-over elements (prefix sum + scatter) into a buffer of N/2;
2. + the whole sampler (BTRS retries on the buffer, scatter back, inversion path check).

Also: the plain BTRS ``while_loop`` over the whole batch (what ``vmap`` runs) for comparison.

    .venv/bin/python benchmarks/bandit_sampler_stages.py [--n 10000] [--steps 400] [--trials 1024]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry_2x32

from grpojax.bandit import _binomial as B


def _median_seconds(fn, key, repeats=3):
    jax.block_until_ready(fn(key))
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn(key))
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--trials", type=float, default=1024.0)
    args = ap.parse_args(argv)
    N, T = args.n, args.steps
    rows = jnp.arange(N, dtype=jnp.uint32)
    n = jnp.full(N, args.trials)
    p0 = jnp.linspace(0.1, 0.5, N)

    def bits_for(key, dtype):
        kd = jax.random.key_data(key)

        def bits(i, cc):
            out = threefry_2x32(kd, jnp.concatenate([cc, jnp.broadcast_to(jnp.asarray(i, jnp.uint32), cc.shape)]))
            m = cc.shape[0]
            return B._bits_to_unit(out[:m], dtype), B._bits_to_unit(out[m:], dtype)

        return bits

    def stage(level):
        def f(key, x):
            bits = bits_for(key, x.dtype)
            active = x > 0
            safe_n, _, _, a, b, c, v_r = B._btrs_shape(n, x, active)
            kk, _, inside, squeeze = B._btrs_proposal(*bits(1, rows), a, b, c, v_r, safe_n)
            k = jnp.where(active & inside & squeeze, kk, 0.0)
            if level == 0:
                return k
            idx = B._compact(active & ~(inside & squeeze), N // 2)
            return k + 1e-9 * idx.astype(x.dtype).sum()

        return f

    def plain(key, x):
        bits = bits_for(key, x.dtype)
        return B._btrs(lambda i: bits(i, rows), n, x, x > 0)

    variants = {
        "0 first proposal + squeeze": stage(0),
        "1 + compaction into N/2": stage(1),
        "2 whole sampler (binomial_counter)": lambda key, x: B.binomial_counter(key, rows, n, x),
        "plain BTRS while_loop over the batch": plain,
    }
    print(f"# bandit_sampler_stages: N={N}, steps={T}, trials={args.trials:g}, p in [0.1, 0.5]; jax {jax.__version__}")
    print("| variant | element-draws/s | ns per element |")
    print("|---|---:|---:|")
    for name, f in variants.items():
        @jax.jit
        def run(key, f=f):
            def body(x, i):
                k = f(jax.random.fold_in(key, i), x)
                return jnp.clip(x + 1e-7 * (k - n * x), 0.05, 0.5), None

            return jax.lax.scan(body, p0, jnp.arange(T))[0]

        sec = _median_seconds(run, jax.random.key(0))
        print(f"| {name} | {N * T / sec:.3g} | {1e9 * sec / (N * T):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
