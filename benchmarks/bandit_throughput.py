"""Two-arm bandit GRPO throughput: configuration-steps per second, grpojax sweep engine vs NumPy.

Both implementations run the same step for N configurations at once (grpo advantage, stale gradient,
heavy-ball momentum, constant lag K_ref = 4 through a ring buffer, exact KL anchor), each configuration
with its own η (and so its own trajectory):

- grpojax: ``grpojax.sweep.simulate_traces`` (one jit-compiled, vmapped call; exact counter-based
  binomial sampler: loop-free CDF inversion for G ≤ 64, inversion/BTRS otherwise);
- NumPy: the same step vectorised over configurations, counts from ``numpy.random.Generator.binomial``
  (exact; C loop per element);
- jax.random.binomial: the grpojax step with ``jax.random.binomial`` as the count sampler (same run).

Also reported: the sampler alone and the step without sampling (where the time goes). Compile time is
reported separately; timings are medians (and minima) of ``--repeats``; wall and process-CPU seconds.

The sweep engine shards configurations over all JAX devices. On a CPU host XLA exposes one device unless
told otherwise, so by default this script asks for one CPU device per core (``--devices``, set through
``XLA_FLAGS=--xla_force_host_platform_device_count`` before JAX starts): that is how the engine uses every
core, as it uses every GPU. ``--devices 1`` measures the single-device program. The NumPy baseline is
single-threaded (NumPy's binomial sampler has no multithreaded form); its per-CPU-second rate is printed
beside grpojax's so the per-core comparison is visible too.

    .venv/bin/python benchmarks/bandit_throughput.py [--configs 10000] [--steps 400] [--repeats 3] [--devices N]
"""

from __future__ import annotations

import argparse
import os


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--numpy-steps", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--devices", type=int, default=os.cpu_count() or 1,
                    help="CPU devices to expose (default: one per core); read before JAX starts")
    return ap


if __name__ == "__main__":  # must happen before JAX initialises its backends
    _devices = _parser().parse_known_args()[0].devices
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={_devices}").strip()

import jax
import jax.numpy as jnp
import numpy as np

from grpojax.bandit import BanditConfig
from grpojax.bandit._binomial import binomial_counter
from grpojax.bandit._two_arm import TwoArmState, _update, behaviour_logit, two_arm_init
from grpojax.sweep import simulate_traces

from _timing import machine_line, time_calls


def numpy_run(eta, mu, k_ref, G, beta, theta_ref, steps, seed):
    """Vectorised NumPy version of the same step (grpo, stale, constant lag)."""
    rng = np.random.default_rng(seed)
    N = eta.shape[0]
    L = int(k_ref.max())
    theta = np.zeros(N)
    v = np.zeros(N)
    hist = np.zeros((L, N))
    cols = np.arange(N)
    for n in range(steps):
        theta_b = hist[(n - k_ref) % L, cols]
        hist[n % L] = theta
        pb = 1.0 / (1.0 + np.exp(-theta_b))
        k = rng.binomial(G, pb)
        q = k / G
        qq = q * (1.0 - q)
        s = np.sqrt(qq)
        W = np.divide(qq, s, out=np.zeros_like(qq), where=qq > 0)
        p = 1.0 / (1.0 + np.exp(-theta))
        g = W - beta * p * (1.0 - p) * (theta - theta_ref)
        v = mu * v + g
        theta = theta + eta * v
    return theta


def _jax_binomial_chunk(cfg: BanditConfig, key, steps: int):
    """The grpojax step with jax.random.binomial (batched over configurations, one key per step)."""

    @jax.jit
    def run(cfg, key):
        st = jax.vmap(two_arm_init)(cfg)

        def body(s, n):
            tb, h = jax.vmap(behaviour_logit)(s)
            k = jax.random.binomial(jax.random.fold_in(key, n), cfg.group_size, jax.nn.sigmoid(tb))
            s2, _ = jax.vmap(_update)(s, tb, h, k)
            return s2, None

        s, _ = jax.lax.scan(body, st, jnp.arange(steps))
        return s.theta

    return run


