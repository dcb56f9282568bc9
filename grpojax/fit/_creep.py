"""Fast rise plus slow creep: a reward-curve model for prompts of different stiffness.

Why a creep. In the mean-field picture every prompt ``i`` relaxes to its plateau at its own rate
``λ_i`` (its stiffness over its damping, ``K_i/C`` in the overdamped limit). The mean reward over
prompts is ``p* − (p* − y₀)·E[exp(−λ t)]``. A single rate gives the exponential law; rates spread
as ``λ ~ Gamma(k, θ)`` give ``E[exp(−λ t)] = (1 + θ t)^(−k)``, a power-law creep: a fast start from
the stiff prompts, then a slow approach driven by the soft ones that an exponential cannot follow.
Real curves show both, so the mean curve is a mixture of a fast exponential (weight ``w``) and the
Gamma continuum::

    m(t) = p* − (p* − y₀)·[w·exp(−λ_f t) + (1 − w)·(1 + θ t)^(−k)]

Noise. A logged reward is the mean over one step's batch: its noise is not white (the policy moves
slowly, so neighbouring batch means are correlated) and has occasional outliers. Residuals
``e = y − m`` follow an AR(1) process, ``e_i = ρ e_{i−1} + u_i``, with Student-t innovations
``u_i ~ t_ν(0, σ)``; ``σ``, ``ρ`` and ``ν`` are learned. Successive *observations* are the AR(1)
index (irregular logging is read at its own cadence).

What a curve identifies. ``p*`` (the plateau), ``y₀``, the fast rate ``λ_f`` and the creep's rate
distribution ``(k, θ)`` are properties of the curve. The oscillator's ``M``, ``C`` and ``K_eff``
are not: a curve fixes ratios only (``λ_f = K_eff/C`` for a first-order prompt; ``C/M``,
``K_eff/M`` and ``D/M²`` for the second-order model). ``M`` comes from the hyperparameters
(``M = (1 + μ)/2 + η K_d τ²/2``, see :mod:`grpojax.dynamics`) when the user gives them; nothing
here reports ``M``, ``C`` or ``K_eff`` separately.

Inference. NUTS on this posterior needs deep trees (the mixture weight, the creep shape and the
rate scale trade off against each other) and takes tens of seconds per curve on a CPU. Instead:
the posterior mode from several starting points (Adam, finished by Newton steps), then adaptive
importance sampling against the exact numpyro log density: half the proposals from a defensive
mixture of two multivariate t's at the mode (the inverse-Hessian scale and a wider, heavier one),
half from a t moment-matched to the weighted first half, every draw weighted against the mixture of
all three (its effective sample size is reported; the window forecast flags one below 20 as
``weak_posterior``). The posterior is skewed along the plateau's ridge (``p*`` trades off against
``w``, ``k`` and ``θ``); the wide component and the moment-matched one reach the far end of it that
a single Laplace-scaled t under-samples. The weights are Pareto-smoothed (PSIS,
:mod:`grpojax.fit._psis`) before resampling: with raw weights a handful of proposals can carry the whole
resample when the effective sample size is small, and the intervals come out too narrow (on 240
simulated runs, coverage of the 90% window interval at a 25% prefix went from 81% to 86%).

A slow start. Both shapes above fall fastest at ``t = 0``. A run whose pass rate starts low rises
slowly first: with a binary reward the learning signal of a prompt is its reward variance
``p(1 − p)``, so a pass rate far below ½ grows logistically, ``dp/dt ∝ p(1 − p)`` (the oscillator
started from rest has the same zero initial slope). The logistic variant is::

    m(t) = p* − (p* − y₀)·σ(−r (t − t_m)) / σ(r t_m)

(``σ`` the logistic function, rate ``r``, midpoint ``t_m > 0``: the curve is inflected at ``t_m``,
flat before it).

Model averaging. The creep term can always bend a curve a little further, so fitted alone it
forecasts a levelled-off run to keep rising (on clean exponentials its plateau interval lay above
the truth). Its special case without creep (``w = 1``, one exponential) and the logistic variant
are fitted the same way, and the draws mix the three posteriors in proportion to their marginal
likelihoods (the mean raw importance weight of each; even prior odds): the simpler law wins when
the data do not need the creep, the logistic one when the rise is inflected.

The inference runs in NumPy on the density and gradient of :mod:`grpojax.fit._creep_density` (the
numpyro model below states the model; the tests check the NumPy density against it): nothing is
compiled, so a first forecast costs about a second per curve, not the tens of seconds of compiling an
XLA program for it.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import gammaln, logsumexp

from grpojax._errors import InvalidValueError
from grpojax.fit._creep_density import (_LOG_K_PRIOR, _LOG_RATE_PRIOR, _LOG_THETA_PRIOR, _NU_MIN, _P_STAR_PRIOR_SD, constrain,
                                        potential_and_grad, unconstrain)
from grpojax.fit._data import check_steps, is_flat, spread
from grpojax.fit._psis import psis_log_weights

MIN_CREEP_POINTS = 8
"""Fewest finite observations a curve needs for the creep model."""

NU_MIN = _NU_MIN
"""Smallest Student-t degrees of freedom (the innovation variance stays finite)."""

# The priors' parameters live with the density (grpojax.fit._creep_density), which both uses and states them.

SITES = ("y0", "p_star", "w", "log_rate", "log_theta", "log_k", "sigma", "rho", "nu")


VARIANTS = ("creep", "exponential", "logistic")
"""The model's variants, in the order of :attr:`CreepPosterior.p_variant` and ``samples["variant"]``."""

