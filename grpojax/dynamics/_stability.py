"""Exact stability of the discrete GRPO update (``docs/model/stability.md``), beside the closed-form approximation.

Linearised at the plateau, with a = η K_d (stale stiffness) and a₀ = η K_0 (instant stiffness):

    e_{n+1} = (1 + μ − a₀) e_n − μ e_{n−1} − a e_{b(n)}

- ``constant`` lag d = K_ref: characteristic polynomial z^{d+1} − (1 + μ − a₀) z^d + μ z^{d−1} + a = 0
  (for a₀ = 0: z^{d−1}(z − 1)(z − μ) + a = 0). Stable iff every root lies inside the unit circle; the
  roots are the eigenvalues of the (d+1)×(d+1) companion matrix.
- ``periodic`` refresh every K_ref steps: state (e_n, e_{n−1}, s) with the snapshot s ← e_n at the start
  of each period; the monodromy matrix P = S^{K_ref} R (R the refresh, S the one-step map) has Floquet
  multipliers whose modulus decides stability.

Spectral radii are reported *per optimizer step* (ρ(P)^{1/K_ref} for periodic refresh) so that both lag
models are comparable; stable iff < 1. Critical values are found by a log-spaced scan followed by
bisection, vectorised over μ (and a₀/a) with ``vmap``; the lag length is static.
Eigenvalues use ``jnp.linalg.eigvals`` (a CPU kernel in JAX). The public functions always compute in
float64 (inside a scoped ``jax.enable_x64(True)``: near a = 0 the dominant root is 1 − O(a), which float32
cannot resolve) and return NumPy float64 arrays; they are host computations, meant to be called once per
grid with concrete values, not inside ``jit``.
"""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from grpojax._checks import check_int as _check_int
from grpojax.dynamics._checks import check, check_hyperparams, check_lag

_SCAN = 160  # log-spaced scan points before bisection
_BISECT = 60
_IMAG_TOL = 1e-7


