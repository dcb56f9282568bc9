"""Input handling shared by the SDE entry points: coefficient extraction and host-side validation.

Every public entry point accepts any object with the fields ``M, C, K_eff, p_star, D``
(:class:`grpojax.dynamics.OscillatorParams`, a NamedTuple, ...). Concrete inputs are validated on the host
before the single ``jit`` boundary (``ValueError`` naming the bad value). Traced inputs (the functions
used inside other people's ``jit``/``vmap``/NUTS samplers) get ``eqx.error_if`` checks of definite
violations only (``M <= 0``, ``D < 0``, a negative time step): NaN passes through, because a sampler must
see ``-inf``/NaN for an extreme proposal, not an exception.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from grpojax._errors import InvalidValueError
from grpojax._checks import OnTrace, check, is_traced

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
    return not is_traced(x)


def float_dtype(*xs: Any):
    """The floating dtype for a computation on ``xs``: float64 if any is, else the default float."""
    default = jnp.zeros(()).dtype
    dts = [jnp.asarray(x).dtype for x in xs]
    dts = [d for d in dts if jnp.issubdtype(d, jnp.floating)]
    return jnp.result_type(default, *dts) if dts else default


def check_finite(name: str, value: Any, *, expected: str = "finite") -> Any:
    """Raise ``ValueError`` quoting the first non-finite entry of a concrete ``value``; traced values pass.

    Returns ``value``.
    """
    return check(name, value, lambda a: a == a, expected, on_trace="skip")


def check_positive(name: str, value: Any, *, on_trace: OnTrace = "allow_nan") -> Any:
    """``value`` finite and > 0 everywhere: ``ValueError`` when concrete, ``eqx.error_if`` when traced.

    Returns the value to use (the ``error_if`` output when traced).
    """
    return check(name, value, lambda a: a > 0, "> 0", on_trace=on_trace)


def check_nonnegative(name: str, value: Any, *, on_trace: OnTrace = "allow_nan") -> Any:
    """``value`` finite and >= 0 everywhere (as :func:`check_positive`)."""
    return check(name, value, lambda a: a >= 0, ">= 0", on_trace=on_trace)


def coefficients(params: Any) -> Coefficients:
    """Extract and broadcast the oscillator coefficients of ``params``.

    Args:
        params: any object with attributes ``M, C, K_eff, p_star, D`` (arrays broadcastable together).

    Returns:
        :class:`Coefficients` of JAX arrays (a pytree, so it can cross a ``jit`` boundary without
        recompiling per value); call :func:`broadcast` inside the jitted function.

    Raises:
        ValueError: if a field is missing, non-finite (concrete values), ``M <= 0`` or ``D < 0``.
        equinox.EqxRuntimeError: traced ``M <= 0`` or ``D < 0`` (NaN passes: samplers may propose it).
    """
    missing = [f for f in FIELDS if not hasattr(params, f)]
    if missing:
        raise InvalidValueError(
            f"params must have fields {FIELDS} (e.g. grpojax.dynamics.OscillatorParams), "
            f"missing {missing} on {type(params).__name__}"
        )
    vals = [check_finite(f"params.{f}", getattr(params, f)) for f in FIELDS]
    vals[0] = check("params.M", vals[0], lambda a: a > 0, "> 0 (inertia)", on_trace="allow_nan")
    vals[4] = check("params.D", vals[4], lambda a: a >= 0, ">= 0 (noise intensity)", on_trace="allow_nan")
    return Coefficients(*(v if isinstance(v, jax.Array) else jnp.asarray(v) for v in vals))


def broadcast(c: Coefficients) -> Coefficients:
    """Broadcast the coefficients to a common shape and floating dtype (use inside ``jit``)."""
    dtype = float_dtype(*c)
    return Coefficients(*jnp.broadcast_arrays(*(jnp.asarray(v, dtype) for v in c)))


def unstable_mask(c: Coefficients) -> jax.Array:
    """``True`` where the fixed point is not asymptotically stable (C ≤ 0 or K_eff ≤ 0)."""
    return (c.C <= 0) | (c.K_eff <= 0)
