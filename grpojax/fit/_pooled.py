"""Several runs at once: a hierarchical posterior of the reward-curve law across the runs of a sweep.

Why pool. A prefix of one run says little about where it will level off: the plateau trades off
against the rate, and a curve that is still rising at the end of the prefix allows a wide range of
plateaus. The runs of a sweep share the model, the task and most hyperparameters: what the siblings
did is evidence about the new run. This module fits every run of a sweep jointly with the single-run
law of :mod:`grpojax.fit._creep` (the fast rise plus power-law creep, or its special case one
exponential), with the identifiable quantities of each run drawn from a population distribution::

    p*_i         = μ_p + β_pᵀ x_i + τ_p z_{p,i}           (plateau)
    log λ_i      = μ_r + β_rᵀ x_i + τ_r z_{r,i}           (fast rate, per unit of time)
    log σ_i      = μ_σ + τ_σ z_{σ,i}                       (noise: innovation scale)
    logit w_i, log θ_i, log k_i, ρ_i: the same, without covariates (creep weight, creep scale and
    shape, AR(1) correlation)

``z ~ Normal(0, 1)`` (non-centred), ``τ ~ HalfNormal``: when the runs agree, ``τ`` is small and a
short prefix borrows the siblings' plateau and rate; when they disagree, ``τ`` is large and each run
is on its own (partial pooling, learned from the data). ``x_i`` are the hyperparameters the logs
carry (log learning rate, log group size, log epochs per rollout; standardised, only those that vary
across the runs): ``β ~ Normal(0, ·)`` is a shrinkage (ridge) prior, so an effect must be supported by
the data to move the plateau or rate away from the population mean. An optional second level
(``groups``: sub-sweeps) adds a shared offset of ``p*`` and ``log λ`` per group. The start level
``y₀`` of each run is not pooled (its prefix fixes it), the Student-t degrees of freedom are shared.

The noise model is the single run's: residuals follow an AR(1) process with Student-t innovations.
Rewards are normalised once for the whole sweep (one centre and scale, so plateaus are comparable),
and time is counted from each run's first step in units of the median span of the runs.

What pooling assumes. The runs are exchangeable given their covariates: nothing but ``x_i`` tells a
run's plateau from another's before its data are seen. It hurts when a run differs from its siblings
in a way the covariates do not carry (a different reward scale, a run that collapses where the others
do not, a change of task or model): the population then pulls its forecast towards the others, and
the run's own prefix must outweigh that pull. See the forecasting documentation for measured numbers.

Inference: numpyro NUTS (diagonal mass matrix) on all runs at once, padded to the longest one.
"""

from __future__ import annotations

import functools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import NUTS

from grpojax._errors import InvalidValueError
from grpojax.fit._creep import (
    _LOG_K_PRIOR,
    _LOG_RATE_PRIOR,
    _LOG_THETA_PRIOR,
    MIN_CREEP_POINTS,
    NU_MIN,
    VARIANTS,
    CreepPosterior,
    _anchors,
    creep_curve,
)
from grpojax.fit._data import check_bounds, check_steps, is_flat, spread
from grpojax.fit._window_forecast import WindowForecast, _creep_from_posterior, _series, _split, _summaries

POOLED_LAWS = ("creep", "exponential")
"""Curve laws of :func:`fit_pooled`: the fast rise plus creep, or its special case a single exponential."""

COVARIATES = ("lr", "group_size", "epochs_per_rollout")
"""Hyperparameters :func:`run_covariates` reads from a run's meta (log values)."""

_RHO_LO, _RHO_HI = -0.5, 0.95  # AR(1) correlation range (the single-run prior's support)
_BETA_SD_PLATEAU = 0.5  # ridge prior of the covariate effects, per sd of the covariate (normalised units)
_BETA_SD_RATE = 1.0


