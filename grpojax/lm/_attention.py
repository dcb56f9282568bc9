"""Grouped-query self-attention with rotary embeddings and an optional KV cache.

For query ``t`` and key slot ``s``: ``a_ts = softmax_s(q_t . k_s / sqrt(d) + m_ts)`` with ``m_ts = 0`` where
the key is visible (causal and not padding) and the most negative float32 elsewhere, so that a query with
no visible key (a pad query) gets a finite, ignored output instead of NaN. ``H`` query heads share ``K``
key/value heads in groups of ``H / K``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ._config import ModelConfig
from ._layers import Linear
from ._rope import apply_rope

__all__ = ["Attention"]


class Attention(nnx.Module):
    """Multi-head attention block ``q_proj/k_proj/v_proj/o_proj`` (Hugging Face names)."""

    def __init__(self, config: ModelConfig, *, dtype, param_dtype, rngs: nnx.Rngs):
        c = config
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.q_proj = Linear(c.hidden_size, c.num_attention_heads * c.head_dim, spec=("data", "model"),
                             use_bias=c.attention_bias, **kw)
        self.k_proj = Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, spec=("data", "model"),
                             use_bias=c.attention_bias, **kw)
        self.v_proj = Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, spec=("data", "model"),
                             use_bias=c.attention_bias, **kw)
        self.o_proj = Linear(c.num_attention_heads * c.head_dim, c.hidden_size, spec=("model", "data"), **kw)
        self.num_heads = c.num_attention_heads
        self.num_kv_heads = c.num_key_value_heads
        self.head_dim = c.head_dim
        self.dtype = dtype

    def __call__(self, x, cos, sin, mask, kv=None, end=None):
        """Attend.

        Args:
            x: ``(B, T, D)`` hidden states.
            cos, sin: ``(B, T, d)`` rotary tables for the query positions.
            mask: ``(B, T, S)`` bool, key slot ``s`` visible to query ``t`` (``S = T`` without cache).
            kv: ``None`` or this layer's cached ``(k, v)``, each ``(B, S, K, d)``.
            end: int32 scalar, the cache slot where this call's ``T`` keys are written.

        Returns:
            ``(y (B, T, D), (k, v))`` -- the updated cache entries (or this call's keys/values).
        """
        B, T, _ = x.shape
        H, K, d = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).reshape(B, T, H, d)
        k = self.k_proj(x).reshape(B, T, K, d)
        v = self.v_proj(x).reshape(B, T, K, d)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        if kv is not None:
            k_c, v_c = kv
            zero = jnp.zeros((), jnp.int32)
            k = jax.lax.dynamic_update_slice(k_c, k.astype(k_c.dtype), (zero, end, zero, zero))
            v = jax.lax.dynamic_update_slice(v_c, v.astype(v_c.dtype), (zero, end, zero, zero))
        qg = q.reshape(B, T, K, H // K, d)
        scores = jnp.einsum("btkgd,bskd->bkgts", qg, k.astype(q.dtype), preferred_element_type=jnp.float32)
        scores = scores * jnp.float32(d**-0.5)
        scores = jnp.where(mask[:, None, None, :, :], scores, jnp.finfo(jnp.float32).min)
        probs = jax.nn.softmax(scores, axis=-1).astype(self.dtype)
        out = jnp.einsum("bkgts,bskd->btkgd", probs, v.astype(self.dtype))
        y = self.o_proj(out.reshape(B, T, H * d))
        return y, (k, v)
