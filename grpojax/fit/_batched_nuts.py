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

import hashlib
import os
import pathlib
import time
from functools import cache, partial
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
from grpojax.fit._models import ZETA_RANGE, folded, natural, prior_sites, state_space_model, state_space_post, unit_sites


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


def np_rng(key) -> np.random.Generator:
    """A NumPy generator seeded by a JAX key (typed or raw): host-side draws compile nothing."""
    raw = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return np.random.default_rng(np.asarray(raw).ravel().tolist())


def draw_levels(mean, cov, rng):
    """One draw per row of ``N(mean (..., 2), cov (..., 2, 2))``; a covariance that round-off left slightly
    indefinite (nearly collinear level columns in float32) is projected onto the PSD cone first."""
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    lam, V = np.linalg.eigh(cov)
    z = rng.standard_normal(mean.shape) * np.sqrt(np.maximum(lam, 0.0))
    return (mean + np.einsum("...ij,...j->...i", V, z)).astype(mean.dtype)


def _init(Y, steps, num_chains, key):
    """Unconstrained initial values (N, chains) per sampled site from the batched LM three-phase fit."""
    N = Y.shape[0]
    lf = fit_laws_batched(steps, Y, "three_phase")
    s = np.nanstd(Y, -1)
    span = steps[-1] - steps[0]
    fp = lf.fitted_params
    om = np.where(np.isfinite(fp["omega0"]), np.maximum(fp["omega0"] * span, 1e-3), 8.0)
    ze = np.clip(np.where(np.isfinite(fp["zeta"]), fp["zeta"], 1.0), ZETA_RANGE[0] + 0.05, ZETA_RANGE[1] - 0.05)
    sig = np.clip(np.where(np.isfinite(lf.sigma), lf.sigma / s, 0.5), 0.02, 2.0)
    vals = unit_sites("state_space", {"omega0": om, "zeta": ze, "sigma": sig, "s_proc": np.full(N, 0.05)})
    vals["rate_z"] = np.clip(vals["rate_z"], -3.0, 3.0)
    out = {}
    for i, (name, d) in enumerate(prior_sites("state_space").items()):
        u = biject_to(d.support).inv(jnp.asarray(vals[name]))
        out[name] = u[:, None] + 0.05 * jax.random.normal(jax.random.fold_in(key, i), (N, num_chains), u.dtype)
    return out


@partial(jax.jit, static_argnames=("model", "static", "post", "num_warmup", "num_samples", "dense_mass",
                                   "target_accept_prob", "sequential"))
def run_chains(init, data, keys, *, model, static=(), post=None, num_warmup, num_samples, dense_mass=True,
               target_accept_prob=0.85, sequential=False):
    """NUTS chains of ``model`` for ``B`` data sets in one compiled program (warm-up, sampling, post-processing).

    Every (data set, chain) pair runs numpyro's functional NUTS kernel with its own step-size and mass-matrix
    adaptation; the data sets are ``vmap``-ed, the chains too (or, with ``sequential``, run one after the other
    by ``lax.map``, so a chain's tree depth does not hold the others back). Nothing runs outside the program,
    so it compiles once per shape and settings and JAX's persistent cache keeps it for the next process.

    Args:
        init: ``{site: (B, chains)}`` unconstrained starting values.
        data: tuple of traced model arguments, each with a leading axis ``B``.
        keys: ``(B, chains)`` PRNG keys.
        model: the numpyro model, called as ``model(*data_b, *static)``.
        static: hashable trailing model arguments (host values: intervals, hyperparameters).
        post: optional ``post(z, *data_b, *static)`` applied to every kept draw ``z`` (unconstrained) inside
            the program (constrained parameters, level posteriors).
        num_warmup, num_samples: per chain.
        dense_mass, target_accept_prob: NUTS adaptation settings.
        sequential: chains by ``lax.map`` instead of ``vmap``.

    Returns:
        ``(z, diverging, num_steps, extra)``: unconstrained draws ``{site: (B, chains, draws)}``, ``(B, chains,
        draws)`` divergence flags and tree sizes, and ``post``'s output per draw (None without ``post``).
    """

    def pe_gen(*d):
        return lambda z: potential_energy(model, (*d, *static), {}, z)

    init_kernel, sample_kernel = hmc(potential_fn_gen=pe_gen, algo="NUTS")

    def one_chain(z0, d, key):
        st = init_kernel(z0, num_warmup, dense_mass=dense_mass, target_accept_prob=target_accept_prob, model_args=d,
                         rng_key=key)

        def body(state, _):
            state = sample_kernel(state, model_args=d)
            return state, (state.z, state.diverging, state.num_steps)

        _, (zs, div, ns) = jax.lax.scan(body, st, None, length=num_warmup + num_samples)
        zs = jax.tree_util.tree_map(lambda a: a[num_warmup:], zs)
        extra = None if post is None else jax.lax.map(lambda z: post(z, *d, *static), zs)
        return zs, div[num_warmup:], ns[num_warmup:], extra

    def chains(z0, d, ks):
        if sequential:
            return jax.lax.map(lambda a: one_chain(a[0], d, a[1]), (z0, ks))
        return jax.vmap(one_chain, in_axes=(0, None, 0))(z0, d, ks)

    return jax.vmap(chains)(init, data, keys)


