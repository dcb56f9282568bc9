"""Input checks shared by every package: eager ``ValueError`` for concrete values, ``eqx.error_if`` under ``jit``.

A public function validates each numeric argument with :func:`check` and keeps the returned value:

    eta = check("eta", eta, lambda a: a > 0, "> 0 (the learning rate)")

- concrete values (Python numbers, NumPy arrays, JAX arrays outside a trace) are checked on the host and
  a bad one raises ``ValueError("eta must be > 0 (the learning rate), got eta=-1.0")``; with JAX's float64
  off (its default), a float64 value that float32 cannot hold -- flushed to 0 or inf, or rounded out of
  its range (``mu=0.9999999999`` is 1.0) -- is refused the same way instead of computed wrongly;
- traced values (inside ``jit``/``vmap``/``grad``) are wrapped with :func:`equinox.error_if`, so a bad
  value raises at run time (``EqxRuntimeError`` eagerly, ``XlaRuntimeError`` from a compiled call, both
  carrying the same message) instead of returning a silently wrong answer. The returned array must be
  used in place of the argument: an unused ``error_if`` is dead code and is removed by the compiler.

``on_trace`` says what a traced check rejects:

- ``"check"``: every entry where ``ok`` is false, NaN included (comparisons with NaN are false);
- ``"allow_nan"``: only definite violations; NaN passes through. For quantities evaluated inside a
  sampler's potential (NUTS proposes extreme points during warm-up, and a NaN log-density there is a
  legitimate rejection, not an error);
- ``"skip"``: no traced check (the value is validated where it is concrete).

Concrete failures raise :class:`grpojax.InvalidValueError` (a ``ValueError``). This module imports
only the shared :mod:`grpojax._errors`; JAX and equinox are imported by the checks that use them
(:func:`check`, :func:`check_traced`), so :func:`check_int` and :func:`check_choice` serve NumPy code that
never imports JAX (no value can be traced before JAX is imported).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from grpojax._errors import InvalidValueError

__all__ = ["check", "check_choice", "check_int", "check_traced", "is_traced"]

OnTrace = Literal["check", "allow_nan", "skip"]


def is_traced(x: Any) -> bool:
    """True when some leaf of ``x`` is a JAX tracer (its values are unknown until run time)."""
    jax = sys.modules.get("jax")
    if jax is None:  # no tracer exists before JAX is imported: NumPy callers (check_int, ...) never import it
        return False
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(x))


def _shown(arr: np.ndarray, good: np.ndarray) -> Any:
    """The first offending entry of ``arr`` as a Python scalar."""
    return arr.ravel()[np.argmin(good.ravel())].item()


def check_traced(name: str, value: Any, ok: Callable, expected: str, *, on_trace: OnTrace = "check") -> Any:
    """Wrap a traced ``value`` with ``eqx.error_if`` raising ``"{name} must be {expected}"`` where ``ok`` fails.

    Returns the value to use from here on (the ``error_if`` output). ``on_trace`` as in the module docs.
    """
    if on_trace == "skip":
        return value
    import equinox as eqx  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    x = jnp.asarray(value)
    bad = ~jnp.asarray(ok(x), bool)
    if on_trace == "allow_nan" and jnp.issubdtype(x.dtype, jnp.inexact):
        bad = bad & ~jnp.isnan(x)
    return eqx.error_if(x, jnp.broadcast_to(bad, x.shape), f"{name} must be {expected}; the traced value of {name} is not")


def check(
    name: str, value: Any, ok: Callable, expected: str, *, finite: bool = True, on_trace: OnTrace = "check"
) -> Any:
    """Validate ``value`` (concrete: ``ValueError``; traced: ``eqx.error_if``) and return it.

    Args:
        name: argument name used in the message.
        value: number or array (concrete or traced).
        ok: elementwise predicate written with operators or ``jnp`` functions (it receives a NumPy array
            when ``value`` is concrete, a JAX array when traced), e.g. ``lambda a: (a >= 0) & (a < 1)``.
        expected: what a valid value is, e.g. ``"in [0, 1) (heavy-ball momentum)"``.
        finite: concrete values must also be finite real numbers (checked before ``ok``).
        on_trace: what a traced check rejects (``"check"``, ``"allow_nan"`` or ``"skip"``).

    Returns:
        ``value`` unchanged when concrete; the ``error_if``-wrapped array when traced.

    Raises:
        ValueError: a concrete value fails, with a one-line message naming it, e.g.
            ``mu must be in [0, 1) (heavy-ball momentum), got mu=1.0``.
    """
    if is_traced(value):
        return check_traced(name, value, ok, expected, on_trace=on_trace)
    import jax  # noqa: PLC0415  (the predicate may use jax.numpy; JAX's float64 setting decides the float32 check)

    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise InvalidValueError(f"{name} must be a real number, got {name}={value!r}")
    if finite:
        fin = np.isfinite(arr)
        if not np.all(fin):
            raise InvalidValueError(f"{name} must be finite, got {name}={_shown(arr, fin)!r}")
    with jax.ensure_compile_time_eval():  # a jnp predicate on constants inside a trace stays concrete
        good = np.broadcast_to(np.asarray(ok(arr), bool), arr.shape)
    if not np.all(good):
        raise InvalidValueError(f"{name} must be {expected}, got {name}={_shown(arr, good)!r}")
    if finite and arr.dtype == np.float64 and not jax.config.jax_enable_x64:
        _check_float32(name, arr, ok, expected)
    return value


_F32 = np.finfo(np.float32)


def _check_float32(name: str, arr: np.ndarray, ok: Callable, expected: str) -> None:
    """A float64 value JAX will compute with in float32 (x64 off) must survive the conversion: not flushed to
    0 or to inf, and still ``ok`` (``mu=0.9999999999`` becomes 1.0); else one line saying what to do."""
    with np.errstate(over="ignore", under="ignore"):
        x32 = arr.astype(np.float32)
    mag = np.abs(arr)
    lost = (mag > _F32.max) | ((mag > 0) & (mag < _F32.tiny))
    import jax  # noqa: PLC0415

    hint = "JAX computes in float32 here; enable float64 (jax.config.update('jax_enable_x64', True)) or rescale"
    if np.any(lost):
        v = _shown(arr, ~lost)
        where = "beyond the float32 range" if abs(v) > float(_F32.max) else "below the smallest float32 number"
        raise InvalidValueError(f"{name}={v!r} is {where} ({_F32.tiny:.2g} to {_F32.max:.3g}); {hint}")
    with jax.ensure_compile_time_eval():
        good32 = np.broadcast_to(np.asarray(ok(x32.astype(np.float64)), bool), arr.shape)
    if not np.all(good32):
        v = _shown(arr, good32)
        raise InvalidValueError(f"{name}={v!r} is {float(np.float32(v))!r} in float32, which is not {expected}; {hint}")


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``; ``ValueError`` naming it and the choices otherwise."""
    if not isinstance(value, str) or value not in choices:
        raise InvalidValueError(f"{name} must be one of {choices}, got {name}={value!r}")
    return value


def check_int(name: str, value: Any, minimum: int) -> int:
    """A static (Python) integer ``>= minimum``; ``ValueError`` for bools, fractions, tracers and small values."""
    if is_traced(value):
        raise InvalidValueError(f"{name} must be a static integer >= {minimum}, got a traced value")
    if isinstance(value, (bool, np.bool_)) or np.ndim(value) != 0 or int(value) != value or int(value) < minimum:
        raise InvalidValueError(f"{name} must be an integer >= {minimum} (static), got {name}={value!r}")
    return int(value)
