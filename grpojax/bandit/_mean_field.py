"""Exact finite-G mean field of the two-arm bandit: drift, fixed point, stiffnesses, oscillator parameters.

The expected update in logit coordinates is a finite sum over the Binomial(G, p_b) count:

    f(θ, θ_b) = Σ_{k=0}^{G} Binom(k; G, σ(θ_b)) · g_reward(k; θ, θ_b) − β p(1 − p)(θ − θ_ref)

(for ``grpo``: E_k[sqrt(q(1−q))]; for ``dr_grpo``: p(1−p)(1 − 1/G); for ``rloo``: p(1−p)).
The plateau is the root θ* of f(θ, θ) (bisection), and the stiffnesses are its derivatives at θ*:

    K_d = −∂f/∂θ_b,   K_0 = −∂f/∂θ        (jax.grad; coordinate-free at a fixed point)

The per-sample gradient variance σ² = G · Var_k[g_reward(k)] at θ* is measured from the same sum and
converted to reward units (× (p*(1 − p*))²), so that ``D/(2 G C K_eff)`` is a prediction of Var(p) that
uses no simulation.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlog1py, xlogy
from jaxtyping import Array, ArrayLike

from grpojax._errors import InvalidValueError
from grpojax.bandit._config import BanditConfig
from grpojax.bandit._two_arm import TwoArmState, behaviour_logit, kl_gradient, reward_gradient, two_arm_init
from grpojax.dynamics import OscillatorParams, from_hyperparams

__all__ = ["mean_drift", "drift_logit", "fixed_point", "stiffness", "gradient_noise", "oscillator_params",
           "Plateau", "plateau", "mean_field_step", "mean_field_trajectory", "with_fixed_point"]

_THETA_MAX = 30.0
_BISECT = 60
_GRID = 241


def _logit(p):
    return jnp.log(p) - jnp.log1p(-p)


_LN_2PI = 1.8378770664093453


def _stirlerr(n: Array) -> Array:
    """log(n!) − [(n + ½) log n − n + ½ log 2π] (Stirling remainder), accurate in float32 for all n ≥ 1."""
    small = n < 16.0
    ns = jnp.where(small, jnp.maximum(n, 1.0), 16.0)
    direct = jax.lax.lgamma(ns + 1.0) - (ns + 0.5) * jnp.log(ns) + ns - 0.5 * _LN_2PI
    nl = jnp.where(small, 16.0, n)
    n2 = 1.0 / (nl * nl)
    series = (1.0 / 12.0 - n2 * (1.0 / 360.0 - n2 * (1.0 / 1260.0 - n2 / 1680.0))) / nl
    return jnp.where(small, direct, series)


def _bd0(x: Array, m: Array) -> Array:
    """Deviance x log(x/m) + m − x ≥ 0 without cancellation (x, m > 0)."""
    r = (x - m) / (x + m)
    near = jnp.abs(r) < 0.1
    # x log(x/m) + m − x = (x − m) r + 2 x Σ_{j≥1} r^{2j+1}/(2j+1)   (|r| small)
    r2 = r * r
    series = (x - m) * r + 2.0 * x * r * r2 * (1.0 / 3.0 + r2 * (1.0 / 5.0 + r2 * (1.0 / 7.0 + r2 * (1.0 / 9.0 + r2 / 11.0))))
    direct = x * jnp.log(jnp.where(near, 1.0, x / m)) + m - x
    return jnp.where(near, series, direct)


def _pmf(G: Array, pb: Array, max_group: int) -> tuple[Array, Array]:
    """(k, Binomial(G, p_b) pmf) over a window of k holding ≥ 24 standard deviations (all of 0..G when G is
    small; the rest is below float precision), by Loader's saddle-point form (stable for G up to ~1e7
    in float32; the naive lgamma difference loses all digits there), normalised to sum to 1."""
    half = int(math.ceil(12.0 * math.sqrt(max_group))) + 10  # ≥ 24 standard deviations each side
    width = min(max_group + 1, 2 * half + 1)
    k_lo = jnp.clip(jnp.floor(G * jax.lax.stop_gradient(pb)) - half, 0.0, jnp.maximum(G + 1.0 - width, 0.0))
    k = k_lo + jnp.arange(width, dtype=pb.dtype)
    q = 1.0 - pb
    inner = (k > 0) & (k < G)
    ki = jnp.where(inner, k, 1.0)
    gk = jnp.where(inner, G - k, 1.0)
    pbs = jnp.clip(pb, 1e-30, 1.0)
    qs = jnp.clip(q, 1e-30, 1.0)
    lp_inner = (_stirlerr(G) - _stirlerr(ki) - _stirlerr(gk) - _bd0(ki, G * pbs) - _bd0(gk, G * qs)
                + 0.5 * (jnp.log(G) - _LN_2PI - jnp.log(ki) - jnp.log(gk)))
    lp = jnp.where(inner, lp_inner, jnp.where(k == 0, xlog1py(G, -pb), xlogy(G, pb)))
    lp = jnp.where(inner & ((pb <= 0) | (q <= 0)), -jnp.inf, lp)
    lp = jnp.where(k <= G, lp, -jnp.inf)
    return k, jax.nn.softmax(lp)


def _drift_one(theta: Array, theta_b: Array, cfg: BanditConfig) -> Array:
    """f(θ, θ_b) for one configuration (scalars)."""
    pb = jax.nn.sigmoid(theta_b)
    k, w = _pmf(cfg.group_size, pb, cfg.max_group)
    g = reward_gradient(k, theta, theta_b, cfg)
    return jnp.sum(w * g) - cfg.beta * kl_gradient(theta, cfg)


def _drift_only(cfg: BanditConfig) -> BanditConfig:
    """The config with the static fields the drift does not use normalised (fewer recompilations)."""
    import dataclasses

    if cfg.max_lag == 1 and cfg.lag == "constant":
        return cfg
    new = object.__new__(type(cfg))
    for f in dataclasses.fields(cfg):
        object.__setattr__(new, f.name, getattr(cfg, f.name))
    object.__setattr__(new, "max_lag", 1)
    object.__setattr__(new, "lag", "constant")
    return new


def _batched(fn: Callable, cfg: BanditConfig, *args):
    """Apply ``fn(*args, cfg)`` (scalar config) over the batch shape of ``cfg`` and ``args``."""
    cfg = cfg.broadcast()
    shape = jnp.broadcast_shapes(cfg.batch_shape, *(jnp.shape(a) for a in args))
    flat_cfg = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape).reshape(-1), cfg)
    flat_args = [jnp.broadcast_to(jnp.asarray(a, dtype=cfg.eta.dtype), shape).reshape(-1) for a in args]
    out = jax.vmap(lambda c, *a: fn(*a, c))(flat_cfg, *flat_args)
    return jax.tree_util.tree_map(lambda x: x.reshape(shape + x.shape[1:]), out)


@jax.jit
def drift_logit(theta: ArrayLike, theta_b: ArrayLike, config: BanditConfig) -> Array:
    """Exact expected update direction f(θ, θ_b) in logit units (before momentum and η).

    Args:
        theta: current logit(s).
        theta_b: behaviour logit(s).
        config: :class:`BanditConfig` (possibly batched; broadcast with the logits).

    Returns:
        f with the broadcast shape.
    """
    return _batched(_drift_one, config, theta, theta_b)


def mean_drift(p: ArrayLike, config: BanditConfig, *, p_behaviour: ArrayLike | None = None) -> Array:
    """Exact finite-G mean drift in logit coordinates at policy ``p`` (behaviour ``p_behaviour``, default p).

    Example:
        >>> cfg = BanditConfig(0.1, group_size=8, advantage="dr_grpo")
        >>> round(float(mean_drift(0.5, cfg)), 6)  # p(1-p)(1-1/G)
        0.21875
    """
    p = jnp.asarray(p, dtype=config.eta.dtype)
    pb = p if p_behaviour is None else jnp.asarray(p_behaviour, dtype=p.dtype)
    return drift_logit(_logit(p), _logit(pb), _drift_only(config))


def _fixed_theta_one(cfg: BanditConfig) -> Array:
    h = lambda t: _drift_one(t, t, cfg)
    dtype = cfg.eta.dtype
    # the drift can change sign several times (a stable plateau, then an unstable root beyond which the
    # reward outruns the KL anchor and p escapes to 1): bracket the first + → − crossing on a grid
    grid = jnp.linspace(-_THETA_MAX, _THETA_MAX, _GRID, dtype=dtype)
    hv = jax.vmap(h)(grid)
    down = (hv[:-1] > 0) & (hv[1:] <= 0)
    i = jnp.argmax(down)
    found = jnp.any(down)
    lo0 = jnp.where(found, grid[i], grid[-1])
    hi0 = jnp.where(found, grid[i + 1], grid[-1])

    def body(_, lohi):
        lo, hi = lohi
        mid = 0.5 * (lo + hi)
        up = h(mid) > 0
        return jnp.where(up, mid, lo), jnp.where(up, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECT, body, (lo0, hi0))
    return 0.5 * (lo + hi)


@jax.jit
def _fixed_point_theta(config: BanditConfig) -> Array:
    return _batched(lambda c: _fixed_theta_one(c), config)


def fixed_point(config: BanditConfig) -> Array:
    """Plateau p* = σ(θ*), the first stable root of the exact mean drift f(θ, θ) = 0.

    The drift is evaluated on a grid of θ ∈ [−30, 30]; the first + → − sign change is refined by bisection.
    (Beyond the plateau the drift may turn positive again: an unstable root past which p escapes to 1.)
    With β = 0 the drift is positive everywhere and p* = σ(30) ≈ 1; with β > 0 it is < 1.

    Example:
        >>> import math
        >>> cfg = BanditConfig(0.1, group_size=8, beta=0.5, advantage="dr_grpo")
        >>> th = math.log(float(fixed_point(cfg)) / (1 - float(fixed_point(cfg))))
        >>> round(th, 4)  # θ* = θ_ref + (1 − 1/G)/β
        1.75
    """
    return jax.nn.sigmoid(_fixed_point_theta(_drift_only(config)))


def _stiff_one(cfg: BanditConfig):
    t = _fixed_theta_one(cfg)
    k0 = -jax.grad(_drift_one, argnums=0)(t, t, cfg)
    kd = -jax.grad(_drift_one, argnums=1)(t, t, cfg)
    pb = jax.nn.sigmoid(t)
    k, w = _pmf(cfg.group_size, pb, cfg.max_group)
    g = reward_gradient(k, t, t, cfg)
    mean = jnp.sum(w * g)
    var = jnp.sum(w * (g - mean) ** 2)
    s = pb * jax.nn.sigmoid(-t)
    return t, kd, k0, cfg.group_size * var * s**2


@jax.jit
def _stiff(config: BanditConfig):
    return _batched(_stiff_one, config)


class Plateau(NamedTuple):
    """The exact mean field at its plateau (each with the batch shape of the config).

    Attributes:
        theta: plateau logit θ* (p* = σ(θ*)).
        k_d: stale stiffness K_d = −∂f/∂θ_b.
        k_0: current-policy stiffness K_0 = −∂f/∂θ.
        sigma2: per-sample gradient variance σ² (see :func:`gradient_noise`).
    """

    theta: Array
    k_d: Array
    k_0: Array
    sigma2: Array


def plateau(config: BanditConfig) -> Plateau:
    """θ*, K_d, K_0 and σ² at the plateau in one jitted pass (what :func:`fixed_point`, :func:`stiffness`
    and :func:`gradient_noise` return piecewise). Only the drift knobs of ``config`` matter (not η, μ,
    K_ref or the lag model), so callers may pass one config per distinct drift and broadcast the result.
    """
    return Plateau(*_stiff(_drift_only(config)))


def stiffness(config: BanditConfig) -> tuple[Array, Array]:
    """(K_d, K_0) at the plateau: −∂f/∂θ_b (stale part) and −∂f/∂θ (current-policy part), per step."""
    _, kd, k0, _ = _stiff(_drift_only(config))
    return kd, k0


def gradient_noise(config: BanditConfig) -> Array:
    """Per-sample gradient variance σ² = G·Var_k[g_reward] at p*, in reward units (× (p*(1−p*))²)."""
    return _stiff(_drift_only(config))[3]


def oscillator_params(config: BanditConfig) -> OscillatorParams:
    """:class:`grpojax.dynamics.OscillatorParams` predicted from the exact mean field of ``config``.

    ``M, C, K_eff`` from (η, μ, K_ref, lag) and the measured K_d, K_0; ``p_star`` from root finding;
    ``D = η² σ²`` with σ² from :func:`gradient_noise`, so ``stationary_variance(params, G)`` predicts the
    stationary Var(p) independently of any simulation.
    """
    t, kd, k0, sig2 = _stiff(_drift_only(config))
    return from_hyperparams(config.eta, config.mu, config.k_ref, kd, lag=config.lag, k_instant=k0,
                            noise=jnp.maximum(sig2, 0.0), p_star=jax.nn.sigmoid(t))


def mean_field_step(state: TwoArmState) -> TwoArmState:
    """One step of the exact finite-G mean-field map for an unbatched two-arm state.

    The simulator's step (same lag and momentum) with the sampled gradient replaced by its expectation
    f(θ_n, θ_b(n)); ``jax.vmap`` it for a batch of states.
    """
    cfg = state.config
    theta_b, hist = behaviour_logit(state)
    g = _drift_one(state.theta, theta_b, cfg)
    v = cfg.mu * state.velocity + g
    return TwoArmState(state.theta + cfg.eta * v, v, hist, state.step + 1, state.theta_ref, cfg)


def _mf_step(state: TwoArmState, _):
    return mean_field_step(state), jax.nn.sigmoid(state.theta)


def mean_field_trajectory(config: BanditConfig, num_steps: int, *, theta0: ArrayLike | None = None) -> Array:
    """Deterministic trajectory p_n (n = 0..num_steps−1) of the exact finite-G mean-field map.

    The same lag and momentum as the simulator, with the sampled gradient replaced by its exact
    expectation f(θ_n, θ_b(n)). Batched configurations give a ``batch_shape + (num_steps,)`` array.

    Args:
        config: :class:`BanditConfig`.
        num_steps: static number of steps.
        theta0: optional initial logit (default logit(p_init)); broadcast with the batch.
    """
    return _mf_traj(config, int(num_steps), theta0)


def _mf_traj(config, num_steps, theta0):
    @jax.jit
    def run(cfg, th0):
        def one(c, t0):
            st = two_arm_init(c)
            if t0 is not None:
                st = st._replace(theta=t0, history=jnp.full_like(st.history, t0))
            _, ps = jax.lax.scan(_mf_step, st, None, length=num_steps)
            return ps

        if th0 is None:
            return _batched(lambda c: one(c, None), cfg)
        return _batched(lambda t, c: one(c, t), cfg, th0)

    return run(config, theta0)


def with_fixed_point(config: BanditConfig, p_star: ArrayLike, *, k_instant: ArrayLike | None = None
                     ) -> BanditConfig:
    """A copy of ``config`` whose KL anchor puts the plateau at ``p_star`` (and optionally sets K_0).

    With ``k_instant=None`` only β changes (``β = R*/(s*(θ* − θ_ref))`` with R* the reward drift at p* and
    s* = p*(1 − p*)); this needs ``p_star`` on the far side of ``p_ref``. With ``k_instant`` given, the
    reference policy moves too, so that K_0 = −∂f/∂θ equals it exactly:
    ``θ* − θ_ref = R*/(K_0 + ∂_θR + R*(2p* − 1))``. ``k_instant=0`` makes the KL anchor's instant stiffness
    cancel (then the a₀ = 0 thresholds of grpojax.dynamics apply directly).

    Example:
        >>> cfg = with_fixed_point(BanditConfig(0.1, group_size=64), 0.8, k_instant=0.0)
        >>> round(float(fixed_point(cfg)), 5), round(float(stiffness(cfg)[1]), 6)
        (0.8, 0.0)
    """
    p_star = jnp.asarray(p_star, dtype=config.eta.dtype)
    cfg0 = jax.tree_util.tree_map(lambda x: x, config)
    zero_beta = _replace(cfg0, beta=jnp.zeros_like(config.beta))
    t = _logit(p_star)
    r_star, r_theta = _calib_terms(_drift_only(zero_beta), t)
    s = p_star * (1.0 - p_star)
    if k_instant is None:
        x = t - _logit(config.p_ref)
        _check_positive("theta* - theta_ref", x, "p_star must lie above p_ref (the reward pushes p up)")
        return _replace(config, beta=r_star / (s * x))
    denom = jnp.asarray(k_instant, dtype=t.dtype) + r_theta + r_star * (2.0 * p_star - 1.0)
    _check_positive("K_0 + dR/dtheta + R*(2p*-1)", denom - 1e-6 * jnp.abs(r_star),
                    "no KL anchor reaches this (p*, K_0)")
    x = r_star / denom
    return _replace(config, beta=r_star / (s * x), p_ref=jax.nn.sigmoid(t - x))


@jax.jit
def _calib_terms(cfg: BanditConfig, t: Array) -> tuple[Array, Array]:
    """(R*, ∂_θR) of the reward-only drift at θ = θ_b = t."""

    def one(th, c):
        return _drift_one(th, th, c), jax.grad(_drift_one, argnums=0)(th, th, c)

    return _batched(one, cfg, t)


def _check_positive(name, value, why):
    arr = np.asarray(value)
    if not np.all(arr > 0):
        raise InvalidValueError(f"{name} must be > 0 ({why}), got {np.ravel(arr)[np.argmin(np.ravel(arr > 0))]!r}")


def _replace(cfg: BanditConfig, **kw) -> BanditConfig:
    import equinox as eqx

    names = list(kw)
    return eqx.tree_at(lambda c: [getattr(c, n) for n in names], cfg, [jnp.asarray(kw[n], dtype=cfg.eta.dtype)
                                                                      for n in names])