class PooledPosterior(NamedTuple):
    """Joint posterior of the runs of a sweep.

    Attributes:
        names: run names, in the order given.
        samples: ``{site: (N, draws)}`` per-run draws in normalised units with the single-run model's
            site names (``y0``, ``p_star``, ``w``, ``log_rate``, ``log_theta``, ``log_k``, ``sigma``,
            ``rho``, ``nu``) and ``variant`` (index into the creep model's variants).
        hyper: population draws ``{name: (draws,) or (draws, C)}``: ``mu_p``, ``tau_p``, ``beta_p``,
            ``mu_r``, ``tau_r``, ``beta_r``, ... in normalised units.
        covariates: names of the covariates used (columns of ``x``); empty when none varies.
        x: ``(N, C)`` standardised covariates (``(raw − x_center)/x_scale``).
        x_center, x_scale: ``(C,)`` standardisation of the raw covariates (log values).
        t0, span, center, scale: ``(N,)`` normalisation, as :class:`grpojax.fit.CreepPosterior`.
        n_obs: ``(N,)`` observations used.
        ess: ``(N,)`` effective sample size of each run's plateau draws.
        divergences: divergent transitions after warmup.
        law: one of :data:`POOLED_LAWS`.
        runtime_s: wall time (compile included).
    """

    names: tuple
    samples: dict
    hyper: dict
    covariates: tuple
    x: np.ndarray
    x_center: np.ndarray
    x_scale: np.ndarray
    t0: np.ndarray
    span: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    n_obs: np.ndarray
    ess: np.ndarray
    divergences: int
    law: str
    runtime_s: float

    def creep_posterior(self) -> CreepPosterior:
        """The per-run draws as a :class:`grpojax.fit.CreepPosterior` (its ``curve`` and ``noise`` methods)."""
        v = VARIANTS.index("creep" if self.law == "creep" else "exponential")
        p_variant = np.zeros((len(self.names), len(VARIANTS)))
        p_variant[:, v] = 1.0
        return CreepPosterior(self.samples, self.t0, self.span, self.center, self.scale, self.n_obs, self.ess,
                              self.runtime_s, p_variant)

    def plateau(self, level: float = 0.9) -> dict:
        """``{run name: (median, lo, hi)}`` of each run's plateau ``p*`` in raw units at ``level``."""
        a = (1.0 - level) / 2.0
        out = {}
        for i, n in enumerate(self.names):
            p = self.center[i] + self.scale[i] * self.samples["p_star"][i]
            out[n] = tuple(float(np.quantile(p, q)) for q in (0.5, a, 1.0 - a))
        return out

    def effects(self, level: float = 0.9) -> dict:
        """Covariate effects ``{(quantity, covariate): (median, lo, hi)}`` per unit of the log covariate:
        ``quantity`` is ``"p_star"`` (raw reward units) or ``"log_rate"`` (natural log of the rate)."""
        a = (1.0 - level) / 2.0
        out = {}
        for j, c in enumerate(self.covariates):
            for q, site, mult in (("p_star", "beta_p", float(self.scale[0])), ("log_rate", "beta_r", 1.0)):
                b = self.hyper[site][:, j] * mult / self.x_scale[j]
                out[(q, c)] = tuple(float(np.quantile(b, v)) for v in (0.5, a, 1.0 - a))
        return out


def run_covariates(runs, names=COVARIATES) -> dict:
    """Hyperparameters of each run as covariates: ``{name: (N,) log values}``.

    Read from each run's ``meta`` (``lr`` — or the peak of a logged ``lr`` column when the meta does not
    carry it —, ``group_size``, ``epochs_per_rollout``). A covariate is kept only when every run carries a
    positive value and the values are not all equal (a constant tells the runs nothing apart).

    Args:
        runs: sequence of :class:`grpojax.logs.RunLog`.
        names: covariates to look for (a subset of :data:`COVARIATES`).
    """
    out = {}
    for name in names:
        vals = []
        for r in runs:
            v = (getattr(r, "meta", None) or {}).get(name)
            if v is None and name == "lr" and hasattr(r, "has") and r.has("lr"):
                v = float(np.nanmax(r.series("lr")[1]))
            try:
                v = float(v)
            except (TypeError, ValueError):
                v = float("nan")
            vals.append(v)
        vals = np.asarray(vals, float)
        if vals.size and np.all(np.isfinite(vals)) and np.all(vals > 0) and np.ptp(np.log(vals)) > 1e-9:
            out[name] = np.log(vals)
    return out


