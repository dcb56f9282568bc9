"""A-arm, many-prompt softmax-bandit GRPO (where the one-number mean field is only approximate).

Per prompt, logits θ ∈ R^A, π = softmax(θ). A group of G draws from the behaviour policy π_b has arm
counts n ~ Multinomial(G, π_b) (sampled as A − 1 conditional binomials) and rewarded counts
m_a ~ Binomial(n_a, r_a). With R = Σ m_a, q = R/G, s = sqrt(q(1 − q)) and the advantage scale
c = 1/(s + ε) (grpo), 1 (dr_grpo), G/(G − 1) (rloo), the positive and negative advantage mass per arm is

    S⁺_a = c m_a (1 − q),   S⁻_a = −c (n_a − m_a) q,      Σ_a (S⁺_a + S⁻_a) = 0.

``stale``: g = (S⁺ + S⁻)/G (score at π_b; the −π Σ term vanishes). ``importance``: with ρ_a = π_θ(a)/π_b(a),
w_a = ρ_a [S⁺_a 1{ρ_a ≤ 1+ε} + S⁻_a 1{ρ_a ≥ 1−ε}] and g = (w − π_θ Σ_a w_a)/G. KL anchor (exact):
∂KL(π_θ‖π_ref)/∂θ = π ⊙ (L − Σ π L), L = log π − log π_ref. Each prompt's logits get their own group's
gradient (the loss is summed over prompts), so A = 2, r = (1, 0) is the two-arm bandit with 2η.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array

from grpojax.bandit._binomial import binomial
from grpojax.bandit._config import MultiArmConfig

__all__ = ["MultiArmState", "multi_arm_init", "multi_arm_step", "multinomial"]


class MultiArmState(NamedTuple):
    """State of the A-arm simulator: logits ``(P, A)``, velocity, history ``(max_lag, P, A)``, step, config."""

    theta: Array
    velocity: Array
    history: Array
    step: Array
    config: MultiArmConfig


def multinomial(key: Array, n: Array, probs: Array, *, max_n: int | None = None) -> Array:
    """Exact multinomial counts ``(..., A)`` by conditional binomials (cost independent of n)."""
    A = probs.shape[-1]
    keys = jax.random.split(key, A - 1)
    remaining = jnp.broadcast_to(jnp.asarray(n, probs.dtype), probs.shape[:-1])
    mass = jnp.ones_like(remaining)
    counts = []
    for a in range(A - 1):
        pa = jnp.clip(probs[..., a] / jnp.maximum(mass, 1e-30), 0.0, 1.0)
        c = binomial(keys[a], remaining, pa, max_n=max_n)
        counts.append(c)
        remaining = remaining - c
        mass = mass - probs[..., a]
    counts.append(remaining)
    return jnp.stack(counts, axis=-1)


def multi_arm_init(config: MultiArmConfig) -> MultiArmState:
    """State at rest at ``init_logits`` with the whole history equal to them."""
    th = config.init_logits
    hist = jnp.broadcast_to(th, (config.max_lag,) + th.shape)
    return MultiArmState(th, jnp.zeros_like(th), hist, jnp.zeros((), jnp.int32), config)


def _behaviour(state: MultiArmState):
    cfg = state.config
    n, L = state.step, cfg.max_lag
    if cfg.lag == "constant":
        theta_b = state.history[jnp.mod(n - cfg.k_ref, L)]
        hist = state.history.at[jnp.mod(n, L)].set(state.theta)
    else:
        theta_b = jnp.where(jnp.mod(n, cfg.k_ref) == 0, state.theta, state.history[0])
        hist = state.history.at[0].set(theta_b)
    return theta_b, hist


def multi_arm_step(state: MultiArmState, key: Array) -> tuple[MultiArmState, dict[str, Array]]:
    """One GRPO step of an unbatched A-arm state; returns the new state and per-step metrics."""
    cfg = state.config
    theta = state.theta
    theta_b, hist = _behaviour(state)
    logpi = jax.nn.log_softmax(theta, axis=-1)
    logpb = jax.nn.log_softmax(theta_b, axis=-1)
    pi, pb = jnp.exp(logpi), jnp.exp(logpb)
    G = cfg.group_size
    k_arm, k_rew = jax.random.split(key)
    n = multinomial(k_arm, G, pb, max_n=cfg.max_group)
    m = binomial(k_rew, n, cfg.reward_probs, max_n=cfg.max_group)
    R = jnp.sum(m, axis=-1, keepdims=True)
    q = R / G
    qq = q * (1.0 - q)
    s = jnp.sqrt(qq)
    if cfg.advantage == "grpo":
        c = jnp.where(qq > 0, 1.0 / jnp.where(qq > 0, s + cfg.adv_eps, 1.0), 0.0)
    elif cfg.advantage == "dr_grpo":
        c = jnp.ones_like(q)
    else:
        c = jnp.broadcast_to(G / (G - 1.0), q.shape)
    s_pos = c * m * (1.0 - q)
    s_neg = -c * (n - m) * q
    rho = jnp.exp(logpi - logpb)
    eps = cfg.clip_eps
    clip_pos = rho > 1.0 + eps
    clip_neg = rho < 1.0 - eps
    if cfg.gradient == "stale":
        g_r = (s_pos + s_neg) / G
    else:
        w = rho * (s_pos * (~clip_pos).astype(s_pos.dtype) + s_neg * (~clip_neg).astype(s_neg.dtype))
        g_r = (w - pi * jnp.sum(w, axis=-1, keepdims=True)) / G
    logref = jax.nn.log_softmax(cfg.ref_logits, axis=-1)
    L = logpi - logref
    kl_grad = pi * (L - jnp.sum(pi * L, axis=-1, keepdims=True))
    g = g_r - cfg.beta * kl_grad
    v = cfg.mu * state.velocity + g
    new = MultiArmState(theta + cfg.eta * v, v, hist, state.step + 1, cfg)
    P = theta.shape[0]
    pos = (m > 0) & (c * (1.0 - q) > 0)
    neg = ((n - m) > 0) & (c * q > 0)
    clipped = jnp.sum(m * (clip_pos & pos).astype(m.dtype) + (n - m) * (clip_neg & neg).astype(m.dtype))
    metrics = dict(
        reward_mean=jnp.mean(q),
        reward_std=jnp.mean(s),
        frac_zero_std=jnp.mean((qq <= 0).astype(q.dtype)),
        eval_reward=jnp.mean(jnp.sum(pi * cfg.eval_reward, axis=-1)),
        entropy=jnp.mean(-jnp.sum(pi * logpi, axis=-1)),
        kl=jnp.mean(jnp.sum(pi * L, axis=-1)),
        grad_norm=jnp.sqrt(jnp.sum(g * g)),
        lr=cfg.eta,
        is_ratio_mean=jnp.sum(n * rho) / (P * G),
        is_ratio_max=jnp.max(jnp.where(n > 0, rho, 0.0)),
        clip_frac=clipped / (P * G),
        p=jnp.mean(jnp.sum(pi * cfg.reward_probs, axis=-1)),
    )
    return new, metrics