def _parts(cfg: BanditConfig, steps: int):
    """(sampler only, step without sampling) jitted over the batch."""
    rows = jnp.arange(cfg.eta.shape[0], dtype=jnp.uint32)

    @jax.jit
    def sampler_only(cfg, key):
        def body(t, n):
            k = binomial_counter(jax.random.fold_in(key, n), rows, cfg.group_size, jax.nn.sigmoid(t),
                                 max_n=cfg.max_group)
            return t + 1e-3 * (k / cfg.group_size - 0.5), None

        return jax.lax.scan(body, jnp.zeros_like(cfg.eta), jnp.arange(steps))[0]

    @jax.jit
    def no_sampling(cfg, key):
        st = jax.vmap(two_arm_init)(cfg)

        def body(s: TwoArmState, n):
            tb, h = jax.vmap(behaviour_logit)(s)
            k = jnp.round(cfg.group_size * jax.nn.sigmoid(tb))
            return jax.vmap(_update)(s, tb, h, k)[0], None

        return jax.lax.scan(body, st, jnp.arange(steps))[0].theta

    return sampler_only, no_sampling


def main(argv=None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    for name in ("configs", "steps", "numpy_steps", "repeats", "devices"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    N, T = args.configs, args.steps
    print(f"# bandit_throughput: {N} configurations, {T} steps (NumPy {args.numpy_steps}), repeats {args.repeats}; "
          f"{machine_line()}")
    rows = []
    for G in (16, 1024):
        eta = np.linspace(0.01, 0.3, N)
        cfg = BanditConfig(eta, 0.9, 4, G, beta=1.8).broadcast()
        ids = np.arange(N)
        key = jax.random.key(0)
        ours = time_calls(lambda: simulate_traces(cfg, ids, T, key=key, stride=T, chunk_size=N), args.repeats)
        compile_s = ours.compile_s
        jb = _jax_binomial_chunk(cfg, key, T)
        jmed = time_calls(lambda: jb(cfg, key), args.repeats).median_s
        so, ns = _parts(cfg, T)
        smed = time_calls(lambda: so(cfg, key), args.repeats).median_s
        nmed = time_calls(lambda: ns(cfg, key), args.repeats).median_s
        Tn = args.numpy_steps
        npy = time_calls(lambda: numpy_run(eta, 0.9, np.full(N, 4), G, 1.8, 0.0, Tn, 0), args.repeats, first=False)
        r = dict(G=G, grpojax=N * T / ours.median_s, grpojax_best=N * T / ours.min_s,
                 grpojax_cpu=N * T / ours.cpu_median_s, compile_s=compile_s, jax_binomial=N * T / jmed,
                 numpy=N * Tn / npy.median_s, numpy_cpu=N * Tn / npy.cpu_median_s,
                 sampler_only=N * T / smed, no_sampling=N * T / nmed)
        r["speedup_vs_numpy"] = r["grpojax"] / r["numpy"]
        r["speedup_vs_jax_binomial"] = r["grpojax"] / r["jax_binomial"]
        rows.append(r)
        print(f"G={G}: grpojax {r['grpojax']:.3g} config-steps/s (median wall; best {r['grpojax_best']:.3g}; "
              f"per CPU-second {r['grpojax_cpu']:.3g}; compile {compile_s:.1f} s) | NumPy {r['numpy']:.3g} "
              f"(x{r['speedup_vs_numpy']:.1f}) | jax.random.binomial step {r['jax_binomial']:.3g} "
              f"(x{r['speedup_vs_jax_binomial']:.1f}) | sampler alone {r['sampler_only']:.3g}, step without "
              f"sampling {r['no_sampling']:.3g}")
    print("\n| G | grpojax median (best) | grpojax per CPU-s | NumPy | × NumPy | jax.random.binomial step | "
          "sampler alone | step w/o sampling | compile s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['G']} | {r['grpojax']:.3g} ({r['grpojax_best']:.3g}) | {r['grpojax_cpu']:.3g} | {r['numpy']:.3g} | "
              f"{r['speedup_vs_numpy']:.1f} | {r['jax_binomial']:.3g} | {r['sampler_only']:.3g} | "
              f"{r['no_sampling']:.3g} | {r['compile_s']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