def chain_devices(num_chains: int) -> int:
    """How many local devices share ``num_chains`` chains: the largest divisor of ``num_chains`` that is at most
    the number of devices of the default backend (1 on a default CPU setup, which has one host device)."""
    n = jax.local_device_count()
    return max(d for d in range(1, min(n, int(num_chains)) + 1) if num_chains % d == 0)


@cache
def _source_digest() -> str:
    """A digest of grpojax's own source files and the versions of the libraries that trace the sampler."""
    import numpyro  # noqa: PLC0415

    h = hashlib.sha256(f"{jax.__version__} {numpyro.__version__} {np.__version__}".encode())
    root = pathlib.Path(__file__).resolve().parents[1]
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _name(f) -> str:
    return "None" if f is None else f"{f.__module__}.{f.__qualname__}"


EXPORTED_KEEP = 64
"""Exported sampler programs kept in the cache folder; the least recently used beyond these are removed (each
source change or new shape writes a new one, about 0.1-0.2 MB)."""


def _prune_exported(folder: pathlib.Path, keep: int = EXPORTED_KEEP) -> None:
    """Remove the least recently used exported programs of ``folder`` beyond the ``keep`` newest (by the time
    each was last written or read). A file another process removes first is skipped: a cache is an
    optimisation, never a reason to fail."""
    stamped = []
    for f in folder.glob("run_chains-*.bin"):
        try:
            stamped.append((f.stat().st_mtime, f))
        except OSError:
            continue
    for _, f in sorted(stamped, key=lambda x: x[0], reverse=True)[keep:]:
        try:
            f.unlink()
        except OSError:
            pass


def _exported_program(args, kwargs):
    """:func:`run_chains` for ``args`` as a ``jax.export.Exported``, kept beside JAX's persistent compilation cache.

    Tracing and lowering the sampler takes seconds of Python in every process, before the compilation cache can
    answer; the exported program is what they produce, so a later process with the same shapes and settings, the
    same grpojax source and the same JAX and numpyro reads it instead (same program: the same draws). Returns None
    (trace as usual) when the compilation cache is off (see :mod:`grpojax._jax_cache`) or the program cannot be
    stored (no ``flatbuffers``, a folder that cannot be written, a model with a host callback, which
    ``jax.export`` cannot serialise).
    """
    from grpojax._jax_cache import active_cache_dir  # noqa: PLC0415

    folder = active_cache_dir()
    if folder is None:
        return None
    try:
        from jax import export  # noqa: PLC0415
        from jax._src.export import serialization  # noqa: F401, PLC0415  (needs flatbuffers)
    except ImportError:
        return None
    leaves, tree = jax.tree_util.tree_flatten(args)
    settings = {k: (_name(v) if k in ("model", "post") else repr(v)) for k, v in sorted(kwargs.items())}
    text = repr((_source_digest(), settings, str(tree), [(a.shape, str(a.dtype)) for a in leaves],
                 jax.config.jax_enable_x64, jax.config.jax_numpy_dtype_promotion, jax.config.jax_default_matmul_precision))
    path = pathlib.Path(folder) / "exported" / f"run_chains-{hashlib.sha256(text.encode()).hexdigest()[:32]}.bin"
    try:
        exported = export.deserialize(bytearray(path.read_bytes()))
        try:
            os.utime(path)  # recently used: kept by _prune_exported
        except OSError:
            pass
        return exported
    except Exception:  # noqa: BLE001  (absent, truncated or from another version: export it again)
        pass
    try:
        exported = export.export(jax.jit(partial(run_chains, **kwargs)))(*args)
        blob = exported.serialize()
    except NotImplementedError:  # a model with a host callback (e.g. a runtime check): it cannot be exported
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, path)
        _prune_exported(path.parent)
    except OSError:  # a cache is an optimisation, never a reason to fail
        pass
    return exported


