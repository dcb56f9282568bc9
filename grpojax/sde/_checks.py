"""Input handling shared by the SDE entry points: coefficient extraction and host-side validation.

Every public entry point accepts any object with the fields ``M, C, K_eff, p_star, D`` (the lead's
:class:`grpojax.dynamics.OscillatorParams`, a NamedTuple, ...). Concrete inputs are validated on the host
before the single ``jit`` boundary (``ValueError`` naming the bad value); traced inputs pass through
untouched so that the functions can be used inside other people's ``jit``/``vmap``/NUTS samplers, where
a raise would be wrong (a sampler must see ``-inf``/NaN, not an exception).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

FIELDS = ("M", "C", "K_eff", "p_star", "D")


class Coefficients(NamedTuple):
    """Broadcast arrays ``M, C, K_eff, p_star, D`` (default float dtype), shape ``batch``."""

    M: jax.Array
    C: jax.Array
    K_eff: jax.Array
    p_star: jax.Array
    D: jax.Array


def is_concrete(x: Any) -> bool:
    """True when no leaf of ``x`` is a JAX tracer (values can be checked on the host)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def float_dtype(*xs: Any):
    """The floating dtype for a computation on ``xs``: float64 if any is, else the default float."""
    default = jnp.zeros(()).dtype
    dts = [jnp.asarray(x).dtype for x in xs]
    dts = [d for d in dts if jnp.issubdtype(d, jnp.floating)]
    return jnp.result_type(default, *dts) if dts else default


def check_finite(name: str, value: Any, *, expected: str = "finite") -> None:
    """Raise ``ValueError`` quoting the first non-finite entry of a concrete ``value``."""
    if not is_concrete(value):
        return
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        bad = arr[~np.isfinite(arr)].ravel()[0] if arr.ndim else arr
        raise ValueError(f"{name} must be {expected}, got {name}={float(bad)!r}")


def check_positive(name: str, value: Any) -> None:
    """Raise ``ValueError`` unless a concrete ``value`` is finite and > 0 everywhere."""
    check_finite(name, value, expected="finite and > 0")
    if is_concrete(value) and not np.all(np.asarray(value) > 0):
        arr = np.asarray(value)
        bad = arr.ravel()[np.argmin(arr.ravel() > 0)] if arr.ndim else arr
        raise ValueError(f"{name} must be > 0, got {name}={float(bad)!r}")


def coefficients(params: Any) -> Coefficients:
    """Extract and broadcast the oscillator coefficients of ``params``.

    Args:
        params: any object with attributes ``M, C, K_eff, p_star, D`` (arrays broadcastable together).

    Returns:
        :class:`Coefficients` of JAX arrays (a pytree, so it can cross a ``jit`` boundary without
        recompiling per value); call :func:`broadcast` inside the jitted function.

    Raises:
        ValueError: if a field is missing, non-finite (concrete values), ``M <= 0`` or ``D < 0``.
    """
    missing = [f for f in FIELDS if not hasattr(params, f)]
    if missing:
        raise ValueError(
            f"params must have fields {FIELDS} (e.g. grpojax.dynamics.OscillatorParams), "
            f"missing {missing} on {type(params).__name__}"
        )
    vals = [getattr(params, f) for f in FIELDS]
    for f, v in zip(FIELDS, vals):
        check_finite(f"params.{f}", v)
    check_positive("params.M", vals[0])
    if is_concrete(vals[4]) and not np.all(np.asarray(vals[4]) >= 0):
        raise ValueError(f"params.D must be >= 0 (noise intensity), got D={np.asarray(vals[4]).min()!r}")
    return Coefficients(*(v if isinstance(v, jax.Array) else jnp.asarray(v) for v in vals))


def broadcast(c: Coefficients) -> Coefficients:
    """Broadcast the coefficients to a common shape and floating dtype (use inside ``jit``)."""
    dtype = float_dtype(*c)
    return Coefficients(*jnp.broadcast_arrays(*(jnp.asarray(v, dtype) for v in c)))


def unstable_mask(c: Coefficients) -> jax.Array:
    """``True`` where the fixed point is not asymptotically stable (C ≤ 0 or K_eff ≤ 0)."""
    return (c.C <= 0) | (c.K_eff <= 0)
