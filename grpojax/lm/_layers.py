"""Small NNX building blocks with sharding annotations: Linear, Embed, RMSNorm, SwiGLU MLP.

Parameters carry an ``out_sharding`` partition spec over the mesh axes ``('data', 'model')`` (FSDP over
``data``, tensor parallelism over ``model``) but are created unsharded (``eager_sharding=False``); see
:func:`grpojax.lm.shard_model` / :func:`grpojax.lm.load_pretrained` for placement.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["Linear", "Embed", "RMSNorm", "MLP", "param"]

_INIT_STD = 0.02  # Hugging Face ``initializer_range`` default for both families


def _lead(v: jnp.ndarray, ndim: int) -> jnp.ndarray:
    """``v`` of shape ``(n,)`` reshaped to ``(1, ..., 1, n)`` of rank ``ndim`` (explicit broadcasting)."""
    return v.reshape((1,) * (ndim - v.ndim) + v.shape)


def _matmul_2d(x: jnp.ndarray, w: jnp.ndarray, out_dtype=None) -> jnp.ndarray:
    """``x (..., in) @ w (in, out) -> (..., out)`` as one 2-D matrix product over the flattened leading axes.

    Same values as ``jnp.dot(x, w)``; the 2-D form spares XLA's CPU backend the transposes it otherwise
    inserts around the weight gradient of a rank-3 product (about a fifth of a small model's backward pass).
    """
    lead = x.shape[:-1]
    y = jnp.dot(x.reshape(-1, x.shape[-1]), w, preferred_element_type=out_dtype)
    return y.reshape(*lead, w.shape[-1])


def param(rngs: nnx.Rngs | None, shape, spec, param_dtype, *, init: str = "normal") -> nnx.Param:
    """A parameter of ``shape`` annotated with partition spec ``spec`` (not placed on any mesh)."""
    if init == "ones":
        value = jnp.ones(shape, param_dtype)
    elif init == "zeros":
        value = jnp.zeros(shape, param_dtype)
    else:
        value = (_INIT_STD * jax.random.normal(rngs.params(), shape, jnp.float32)).astype(param_dtype)
    return nnx.Param(value, out_sharding=tuple(spec), eager_sharding=False)


class Linear(nnx.Module):
    """``y = x W + b`` with ``W`` of shape ``(in, out)`` (the transpose of torch's ``weight``)."""

    def __init__(self, d_in: int, d_out: int, *, spec, use_bias: bool = False, dtype, param_dtype, rngs: nnx.Rngs):
        self.kernel = param(rngs, (d_in, d_out), spec, param_dtype)
        self.bias = param(rngs, (d_out,), (spec[1],), param_dtype, init="zeros") if use_bias else None
        self.dtype = dtype

    def __call__(self, x: jnp.ndarray, *, out_dtype=None) -> jnp.ndarray:
        """``x (..., in) -> (..., out)`` computed in ``dtype`` (accumulated as ``out_dtype`` if given)."""
        y = _matmul_2d(x.astype(self.dtype), self.kernel[...].astype(self.dtype), out_dtype)
        if self.bias is not None:
            y = y + _lead(self.bias[...].astype(y.dtype), y.ndim)
        return y


class Embed(nnx.Module):
    """Token embedding table ``E`` of shape ``(V, D)`` (same layout as torch)."""

    def __init__(self, vocab: int, dim: int, *, dtype, param_dtype, rngs: nnx.Rngs):
        self.embedding = param(rngs, (vocab, dim), ("model", "data"), param_dtype)
        self.dtype = dtype

    def __call__(self, tokens: jnp.ndarray) -> jnp.ndarray:
        """``tokens (B, T) int -> (B, T, D)``."""
        return jnp.take(self.embedding[...], tokens, axis=0).astype(self.dtype)

    def attend(self, h: jnp.ndarray) -> jnp.ndarray:
        """Tied output projection ``h E^T`` in float32: ``(B, T, D) -> (B, T, V)``."""
        return _matmul_2d(h.astype(self.dtype), self.embedding[...].astype(self.dtype).T, jnp.float32)


class RMSNorm(nnx.Module):
    """``y = w * x / sqrt(mean(x^2) + eps)``; the normalisation runs in float32, as in transformers."""

    def __init__(self, dim: int, *, eps: float, dtype, param_dtype):
        self.weight = param(None, (dim,), (None,), param_dtype, init="ones")
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        x32 = x.astype(jnp.float32)
        var = jnp.mean(jnp.square(x32), axis=-1, keepdims=True)
        y = (x32 * jax.lax.rsqrt(var + jnp.float32(self.eps))).astype(self.dtype)
        return _lead(self.weight[...].astype(self.dtype), y.ndim) * y


class MLP(nnx.Module):
    """SwiGLU feed-forward ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, dim: int, hidden: int, *, dtype, param_dtype, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.gate_proj = Linear(dim, hidden, spec=("data", "model"), **kw)
        self.up_proj = Linear(dim, hidden, spec=("data", "model"), **kw)
        self.down_proj = Linear(hidden, dim, spec=("model", "data"), **kw)

    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        return self.down_proj(jax.nn.silu(self.gate_proj(x)) * self.up_proj(x))