def run_chains_split(init, data, keys, *, devices: int, **kwargs):
    """:func:`run_chains` with the chains split evenly between the first ``devices`` local devices.

    Each device gets the same single-device program (compiled for it) and its own share of the chains, and the
    devices run at the same time, each at the pace of its own chains; the draws are therefore the ones
    :func:`run_chains` gives on one device (the chains are independent and a chain's arithmetic does not depend
    on how many are batched with it). On a CPU the host devices are threads (``jax_num_cpu_devices``): two
    devices use two cores, where one program uses one. When JAX's persistent compilation cache is on, the traced
    program is kept beside it (:func:`_exported_program`). ``kwargs`` as for :func:`run_chains`.

    Returns:
        :func:`run_chains`'s outputs as NumPy arrays, the chains in their original order.
    """
    import concurrent.futures  # noqa: PLC0415

    C = int(keys.shape[1])
    if devices < 1 or C % devices:
        raise InvalidValueError(f"devices must divide the number of chains {C}, got {devices!r}")
    per = C // devices
    shares = [({k: v[:, i * per:(i + 1) * per] for k, v in init.items()}, data, keys[:, i * per:(i + 1) * per])
              for i in range(devices)]
    exported = _exported_program(shares[0], kwargs)
    program = partial(run_chains, **kwargs) if exported is None else exported.call
    if devices == 1 and exported is None:
        return jax.tree_util.tree_map(np.asarray, run_chains(init, data, keys, **kwargs))
    parts = []
    for share, dev in zip(shares, jax.local_devices()[:devices]):
        args = jax.device_put(share, dev)
        parts.append((jax.jit(program).lower(*args), args))  # traced here: numpyro's tracing is not thread-safe

    def run(part):
        lowered, args = part
        return jax.tree_util.tree_map(np.asarray, lowered.compile()(*args))

    if devices == 1:
        return run(parts[0])
    with concurrent.futures.ThreadPoolExecutor(devices) as pool:
        outs = list(pool.map(run, parts))
    return jax.tree_util.tree_map(lambda *a: None if a[0] is None else np.concatenate(a, axis=1), *outs,
                                  is_leaf=lambda x: x is None)


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
                ysel = jnp.asarray(yn[sel])
                B_ = ysel.shape[0]
                data = (jnp.broadcast_to(jnp.asarray(t), ysel.shape), jnp.where(jnp.isfinite(ysel), ysel, 0.0),
                        jnp.isfinite(ysel), jnp.broadcast_to(jnp.asarray(index), (B_, index.size)))
                _, d, _, ex = run_chains({k: v[sel] for k, v in init.items()}, data, keys[sel],
                                         model=state_space_model, static=(tuple(float(u) for u in uniq),),
                                         post=state_space_post, num_warmup=int(num_warmup), num_samples=int(num_samples),
                                         dense_mass=bool(dense_mass))
            zs_parts.append({k: np.asarray(v, float)[:m] for k, v in ex.items()})
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
    post = folded({k: zs[k] for k in sites})  # (N, chains, draws), constrained
    nat = natural("state_space", post)
    # one draw of the two levels from their exact conditional posterior per draw
    rng = np_rng(jax.random.fold_in(k_init, 7))
    lv = draw_levels(zs["level_mean"], zs["level_cov"], rng)
    span = s[-1] - s[0]
    raw = {
        "p0": c[:, None, None] + sc[:, None, None] * lv[..., 0],
        "p_star": c[:, None, None] + sc[:, None, None] * lv[..., 1],
        "zeta": nat["zeta"],
        "omega0": nat["omega0"] / span,
        "sigma": sc[:, None, None] * nat["sigma"],
        "s_proc": sc[:, None, None] * nat["s_proc"],
    }
    r_hat = {k: np.array([float(split_gelman_rubin(post[k][i])) for i in range(N)]) for k in sites}
    ess = {k: np.array([float(effective_sample_size(post[k][i])) for i in range(N)]) for k in sites}
    rmax = np.max(np.stack(list(r_hat.values())), 0)
    emin = np.min(np.stack(list(ess.values())), 0)
    ndiv = np.asarray(div).sum(axis=(1, 2))
    converged = (rmax <= 1.01) & (emin >= 100 * num_chains) & (ndiv == 0)
    return BatchedPosterior(raw, r_hat, ess, converged, runtime)
