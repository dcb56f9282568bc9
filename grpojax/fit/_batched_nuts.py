"""State-space NUTS for many curves at once: numpyro's functional NUTS kernel vmapped over curves × chains.

Each (curve, chain) pair runs its own NUTS chain with its own step-size and mass-matrix adaptation
(numpyro's ``hmc(potential_fn_gen=..., algo="NUTS")`` kernel, whose state carries the adaptation),
and all of them advance together in one ``lax.scan`` over iterations of a ``vmap``-ed kernel. The
tree-building loop of a batch runs until its slowest member finishes, so an iteration costs about
as much as the deepest tree in the batch, but the Kalman filter underneath is vectorised across the
whole batch. This is what makes the calibration experiment (≥ 100 curves) affordable on a CPU.

The model is :func:`grpojax.fit._models.state_space_model` (same priors, same normalisation as
:func:`grpojax.fit.fit_bayes` with ``model="state_space"``); all curves share the same steps.
"""

from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.distributions.transforms import biject_to
from numpyro.infer.hmc import hmc
from numpyro.infer.util import potential_energy

from grpojax._errors import InvalidValueError
from grpojax._chunks import padded_chunks
from grpojax.fit._data import check_steps
from grpojax.fit._kalman import step_intervals
from grpojax.fit._lsq import fit_laws_batched
from grpojax.fit._models import ZETA_RANGE, prior_sites, state_space_model


class BatchedPosterior(NamedTuple):
    """Per-curve posterior draws of the state-space model (raw units).

    Attributes:
        samples: ``{name: (N, chains, draws)}`` for ``p0, p_star, zeta, omega0, sigma, s_proc``.
        r_hat: ``{name: (N,)}`` split-R̂ per curve; ``ess``: ``{name: (N,)}`` bulk ESS per curve.
        converged: ``(N,)`` bool, max R̂ ≤ 1.01 and min ESS ≥ 100 per chain.
        runtime_s: wall time (compile included).
    """

    samples: dict
    r_hat: dict
    ess: dict
    converged: np.ndarray
    runtime_s: float


def _init(Y, steps, num_chains, key):
    """Unconstrained initial values (N, chains) per site from the batched LM three-phase fit."""
    N = Y.shape[0]
    lf = fit_laws_batched(steps, Y, "three_phase")
    c = np.nanmean(Y, -1)
    s = np.nanstd(Y, -1)
    span = steps[-1] - steps[0]
    fp = lf.fitted_params
    vals = {
        "p0": np.clip((fp["r0"] - c) / s, -8, 8),
        "p_star": np.clip((fp["r_inf"] - c) / s, -8, 8),
        "log_omega0": np.clip(np.log(np.maximum(fp["omega0"] * span, 1e-3)), -3, 7),
        "zeta": np.clip(fp["zeta"], ZETA_RANGE[0] + 0.05, ZETA_RANGE[1] - 0.05),
        "sigma": np.clip(lf.sigma / s, 0.02, 2.0),
        "s_proc": np.full(N, 0.05),
    }
    out = {}
    for i, (name, d) in enumerate(prior_sites("state_space").items()):
        v = np.where(np.isfinite(vals[name]), vals[name], np.nan)
        v = np.where(np.isnan(v), float(d.mean) if name not in ("sigma", "s_proc") else 0.3, v)
        u = biject_to(d.support).inv(jnp.asarray(v))
        out[name] = u[:, None] + 0.05 * jax.random.normal(jax.random.fold_in(key, i), (N, num_chains), u.dtype)
    return out


@partial(jax.jit, static_argnums=(2, 4, 5, 6))
def _run(init, ys, uniq, index, num_warmup, num_samples, dense_mass, keys):
    uniq = np.asarray(uniq)  # static: the transitions need concrete intervals

    def pe_gen(y, mask):
        return lambda z: potential_energy(state_space_model, (y, mask, uniq, index), {}, z)

    init_kernel, sample_kernel = hmc(potential_fn_gen=pe_gen, algo="NUTS")

    def one_chain(z0, y, key):
        mask = jnp.isfinite(y)
        yz = jnp.where(mask, y, 0.0)
        k0, k1 = jax.random.split(key)
        st = init_kernel(z0, num_warmup, dense_mass=dense_mass, target_accept_prob=0.85, model_args=(yz, mask), rng_key=k0)

        def body(state, _):
            state = sample_kernel(state, model_args=(yz, mask))
            return state, (state.z, state.diverging)

        _, (zs, div) = jax.lax.scan(body, st, None, length=num_warmup + num_samples)
        return jax.tree_util.tree_map(lambda a: a[num_warmup:], zs), div[num_warmup:]

    # vmap over chains (inner) and curves (outer)
    f = jax.vmap(jax.vmap(one_chain, in_axes=(0, None, 0)), in_axes=(0, 0, 0))
    return f(init, ys, keys)


