r"""numpyro models of a reward curve (all in normalised units, see :mod:`grpojax.fit._data`).

Time ``t ∈ [0, 1]`` (the curve's span), rewards standardised (mean 0, sd 1); the priors below are
weakly informative on that scale and the results are mapped back to steps and reward units.

``three_phase``  (phenomenological, iid noise)
    ``y_k ~ N(R(t_k), σ²)``, ``R = r_inf − (r_inf − r0) φ(t; ω₀, ζ)`` (:class:`grpojax.dynamics.ThreePhase`).
``state_space``  (the linear oscillator SDE observed with noise)
    ``ë + 2ζω₀ ė + ω₀² e = sqrt(q) ξ`` from rest at ``e(0) = p0 − p*``; ``y_k = p* + e(t_k) + v_k``,
    ``v_k ~ N(0, σ²)``; exact marginal likelihood by the Kalman filter of :mod:`grpojax.fit._kalman`
    (exact transition per distinct Δt; irregular and missing steps are exact). ``q = 4 ω₀³ s²`` so
    that ``s`` is the stationary sd of ``e`` at ζ = 1 (a scale-free process-noise parameter).
``mechanistic``  (η, μ, K_ref, lag, G known)
    ``M, C, K_eff`` from :func:`grpojax.dynamics.from_hyperparams` with one unknown stale curvature
    ``K = K_d`` (``a = ηK`` sampled on a log scale; the instant stiffness K₀ is given, default 0), plus ``p*``, ``p0``, process and observation noise;
    same Kalman likelihood, time in optimizer steps. One free dynamical parameter for a whole curve:
    falsifiable (a bad fit shows as a poor R² and a large residual autocorrelation).

Priors (normalised units): levels ``N(0, 3²)``; ``log ω₀ ~ N(log 8, 1.5²)`` (rise over ~1/8 of the
span, e-fold range ×/÷ 4.5); ``ζ ~ U(−0.5, 5)`` (covers unstable, underdamped, overdamped);
``σ ~ HalfNormal(1)``; ``s ~ HalfNormal(0.3)``; mechanistic ``log(ηK) ~ N(log(5(1−μ)/span), 2²)``.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from grpojax._errors import InvalidValueError
from grpojax.dynamics import ThreePhase, from_hyperparams
from grpojax.fit._kalman import kalman_loglik, oscillator_transitions, unchecked_params

ZETA_RANGE = (-0.5, 5.0)
LOG_OMEGA_PRIOR = (math.log(8.0), 1.5)  # plain Python: importing grpojax.fit must not start JAX
LEVEL_SD = 3.0
SIGMA_SCALE = 1.0
PROC_SCALE = 0.3

MODELS = ("three_phase", "state_space", "mechanistic")
"""Names of the Bayesian models."""


def prior_sites(model: str, *, a_loc: float = 0.0) -> dict:
    """``{site: distribution}`` of the latent sites of ``model`` (used for inits and priors)."""
    level = dist.Normal(0.0, LEVEL_SD)
    common = {"sigma": dist.HalfNormal(SIGMA_SCALE)}
    if model == "three_phase":
        return {
            "r0": level,
            "r_inf": level,
            "log_omega0": dist.Normal(*LOG_OMEGA_PRIOR),
            "zeta": dist.Uniform(*ZETA_RANGE),
            **common,
        }
    if model == "state_space":
        return {
            "p0": level,
            "p_star": level,
            "log_omega0": dist.Normal(*LOG_OMEGA_PRIOR),
            "zeta": dist.Uniform(*ZETA_RANGE),
            "s_proc": dist.HalfNormal(PROC_SCALE),
            **common,
        }
    if model == "mechanistic":
        return {
            "p0": level,
            "p_star": level,
            "log_a": dist.Normal(a_loc, 2.0),
            "s_proc": dist.HalfNormal(PROC_SCALE),
            **common,
        }
    raise InvalidValueError(f"unknown model {model!r}; expected one of {MODELS}")


def three_phase_model(t, y, mask):
    """Phenomenological three-phase law with iid Gaussian noise (arrays ``(T,)``)."""
    p = {k: numpyro.sample(k, d) for k, d in prior_sites("three_phase").items()}
    omega0 = jnp.exp(p["log_omega0"])
    mu = ThreePhase(p["r0"], p["r_inf"], omega0, p["zeta"])(t)
    with numpyro.handlers.mask(mask=mask):
        numpyro.sample("y", dist.Normal(mu, p["sigma"]), obs=jnp.where(mask, y, 0.0))


def _state_space_ll(y, mask, unique_dts, index, p0, p_star, M, C, K_eff, q, sigma):
    # built valid (M > 0, q ≥ 0, σ² ≥ 0): no traced checks, whose host callbacks would keep the sampler's
    # program out of JAX's persistent compilation cache
    params = unchecked_params(M, C, K_eff, p_star, q * M**2)
    A, Q = oscillator_transitions(params, unique_dts, index)
    m0 = jnp.stack([p0 - p_star, jnp.zeros_like(p0)])
    return kalman_loglik(y, mask, A, Q, sigma**2, m0, jnp.zeros((2, 2), m0.dtype), offset=p_star, checked=False)


def state_space_model(y, mask, unique_dts, index):
    """Linear-SDE state-space model; ``unique_dts``/``index`` from :func:`step_intervals` (normalised)."""
    p = {k: numpyro.sample(k, d) for k, d in prior_sites("state_space").items()}
    omega0 = jnp.exp(p["log_omega0"])
    q = 4.0 * omega0**3 * p["s_proc"] ** 2
    one = jnp.ones_like(omega0)
    ll = _state_space_ll(y, mask, unique_dts, index, p["p0"], p["p_star"], one, 2.0 * p["zeta"] * omega0, omega0**2, q, p["sigma"])
    numpyro.factor("loglik", ll)


def mechanistic_oscillator(a, eta, mu, k_ref, lag, k_instant=0.0):
    """``(M, C, K_eff)`` for stale stiffness rate ``a = ηK`` (traced) and known hyperparameters."""
    p = from_hyperparams(eta, mu, k_ref, a / eta, lag=lag, k_instant=k_instant)
    return p.M, p.C, p.K_eff


def mechanistic_model(y, mask, unique_dts, index, eta, mu, k_ref, lag, group_size, a_loc, k_instant=0.0):
    """Mechanistic model: time in optimizer steps; levels and noises normalised.

    ``unique_dts`` in steps. The process noise is parameterised by ``s`` as in the state-space model
    (``q = D/(G M²) = 4 ω₀³ s²``), so ``group_size`` only rescales the reported gradient-noise σ².
    """
    del group_size
    p = {k: numpyro.sample(k, d) for k, d in prior_sites("mechanistic", a_loc=a_loc).items()}
    a = jnp.exp(p["log_a"])
    M, C, K_eff = mechanistic_oscillator(a, eta, mu, k_ref, lag, k_instant)
    omega0 = jnp.sqrt(K_eff / M)
    q = 4.0 * omega0**3 * p["s_proc"] ** 2
    ll = _state_space_ll(y, mask, unique_dts, index, p["p0"], p["p_star"], M, C, K_eff, q, p["sigma"])
    numpyro.factor("loglik", ll)
