"""Rotary position embeddings (RoPE) with the ``default``, ``linear`` and Llama-3 frequency rules.

Follows the Hugging Face convention ("rotate half"): for a head vector ``x = (x1, x2)`` split into
halves, ``rope(x, p) = x * cos(p w) + (-x2, x1) * sin(p w)`` with ``w = concat(f, f)`` and frequencies
``f_i = theta^(-2i/d)``, ``i = 0..d/2-1`` (then rescaled by the rope-scaling rule).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ._config import ModelConfig

__all__ = ["inverse_frequencies", "rope_cos_sin", "apply_rope"]


def inverse_frequencies(config: ModelConfig) -> np.ndarray:
    """Per-pair rotary frequencies ``f`` (shape ``(d/2,)``, float32), after rope scaling.

    ``linear``: ``f / factor``. ``llama3`` (Llama 3.1): with wavelength ``lambda = 2 pi / f``, original
    context ``C``, ``lo = C / low_freq_factor``, ``hi = C / high_freq_factor``: ``f`` is kept where
    ``lambda < hi``, divided by ``factor`` where ``lambda > lo``, and interpolated in between with
    ``s = (C / lambda - low_freq_factor) / (high_freq_factor - low_freq_factor)``:
    ``f' = (1 - s) f / factor + s f``.
    """
    d = config.head_dim
    f = (1.0 / (np.float32(config.rope_theta) ** (np.arange(0, d, 2, dtype=np.float32) / np.float32(d)))).astype(
        np.float32
    )
    rtype = config.rope_type
    if rtype == "default":
        return f
    sc = config.rope_scaling
    factor = float(sc["factor"])
    if rtype == "linear":
        return (f / np.float32(factor)).astype(np.float32)
    # llama3
    low, high = float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
    ctx = float(sc["original_max_position_embeddings"])
    low_wl, high_wl = ctx / low, ctx / high
    wavelen = np.float32(2 * math.pi) / f
    f_l = np.where(wavelen > low_wl, f / np.float32(factor), f).astype(np.float32)
    smooth = ((ctx / wavelen - low) / (high - low)).astype(np.float32)
    smoothed = ((1 - smooth) * f_l / np.float32(factor) + smooth * f_l).astype(np.float32)
    medium = ~(wavelen < high_wl) & ~(wavelen > low_wl)
    return np.where(medium, smoothed, f_l).astype(np.float32)


def rope_cos_sin(config: ModelConfig, positions: jnp.ndarray, dtype) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``cos(p w)`` and ``sin(p w)`` for integer positions ``(B, T)`` -> two ``(B, T, d)`` arrays in ``dtype``.

    The angles are computed in float32 (as transformers does) and only then cast.
    """
    f = jnp.asarray(inverse_frequencies(config), dtype=jnp.float32)
    f = f.reshape((1,) * positions.ndim + f.shape)  # (1, 1, d/2): explicit rank for the outer product
    ang = positions.astype(jnp.float32)[..., None] * f  # (B, T, d/2)
    ang = jnp.concatenate([ang, ang], axis=-1)
    return jnp.cos(ang).astype(dtype), jnp.sin(ang).astype(dtype)


def apply_rope(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray) -> jnp.ndarray:
    """Rotate ``x`` of shape ``(B, T, heads, d)`` by ``cos``/``sin`` of shape ``(B, T, d)``."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    rot = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos[:, :, None, :] + rot * sin[:, :, None, :]
