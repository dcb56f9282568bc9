"""Two-arm softmax-bandit GRPO: the exact mean-field reduction (``docs/model/bandit.md``).

Policy ``π_θ(correct) = p = σ(θ)``, score ``∂_θ log π = 1 − p`` (correct) and ``−p`` (wrong). A group of
G answers drawn from the behaviour policy ``p_b`` has ``k ~ Binomial(G, p_b)`` correct ones, q = k/G.
Group advantages are mean-centred, so ``Σ_i A_i = 0`` and, with ``A₊`` the advantage of a correct answer,
the stale surrogate gradient is ``(1/G) Σ_i A_i ∂_θ log π(a_i) = k A₊ / G =: W(k)`` for *any* score point:

    grpo     A₊ = (1 − q)/(s + ε),  s = sqrt(q(1 − q))     W = q(1 − q)/(s + ε)   (0 when s = 0)
    dr_grpo  A₊ = 1 − q                                     W = q(1 − q)
    rloo     A₊ = 1 − (k − 1)/(G − 1) = (G − k)/(G − 1)      W = q(1 − q)·G/(G − 1)

``importance`` replaces the score by the gradient of the PPO surrogate ``min(ρA, clip(ρ, 1±ε)A)`` with
ρ = π_θ(a)/π_b(a) at the current θ: correct answers (A₊ ≥ 0) stop contributing when ρ_c = p/p_b > 1 + ε,
wrong ones (A₋ ≤ 0) when ρ_w = (1 − p)/(1 − p_b) < 1 − ε, giving

    g_imp = W(k) · p(1 − p) · [1{ρ_c ≤ 1+ε}/p_b + 1{ρ_w ≥ 1−ε}/(1 − p_b)]     (= W at p = p_b).

The KL anchor is exact at the current θ: ``∂_θ KL(π_θ‖π_ref) = p(1 − p)(θ − θ_ref)``; the update ascends
``J − β KL``: ``g = g_reward − β p(1 − p)(θ − θ_ref)``; then ``v ← μ v + g``, ``θ ← θ + η v``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array

from grpojax.bandit._binomial import binomial, binomial_counter
from grpojax.bandit._config import BanditConfig

__all__ = ["TwoArmState", "advantage_mass", "reward_gradient", "kl_gradient", "behaviour_logit",
           "two_arm_init", "two_arm_step", "two_arm_step_counter", "two_arm_step_batch"]


class TwoArmState(NamedTuple):
    """State of the two-arm simulator (all leaves may carry a leading batch axis under ``vmap``).

    Attributes:
        theta: current logit θ_n, shape ``()``.
        velocity: heavy-ball velocity v_n.
        history: ``(max_lag,)`` ring buffer of past logits (constant lag: θ_{n−L..n−1} at index m mod L;
            periodic: slot 0 holds the behaviour snapshot).
        step: step counter n (int32).
        theta_ref: logit of the KL anchor, logit(p_ref) (fixed by :func:`two_arm_init`, so that the hot
            loop does not recompute two logarithms per step).
        config: the :class:`BanditConfig`.
    """

    theta: Array
    velocity: Array
    history: Array
    step: Array
    theta_ref: Array
    config: BanditConfig


_UNROLL_MAX_LAG = 64


def _pq(theta: Array) -> tuple[Array, Array]:
    """(σ(θ), σ(−θ)) from one exponential, both to full relative precision."""
    e = jnp.exp(-jnp.abs(theta))
    big = 1.0 / (1.0 + e)
    small = e * big
    pos = theta >= 0
    return jnp.where(pos, big, small), jnp.where(pos, small, big)


def _logit(p: Array) -> Array:
    return jnp.log(p) - jnp.log1p(-p)


def advantage_mass(k: Array, config: BanditConfig) -> Array:
    """W(k) = k A₊ / G, the stale gradient in logit coordinates for k correct out of G."""
    G = config.group_size
    q = k / G
    qq = q * (1.0 - q)
    if config.advantage == "grpo":
        s = jnp.sqrt(qq)
        den = s + config.adv_eps
        return jnp.where(qq > 0, qq / jnp.where(qq > 0, den, 1.0), 0.0)
    if config.advantage == "dr_grpo":
        return qq
    return qq * G / (G - 1.0)


def reward_gradient(k: Array, theta: Array, theta_b: Array, config: BanditConfig) -> Array:
    """Surrogate reward gradient ∂_θ for k correct answers drawn at θ_b (see module docstring)."""
    W = advantage_mass(k, config)
    if config.gradient == "stale":
        return W
    p, pm = _pq(theta)
    pb, pbm = _pq(theta_b)
    rc, rw = p / pb, pm / pbm
    eps = config.clip_eps
    keep_c = (rc <= 1.0 + eps).astype(p.dtype)
    keep_w = (rw >= 1.0 - eps).astype(p.dtype)
    return W * p * pm * (keep_c / pb + keep_w / pbm)


def kl_gradient(theta: Array, config: BanditConfig, theta_ref: Array | None = None) -> Array:
    """∂_θ KL(π_θ‖π_ref) = p(1 − p)(θ − θ_ref) for the two-arm policy (θ_ref = logit(p_ref) unless given)."""
    p, pm = _pq(theta)
    theta_ref = _logit(config.p_ref) if theta_ref is None else theta_ref
    return p * pm * (theta - theta_ref)


def two_arm_init(config: BanditConfig) -> TwoArmState:
    """State at rest at θ_0 = logit(p_init) with the whole history equal to θ_0."""
    theta0 = _logit(config.p_init)
    hist = jnp.broadcast_to(theta0[..., None], theta0.shape + (config.max_lag,))
    theta_ref = jnp.broadcast_to(_logit(config.p_ref), theta0.shape)
    return TwoArmState(theta0, jnp.zeros_like(theta0), hist, jnp.zeros(theta0.shape, jnp.int32), theta_ref, config)


def behaviour_logit(state: TwoArmState) -> tuple[Array, Array]:
    """(θ_b for this step, history after storing what the lag model needs). Unbatched state.

    The ring buffer is read and written through one-hot masks over its ``max_lag`` slots (no gather or
    scatter), which vectorises well when every configuration of a batch has its own K_ref.
    """
    cfg = state.config
    n, L = state.step, cfg.max_lag
    slots = jnp.arange(L, dtype=n.dtype)
    if cfg.lag == "constant":
        read = jnp.mod(n - cfg.k_ref, L)
        if L <= _UNROLL_MAX_LAG:  # a sum of L selects fuses with the step; a reduction would not
            theta_b = sum(jnp.where(read == j, state.history[j], 0.0) for j in range(L))
        else:
            theta_b = jnp.sum(jnp.where(slots == read, state.history, 0.0))
        hist = jnp.where(slots == jnp.mod(n, L), state.theta, state.history)
    else:
        theta_b = jnp.where(jnp.mod(n, cfg.k_ref) == 0, state.theta, state.history[0])
        hist = state.history.at[0].set(theta_b)
    return theta_b, hist


def _update(state: TwoArmState, theta_b: Array, hist: Array, k: Array) -> tuple[TwoArmState, dict[str, Array]]:
    cfg = state.config
    theta = state.theta
    g_r = reward_gradient(k, theta, theta_b, cfg)
    g = g_r - cfg.beta * kl_gradient(theta, cfg, state.theta_ref)
    v = cfg.mu * state.velocity + g
    new = TwoArmState(theta + cfg.eta * v, v, hist, state.step + 1, state.theta_ref, cfg)
    metrics = dict(k=k, p=jax.nn.sigmoid(theta), theta=theta, theta_b=theta_b, g=g)
    return new, metrics


def two_arm_step(state: TwoArmState, key: Array) -> tuple[TwoArmState, dict[str, Array]]:
    """One GRPO step of an (unbatched) two-arm state; returns the new state and per-step metrics."""
    cfg = state.config
    theta_b, hist = behaviour_logit(state)
    k = binomial(key, cfg.group_size, jax.nn.sigmoid(theta_b), max_n=cfg.max_group)
    return _update(state, theta_b, hist, k)


def two_arm_step_counter(state: TwoArmState, key: Array, counter: Array) -> TwoArmState:
    """:func:`two_arm_step` with counter-based randomness (:func:`binomial_counter`)."""
    cfg = state.config
    theta_b, hist = behaviour_logit(state)
    k = binomial_counter(key, counter, cfg.group_size, jax.nn.sigmoid(theta_b), max_n=cfg.max_group)
    return _update(state, theta_b, hist, k)[0]


def two_arm_step_batch(state: TwoArmState, key: Array, counter: Array) -> TwoArmState:
    """:func:`two_arm_step_counter` for a state with a leading batch axis (the sweep's hot loop).

    Identical, row by row, to ``jax.vmap(two_arm_step_counter, (0, None, 0))``; the count sampler sees the
    whole batch, so its rejection loop runs on the compacted rows that need it (:func:`binomial_counter`).
    """
    cfg = state.config
    theta_b, hist = jax.vmap(behaviour_logit)(state)
    k = binomial_counter(key, counter, cfg.group_size, jax.nn.sigmoid(theta_b), max_n=cfg.max_group)
    return jax.vmap(_update)(state, theta_b, hist, k)[0]