def _hier(name, n, mu_prior, tau_sd, x=None, beta_sd=None, g=None, n_groups=0, group_sd=0.5):
    """``μ + xβ + (group offset) + τ z`` for ``n`` runs (non-centred), with its hyperparameter sites."""
    mu = numpyro.sample(f"mu_{name}", dist.Normal(*mu_prior))
    tau = numpyro.sample(f"tau_{name}", dist.HalfNormal(tau_sd))
    z = numpyro.sample(f"z_{name}", dist.Normal(0.0, 1.0).expand([n]).to_event(1))
    val = mu + tau * z
    if x is not None and x.shape[1]:
        beta = numpyro.sample(f"beta_{name}", dist.Normal(0.0, beta_sd).expand([x.shape[1]]).to_event(1))
        val = val + x @ beta
    if n_groups > 1:
        tg = numpyro.sample(f"tau_group_{name}", dist.HalfNormal(group_sd))
        u = numpyro.sample(f"u_group_{name}", dist.Normal(0.0, 1.0).expand([n_groups]).to_event(1))
        val = val + tg * u[g]
    return val


def pooled_model(t, y, mask, anchors, x, g, n_groups: int, creep: bool):
    """numpyro model of ``N`` runs in normalised units (sweep-wide centre and scale).

    Args:
        t: ``(N, T)`` time since each run's first step, in units of the median span.
        y: ``(N, T)`` normalised rewards; entries where ``mask`` is False are padding (end of each row).
        mask: ``(N, T)`` bool, each row's first entry True.
        anchors: ``(N, 2)`` prior centres of ``y₀`` (mean of the first points) and the plateau (mean of the
            last ones) of each run.
        x: ``(N, C)`` standardised covariates (``C`` may be 0).
        g: ``(N,)`` int group of each run (all 0 without groups).
        n_groups: number of groups (static).
        creep: the creep law (True) or a single exponential (False); static.
    """
    n = t.shape[0]
    p_center = jnp.mean(anchors[:, 1])
    p_star = _hier("p", n, (p_center, 2.0), 1.0, x, _BETA_SD_PLATEAU, g, n_groups)
    log_rate = _hier("r", n, _LOG_RATE_PRIOR, 1.0, x, _BETA_SD_RATE, g, n_groups)
    log_sigma = _hier("s", n, (math.log(0.2), 1.5), 1.0)
    rho = _RHO_LO + (_RHO_HI - _RHO_LO) * jax.nn.sigmoid(_hier("a", n, (0.5, 1.5), 1.0))
    y0 = numpyro.sample("y0", dist.Normal(anchors[:, 0], 1.0).to_event(1))
    nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
    if creep:
        w = jax.nn.sigmoid(_hier("w", n, (0.0, 1.5), 1.0))
        log_theta = _hier("theta", n, _LOG_THETA_PRIOR, 1.0)
        log_k = _hier("k", n, _LOG_K_PRIOR, 0.5)
    else:
        w = jnp.ones_like(p_star)
        log_theta = jnp.full_like(p_star, _LOG_THETA_PRIOR[0])
        log_k = jnp.full_like(p_star, _LOG_K_PRIOR[0])
    sigma = jnp.exp(log_sigma)
    for name, v in (("p_star", p_star), ("log_rate", log_rate), ("sigma", sigma), ("rho", rho), ("w", w),
                    ("log_theta", log_theta), ("log_k", log_k)):
        numpyro.deterministic(name, v)
    col = (lambda v: v[:, None])
    m = creep_curve(t, col(y0), col(p_star), col(w), col(jnp.exp(log_rate)), col(jnp.exp(log_theta)),
                    col(jnp.exp(log_k)))
    df = NU_MIN + nu
    e = jnp.where(mask, y - m, 0.0)
    innov = e[:, 1:] - col(rho) * e[:, :-1]
    lp0 = dist.StudentT(df, 0.0, sigma / jnp.sqrt(1.0 - rho**2)).log_prob(e[:, 0])
    lp = jnp.where(mask[:, 1:], dist.StudentT(df, 0.0, col(sigma)).log_prob(innov), 0.0)
    numpyro.factor("lik", jnp.sum(lp0) + jnp.sum(lp))