_VARIANT_FLAGS = (1.0, 0.0, 2.0)  # anchors[2] of each variant in creep_model


def creep_curve(t, y0, p_star, w, rate, theta, k):
    """Mean curve ``p* − (p* − y₀)·[w e^{−rate·t} + (1 − w)(1 + θ t)^{−k}]`` (broadcasts; jax.numpy)."""
    import jax.numpy as jnp  # noqa: PLC0415  (JAX only where the numpyro model is used, never by the forecasts)

    shape = w * jnp.exp(-rate * t) + (1.0 - w) * jnp.exp(-k * jnp.log1p(theta * t))
    return p_star - (p_star - y0) * shape


def logistic_curve(t, y0, p_star, rate, mid):
    """Slow-start mean curve ``p* − (p* − y₀)·σ(−rate (t − mid)) / σ(rate·mid)`` (broadcasts; ``mid > 0``; jax.numpy)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    shape = jnp.exp(jax.nn.log_sigmoid(rate * (mid - t)) - jax.nn.log_sigmoid(rate * mid))
    return p_star - (p_star - y0) * shape


def _priors(anchors):
    import numpyro.distributions as dist  # noqa: PLC0415

    y_first, y_last = anchors[0], anchors[1]
    return {
        "y0": dist.Normal(y_first, 1.0),
        "p_star": dist.Normal(y_last, _P_STAR_PRIOR_SD),
        "w": dist.Beta(1.5, 1.5),
        "log_rate": dist.Normal(*_LOG_RATE_PRIOR),
        "log_theta": dist.Normal(*_LOG_THETA_PRIOR),
        "log_k": dist.Normal(*_LOG_K_PRIOR),
        "sigma": dist.HalfNormal(1.0),
        "rho": dist.Uniform(-0.5, 0.95),
        "nu": dist.Gamma(2.0, 0.1),
    }


def creep_model(t, y, mask, anchors):
    """numpyro model of one curve in normalised units.

    Args:
        t: ``(T,)`` time in units of the fitted span (0 at the first observation).
        y: ``(T,)`` normalised rewards; entries where ``mask`` is False are padding (end of the array only).
        mask: ``(T,)`` bool.
        anchors: ``(3,)`` prior centres for ``y₀`` (mean of the first points) and ``p*`` (mean of the last
            ones), and the variant: 1.0 the creep model, 0.0 its no-creep special case ``w = 1`` (a
            single exponential; ``w``, ``θ`` and ``k`` then keep their priors and do not touch the
            curve), 2.0 the logistic slow start (``rate`` its rate, ``θ`` its midpoint; ``w`` and
            ``k`` unused).
    """
    import jax.numpy as jnp  # noqa: PLC0415
    import numpyro  # noqa: PLC0415
    import numpyro.distributions as dist  # noqa: PLC0415

    pri = _priors(anchors)
    v = {name: numpyro.sample(name, pri[name]) for name in SITES}
    w = jnp.where(anchors[2] > 0.5, v["w"], 1.0)
    rate, theta = jnp.exp(v["log_rate"]), jnp.exp(v["log_theta"])
    m = jnp.where(anchors[2] > 1.5, logistic_curve(t, v["y0"], v["p_star"], rate, theta),
                  creep_curve(t, v["y0"], v["p_star"], w, rate, theta, jnp.exp(v["log_k"])))
    df = NU_MIN + v["nu"]
    rho, sigma = v["rho"], v["sigma"]
    e = jnp.where(mask, y - m, 0.0)
    innov = e[1:] - rho * e[:-1]
    lp0 = dist.StudentT(df, 0.0, sigma / jnp.sqrt(1.0 - rho**2)).log_prob(e[0])
    lp = jnp.sum(jnp.where(mask[1:], dist.StudentT(df, 0.0, sigma).log_prob(innov), 0.0))
    numpyro.factor("lik", lp0 + lp)


class CreepPosterior(NamedTuple):
    """Posterior draws of the creep model for ``N`` curves.

    Attributes:
        samples: ``{site: (N, draws)}`` in normalised units; sites are :data:`SITES`, plus ``"variant"``
            (each draw's index into :data:`VARIANTS`).
        t0, span, center, scale: ``(N,)`` normalisation: ``t = (step − t0)/span``, ``y = (r − center)/scale``.
        n_obs: ``(N,)`` observations used.
        ess: ``(N,)`` effective sample size of the importance weights (out of ``num_proposals``); a
            small value (< 20) means the proposals missed part of the posterior.
        runtime_s: wall time (compile included).
        p_variant: ``(N, 3)`` posterior probabilities of the :data:`VARIANTS` (the creep model, its
            special case a single exponential, the logistic slow start), from their marginal
            likelihoods with even prior odds; the draws are a mixture of the three posteriors in these
            proportions (``[1, 0, 0]`` when not averaged). ``samples["variant"]`` holds each draw's
            index into :data:`VARIANTS`.
    """

    samples: dict
    t0: np.ndarray
    span: np.ndarray
    center: np.ndarray
    scale: np.ndarray
    n_obs: np.ndarray
    ess: np.ndarray
    runtime_s: float
    p_variant: np.ndarray | None = None

    def curve(self, i: int, steps) -> np.ndarray:
        """Draws of the mean curve of curve ``i`` at ``steps``, raw units, ``(draws, len(steps))``."""
        # NumPy, not jax.numpy: evaluated eagerly on arrays whose length changes from call to call, every
        # jax.numpy operation would compile a new small program for each length
        t = (np.asarray(steps, float) - self.t0[i]) / self.span[i]
        s = {k: v[i][:, None] for k, v in self.samples.items()}
        rate, theta = np.exp(s["log_rate"]), np.exp(s["log_theta"])
        shape = s["w"] * np.exp(-rate * t[None, :]) + (1.0 - s["w"]) * np.exp(-np.exp(s["log_k"]) * np.log1p(theta * t[None, :]))
        m = s["p_star"] - (s["p_star"] - s["y0"]) * shape
        logistic = s["variant"][:, 0] == VARIANTS.index("logistic")
        if np.any(logistic):
            r, mid = rate[logistic], theta[logistic]
            log_sig = lambda x: -np.logaddexp(0.0, -x)  # noqa: E731
            shape = np.exp(log_sig(r * (mid - t[None, :])) - log_sig(r * mid))
            m[logistic] = s["p_star"][logistic] - (s["p_star"][logistic] - s["y0"][logistic]) * shape
        return self.center[i] + self.scale[i] * m

    def noise(self, i: int) -> dict:
        """Noise draws of curve ``i`` in raw units: ``sigma`` (innovation scale), ``rho``, ``df``, ``sd`` (marginal sd)."""
        s = {k: v[i] for k, v in self.samples.items()}
        df = NU_MIN + s["nu"]
        sig = self.scale[i] * s["sigma"]
        sd = sig * np.sqrt(df / (df - 2.0)) / np.sqrt(1.0 - s["rho"] ** 2)
        return {"sigma": sig, "rho": s["rho"], "df": df, "sd": sd}


def _anchors(y):
    """Prior centres of ``y₀`` and ``p*`` and the variant flag (1: creep; the caller sets 0 for ``w = 1``)."""
    n = y.size
    a = max(3, int(round(0.05 * n)))
    b = max(3, int(round(0.2 * n)))
    return np.array([np.mean(y[:a]), np.mean(y[-b:]), 1.0])


# starting points of the MAP search: (w, log_rate, log_k); y0 and p* start at the anchors
_RESTARTS = ((0.5, _LOG_RATE_PRIOR[0], _LOG_K_PRIOR[0]), (0.2, math.log(20.0), math.log(0.3)),
             (0.8, math.log(4.0), math.log(2.0)), (0.5, math.log(2.0), math.log(0.7)))


def _init_values(anchors, restart):
    w, lr, lk = restart
    return {"y0": anchors[0], "p_star": anchors[1], "w": w, "log_rate": lr, "log_theta": _LOG_THETA_PRIOR[0],
            "log_k": lk, "sigma": 0.5, "rho": 0.3, "nu": 20.0}


_PROPOSAL_DF = 5.0
_PROPOSAL_SCALE = 1.3
_WIDE_DF = 3.0
_WIDE_SCALE = 3.0
_MIN_CURVATURE = 0.05  # floor on the Hessian's eigenvalues (unconstrained sd ≤ 4.5)
_NEWTON_STEPS = 12
_NEWTON_FLOOR = 1e-3  # floor on |eigenvalue| in a Newton step
_NEWTON_LENGTHS = (1.0, 0.5, 0.25, 0.1, 0.03, 0.0)  # step lengths tried; 0 keeps the current point


def _finite(x, fill):
    return np.where(np.isfinite(x), x, fill)


def _key_seed(key) -> np.random.SeedSequence:
    """A NumPy seed sequence from a JAX PRNG key (typed or raw ``uint32``), an int or a seed sequence."""
    if isinstance(key, np.random.SeedSequence):
        return key
    if isinstance(key, (int, np.integer)):
        return np.random.SeedSequence(int(key))
    import jax  # noqa: PLC0415  (a JAX key: JAX is loaded already)
    import jax.numpy as jnp  # noqa: PLC0415

    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.random.SeedSequence([int(x) for x in np.asarray(key, np.uint64).ravel()])


def _hessian(Z, t, y, anchors, variant, h: float = 1e-5):
    """Hessians of the potential at the rows of ``Z`` ``(R, d)``: central differences of the analytic gradient."""
    R, d = Z.shape
    steps = h * np.eye(d)
    pts = np.concatenate([Z[:, None, :] + steps[None], Z[:, None, :] - steps[None]], 1).reshape(R * 2 * d, d)
    _, g = potential_and_grad(pts, t, y, anchors, np.repeat(np.broadcast_to(variant, (R,)), 2 * d))
    g = _finite(g, 0.0).reshape(R, 2, d, d)
    return (g[:, 0] - g[:, 1]) / (2.0 * h)


def _mode(z_init, t, y, anchors, variants, n_steps):
    """Posterior mode of each variant (unconstrained) and the eigen-decomposition of the Hessian there.

    ``z_init`` ``(R, d)`` starting points, shared by the ``V`` variants. Adam (``optax.adam(0.05)``'s update)
    from every start, the best start per variant finished by Newton steps on ``|H|`` (of a few step lengths
    the best is taken, never one that raises the potential; a saddle is left along its negative
    directions). Returns ``(z, ev, V)`` per variant, the curvature at the final point.
    """
    Vn, (R, d) = len(variants), z_init.shape
    flags = np.repeat(np.asarray(variants, float), R)
    z = np.tile(z_init, (Vn, 1))
    m1, m2 = np.zeros_like(z), np.zeros_like(z)
    b1, b2, lr, eps = 0.9, 0.999, 0.05, 1e-8
    for i in range(1, n_steps + 1):
        _, g = potential_and_grad(z, t, y, anchors, flags)
        g = _finite(g, 0.0)
        m1 = b1 * m1 + (1.0 - b1) * g
        m2 = b2 * m2 + (1.0 - b2) * g * g
        z = z - lr * (m1 / (1.0 - b1**i)) / (np.sqrt(m2 / (1.0 - b2**i)) + eps)
    u = _finite(potential_and_grad(z, t, y, anchors, flags, grad=False), np.inf).reshape(Vn, R)
    zb = z.reshape(Vn, R, d)[np.arange(Vn), np.argmin(u, -1)]
    flags_v = np.asarray(variants, float)
    lengths = np.asarray(_NEWTON_LENGTHS)
    for it in range(_NEWTON_STEPS + 1):
        _, g = potential_and_grad(zb, t, y, anchors, flags_v)
        g = _finite(g, 0.0)
        H = _finite(_hessian(zb, t, y, anchors, flags_v), 0.0)
        ev, V = np.linalg.eigh(0.5 * (H + np.swapaxes(H, -1, -2)))
        if it == _NEWTON_STEPS:
            break
        step = -np.einsum("vij,vj->vi", V, np.einsum("vji,vj->vi", V, g) / np.maximum(np.abs(ev), _NEWTON_FLOOR))
        cands = zb[:, None, :] + lengths[None, :, None] * step[:, None, :]
        uc = potential_and_grad(cands.reshape(-1, d), t, y, anchors, np.repeat(flags_v, lengths.size), grad=False)
        uc = _finite(uc, np.inf).reshape(Vn, lengths.size)
        zb = cands[np.arange(Vn), np.argmin(uc, -1)]
    return zb, ev, V


def _chol(A):
    """Cholesky factor of a small symmetric matrix; eigenvalues floored at 1e-12 where it is not positive definite."""
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        ev, V = np.linalg.eigh(0.5 * (A + A.T))
        return np.linalg.cholesky((V * np.maximum(ev, 1e-12)) @ V.T)


def _mvt_logpdf(z, mu, L, df):
    """Log density of a multivariate t (location ``mu``, scale ``L Lᵀ``, ``df`` degrees of freedom), up to a
    constant shared by every t of the same dimension."""
    d = mu.shape[-1]
    x = solve_triangular(L, (z - mu[None, :]).T, lower=True).T
    logdet = np.sum(np.log(np.abs(np.diag(L))))
    return (gammaln((df + d) / 2.0) - gammaln(df / 2.0) - 0.5 * d * np.log(df) - logdet
            - 0.5 * (df + d) * np.log1p(np.sum(x**2, -1) / df))


def _mvt_draw(rng, mu, L, df, n):
    eps = rng.standard_normal((n, mu.shape[-1]))
    g = rng.gamma(df / 2.0, 1.0, n) / (df / 2.0)
    return mu[None, :] + (eps / np.sqrt(g)[:, None]) @ L.T


def _importance(rng, zb, ev, V, t, y, anchors, variant, n_proposals):
    """Adaptive importance sampling around one mode: the proposals and their log weights.

    Stage 1 draws half the proposals from a defensive mixture of two multivariate t's at the mode
    (the Laplace scale, and a wider, heavier-tailed one that reaches the far end of the skewed
    ridges). Stage 2 draws the other half from a t whose location and scale are the weighted mean
    and covariance of stage 1 (moment matching, which follows the ridge's curvature and skew).
    Every draw is then weighted against the deterministic mixture of all three proposal densities
    (the balance heuristic), which keeps the estimator unbiased whatever stage 2 learned.
    """
    d = zb.shape[-1]
    n1 = n_proposals // 2
    n2 = n_proposals - n1
    eye = np.eye(d)

    def U(z):
        return potential_and_grad(z, t, y, anchors, variant, grad=False)

    L0 = V * (1.0 / np.sqrt(np.maximum(ev, _MIN_CURVATURE)))[None, :]
    C0 = L0 @ L0.T
    La = _chol(_PROPOSAL_SCALE**2 * C0 + 1e-9 * eye)
    Lb = _chol(_WIDE_SCALE**2 * C0 + 1e-9 * eye)
    za = _mvt_draw(rng, zb, La, _PROPOSAL_DF, n1)
    zw = _mvt_draw(rng, zb, Lb, _WIDE_DF, n1)
    z1 = np.where((rng.uniform(size=n1) < 0.5)[:, None], za, zw)

    def logq1(z):
        return np.logaddexp(_mvt_logpdf(z, zb, La, _PROPOSAL_DF), _mvt_logpdf(z, zb, Lb, _WIDE_DF)) - np.log(2.0)

    with np.errstate(all="ignore"):
        lp1 = _finite(-U(z1), -np.inf)
        lw1 = _finite(lp1 - logq1(z1), -np.inf)
        w1 = np.exp(lw1 - logsumexp(lw1)) if np.isfinite(lw1).any() else np.full(n1, 1.0 / n1)
        mu2 = w1 @ z1
        dz = z1 - mu2[None, :]
        cov = (dz * w1[:, None]).T @ dz
        # shrink the weighted covariance towards the Laplace one (a few effective draws estimate it poorly)
        ess1 = 1.0 / np.sum(w1**2)
        a = ess1 / (ess1 + d)
        A2 = _PROPOSAL_SCALE**2 * (a * cov + (1.0 - a) * C0) + 1e-9 * eye
        L2 = _chol(A2) if np.all(np.isfinite(A2)) else La
        mu2 = mu2 if np.all(np.isfinite(mu2)) else zb
        z2 = _mvt_draw(rng, mu2, L2, _PROPOSAL_DF, n2)
        zd = np.concatenate([z1, z2])
        lp = np.concatenate([lp1, _finite(-U(z2), -np.inf)])
        logq = np.logaddexp(np.log(n1 / n_proposals) + logq1(zd),
                            np.log(n2 / n_proposals) + _mvt_logpdf(zd, mu2, L2, _PROPOSAL_DF))
        return zd, _finite(lp - logq, -np.inf)


def fit_creep_batched(curves, *, key, num_draws: int = 1000, num_proposals: int = 4000, opt_steps: int = 600,
                      average: bool = True, show_progress: bool = False) -> CreepPosterior:
    """Posteriors of the creep model for several curves: MAP, Laplace proposal, importance resampling.

    For each curve the posterior mode is found by Adam from several starting points (in numpyro's
    unconstrained space), polished by Newton steps; ``num_proposals`` draws come from multivariate-t
    proposals (a defensive mixture at the mode scaled by the inverse Hessian, then one moment-matched
    to the weighted first half), are weighted by the exact posterior density over the mixture of the
    proposal densities, Pareto-smoothed, and resampled to ``num_draws`` draws; ``ess`` (of the raw
    weights) says how well they covered the posterior. The density and its gradient are evaluated in
    NumPy (:mod:`grpojax.fit._creep_density`): nothing is compiled, a curve of a few hundred points takes
    about a second, and each curve's draws depend only on ``key`` and its position in ``curves``.

    Args:
        curves: sequence of ``(steps, values)``; NaN values are dropped (missing observations); each
            curve needs ≥ :data:`MIN_CREEP_POINTS` finite points, strictly increasing finite steps and
            non-zero variance.
        key: PRNG key (a JAX key or an int seed).
        num_draws: posterior draws returned per curve.
        num_proposals: importance proposals per curve.
        opt_steps: Adam steps of the mode search.
        average: also fit the model's special case without creep (``w = 1``, one exponential) and
            the logistic slow start, and return draws from the three posteriors in proportion to their
            marginal likelihoods (importance-sampling estimates, even prior odds;
            :attr:`CreepPosterior.p_variant`). The creep term can always bend a curve a little
            further; when the data do not need it, its extra prior volume loses to the simpler law
            (Occam's factor), so a run that has levelled off is not forecast to keep creeping; an
            inflected rise goes to the logistic variant instead of being read as a steep start.
        show_progress: rich progress bar over curves.

    Returns:
        :class:`CreepPosterior` (curves in the order given).

    Raises:
        ValueError: no curves, a bad curve (naming its index), or bad sizes.
    """
    curves = list(curves)
    if not curves:
        raise InvalidValueError("curves must hold at least one (steps, values) pair, got none")
    for name, v in (("num_draws", num_draws), ("num_proposals", num_proposals), ("opt_steps", opt_steps)):
        if int(v) != v or v < 1:
            raise InvalidValueError(f"{name} must be a positive integer, got {v!r}")
    N = len(curves)
    prepared = []
    for i, (s, y) in enumerate(curves):
        s = check_steps(s, f"steps of curve {i}")
        y = np.asarray(y, float)
        if y.shape != s.shape:
            raise InvalidValueError(f"values of curve {i} must have the same shape as its steps, got {y.shape} and {s.shape}")
        if np.any(np.isinf(y)):
            raise InvalidValueError(f"rewards of curve {i} must be finite or NaN (missing), got inf")
        keep = np.isfinite(y)
        s, y = s[keep], y[keep]
        if s.size < MIN_CREEP_POINTS:
            raise InvalidValueError(f"curve {i} has {s.size} finite points; the creep model needs at least {MIN_CREEP_POINTS}")
        sc = spread(y)
        if is_flat(y, sc):
            raise InvalidValueError(f"curve {i} is constant (every reward = {float(y[0]):g}): there is nothing to fit")
        prepared.append((s, y, float(s[0]), float(s[-1] - s[0]), float(np.mean(y)), sc))
    t0 = np.array([p[2] for p in prepared])
    span = np.array([p[3] for p in prepared])
    center = np.array([p[4] for p in prepared])
    scale = np.array([p[5] for p in prepared])
    n_obs = np.array([p[0].size for p in prepared])

    out = {k: np.zeros((N, num_draws)) for k in SITES}
    out["variant"] = np.zeros((N, num_draws), np.int32)
    ess = np.zeros(N)
    variants = _VARIANT_FLAGS if average else _VARIANT_FLAGS[:1]
    p_variant = np.zeros((N, len(VARIANTS)))
    start = time.perf_counter()
    seeds = _key_seed(key).spawn(N)
    pbar = None
    if show_progress:
        from grpojax._progress import progress  # noqa: PLC0415

        pbar = progress()
        pbar.start()
        pbar.add_task("creep posteriors", total=N)
    try:
        for i, (s, y, *_rest) in enumerate(prepared):
            rng = np.random.default_rng(seeds[i])
            t = (s - t0[i]) / span[i]
            yn = (y - center[i]) / scale[i]
            anc = _anchors(yn)
            z0 = np.stack([unconstrain(_init_values(anc, rs)) for rs in _RESTARTS])  # shared by every variant
            zb, ev, V = _mode(z0, t, yn, anc[:2], variants, int(opt_steps))
            zps, lws = [], []
            for v, flag in enumerate(variants):
                zp, lw = _importance(rng, zb[v], ev[v], V[v], t, yn, anc[:2], flag, int(num_proposals))
                zps.append(zp)
                lws.append(np.where(np.isfinite(lw), lw, -np.inf))
            # marginal likelihood of each variant: the mean importance weight (raw weights: unbiased)
            log_z = np.array([logsumexp(lw) - np.log(lw.size) for lw in lws])
            post_v = np.exp(log_z - logsumexp(log_z))
            post_v = np.where(np.isfinite(post_v), post_v, np.eye(len(variants))[0])
            # Pareto-smoothed importance weights: the largest raw weights are replaced by the order statistics
            # of a fitted generalized Pareto tail, so that a few lucky proposals do not carry the whole
            # resample (which would make the intervals too narrow when ESS is small)
            lw_s = np.concatenate([psis_log_weights(lw)[0] + np.log(max(post_v[v], 1e-300)) for v, lw in enumerate(lws)])
            prob = np.exp(lw_s - logsumexp(lw_s))
            picks = rng.choice(prob.size, size=num_draws, p=prob / prob.sum())
            zd = np.concatenate(zps)[picks]
            variant_of = picks // num_proposals  # index into VARIANTS
            # ESS of the combined raw weights: each variant's normalised weights times its probability
            wv = np.concatenate([np.exp(lw - logsumexp(lw)) * post_v[v] for v, lw in enumerate(lws)])
            vals = constrain(zd)
            for k in SITES:
                out[k][i] = vals[k]
            out["w"][i][variant_of == VARIANTS.index("exponential")] = 1.0
            out["variant"][i] = variant_of
            ess[i] = float(1.0 / np.sum(wv**2))
            p_variant[i, :len(variants)] = post_v
            if pbar is not None:
                pbar.advance(pbar.task_ids[0], 1)
    finally:
        if pbar is not None:
            pbar.stop()
    return CreepPosterior(out, t0, span, center, scale, n_obs, ess, time.perf_counter() - start, p_variant)


def fit_creep(steps, values, *, key, **kwargs) -> CreepPosterior:
    """:func:`fit_creep_batched` for one curve (``N = 1``); ``kwargs`` go to it."""
    return fit_creep_batched([(steps, values)], key=key, **kwargs)
