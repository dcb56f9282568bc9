"""Group-relative advantages for GRPO and its variants.

For a group of ``G`` rewards ``r_1..r_G`` drawn for the same prompt:

- ``grpo``:    ``A_i = (r_i - mean(r)) / (std(r) + eps)`` (population std, as in DeepSeekMath / TRL)
- ``dr_grpo``: ``A_i = r_i - mean(r)`` (Dr. GRPO: no std normalisation)
- ``rloo``:    ``A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean(r))`` (leave-one-out baseline)

A group whose rewards are all equal gets zero advantage in every mode (never NaN).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array

from grpojax._errors import InvalidValueError

__all__ = ["ADVANTAGE_MODES", "group_advantages"]

ADVANTAGE_MODES = ("grpo", "dr_grpo", "rloo")


def group_advantages(rewards: Array, mode: str = "grpo", *, eps: float = 1e-4) -> Array:
    """Advantages of ``(B, G)`` grouped rewards.

    Args:
      rewards: ``(B, G)`` rewards, one row per prompt.
      mode: one of ``ADVANTAGE_MODES``.
      eps: added to the group std in ``grpo`` mode.

    Returns:
      ``(B, G)`` advantages in the dtype of ``rewards`` (float32 if integer).

    Raises:
      ValueError: for an unknown mode, a non-2-D input, or ``G < 2`` in ``rloo`` mode.
    """
    if mode not in ADVANTAGE_MODES:
        raise InvalidValueError(f"advantage mode {mode!r}; expected one of {ADVANTAGE_MODES}")
    r = jnp.asarray(rewards)
    if r.ndim != 2:
        raise InvalidValueError(f"rewards must be (B, G); got shape {r.shape}")
    if not jnp.issubdtype(r.dtype, jnp.floating):
        r = r.astype(jnp.float32)
    g = r.shape[1]
    centred = r - r.mean(axis=1, keepdims=True)
    if mode == "grpo":
        std = r.std(axis=1, keepdims=True)
        adv = centred / (std + eps)
        # an all-equal group has centred == 0 exactly; force 0 also when eps == 0
        return jnp.where(std > 0, adv, jnp.zeros_like(adv))
    if mode == "dr_grpo":
        return centred
    if g < 2:
        raise InvalidValueError(f"rloo needs a group size G >= 2; got G={g}")
    return centred * (g / (g - 1))