def _prepare(curves, names):
    prepared = []
    for i, c in enumerate(curves):
        try:
            s, y = c
        except (TypeError, ValueError):
            raise InvalidValueError(f"run {names[i]!r} must be a (steps, values) pair, got {type(c).__name__}") from None
        s = check_steps(s, f"steps of run {names[i]!r}")
        y = np.asarray(y, float)
        if y.shape != s.shape:
            raise InvalidValueError(f"values of run {names[i]!r} must have the same shape as its steps, got {y.shape} "
                             f"and {s.shape}")
        if np.any(np.isinf(y)):
            raise InvalidValueError(f"rewards of run {names[i]!r} must be finite or NaN (missing), got inf")
        keep = np.isfinite(y)
        s, y = s[keep], y[keep]
        if s.size < MIN_CREEP_POINTS:
            raise InvalidValueError(f"run {names[i]!r} has {s.size} finite points; pooling needs at least "
                             f"{MIN_CREEP_POINTS} per run")
        prepared.append((s, y))
    return prepared


_KERNELS: dict = {}
_MAX_KERNELS = 4


def _kernel(creep, n_groups, target, depth, num_warmup):
    """One NUTS kernel per configuration, kept: the compiled sampling loop (:func:`_chain`, keyed on the
    kernel) then serves every sweep of the same shape, so a leave-one-run-out loop compiles once. The
    warmup length is part of the key: the kernel's sampler closes over it."""
    k = (creep, n_groups, target, depth, num_warmup)
    if k not in _KERNELS:
        if len(_KERNELS) >= _MAX_KERNELS:
            _KERNELS.pop(next(iter(_KERNELS)))
        model = functools.partial(pooled_model, n_groups=n_groups, creep=creep)
        _KERNELS[k] = NUTS(model, target_accept_prob=target, max_tree_depth=depth)
    return _KERNELS[k]


@functools.partial(jax.jit, static_argnums=(0, 3))
def _chain(kernel, state, args, length):
    """``length`` NUTS transitions from ``state`` (warmup adaptation while ``state.i`` < the warmup length);
    the model's data are arguments, so one compiled loop serves every data set of the same shape."""

    def body(st, _):
        st = kernel.sample(st, args, {})
        return st, (st.z, st.diverging)

    return jax.lax.scan(body, state, None, length=length)[1]


@functools.partial(jax.jit, static_argnums=(0,))
def _constrain(kernel, z, args):
    """Every site of the model (sampled and deterministic) from unconstrained draws ``z`` (leading axis: draws)."""
    return jax.vmap(kernel._postprocess_fn(*args))(z)


def _init_params(anc, n_cov, n_groups, creep):
    """Starting point in numpyro's unconstrained space: population means at the prior centres, each run's
    plateau at the mean of its last points (``τ`` sites are log-transformed, as is ``nu``)."""
    n = anc.shape[0]
    log_half = math.log(0.5)
    z = {"mu_p": float(anc[:, 1].mean()), "mu_r": _LOG_RATE_PRIOR[0], "mu_s": math.log(0.2), "mu_a": 0.5,
         "y0": anc[:, 0], "nu": math.log(20.0)}
    parts = ("p", "r", "s", "a") + (("w", "theta", "k") if creep else ())
    for nm in parts:
        z[f"z_{nm}"] = np.zeros(n)
        z[f"tau_{nm}"] = log_half
    z["z_p"] = (anc[:, 1] - anc[:, 1].mean()) / 0.5
    if creep:
        z.update({"mu_w": 0.0, "mu_theta": _LOG_THETA_PRIOR[0], "mu_k": _LOG_K_PRIOR[0]})
    if n_cov:
        z["beta_p"] = np.zeros(n_cov)
        z["beta_r"] = np.zeros(n_cov)
    if n_groups > 1:
        for nm in ("p", "r"):
            z[f"tau_group_{nm}"] = math.log(0.25)
            z[f"u_group_{nm}"] = np.zeros(n_groups)
    return {k: jnp.asarray(v, dtype=jnp.asarray(anc).dtype) for k, v in z.items()}


