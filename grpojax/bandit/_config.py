"""Configuration of the softmax-bandit GRPO simulators (``docs/model/bandit.md``).

A configuration is an :class:`equinox.Module` whose numeric knobs are array leaves (so a batch of
configurations is one module with a leading axis, and ``vmap`` runs them all) and whose modes and buffer
sizes are static fields (one compiled program per combination).
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from grpojax._errors import InvalidValueError
from grpojax._checks import check, check_choice, check_int, is_traced

__all__ = ["BanditConfig", "MultiArmConfig", "ADVANTAGES", "GRADIENTS", "LAGS"]

ADVANTAGES = ("grpo", "dr_grpo", "rloo")
GRADIENTS = ("stale", "importance")
LAGS = ("constant", "periodic")


def _concrete(x: Any) -> np.ndarray | None:
    return None if is_traced(x) else np.asarray(x)


def _check(name: str, value: Any, ok, expected: str) -> Any:
    """Concrete values: ``ValueError`` naming the bad one; traced: ``eqx.error_if`` (use the returned value)."""
    return check(name, value, ok, expected, finite=False)


def _isint(a):
    return a == jnp.round(a)


def _float(x: ArrayLike) -> Array:
    return jnp.asarray(x, dtype=jnp.result_type(float))


def _static_max(name: str, value: Any, given: int | None, minimum: int) -> tuple[Any, int]:
    """The static buffer bound for ``value`` and ``value`` itself (checked against the bound under ``jit``)."""
    if given is not None:
        given = check_int(f"max bound of {name}", given, minimum)
        value = _check(name, value, lambda a: a <= given, f"<= its static bound {given} (max_lag / max_group)")
        return value, given
    arr = _concrete(value)
    if arr is None:
        raise InvalidValueError(f"{name} is traced: pass its static bound (max_lag / max_group) explicitly")
    return value, max(int(np.max(arr)), minimum)


class _Common(eqx.Module):
    eta: Array
    mu: Array
    k_ref: Array
    group_size: Array
    beta: Array
    clip_eps: Array
    adv_eps: Array
    lag: str = eqx.field(static=True)
    advantage: str = eqx.field(static=True)
    gradient: str = eqx.field(static=True)
    max_lag: int = eqx.field(static=True)
    max_group: int = eqx.field(static=True)

    def _init_common(self, eta, mu, k_ref, group_size, beta, clip_eps, adv_eps, lag, advantage, gradient,
                     max_lag, max_group):
        eta = _check("eta", eta, lambda a: jnp.isfinite(a) & (a > 0), "> 0 (learning rate)")
        mu = _check("mu", mu, lambda a: (a >= 0) & (a < 1), "in [0, 1) (heavy-ball momentum)")
        k_ref = _check("k_ref", k_ref, lambda a: (a >= 1) & _isint(a), "an integer >= 1 (refresh interval)")
        group_size = _check("group_size", group_size, lambda a: (a >= 2) & _isint(a),
                            "an integer >= 2 (group size G)")
        beta = _check("beta", beta, lambda a: jnp.isfinite(a) & (a >= 0), ">= 0 (KL coefficient)")
        clip_eps = _check("clip_eps", clip_eps, lambda a: (a > 0) & (a < 1), "in (0, 1) (PPO clip range)")
        adv_eps = _check("adv_eps", adv_eps, lambda a: jnp.isfinite(a) & (a >= 0), ">= 0 (advantage std epsilon)")
        self.lag = check_choice("lag", lag, LAGS)
        self.advantage = check_choice("advantage", advantage, ADVANTAGES)
        self.gradient = check_choice("gradient", gradient, GRADIENTS)
        k_ref, self.max_lag = _static_max("k_ref", k_ref, max_lag, 1)
        group_size, self.max_group = _static_max("group_size", group_size, max_group, 2)
        self.eta = _float(eta)
        self.mu = _float(mu)
        self.k_ref = jnp.asarray(k_ref, dtype=jnp.int32)
        self.group_size = _float(group_size)
        self.beta = _float(beta)
        self.clip_eps = _float(clip_eps)
        self.adv_eps = _float(adv_eps)


_SCALARS = ("eta", "mu", "k_ref", "group_size", "beta", "clip_eps", "adv_eps")


class BanditConfig(_Common):
    """Two-arm softmax bandit (correct arm r = 1, wrong arm r = 0): the exact mean-field reduction.

    The policy is ``p = σ(θ)`` for one logit θ. One GRPO step samples ``k ~ Binomial(G, p_b)`` correct
    answers from the behaviour policy ``p_b``, forms group advantages, the surrogate gradient in logit
    coordinates, subtracts the exact KL-anchor gradient ``β ∂_θ KL(π_θ‖π_ref)`` and applies heavy-ball
    momentum ``v ← μ v + g, θ ← θ + η v``.

    Attributes:
        eta: learning rate η > 0.
        mu: heavy-ball momentum μ ∈ [0, 1).
        k_ref: refresh interval / lag K_ref ≥ 1 (integer).
        group_size: G ≥ 2 (integer-valued; stored as float).
        beta: KL coefficient β ≥ 0.
        p_ref: reference-policy probability of the correct arm, in (0, 1).
        p_init: initial policy probability, in (0, 1).
        clip_eps: PPO clip range ε (``importance`` gradient).
        adv_eps: ε in ``(r − mean)/(std + ε)`` (``grpo`` advantage); 0 divides safely (0/0 := 0).
        lag: ``"constant"`` (behaviour = θ from K_ref steps ago) or ``"periodic"`` (snapshot every K_ref).
        advantage: ``"grpo"``, ``"dr_grpo"`` or ``"rloo"``.
        gradient: ``"stale"`` (score at the behaviour policy, no ratio) or ``"importance"`` (clipped ratio).
        max_lag: static ring-buffer length ≥ max K_ref (default: max of ``k_ref``).
        max_group: static bound ≥ max G (default: max of ``group_size``); G ≤ 64 uses the loop-free sampler.

    All numeric fields broadcast: a grid of configurations is one ``BanditConfig`` with batched leaves.
    Invalid values raise ``ValueError`` naming the value when concrete; a configuration built inside
    ``jit``/``vmap`` from traced values raises ``EqxRuntimeError`` at run time instead (including a traced
    ``k_ref``/``group_size`` above its static bound ``max_lag``/``max_group``, which would otherwise
    overrun the ring buffer or the sampler silently).

    Example:
        >>> cfg = BanditConfig(eta=0.1, mu=0.9, k_ref=4, group_size=16, beta=1.0)
        >>> cfg.max_lag, cfg.advantage
        (4, 'grpo')
    """

    p_ref: Array
    p_init: Array

    def __init__(
        self,
        eta: ArrayLike,
        mu: ArrayLike = 0.0,
        k_ref: ArrayLike = 1,
        group_size: ArrayLike = 8,
        *,
        beta: ArrayLike = 0.0,
        p_ref: ArrayLike = 0.5,
        p_init: ArrayLike = 0.5,
        clip_eps: ArrayLike = 0.2,
        adv_eps: ArrayLike = 0.0,
        lag: str = "constant",
        advantage: str = "grpo",
        gradient: str = "stale",
        max_lag: int | None = None,
        max_group: int | None = None,
    ):
        self._init_common(eta, mu, k_ref, group_size, beta, clip_eps, adv_eps, lag, advantage, gradient,
                          max_lag, max_group)
        p_ref = _check("p_ref", p_ref, lambda a: (a > 0) & (a < 1), "in (0, 1) (reference probability)")
        p_init = _check("p_init", p_init, lambda a: (a > 0) & (a < 1), "in (0, 1) (initial probability)")
        self.p_ref = _float(p_ref)
        self.p_init = _float(p_init)

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast shape of the numeric fields (``()`` for a single configuration)."""
        return jnp.broadcast_shapes(*(jnp.shape(getattr(self, n)) for n in _SCALARS + ("p_ref", "p_init")))

    def broadcast(self) -> "BanditConfig":
        """Every numeric leaf broadcast to :attr:`batch_shape` (what ``vmap`` over configurations needs)."""
        shape = self.batch_shape
        return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape), self)


