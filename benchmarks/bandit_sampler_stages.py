"""Where the time of the exact count sampler goes at large G: stage-by-stage cost of the compacted BTRS.

Runs ``binomial_counter`` on N elements for T steps (one device, one jitted ``scan``), and the same work cut
off after each stage, so that differences of the per-element times are the cost of each stage:

- the counter hash alone: JAX's ``threefry_2x32`` (a C++ custom call on CPU) vs grpojax's jnp version;
0. first proposal + squeeze on every element (jnp Threefry hash included);
1. + gathering the ~30% left-over elements into a buffer of N/2 and scattering results back (:func:`_drain`);
2. the whole sampler, with the log-factorial table (static ``max_n``, what the sweep uses) and without it.

Also: the plain BTRS ``while_loop`` over the whole batch (what ``vmap`` runs) for comparison.

    .venv/bin/python benchmarks/bandit_sampler_stages.py [--n 10000] [--steps 400] [--trials 1024]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
from jax.extend.random import threefry_2x32

from grpojax.bandit import _binomial as B
from grpojax.bandit._threefry import threefry2x32

from _timing import machine_line, time_calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--trials", type=float, default=1024.0)
    args = ap.parse_args(argv)
    if args.n < 2 or args.steps < 1 or args.trials < 20:
        ap.error(f"need --n >= 2, --steps >= 1 and --trials >= 20 (BTRS regime), got --n {args.n} "
                 f"--steps {args.steps} --trials {args.trials:g}")
    N, T = args.n, args.steps
    rows = jnp.arange(N, dtype=jnp.uint32)
    n = jnp.full(N, args.trials)
    p0 = jnp.linspace(0.1, 0.5, N)

    max_n = int(args.trials)

    def bits_for(key, dtype):
        kd = jax.random.key_data(key)

        def bits(i, cc):
            w0, w1 = threefry2x32(kd[0], kd[1], cc, jnp.broadcast_to(jnp.asarray(i, jnp.uint32), cc.shape))
            return B._bits_to_unit(w0, dtype), B._bits_to_unit(w1, dtype)

        return bits

    def hash_jax(key, x):
        out = threefry_2x32(jax.random.key_data(key), jnp.concatenate([rows, jnp.zeros_like(rows)]))
        return B._bits_to_unit(out[:N], x.dtype) + B._bits_to_unit(out[N:], x.dtype)

    def hash_jnp(key, x):
        return sum(bits_for(key, x.dtype)(0, rows))

    def stage(level):
        def f(key, x):
            bits = bits_for(key, x.dtype)
            active = x > 0
            safe_n, _, _, a, b, c, v_r = B._btrs_shape(n, x, active)
            kk, _, inside, squeeze = B._btrs_proposal(*bits(1, rows), a, b, c, v_r, safe_n)
            k = jnp.where(active & inside & squeeze, kk, 0.0)
            if level == 0:
                return k
            return B._drain(active & ~(inside & squeeze), N // 2, lambda c_, n_, p_, ok: jnp.where(ok, n_, 0.0), k,
                            (rows, n, x))

        return f

    def plain(key, x):
        bits = bits_for(key, x.dtype)
        return B._btrs(lambda i: bits(i, rows), n, x, x > 0)

    variants = {
        "hash only: jax.extend.random.threefry_2x32": hash_jax,
        "hash only: grpojax jnp threefry2x32": hash_jnp,
        "0 first proposal + squeeze": stage(0),
        "1 + gather left-overs into N/2, scatter back": stage(1),
        "2 whole sampler (binomial_counter, max_n: log-factorial table)":
            lambda key, x: B.binomial_counter(key, rows, n, x, max_n=max_n),
        "2' whole sampler (binomial_counter, Stirling series)": lambda key, x: B.binomial_counter(key, rows, n, x),
        "plain BTRS while_loop over the batch": plain,
    }
    print(f"# bandit_sampler_stages: N={N}, steps={T}, trials={args.trials:g}, p in [0.1, 0.5]; {machine_line()}")
    print("| variant | element-draws/s | ns per element |")
    print("|---|---:|---:|")
    for name, f in variants.items():
        @jax.jit
        def run(key, f=f):
            def body(x, i):
                k = f(jax.random.fold_in(key, i), x)
                return jnp.clip(x + 1e-7 * (k - n * x), 0.05, 0.5), None

            return jax.lax.scan(body, p0, jnp.arange(T))[0]

        key = jax.random.key(0)
        sec = time_calls(lambda: run(key), 3).median_s
        print(f"| {name} | {N * T / sec:.3g} | {1e9 * sec / (N * T):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