def _thin(s, y, max_points):
    """Every k-th point counted back from the last, so that at most ``max_points`` remain."""
    k = -(-s.size // max_points)
    return s[::-1][::k][::-1], y[::-1][::k][::-1]


def fit_pooled(curves, *, key, names=None, covariates=None, groups=None, law: str = "exponential", num_warmup: int = 500,
               num_samples: int = 500, num_chains: int = 1, target_accept_prob: float = 0.9,
               max_tree_depth: int = 8) -> PooledPosterior:
    """Joint posterior of several runs of one sweep with partial pooling (see the module docstring).

    Args:
        curves: sequence of ``(steps, values)`` (NaN values are missing observations), one per run, all of
            the same metric; at least two runs, each with ≥ :data:`grpojax.fit.MIN_CREEP_POINTS` finite
            points and not all constant together.
        key: PRNG key.
        names: run names (default ``run0``, ``run1``, ...).
        covariates: ``{name: (N,) values}`` (e.g. :func:`run_covariates`: log hyperparameters), or None.
            Standardised here; a covariate that does not vary is dropped.
        groups: ``(N,)`` labels of a second level (sub-sweeps), or None.
        law: one of :data:`POOLED_LAWS`.
        num_warmup, num_samples, num_chains, target_accept_prob, max_tree_depth: NUTS settings (chains run
            one after the other; the draws of every chain are pooled).

    Returns:
        :class:`PooledPosterior`.

    Raises:
        InvalidValueError: fewer than two runs, a bad run (naming it), bad covariates, groups or settings.
    """
    curves = list(curves)
    n = len(curves)
    if n < 2:
        raise InvalidValueError(f"pooling needs at least two runs, got {n}")
    names = tuple(f"run{i}" for i in range(n)) if names is None else tuple(str(v) for v in names)
    if len(names) != n:
        raise InvalidValueError(f"names must have one entry per run ({n}), got {len(names)}")
    if law not in POOLED_LAWS:
        raise InvalidValueError(f"law must be one of {', '.join(POOLED_LAWS)}, got {law!r}")
    for nm, v in (("num_warmup", num_warmup), ("num_samples", num_samples), ("num_chains", num_chains),
                  ("max_tree_depth", max_tree_depth)):
        if int(v) != v or v < 1:
            raise InvalidValueError(f"{nm} must be a positive integer, got {v!r}")
    if not 0.0 < float(target_accept_prob) < 1.0:
        raise InvalidValueError(f"target_accept_prob must be in (0, 1), got {target_accept_prob!r}")
    prepared = _prepare(curves, names)
    cov_names, xs = [], []
    for cname, v in (covariates or {}).items():
        v = np.asarray(v, float)
        if v.shape != (n,):
            raise InvalidValueError(f"covariate {cname!r} must have one value per run ({n}), got shape {v.shape}")
        if not np.all(np.isfinite(v)):
            raise InvalidValueError(f"covariate {cname!r} must be finite, got {v.tolist()!r}")
        if np.ptp(v) > 1e-9 * max(1.0, float(np.max(np.abs(v)))):
            cov_names.append(str(cname))
            xs.append(v)
    xr = np.stack(xs, -1) if xs else np.zeros((n, 0))
    x_center, x_scale = xr.mean(0), (xr.std(0) if xs else np.ones(0))
    x = (xr - x_center) / np.where(x_scale > 0, x_scale, 1.0)
    if groups is None:
        g, n_groups = np.zeros(n, np.int32), 1
    else:
        labels = list(groups)
        if len(labels) != n:
            raise InvalidValueError(f"groups must have one label per run ({n}), got {len(labels)}")
        uniq = sorted(set(map(str, labels)))
        g = np.array([uniq.index(str(v)) for v in labels], np.int32)
        n_groups = len(uniq)

    allv = np.concatenate([p[1] for p in prepared])
    center, scale = float(np.mean(allv)), spread(allv)
    if is_flat(allv, scale):
        raise InvalidValueError(f"every run is constant (every reward = {float(allv[0]):g}): there is nothing to fit")
    t0 = np.array([p[0][0] for p in prepared])
    spans = np.array([p[0][-1] - p[0][0] for p in prepared])
    unit = float(np.median(spans)) if np.median(spans) > 0 else 1.0
    T = 16
    while T < max(p[0].size for p in prepared):  # padded to a power of two: few shapes, few compilations
        T *= 2
    ts, ys, ms, anc = np.zeros((n, T)), np.zeros((n, T)), np.zeros((n, T), bool), np.zeros((n, 2))
    for i, (s, y) in enumerate(prepared):
        k = s.size
        ts[i, :k] = (s - t0[i]) / unit
        ts[i, k:] = ts[i, k - 1]
        ys[i, :k] = (y - center) / scale
        ms[i, :k] = True
        anc[i] = _anchors(ys[i, :k])[:2]
    creep = law == "creep"
    kernel = _kernel(creep, n_groups, float(target_accept_prob), int(max_tree_depth), int(num_warmup))
    init = _init_params(anc, x.shape[1], n_groups, creep)
    args = tuple(jnp.asarray(v) for v in (ts, ys, ms, anc, x, g))
    start = time.perf_counter()
    draws, divergences = [], 0
    for c, k in enumerate(jax.random.split(key, int(num_chains))):
        # numpyro's NUTS mixes integer counters with floats: it runs under standard dtype promotion even
        # where a caller made promotion strict
        with jax.numpy_dtype_promotion("standard"):
            state = kernel.init(k, int(num_warmup), init, model_args=args)
            z, div = _chain(kernel, state, args, int(num_warmup) + int(num_samples))
            z = {name: v[int(num_warmup):] for name, v in z.items()}
            draws.append({name: np.asarray(v) for name, v in _constrain(kernel, z, args).items()})
        divergences += int(np.sum(np.asarray(div)[int(num_warmup):]))
    runtime = time.perf_counter() - start
    post = {k: np.stack([d[k] for d in draws]) for k in draws[0]}
    flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in post.items()}
    ess = np.asarray(numpyro.diagnostics.effective_sample_size(post["p_star"]), float)
    samples = {}
    for site in ("p_star", "log_rate", "sigma", "rho", "w", "log_theta", "log_k", "y0"):
        samples[site] = flat[site].T.copy()
    samples["nu"] = np.broadcast_to(flat["nu"][None, :], (n, flat["nu"].size)).copy()
    samples["variant"] = np.full(samples["p_star"].shape, VARIANTS.index("creep" if creep else "exponential"),
                                 np.int32)
    hyper = {k: v for k, v in flat.items() if k.startswith(("mu_", "tau_", "beta_"))}
    return PooledPosterior(names, samples, hyper, tuple(cov_names), x, x_center, np.where(x_scale > 0, x_scale, 1.0),
                           t0, np.full(n, unit), np.full(n, center), np.full(n, scale),
                           np.array([p[0].size for p in prepared]), ess, divergences, law, runtime)