class MultiArmConfig(_Common):
    """A-arm, many-prompt softmax bandit (mean field only approximate).

    Each of P prompts has its own softmax over A arms (full logits, shape ``(P, A)``) and Bernoulli
    rewards with per-arm success probabilities ``reward_probs``. A GRPO step draws multinomial arm counts
    ``n ~ Multinomial(G, π_b)`` and rewarded counts ``m_a ~ Binomial(n_a, r_a)`` per prompt. With A = 2,
    reward_probs = (1, 0) this is the two-arm bandit with logit difference θ₁ − θ₀ and learning rate 2η.

    Attributes (beyond those of :class:`BanditConfig`):
        reward_probs: ``(P, A)`` training-reward probabilities in [0, 1].
        eval_reward: ``(P, A)`` true-target reward per arm (defaults to ``reward_probs``); differs from it
            in reward-hacking set-ups where a gameable proxy arm pays the training reward.
        ref_logits: ``(P, A)`` reference-policy logits (default zeros, uniform).
        init_logits: ``(P, A)`` initial logits (default zeros).
    """

    reward_probs: Array
    eval_reward: Array
    ref_logits: Array
    init_logits: Array

    def __init__(
        self,
        eta: ArrayLike,
        mu: ArrayLike = 0.0,
        k_ref: ArrayLike = 1,
        group_size: ArrayLike = 8,
        *,
        reward_probs: ArrayLike,
        eval_reward: ArrayLike | None = None,
        ref_logits: ArrayLike | None = None,
        init_logits: ArrayLike | None = None,
        beta: ArrayLike = 0.0,
        clip_eps: ArrayLike = 0.2,
        adv_eps: ArrayLike = 0.0,
        lag: str = "constant",
        advantage: str = "grpo",
        gradient: str = "stale",
        max_lag: int | None = None,
        max_group: int | None = None,
    ):
        self._init_common(eta, mu, k_ref, group_size, beta, clip_eps, adv_eps, lag, advantage, gradient,
                          max_lag, max_group)
        r = _float(reward_probs)
        if r.ndim == 1:
            r = r[None, :]
        if r.ndim < 2 or r.shape[-1] < 2:
            raise InvalidValueError(f"reward_probs must have shape (P, A) with A >= 2 arms, got shape {r.shape}")
        r = _check("reward_probs", r, lambda a: (a >= 0) & (a <= 1), "in [0, 1] (reward probabilities)")
        ev = r if eval_reward is None else jnp.broadcast_to(_float(eval_reward), r.shape)
        ev = _check("eval_reward", ev, jnp.isfinite, "finite")
        ref = jnp.zeros_like(r) if ref_logits is None else jnp.broadcast_to(_float(ref_logits), r.shape)
        ini = jnp.zeros_like(r) if init_logits is None else jnp.broadcast_to(_float(init_logits), r.shape)
        ref = _check("ref_logits", ref, jnp.isfinite, "finite")
        ini = _check("init_logits", ini, jnp.isfinite, "finite")
        self.reward_probs, self.eval_reward, self.ref_logits, self.init_logits = r, ev, ref, ini

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """Broadcast shape of the per-configuration fields (``()`` for a single configuration)."""
        shapes = [jnp.shape(getattr(self, n)) for n in _SCALARS]
        shapes += [jnp.shape(getattr(self, n))[:-2] for n in ("reward_probs", "eval_reward", "ref_logits",
                                                                "init_logits")]
        return jnp.broadcast_shapes(*shapes)

    def broadcast(self) -> "MultiArmConfig":
        """Every leaf broadcast to :attr:`batch_shape` (+ ``(P, A)`` for the per-arm fields)."""
        shape = self.batch_shape
        pa = self.reward_probs.shape[-2:]

        scal = {n: jnp.broadcast_to(getattr(self, n), shape) for n in _SCALARS}
        arms = {n: jnp.broadcast_to(getattr(self, n), shape + pa) for n in ("reward_probs", "eval_reward",
                                                                            "ref_logits", "init_logits")}
        return eqx.tree_at(lambda c: [getattr(c, n) for n in _SCALARS + tuple(arms)], self,
                           [scal[n] for n in _SCALARS] + list(arms.values()))

    @property
    def num_prompts(self) -> int:
        return self.reward_probs.shape[-2]

    @property
    def num_arms(self) -> int:
        return self.reward_probs.shape[-1]
