"""Key/value cache for incremental decoding.

The cache holds ``S`` slots per sequence. All rows of a batch write to the same slot index (``end``):
with left-padded prompts of common length ``P`` the prompt fills slots ``[0, P)`` and decode step ``n``
writes slot ``P + n``. Which slots hold real (non-pad) keys is tracked per row in ``mask``; the
rotary position of a token is passed in by the caller and is independent of its slot.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from ._config import ModelConfig

from grpojax._errors import InvalidValueError

__all__ = ["KVCache", "init_cache"]


class KVCache(NamedTuple):
    """Per-layer keys and values plus the slot mask.

    Attributes:
        k: tuple of ``L`` arrays ``(B, S, K, d)`` -- rotated keys per layer.
        v: tuple of ``L`` arrays ``(B, S, K, d)`` -- values per layer.
        mask: ``(B, S)`` bool -- slot holds a real (non-pad) token.
        end: int32 scalar -- number of slots written so far (next write index).
    """

    k: tuple[jnp.ndarray, ...]
    v: tuple[jnp.ndarray, ...]
    mask: jnp.ndarray
    end: jnp.ndarray

    @property
    def max_len(self) -> int:
        """Number of slots ``S``."""
        return self.mask.shape[1]


def init_cache(config: ModelConfig, batch: int, max_len: int, *, dtype=jnp.float32) -> KVCache:
    """An empty cache with ``max_len`` slots for ``batch`` rows.

    Args:
        config: model configuration (layers, kv heads, head width).
        batch: rows ``B``.
        max_len: slots ``S`` (prompt length + new tokens).
        dtype: storage dtype of keys/values (use the model's compute dtype).
    """
    if batch < 1 or max_len < 1:
        raise InvalidValueError(f"batch={batch} and max_len={max_len} must be >= 1")
    shape = (batch, max_len, config.num_key_value_heads, config.head_dim)
    zeros = tuple(jnp.zeros(shape, dtype) for _ in range(config.num_hidden_layers))
    return KVCache(
        k=zeros,
        v=tuple(jnp.zeros(shape, dtype) for _ in range(config.num_hidden_layers)),
        mask=jnp.zeros((batch, max_len), jnp.bool_),
        end=jnp.zeros((), jnp.int32),
    )
