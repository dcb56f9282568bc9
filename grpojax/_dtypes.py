"""Floating dtype of a computation, decided explicitly (valid under ``jax_numpy_dtype_promotion="strict"``).

This module imports no other ``grpojax`` module.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["as_float", "float_dtype"]


def float_dtype(*xs: Any) -> np.dtype:
    """The widest floating dtype among the array arguments, or the default float when there is none.

    Python scalars are weakly typed and do not widen the result (as in JAX's own promotion); integer and
    boolean arrays are ignored. With x64 disabled the answer is at most float32.
    """
    floats = []
    for x in xs:
        if isinstance(x, (bool, int, float)):
            continue
        d = np.dtype(x.dtype if hasattr(x, "dtype") else jnp.asarray(x).dtype)
        if jnp.issubdtype(d, jnp.floating):
            floats.append(d)
    if not floats:
        return np.dtype(jnp.zeros(()).dtype)
    widest = max(floats, key=lambda d: d.itemsize)
    return np.dtype(jnp.zeros((), widest).dtype)  # canonical: float64 becomes float32 without x64


def as_float(x: Any):
    """``x`` as a floating JAX array without widening it: floating arrays keep their dtype, integer and
    boolean arrays become the default float, Python numbers stay weakly typed (so they follow the other
    operands' precision instead of promoting a float32 computation to float64)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return jnp.asarray(float(x))
    a = jnp.asarray(x)
    return a if jnp.issubdtype(a.dtype, jnp.inexact) else a.astype(float_dtype())
