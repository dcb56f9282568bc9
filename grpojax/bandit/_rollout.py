"""Public entry points of the bandit simulators: ``init``/``step`` and canonical run logs.

``rollout_log`` turns a bandit run into the canonical run-log columns (``grpojax.logs.CANONICAL_COLUMNS``), so that bandit
runs with settings that induce a failure mode become labelled logs for the diagnostics.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array

from grpojax._errors import InvalidValueError
from grpojax.bandit._config import BanditConfig, MultiArmConfig
from grpojax.bandit._multi_arm import MultiArmState, multi_arm_init, multi_arm_step
from grpojax.bandit._two_arm import TwoArmState, two_arm_init, two_arm_step

__all__ = ["init", "step", "rollout_log", "LOG_COLUMNS"]

LOG_COLUMNS = ("reward_mean", "reward_std", "frac_zero_std", "eval_reward", "entropy", "kl", "grad_norm", "lr",
               "is_ratio_mean", "is_ratio_max", "clip_frac")
"""Canonical run-log columns written by :func:`rollout_log` (plus ``step``, ``p`` and ``theta``)."""


def init(config: BanditConfig | MultiArmConfig, *, key: Array | None = None) -> TwoArmState | MultiArmState:
    """Initial state (at rest, history filled with the initial logits) of one configuration.

    Args:
        config: :class:`BanditConfig` (two-arm) or :class:`MultiArmConfig`; unbatched (``vmap`` for a batch).
        key: accepted for API uniformity; the initial state is deterministic.
    """
    del key
    if isinstance(config, MultiArmConfig):
        return multi_arm_init(config)
    if isinstance(config, BanditConfig):
        return two_arm_init(config)
    raise InvalidValueError(f"config must be a BanditConfig or MultiArmConfig, got {type(config).__name__}")


def step(state: TwoArmState | MultiArmState, key: Array) -> TwoArmState | MultiArmState:
    """One GRPO step (sample, advantages, surrogate gradient, KL anchor, heavy-ball update)."""
    if isinstance(state, MultiArmState):
        return multi_arm_step(state, key)[0]
    return two_arm_step(state, key)[0]


def _two_arm_metrics(m: dict[str, Array], cfg: BanditConfig) -> dict[str, Array]:
    k, p, theta, theta_b, g = m["k"], m["p"], m["theta"], m["theta_b"], m["g"]
    G = cfg.group_size
    q = k / G
    pm = jax.nn.sigmoid(-theta)
    pb, pbm = jax.nn.sigmoid(theta_b), jax.nn.sigmoid(-theta_b)
    rc, rw = p / pb, pm / pbm
    eps = cfg.clip_eps
    p_ref = cfg.p_ref
    kl = p * (jnp.log(p) - jnp.log(p_ref)) + pm * (jnp.log(pm) - jnp.log1p(-p_ref))
    mixed = (k > 0) & (k < G)
    dt = q.dtype
    clipped = jnp.where(mixed, k * (rc > 1 + eps).astype(dt) + (G - k) * (rw < 1 - eps).astype(dt), 0.0) / G
    return dict(
        reward_mean=q,
        reward_std=jnp.sqrt(q * (1.0 - q)),
        frac_zero_std=(~mixed).astype(q.dtype),
        eval_reward=p,
        entropy=-(p * jnp.log(p) + pm * jnp.log(pm)),
        kl=kl,
        grad_norm=jnp.abs(g),
        lr=jnp.broadcast_to(cfg.eta, q.shape),
        is_ratio_mean=(k * rc + (G - k) * rw) / G,
        is_ratio_max=jnp.maximum(jnp.where(k > 0, rc, 0.0), jnp.where(k < G, rw, 0.0)),
        clip_frac=clipped,
        p=p,
        theta=theta,
    )


@partial(jax.jit, static_argnames=("num_steps",))
def _rollout(config, num_steps: int, key: Array):
    keys = jax.random.split(key, num_steps)
    if isinstance(config, MultiArmConfig):
        st = multi_arm_init(config)

        def body(s, k):
            s2, m = multi_arm_step(s, k)
            m = dict(m, theta=s.theta)
            return s2, m

        _, out = jax.lax.scan(body, st, keys)
        return out
    st = two_arm_init(config)

    def body2(s, k):
        s2, m = two_arm_step(s, k)
        return s2, _two_arm_metrics(m, s.config)

    _, out = jax.lax.scan(body2, st, keys)
    return out


def rollout_log(config: BanditConfig | MultiArmConfig, num_steps: int, *, key: Array) -> dict[str, Array]:
    """Simulate one configuration for ``num_steps`` steps and return canonical run-log columns.

    Args:
        config: an unbatched :class:`BanditConfig` or :class:`MultiArmConfig`.
        num_steps: number of GRPO steps (static).
        key: PRNG key.

    Returns:
        ``dict`` of arrays of length ``num_steps`` (row n describes step n, whose samples come from the
        behaviour policy and whose policy columns describe θ_n before the update):

        - ``step``: 1..num_steps (int32);
        - ``reward_mean``: batch mean training reward; ``reward_std``: mean within-group (population)
          reward std, the std used by the ``grpo`` advantage; ``frac_zero_std``: fraction of groups with
          zero std (all correct or all wrong);
        - ``eval_reward``: exact expected *eval* reward of the current policy (two-arm: p; A-arm: Σ π·eval_reward);
        - ``entropy``, ``kl``: exact entropy (nats) and KL(π_θ‖π_ref) of the current policy, mean over prompts;
        - ``grad_norm``: L2 norm of the total gradient (reward + KL anchor); ``lr``: η;
        - ``is_ratio_mean``/``is_ratio_max``: importance ratio π_θ/π_b over the sampled answers (reported in
          both gradient modes: it measures the staleness); ``clip_frac``: fraction of samples on the PPO-clipped
          side of [1−ε, 1+ε] (in ``stale`` mode: those that *would* be clipped);
        - ``p``: expected training reward of the current policy; ``theta``: current logit (two-arm, ``(T,)``)
          or logits (A-arm, ``(T, P, A)``).

    Example:
        >>> import jax
        >>> log = rollout_log(BanditConfig(0.5, group_size=8, beta=0.1), 20, key=jax.random.key(0))
        >>> sorted(log)[:3], log["reward_mean"].shape
        (['clip_frac', 'entropy', 'eval_reward'], (20,))
    """
    if not isinstance(config, (BanditConfig, MultiArmConfig)):
        raise InvalidValueError(f"config must be a BanditConfig or MultiArmConfig, got {type(config).__name__}")
    if config.batch_shape != ():
        raise InvalidValueError(f"rollout_log takes one configuration, got batch_shape={config.batch_shape}; use vmap")
    num_steps = int(num_steps)
    if num_steps < 1:
        raise InvalidValueError(f"num_steps must be >= 1, got num_steps={num_steps}")
    out = dict(_rollout(config, num_steps, key))
    out["step"] = jnp.arange(1, num_steps + 1, dtype=jnp.int32)
    return out
