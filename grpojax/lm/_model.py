"""Qwen2 / Llama decoder-only causal language model in Flax NNX.

``h_0 = E[tokens]``; each block ``h <- h + Attn(RMSNorm(h))``, ``h <- h + MLP(RMSNorm(h))``; logits
``RMSNorm(h_L) W_out`` with ``W_out = E^T`` when embeddings are tied. Module attribute names mirror the
Hugging Face parameter names (``embed_tokens``, ``layers[i].self_attn.q_proj`` ...), which keeps the
weight-mapping table in :mod:`grpojax.lm._weights` mechanical.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ._attention import Attention
from ._cache import KVCache
from ._config import ModelConfig
from ._layers import MLP, Embed, Linear, RMSNorm
from ._rope import rope_cos_sin

from grpojax._errors import InvalidValueError

__all__ = ["CausalLM", "DecoderLayer", "init_model", "left_pad_positions"]


def left_pad_positions(mask: jnp.ndarray) -> jnp.ndarray:
    """Rotary positions for a (left-)padded batch: ``cumsum(mask) - 1`` clipped at 0, int32 ``(B, T)``."""
    return jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=-1, dtype=jnp.int32) - 1, 0).astype(jnp.int32)


class DecoderLayer(nnx.Module):
    """Pre-norm transformer block: attention then SwiGLU MLP, each with a residual connection."""

    def __init__(self, config: ModelConfig, *, dtype, param_dtype, rngs: nnx.Rngs):
        c = config
        self.input_layernorm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.self_attn = Attention(c, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps, dtype=dtype,
                                                param_dtype=param_dtype)
        self.mlp = MLP(c.hidden_size, c.intermediate_size, dtype=dtype, param_dtype=param_dtype, rngs=rngs)

    def __call__(self, h, cos, sin, mask, kv=None, end=None):
        a, kv = self.self_attn(self.input_layernorm(h), cos, sin, mask, kv, end)
        h = h + a
        h = h + self.mlp(self.post_attention_layernorm(h))
        return h, kv


class CausalLM(nnx.Module):
    """Decoder-only language model (Qwen2 and Llama families).

    Args:
        config: architecture (see :class:`ModelConfig`, usually ``ModelConfig.from_hf(path)``).
        rngs: random streams for the (normal(0, 0.02)) initialisation.
        dtype: compute dtype of activations (``jnp.float32`` or ``jnp.bfloat16``); logits are float32.
        param_dtype: storage dtype of the parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> from flax import nnx
        >>> from grpojax.lm import CausalLM, ModelConfig
        >>> cfg = ModelConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        ...                   num_attention_heads=2, num_key_value_heads=1, head_dim=8)
        >>> model = CausalLM(cfg, rngs=nnx.Rngs(0))
        >>> tokens = jnp.zeros((2, 5), jnp.int32)
        >>> logits, _ = model(tokens, jnp.broadcast_to(jnp.arange(5, dtype=jnp.int32), (2, 5)))
        >>> logits.shape, logits.dtype
        ((2, 5, 32), dtype('float32'))
    """

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs, dtype=jnp.float32, param_dtype=jnp.float32):
        c = config
        self.config = c
        self.dtype = dtype
        self.param_dtype = param_dtype
        self.embed_tokens = Embed(c.vocab_size, c.hidden_size, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.layers = nnx.List(
            [DecoderLayer(c, dtype=dtype, param_dtype=param_dtype, rngs=rngs) for _ in range(c.num_hidden_layers)]
        )
        self.norm = RMSNorm(c.hidden_size, eps=c.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        if c.tie_word_embeddings:
            self.lm_head = None
        else:
            self.lm_head = Linear(c.hidden_size, c.vocab_size, spec=("data", "model"), dtype=dtype,
                                  param_dtype=param_dtype, rngs=rngs)

    def __call__(
        self,
        tokens: jnp.ndarray,
        positions: jnp.ndarray,
        *,
        attention_mask: jnp.ndarray | None = None,
        cache: KVCache | None = None,
        last_only: bool = False,
    ) -> tuple[jnp.ndarray, KVCache | None]:
        """Forward pass.

        Args:
            tokens: ``(B, T)`` int32 token ids.
            positions: ``(B, T)`` int32 rotary positions (``left_pad_positions(mask)`` for left padding).
            attention_mask: ``(B, T)`` bool, ``False`` marks padding (never attended to); ``None`` = all real.
            cache: ``None`` (plain causal attention over the ``T`` tokens) or a :class:`KVCache`; the ``T``
                new keys are written at slots ``[cache.end, cache.end + T)`` and every query attends to the
                real cached slots up to its own.
            last_only: compute logits for the last position only (``(B, 1, V)``): a prefill needs no more,
                and ``B x T x V`` float32 logits are large for 150k-token vocabularies.

        Returns:
            ``(logits (B, T, V) float32, cache)`` -- the updated cache, or ``None`` when none was given.
        """
        tokens = jnp.asarray(tokens)
        if tokens.ndim != 2 or positions.shape != tokens.shape:
            raise InvalidValueError(f"tokens {tokens.shape} and positions {positions.shape} must both be (B, T)")
        B, T = tokens.shape
        if attention_mask is None:
            attention_mask = jnp.ones((B, T), jnp.bool_)
        elif attention_mask.shape != (B, T):
            raise InvalidValueError(f"attention_mask has shape {attention_mask.shape}, expected {(B, T)}")
        attention_mask = attention_mask.astype(jnp.bool_)
        if cache is None:
            h = self.hidden_states(tokens, positions, attention_mask)
            new_cache = None
        else:
            h = self.embed_tokens(tokens.astype(jnp.int32))
            cos, sin = rope_cos_sin(self.config, positions.astype(jnp.int32), self.dtype)
            t_idx = jnp.arange(T, dtype=jnp.int32)
            if len(cache.k) != len(self.layers) or cache.mask.shape[0] != B:
                raise InvalidValueError(
                    f"cache has {len(cache.k)} layers and batch {cache.mask.shape[0]}; "
                    f"expected {len(self.layers)} and {B}"
                )
            S = cache.max_len
            end = cache.end.astype(jnp.int32)
            kv_mask = jnp.asarray(cache.mask)
            kv_mask = _update_cols(kv_mask, attention_mask, end)
            s_idx = jnp.arange(S, dtype=jnp.int32)
            causal = s_idx[None, :] <= (end + t_idx)[:, None]  # (T, S)
            mask = causal[None] & kv_mask[:, None, :]
            ks, vs = [], []
            for layer, k_c, v_c in zip(self.layers, cache.k, cache.v):
                h, (k, v) = layer(h, cos, sin, mask, (k_c, v_c), end)
                ks.append(k)
                vs.append(v)
            new_cache = KVCache(k=tuple(ks), v=tuple(vs), mask=kv_mask, end=end + jnp.int32(T))
        if last_only:
            h = h[:, -1:]
        return self.logits_from_hidden(h), new_cache

    def hidden_states(self, tokens: jnp.ndarray, positions: jnp.ndarray, attention_mask: jnp.ndarray) -> jnp.ndarray:
        """Last decoder layer's output ``(B, T, D)`` (before the final norm), no cache.

        This is what ``__call__`` turns into logits. A loss that needs the logits of a few positions only
        slices it first and calls :meth:`logits_from_hidden` on the slice (for a large vocabulary the output
        projection is the largest product of the model).
        """
        tokens = jnp.asarray(tokens)
        T = tokens.shape[1]
        attention_mask = jnp.asarray(attention_mask).astype(jnp.bool_)
        h = self.embed_tokens(tokens.astype(jnp.int32))
        cos, sin = rope_cos_sin(self.config, positions.astype(jnp.int32), self.dtype)
        t_idx = jnp.arange(T, dtype=jnp.int32)
        causal = t_idx[None, :] <= t_idx[:, None]  # (T, T): key s <= query t
        mask = causal[None] & attention_mask[:, None, :]
        for layer in self.layers:
            h, _ = layer(h, cos, sin, mask)
        return h

    def logits_from_hidden(self, h: jnp.ndarray) -> jnp.ndarray:
        """Final norm and output projection: hidden states ``(B, T, D)`` -> float32 logits ``(B, T, V)``."""
        h = self.norm(h)
        if self.lm_head is None:
            logits = self.embed_tokens.attend(h)
        else:
            logits = self.lm_head(h, out_dtype=jnp.float32)
        return logits.astype(jnp.float32)


def _update_cols(x: jnp.ndarray, cols: jnp.ndarray, start: jnp.ndarray) -> jnp.ndarray:
    return jax.lax.dynamic_update_slice(x, cols.astype(x.dtype), (jnp.zeros((), jnp.int32), start))


def init_model(config: ModelConfig, *, key: jax.Array, dtype=jnp.float32, param_dtype=jnp.float32,
               mesh: jax.sharding.Mesh | None = None) -> CausalLM:
    """A randomly initialised :class:`CausalLM`, built inside one ``jax.jit`` (fast for any size).

    With ``mesh``, every parameter is created directly with its annotated sharding (no host copy), which is
    how a model larger than one device is initialised.

    Args:
        config: architecture.
        key: PRNG key of the initialisation.
        dtype, param_dtype: compute and storage dtypes.
        mesh: optional ``('data', 'model')`` mesh.
    """
    from ._mesh import param_shardings

    def make(k):
        return nnx.split(CausalLM(config, rngs=nnx.Rngs(params=k), dtype=dtype, param_dtype=param_dtype))[1]

    abstract = nnx.eval_shape(lambda: CausalLM(config, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=param_dtype))
    graphdef, abs_state = nnx.split(abstract)
    out_sh = param_shardings(abs_state, mesh) if mesh is not None else None
    state = jax.jit(make, out_shardings=out_sh)(key)
    return nnx.merge(graphdef, state)