def _host_float64(fn):
    """Run ``fn`` with float64 enabled (scoped, never global) and return NumPy float64/complex128 arrays."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True):
            out = fn(*args, **kwargs)
            return np.asarray(out)

    return wrapper


def companion_constant(a: Array, mu: Array, d: int, a0: Array = 0.0) -> Array:
    """One-step companion matrix of the constant-lag recurrence, shape ``(d+1, d+1)`` (scalars in)."""
    n = d + 1
    first = jnp.zeros(n, dtype=jnp.result_type(a, mu, float)).at[0].set(1.0 + mu - a0).at[1].add(-mu).at[d].add(-a)
    sub = jnp.eye(n - 1, n, dtype=first.dtype)
    return jnp.concatenate([first[None, :], sub], axis=0)


def _roots_constant(a, mu, d, a0):
    return jnp.linalg.eigvals(companion_constant(a, mu, d, a0))


def _monodromy_periodic(a, mu, k_ref, a0):
    dtype = jnp.result_type(a, mu, float)
    S = jnp.array([[1.0 + mu - a0, -mu, -a], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=dtype)
    R = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=dtype)
    return jnp.linalg.matrix_power(S, k_ref) @ R


def _roots_periodic(a, mu, k_ref, a0):
    return jnp.linalg.eigvals(_monodromy_periodic(a, mu, k_ref, a0))


def _radius(a, mu, k_ref, a0, lag):
    if lag == "constant":
        return jnp.max(jnp.abs(_roots_constant(a, mu, k_ref, a0)))
    return jnp.max(jnp.abs(_roots_periodic(a, mu, k_ref, a0))) ** (1.0 / k_ref)


def _oscillatory(a, mu, k_ref, a0, lag):
    z = _roots_constant(a, mu, k_ref, a0) if lag == "constant" else _roots_periodic(a, mu, k_ref, a0)
    dom = z[jnp.argmax(jnp.abs(z))]
    return (jnp.abs(dom.imag) > _IMAG_TOL * jnp.abs(dom)) | (dom.real < 0)


@partial(jax.jit, static_argnames=("d",))
def _radius_constant_vec(a, mu, a0, d):
    f = lambda a_, m_, b_: _radius(a_, m_, d, b_, "constant")
    return jnp.vectorize(f)(a, mu, a0)


@partial(jax.jit, static_argnames=("k_ref",))
def _radius_periodic_vec(a, mu, a0, k_ref):
    f = lambda a_, m_, b_: _radius(a_, m_, k_ref, b_, "periodic")
    return jnp.vectorize(f)(a, mu, a0)


@_host_float64
def spectral_radius_constant(a: ArrayLike, mu: ArrayLike, d: int, *, a0: ArrayLike = 0.0) -> Array:
    """Per-step spectral radius of the constant-lag recurrence; broadcast over ``a``, ``mu``, ``a0``.

    Args:
        a: stale stiffness times step size, η K_d.
        mu: momentum μ ∈ [0, 1).
        d: lag in steps (static integer ≥ 1).
        a0: instant stiffness times step size, η K_0.

    Example:
        >>> round(float(spectral_radius_constant(1.0, 0.0, 1)), 6)  # z² − z + 1: |z| = 1
        1.0
    """
    d = _check_int("d", d, 1)
    mu = check_hyperparams(mu=mu)[1]
    a = check("a", a, lambda x: x == x, "finite")
    a0 = check("a0", a0, lambda x: x == x, "finite")
    a, mu, a0 = jnp.broadcast_arrays(*(jnp.asarray(x) * 1.0 for x in (a, mu, a0)))
    return _radius_constant_vec(a, mu, a0, d)


@_host_float64
def spectral_radius_periodic(a: ArrayLike, mu: ArrayLike, k_ref: int, *, a0: ArrayLike = 0.0) -> Array:
    """Per-step spectral radius ρ(P)^{1/K_ref} for periodic refresh; broadcast over ``a``, ``mu``, ``a0``.

    Example:
        >>> round(float(spectral_radius_periodic(0.5, 0.0, 4)), 6)  # multiplier 1 − a K_ref = −1
        1.0
    """
    k_ref = _check_int("k_ref", k_ref, 1)
    mu = check_hyperparams(mu=mu)[1]
    a = check("a", a, lambda x: x == x, "finite")
    a0 = check("a0", a0, lambda x: x == x, "finite")
    a, mu, a0 = jnp.broadcast_arrays(*(jnp.asarray(x) * 1.0 for x in (a, mu, a0)))
    return _radius_periodic_vec(a, mu, a0, k_ref)


def _first_crossing(pred, lo_scan: float, hi_scan: float, dtype):
    """Smallest a in [lo, hi] (log scan + bisection) where ``pred(a)`` turns True; +inf if never."""
    grid = jnp.geomspace(lo_scan, hi_scan, _SCAN, dtype=dtype)
    flags = jax.vmap(pred)(grid)
    idx = jnp.argmax(flags)
    found = flags[idx]
    hi = grid[idx]
    lo = grid[jnp.maximum(idx - 1, 0)]

    def body(_, lohi):
        lo, hi = lohi
        mid = jnp.sqrt(lo * hi)
        f = pred(mid)
        return jnp.where(f, lo, mid), jnp.where(f, mid, hi)

    lo, hi = jax.lax.fori_loop(0, _BISECT, body, (lo, hi))
    crossing = jnp.where(idx == 0, 0.0, 0.5 * (lo + hi))  # unstable already at the smallest a scanned
    return jnp.where(found, crossing, jnp.inf)


def _scan_range(k_ref: int) -> tuple[float, float]:
    return 1e-6 / k_ref, 8.0


@partial(jax.jit, static_argnames=("k_ref", "lag", "kind"))
def _critical_vec(mu, a0_ratio, k_ref, lag, kind):
    lo, hi = _scan_range(k_ref)

    def one(m, r):
        if kind == "stability":
            pred = lambda a: _radius(a, m, k_ref, r * a, lag) >= 1.0
        else:
            pred = lambda a: _oscillatory(a, m, k_ref, r * a, lag)
        return _first_crossing(pred, lo, hi, jnp.result_type(m, float))

    return jnp.vectorize(one)(mu, a0_ratio)


def _critical(mu, k_ref, lag, a0_ratio, kind):
    """Validate the inputs of the exact critical-a searches and run the vectorised scan + bisection."""
    check_lag(lag)
    k_ref = _check_int("k_ref", k_ref, 1)
    mu = check_hyperparams(mu=mu)[1]
    a0_ratio = check("a0_ratio", a0_ratio, lambda x: x == x, "finite")
    mu, r = jnp.broadcast_arrays(jnp.asarray(mu, jnp.float64), jnp.asarray(a0_ratio, jnp.float64))
    return _critical_vec(mu, r, k_ref, lag, kind)


@_host_float64
def exact_critical_a(mu: ArrayLike, k_ref: int, *, lag: str = "constant", a0_ratio: ArrayLike = 0.0) -> Array:
    """Exact critical a* = η* K_d of the discrete update: the smallest a with spectral radius ≥ 1.

    Args:
        mu: momentum (array, broadcast with ``a0_ratio``).
        k_ref: lag d (constant) or refresh interval (periodic), a static integer ≥ 1.
        lag: ``"constant"`` or ``"periodic"``.
        a0_ratio: K_0 / K_d, held fixed while η grows (0: no instant stiffness; negative values, a
            destabilising instant term, are allowed).

    Returns:
        a* per μ (NumPy float64); ``0`` when the update is unstable already at the smallest a scanned
        (e.g. K_0/K_d ≤ −1: no net restoring force), ``+inf`` if no instability is found for a ≤ 8.

    Example:
        >>> round(float(exact_critical_a(0.0, 2)) * 2, 3)  # μ = 0, d = 2: √5 − 1 = 1.236
        1.236
    """
    return _critical(mu, k_ref, lag, a0_ratio, "stability")


@_host_float64
def exact_critical_eta(
    mu: ArrayLike, k_ref: int, curvature: ArrayLike, *, lag: str = "constant", k_instant: ArrayLike = 0.0
) -> Array:
    """Exact critical learning rate η* = a*/K_d with K_0/K_d held fixed (``+inf`` when K_d ≤ 0)."""
    *_, curvature, k_instant = check_hyperparams(curvature=curvature, k_instant=k_instant)
    kd = jnp.asarray(curvature) * 1.0
    ratio = jnp.where(kd > 0, jnp.asarray(k_instant) / jnp.where(kd > 0, kd, 1.0), 0.0)
    a_star = exact_critical_a(mu, k_ref, lag=lag, a0_ratio=ratio)
    return jnp.where(kd > 0, a_star / jnp.where(kd > 0, kd, 1.0), jnp.inf)


@_host_float64
def exact_oscillatory_a(mu: ArrayLike, k_ref: int, *, lag: str = "constant", a0_ratio: ArrayLike = 0.0) -> Array:
    """Smallest a = η K_d at which the dominant root of the discrete update stops being real and positive.

    That is the exact overdamped → oscillatory transition (a complex dominant root oscillates with period
    2π/arg z; a negative real one flips sign every step / period).
    """
    return _critical(mu, k_ref, lag, a0_ratio, "oscillation")


@_host_float64
def dominant_root(a: ArrayLike, mu: ArrayLike, k_ref: int, *, lag: str = "constant", a0: ArrayLike = 0.0) -> Array:
    """Dominant (largest-modulus) root, per step for constant lag and per period for periodic refresh."""
    check_lag(lag)
    k_ref = _check_int("k_ref", k_ref, 1)
    roots = _roots_constant if lag == "constant" else _roots_periodic

    def one(a_, m_, b_):
        z = roots(a_, m_, k_ref, b_)
        return z[jnp.argmax(jnp.abs(z))]

    a, mu, a0 = jnp.broadcast_arrays(*(jnp.asarray(x) * 1.0 for x in (a, mu, a0)))
    return jnp.vectorize(one)(a, mu, a0)
