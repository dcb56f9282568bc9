r"""numpyro models of a reward curve (all in normalised units, see :mod:`grpojax.fit._data`).

Time ``t ∈ [0, 1]`` (the curve's span), rewards standardised (mean 0, sd 1); the priors below are
weakly informative on that scale and the results are mapped back to steps and reward units.

``three_phase``  (phenomenological, iid noise)
    ``y_k ~ N(R(t_k), σ²)``, ``R = p* − (p* − p0) φ(t; ω₀, ζ)`` (:class:`grpojax.dynamics.ThreePhase`).
``state_space``  (the linear oscillator SDE observed with noise)
    ``ë + 2ζω₀ ė + ω₀² e = sqrt(q) ξ`` from rest at ``e(0) = p0 − p*``; ``y_k = p* + e(t_k) + v_k``,
    ``v_k ~ N(0, σ²)``; exact marginal likelihood by the Kalman filter of :mod:`grpojax.fit._kalman`
    (exact transition per distinct Δt; irregular and missing steps are exact). ``q = 4 ω₀³ s²`` so
    that ``s`` is the stationary sd of ``e`` at ζ = 1 (a scale-free process-noise parameter).
``mechanistic``  (η, μ, K_ref, lag, G known)
    ``M, C, K_eff`` from :func:`grpojax.dynamics.from_hyperparams` with one unknown stale curvature
    ``K = K_d`` (``a = ηK`` sampled on a log scale; the instant stiffness K₀ is given, default 0), plus ``p*``,
    ``p0``, process and observation noise; same Kalman likelihood, time in optimizer steps. One free dynamical
    parameter for a whole curve: falsifiable (a bad fit shows as a poor R² and a large residual autocorrelation).

**What NUTS samples.** The two levels ``p0`` and ``p*`` enter every model linearly with Gaussian priors, so
they are integrated out exactly: the curve is ``p0 φ + p* (1 − φ)`` plus noise, a Bayesian linear
regression on the columns ``φ`` and ``1 − φ`` (closed form for ``three_phase``; for the other two, one Kalman
filter whitens the data and both columns, :func:`grpojax.fit._kalman.kalman_innovations`, and the regression is
solved on the whitened values). NUTS then samples only the
dynamics and the noise, each on a unit scale (``*_z`` sites), and :func:`natural` maps them to the model's
parameters; the levels are drawn afterwards from their exact Gaussian conditional, one draw per posterior
draw. The rate is sampled as the *closing rate*

    κ = ω₀ / (ζ + sqrt(1 + ζ²)),

which is ω₀ for an undamped curve, ω₀/2.41 at critical damping and tends to the slow root ω₀(ζ − sqrt(ζ² − 1))
≈ ω₀/(2ζ) of an overdamped one: a curve that looks exponential fixes only that slow root, so in (log κ, ζ) its
posterior ridge is straight (ζ free at fixed κ) where in (log ω₀, ζ) it is curved.

Priors (normalised units): levels ``p0, p* ~ N(0, 3²)`` (integrated out); ``log κ ~ N(log 3, 1.2²)`` (the
gap closes by e³ over the span; 95% between 0.3 and 30 e-folds per span); ``ζ ~ U(−0.5, 5)`` (unstable,
underdamped and overdamped); ``σ ~ HalfNormal(1)``; ``s ~ HalfNormal(0.3)``; mechanistic
``log(ηK) ~ N(log(5(1−μ)/span), 2²)``.

The process-noise scale is sampled *folded*: ``u ~ N(0, 1)`` and ``s = 0.3 |u|``, which is exactly the
HalfNormal(0.3) prior. The likelihood depends on ``s²`` only, so the posterior of ``u`` is smooth and symmetric
through 0. A curve that does not rule out ``s → 0`` (most reward curves: the observation noise explains the
wiggles) leaves, on numpyro's usual log scale for a positive parameter, a long tail towards ``log s → −∞`` that
NUTS explores slowly (the lowest ESS and the worst r̂ of the sampled sites); on ``u`` that tail is a bounded
interval around 0.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.distributions.transforms import biject_to

from grpojax._errors import InvalidValueError
from grpojax.dynamics import ThreePhase, from_hyperparams, response_from_rest
from grpojax.fit._kalman import kalman_innovations, quadrature_transition, unchecked_params

ZETA_RANGE = (-0.5, 5.0)
RATE_PRIOR = (math.log(3.0), 1.2)  # log closing rate per span; plain Python: importing grpojax.fit must not start JAX
LEVEL_SD = 3.0
SIGMA_SCALE = 1.0
PROC_SCALE = 0.3
A_SD = 2.0

MODELS = ("three_phase", "state_space", "mechanistic")
"""Names of the Bayesian models."""

LEVELS = ("p0", "p_star")
"""The two levels every model integrates out (drawn afterwards from their Gaussian conditional)."""


def prior_sites(model: str) -> dict:
    """``{site: distribution}`` of the sampled (unit-scale) sites of ``model``; :func:`natural` maps them."""
    common = {"zeta": dist.Uniform(*ZETA_RANGE)}
    sigma = {"sigma_z": dist.HalfNormal(1.0)}
    if model == "three_phase":
        return {"rate_z": dist.Normal(0.0, 1.0), **common, **sigma}
    if model == "state_space":
        return {"rate_z": dist.Normal(0.0, 1.0), **common, "proc_z": dist.Normal(0.0, 1.0), **sigma}
    if model == "mechanistic":
        return {"a_z": dist.Normal(0.0, 1.0), "proc_z": dist.Normal(0.0, 1.0), **sigma}
    raise InvalidValueError(f"unknown model {model!r}; expected one of {MODELS}")


def closing_rate(omega0, zeta):
    """κ = ω₀ / (ζ + sqrt(1 + ζ²)) (works on NumPy and JAX arrays)."""
    return omega0 / (zeta + (1.0 + zeta * zeta) ** 0.5)


def natural(model: str, z: dict, *, a_loc: float = 0.0) -> dict:
    """The model's parameters (normalised units) from its unit-scale sites ``z`` (NumPy or JAX arrays).

    Returns ``{omega0, zeta, rate, sigma}`` plus ``s_proc`` (state-space, mechanistic) and ``a`` (mechanistic:
    ω₀ and ζ then follow from the hyperparameters, see :func:`mechanistic_oscillator`, and are not included).
    """
    xp = jnp if any(isinstance(v, jax.Array) for v in z.values()) else __import__("numpy")
    out = {"sigma": SIGMA_SCALE * z["sigma_z"]}
    if "proc_z" in z:
        out["s_proc"] = PROC_SCALE * xp.abs(z["proc_z"])  # folded: s ~ HalfNormal(PROC_SCALE), see the module notes
    if model == "mechanistic":
        out["a"] = xp.exp(a_loc + A_SD * z["a_z"])
        return out
    zeta = z["zeta"]
    rate = xp.exp(RATE_PRIOR[0] + RATE_PRIOR[1] * z["rate_z"])
    out.update(zeta=zeta, rate=rate, omega0=rate * (zeta + xp.sqrt(1.0 + zeta * zeta)))
    return out


def folded(sites: dict) -> dict:
    """The sampled sites as the likelihood sees them: the process-noise site by its absolute value (the sign of
    ``u`` is not identified, so r̂ and ESS are computed on ``|u|``; NumPy or JAX arrays)."""
    return {k: (abs(v) if k == "proc_z" else v) for k, v in sites.items()}


def unit_sites(model: str, values: dict, *, a_loc: float = 0.0) -> dict:
    """The inverse of :func:`natural` (NumPy): unit-scale sites from ``{omega0, zeta, sigma[, s_proc][, a]}``."""
    import numpy as np  # noqa: PLC0415

    out = {"sigma_z": np.asarray(values["sigma"]) / SIGMA_SCALE}
    if model != "three_phase":
        out["proc_z"] = np.asarray(values["s_proc"]) / PROC_SCALE
    if model == "mechanistic":
        out["a_z"] = (np.log(values["a"]) - a_loc) / A_SD
        return out
    out["zeta"] = np.asarray(values["zeta"])
    out["rate_z"] = (np.log(closing_rate(values["omega0"], values["zeta"])) - RATE_PRIOR[0]) / RATE_PRIOR[1]
    return out


# ---------------------------------------------------------------------------------------------------------
# the two levels, integrated out


def levels_regression(yw, Xw, mask):
    """Exact marginal of ``yw = Xw β + N(0, I)`` over ``β = (p0, p*) ~ N(0, LEVEL_SD² I)``, and β's posterior.

    ``yw (..., T)`` and ``Xw (..., T, 2)`` are already whitened (unit noise; rows where ``mask`` is false are
    ignored). Uses ``yᵀ Σ⁻¹ y = min_β |y − Xβ|² + |β|²/L²`` and ``|Σ| = L⁴ |A|`` with ``A = XᵀX + I/L²``: only a
    2×2 system is solved.

    Returns:
        ``(loglik without the −½ Σ log 2π S_k of the whitening, mean (..., 2), cov (..., 2, 2))``.
    """
    w = jnp.asarray(mask, Xw.dtype)
    X = Xw * w[..., None]
    y = jnp.where(mask, yw, 0.0)
    L2 = LEVEL_SD**2
    A = jnp.einsum("...ti,...tj->...ij", X, X) + jnp.eye(2, dtype=X.dtype) / L2
    b = jnp.einsum("...ti,...t->...i", X, y)
    # closed-form 2×2 inverse: no LAPACK call inside the sampler (cheaper to compile and to differentiate)
    a11, a12, a22 = A[..., 0, 0], A[..., 0, 1], A[..., 1, 1]
    det = a11 * a22 - a12 * a12
    cov = jnp.stack([jnp.stack([a22, -a12], -1), jnp.stack([-a12, a11], -1)], -2) / det[..., None, None]
    beta = jnp.einsum("...ij,...j->...i", cov, b)
    r = y - jnp.einsum("...ti,...i->...t", X, beta)
    quad = jnp.sum(r * r, -1) + jnp.sum(beta * beta, -1) / L2
    ll = -0.5 * (2.0 * math.log(L2) + jnp.log(det) + quad)
    return ll, beta, cov


def three_phase_response(t, omega0, zeta):
    """φ(t; ω₀, ζ) of :class:`grpojax.dynamics.ThreePhase` (the one definition of the law)."""
    return ThreePhase(0.0, 0.0, omega0, zeta).response(t)


def level_columns(phi):
    """The regressors of ``(p0, p*)``: the curve is ``p0 φ + p* (1 − φ)`` (``(..., T)`` → ``(..., T, 2)``)."""
    return jnp.stack([phi, 1.0 - phi], -1)


def three_phase_loglik(t, y, mask, omega0, zeta, sigma):
    """``(loglik, level mean, level cov)`` of the three-phase model, levels integrated out."""
    phi = three_phase_response(t, omega0, zeta)
    n = jnp.sum(jnp.asarray(mask, phi.dtype), -1)
    ll, beta, cov = levels_regression(y / sigma, level_columns(phi) / sigma, mask)
    return ll - 0.5 * n * jnp.log(2.0 * jnp.pi * sigma**2), beta, cov


def three_phase_model(t, y, mask):
    """Phenomenological three-phase law with iid Gaussian noise (arrays ``(T,)``); levels integrated out."""
    z = {k: numpyro.sample(k, d) for k, d in prior_sites("three_phase").items()}
    p = natural("three_phase", z)
    ll, _, _ = three_phase_loglik(t, y, mask, p["omega0"], p["zeta"], p["sigma"])
    numpyro.factor("loglik", ll)


def state_space_loglik(t, y, mask, unique_dts, index, M, C, K_eff, q, sigma):
    """``(loglik, level mean, level cov)`` of the state-space model, levels integrated out.

    ``y = p0 φ + p* (1 − φ) + η + v``: ``η`` the process-noise path from rest at 0 (Kalman state), ``v`` the
    observation noise. One Kalman filter whitens ``y`` and both regressors (:func:`kalman_innovations`), and the
    levels are integrated out of the whitened regression. Built valid (``M > 0``, ``q ≥ 0``): no traced
    checks, whose host callbacks would keep the sampler's program out of JAX's persistent compilation cache.
    ``t`` are the observation times from the first (``unique_dts``/``index`` from :func:`step_intervals`);
    ``q`` the variance rate of ``ė``.
    """
    A, Q = quadrature_transition(M, C, K_eff, q, unique_dts)
    phi = response_from_rest(unchecked_params(M, C, K_eff), t)
    cols = jnp.concatenate([y[:, None], level_columns(phi)], -1)
    v, S = kalman_innovations(cols, mask, A[index], Q[index], sigma**2)
    sd = jnp.sqrt(S)
    ll, beta, cov = levels_regression(v[:, 0] / sd, v[:, 1:] / sd[:, None], mask)
    return ll - 0.5 * jnp.sum(jnp.where(mask, jnp.log(2.0 * jnp.pi * S), 0.0)), beta, cov


def _state_space_terms(p, t, y, mask, index, unique_dts):
    om = p["omega0"]
    q = 4.0 * om**3 * p["s_proc"] ** 2
    return state_space_loglik(t, y, mask, unique_dts, index, jnp.ones_like(om), 2.0 * p["zeta"] * om, om**2, q, p["sigma"])


def state_space_model(t, y, mask, index, unique_dts):
    """Linear-SDE state-space model; ``index``/``unique_dts`` from :func:`step_intervals` (normalised)."""
    z = {k: numpyro.sample(k, d) for k, d in prior_sites("state_space").items()}
    ll, _, _ = _state_space_terms(natural("state_space", z), t, y, mask, index, unique_dts)
    numpyro.factor("loglik", ll)


def mechanistic_oscillator(a, eta, mu, k_ref, lag, k_instant=0.0):
    """``(M, C, K_eff)`` for stale stiffness rate ``a = ηK`` (traced) and known hyperparameters."""
    p = from_hyperparams(eta, mu, k_ref, a / eta, lag=lag, k_instant=k_instant)
    return p.M, p.C, p.K_eff


def _mechanistic_terms(p, t, y, mask, index, unique_dts, eta, mu, k_ref, lag, k_instant):
    M, C, K_eff = mechanistic_oscillator(p["a"], eta, mu, k_ref, lag, k_instant)
    omega0 = jnp.sqrt(K_eff / M)
    q = 4.0 * omega0**3 * p["s_proc"] ** 2
    return state_space_loglik(t, y, mask, unique_dts, index, M, C, K_eff, q, p["sigma"])


def mechanistic_model(t, y, mask, index, unique_dts, eta, mu, k_ref, lag, group_size, a_loc, k_instant=0.0):
    """Mechanistic model: time in optimizer steps; levels and noises normalised.

    ``unique_dts`` in steps. The process noise is parameterised by ``s`` as in the state-space model
    (``q = D/(G M²) = 4 ω₀³ s²``), so ``group_size`` only rescales the reported gradient-noise σ².
    """
    del group_size
    z = {k: numpyro.sample(k, d) for k, d in prior_sites("mechanistic").items()}
    ll, _, _ = _mechanistic_terms(natural("mechanistic", z, a_loc=a_loc), t, y, mask, index, unique_dts, eta, mu, k_ref, lag,
                                  k_instant)
    numpyro.factor("loglik", ll)


# ---------------------------------------------------------------------------------------------------------
# per-draw post-processing inside the sampler's program (see grpojax.fit._batched_nuts.run_chains)


def constrain(model: str, z: dict) -> dict:
    """The sampled sites from their unconstrained values (numpyro's bijections of each prior's support)."""
    return {k: biject_to(d.support)(z[k]) for k, d in prior_sites(model).items()}


def _with_levels(sites, terms):
    _, beta, cov = terms
    return {**sites, "level_mean": beta, "level_cov": cov}


def three_phase_post(z, t, y, mask):
    """Constrained sites and the Gaussian posterior of ``(p0, p*)`` of one unconstrained draw ``z``."""
    sites = constrain("three_phase", z)
    p = natural("three_phase", sites)
    return _with_levels(sites, three_phase_loglik(t, y, mask, p["omega0"], p["zeta"], p["sigma"]))


def state_space_post(z, t, y, mask, index, unique_dts):
    """:func:`three_phase_post` for the state-space model."""
    sites = constrain("state_space", z)
    return _with_levels(sites, _state_space_terms(natural("state_space", sites), t, y, mask, index, unique_dts))


def mechanistic_post(z, t, y, mask, index, unique_dts, eta, mu, k_ref, lag, group_size, a_loc, k_instant=0.0):
    """:func:`three_phase_post` for the mechanistic model."""
    del group_size
    sites = constrain("mechanistic", z)
    p = natural("mechanistic", sites, a_loc=a_loc)
    return _with_levels(sites, _mechanistic_terms(p, t, y, mask, index, unique_dts, eta, mu, k_ref, lag, k_instant))