def fit_state_space_batched(steps, Y, *, key, num_warmup: int = 500, num_samples: int = 500, num_chains: int = 2,
                            dense_mass: bool = True, batch_size: int = 1, show_progress: bool = False
                            ) -> BatchedPosterior:
    """State-space posteriors for ``N`` curves sharing ``steps``: one compiled NUTS program, run per batch.

    The program is compiled once (all batches have the same shape; the last one is padded) and each call
    runs ``batch_size`` curves × ``num_chains`` chains vmapped. Small batches are usually fastest on a
    CPU: a vmapped NUTS iteration costs as much as the deepest tree in its batch, so one hard curve
    slows every curve batched with it.

    Args:
        steps: ``(T,)`` strictly increasing steps (irregular allowed).
        Y: ``(N, T)`` rewards (NaN = missing; each curve needs ≥ 8 observations and non-zero variance).
        key: PRNG key.
        num_warmup, num_samples, num_chains: per (curve, chain).
        dense_mass: dense mass-matrix adaptation.
        batch_size: curves per compiled call (≥ 1).
        show_progress: rich progress bar over curves.

    Returns:
        :class:`BatchedPosterior`.

    Raises:
        ValueError: bad steps, shape, ±inf, a curve with < 8 points or constant.
    """
    s = check_steps(steps)
    Y = np.asarray(Y, float)
    if Y.ndim != 2 or Y.shape[1] != s.size:
        raise InvalidValueError(f"Y must have shape (N, {s.size}), got {Y.shape}")
    if np.any(np.isinf(Y)):
        raise InvalidValueError("rewards must be finite or NaN (missing)")
    n_obs = np.isfinite(Y).sum(-1)
    if np.any(n_obs < 8):
        raise InvalidValueError(f"every curve needs at least 8 finite points; curve {int(np.argmin(n_obs))} has {int(n_obs.min())}")
    c, sc = np.nanmean(Y, -1), np.nanstd(Y, -1)
    if np.any(~(sc > 0)):
        raise InvalidValueError(f"curve {int(np.argmin(sc))} is constant: nothing to fit")
    N = Y.shape[0]
    t = (s - s[0]) / (s[-1] - s[0])
    uniq, index = step_intervals(t)
    yn = (Y - c[:, None]) / sc[:, None]
    k_init, k_run = jax.random.split(key)
    init = _init(Y, s, num_chains, k_init)
    keys = jax.random.split(k_run, N * num_chains).reshape(N, num_chains)
    if int(batch_size) != batch_size or batch_size < 1:
        raise InvalidValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    B = min(int(batch_size), N)
    t0 = time.perf_counter()
    zs_parts, div_parts = [], []
    pbar = None
    if show_progress:
        from grpojax._progress import progress  # noqa: PLC0415

        pbar = progress()
        pbar.start()
        pbar.add_task("NUTS curves", total=N)
    try:
        for sel, m in padded_chunks(N, B):
            # numpyro's HMC adaptation mixes integer counters with floats: standard promotion for it
            with jax.numpy_dtype_promotion("standard"):
                z, d = _run({k: v[sel] for k, v in init.items()}, jnp.asarray(yn[sel]),
                            tuple(float(u) for u in uniq), jnp.asarray(index), int(num_warmup), int(num_samples),
                            bool(dense_mass), keys[sel])
            zs_parts.append({k: np.asarray(v)[:m] for k, v in z.items()})
            div_parts.append(np.asarray(d)[:m])
            if pbar is not None:
                pbar.advance(pbar.task_ids[0], m)
    finally:
        if pbar is not None:
            pbar.stop()
    zs = {k: np.concatenate([p[k] for p in zs_parts]) for k in zs_parts[0]}
    div = np.concatenate(div_parts)
    runtime = time.perf_counter() - t0
    sites = prior_sites("state_space")
    post = {k: np.asarray(biject_to(sites[k].support)(zs[k])) for k in sites}  # (N, chains, draws)
    span = s[-1] - s[0]
    om = np.exp(post["log_omega0"])
    raw = {
        "p0": c[:, None, None] + sc[:, None, None] * post["p0"],
        "p_star": c[:, None, None] + sc[:, None, None] * post["p_star"],
        "zeta": post["zeta"],
        "omega0": om / span,
        "sigma": sc[:, None, None] * post["sigma"],
        "s_proc": sc[:, None, None] * post["s_proc"],
    }
    r_hat = {k: np.array([float(split_gelman_rubin(post[k][i])) for i in range(N)]) for k in sites}
    ess = {k: np.array([float(effective_sample_size(post[k][i])) for i in range(N)]) for k in sites}
    rmax = np.max(np.stack(list(r_hat.values())), 0)
    emin = np.min(np.stack(list(ess.values())), 0)
    ndiv = np.asarray(div).sum(axis=(1, 2))
    converged = (rmax <= 1.01) & (emin >= 100 * num_chains) & (ndiv == 0)
    return BatchedPosterior(raw, r_hat, ess, converged, runtime)