def forecast_pooled(curves, *, targets, prefix: float, window: float = 0.1, level: float = 0.9, names=None,
                    covariates=None, groups=None, metric: str = "reward_mean", end_steps=None, key=None, bounds=None,
                    law: str = "exponential", max_sibling_points: int | None = None, show_progress: bool = False,
                    **nuts) -> list[WindowForecast]:
    """Forecast runs of a sweep from their prefix plus their siblings' curves (one pooled fit per target).

    For each target ``i``: run ``i`` is cut to its first ``prefix`` of its step range (as
    :func:`grpojax.fit.forecast_window` does), every other run keeps the data it has, the pooled
    posterior is fitted (:func:`fit_pooled`), and the mean over the final ``window`` of run ``i`` is
    forecast from its posterior with the window forecaster's predictive (curve draws plus the noise of
    a mean of correlated points) and status checks.

    Args:
        curves: sequence of runs (:class:`grpojax.logs.RunLog`, their ``metric`` column) or ``(steps,
            values)`` pairs, one per run of the sweep.
        targets: indices of the runs to forecast.
        prefix, window, level, bounds: as :func:`grpojax.fit.forecast_window`.
        names, covariates, groups, law: as :func:`fit_pooled`.
        max_sibling_points: thin each sibling (never the target) to at most this many points by keeping every
            k-th observation counted back from its last one (its plateau is kept; the AR(1) noise of a
            thinned series is AR(1) with correlation ρᵏ, learned per run), or None to keep every point.
            Thinning bounds the cost of a long sweep.
        end_steps: None, or one planned last step per run (None entries: the last logged step).
        key: PRNG key (None: a fixed key).
        show_progress: a progress bar over the targets.
        nuts: NUTS settings passed to :func:`fit_pooled`.

    Returns:
        One :class:`grpojax.fit.WindowForecast` per target (method ``"pooled"``), in the order of ``targets``.
    """
    curves = list(curves)
    n = len(curves)
    if not 0.0 < float(level) < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level!r}")
    lo_b, hi_b = check_bounds(bounds)
    targets = [int(i) for i in targets]
    for i in targets:
        if not 0 <= i < n:
            raise InvalidValueError(f"targets must index the {n} runs, got {i}")
    end_steps = [None] * n if end_steps is None else list(end_steps)
    if len(end_steps) != n:
        raise InvalidValueError(f"end_steps must have one entry per run ({n}), got {len(end_steps)}")
    if max_sibling_points is not None and (int(max_sibling_points) != max_sibling_points
                                           or max_sibling_points < MIN_CREEP_POINTS):
        raise InvalidValueError(f"max_sibling_points must be an integer >= {MIN_CREEP_POINTS} or None, got "
                         f"{max_sibling_points!r}")
    series = [_series(c, metric) for c in curves]
    if max_sibling_points is not None:
        series = [_thin(s, y, int(max_sibling_points)) for s, y in series]
    full = [_series(c, metric) for c in curves]
    key = jax.random.PRNGKey(0) if key is None else key
    out = []
    pbar = None
    if show_progress:
        from grpojax._progress import progress  # noqa: PLC0415

        pbar = progress()
        pbar.start()
        pbar.add_task("pooled posteriors", total=len(targets))
    try:
        for j, i in enumerate(targets):
            s, y = full[i]
            sp, yp, w, _, n_w = _split(s, y, prefix, window, end_steps[i])
            cut = [(sp, yp) if k == i else series[k] for k in range(n)]
            k_fit, k_fc = jax.random.split(jax.random.fold_in(key, j))
            post = fit_pooled(cut, key=k_fit, names=names, covariates=covariates, groups=groups, law=law,
                              **nuts).creep_posterior()
            point, lo, hi, status, band = _creep_from_posterior(post, i, sp, yp, w, n_w, level, k_fc)
            if bounds is not None:
                point, lo, hi = (float(np.clip(v, lo_b, hi_b)) for v in (point, lo, hi))
                band = {k: (v if k == "steps" else np.clip(v, lo_b, hi_b)) for k, v in band.items()}
            out.append(WindowForecast(float(point), float(lo), float(hi), float(level), "pooled", status,
                                      float(sp[-1]), int(sp.size), (float(w[0]), float(w[1])), int(n_w),
                                      _summaries(post, i, level), band, float(post.ess[i]), {law: 1.0}))
            if pbar is not None:
                pbar.advance(pbar.task_ids[0])
    finally:
        if pbar is not None:
            pbar.stop()
    return out
