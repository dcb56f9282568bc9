r"""Exact Gaussian discretisation of the linear oscillator SDE (the ground truth and a fast sampler).

The state ``x = (e, ė)`` of ``M ë + C ė + K_eff e = sqrt(D/G) ξ(t)`` obeys the linear Itô SDE

.. math::

    dx = F x\,dt + L\,dW,\qquad
    F = \begin{pmatrix}0 & 1\\ -K_{eff}/M & -C/M\end{pmatrix},\quad
    L = \begin{pmatrix}0\\ \sqrt{D/G}/M\end{pmatrix},

whose transition over a step ``Δt`` is exactly Gaussian: ``x(t+Δt) | x(t) ~ N(A x(t), Q)`` with
``A = exp(F Δt)`` and ``Q = ∫_0^{Δt} exp(F s) L Lᵀ exp(F s)ᵀ ds``. ``Q`` is computed with Van Loan's
block-matrix exponential (Van Loan 1978, "Computing integrals involving the matrix exponential"):

.. math::

    \exp\!\left(\begin{pmatrix}-F & LL^T\\ 0 & F^T\end{pmatrix}Δt\right)
    = \begin{pmatrix}\cdot & B_{12}\\ 0 & B_{22}\end{pmatrix},\qquad A = B_{22}^T,\quad Q = A B_{12}.

Nothing assumes stationarity, so unstable parameters (``C ≤ 0``) are handled too. Conditioning: the
block exponential contains both ``exp(−F Δt)`` and ``exp(Fᵀ Δt)``, so for long steps one of them is huge
and ``A B₁₂`` cancels catastrophically (``‖F‖Δt = 40`` would lose ~17 digits). :func:`van_loan` therefore
applies the block exponential to ``Δt/2^s`` with ``‖F‖Δt/2^s ≤ 1/2`` and doubles back up with the
semigroup identities, which are exact and stable.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax.scipy.linalg import expm

from grpojax._errors import InvalidValueError
from grpojax.sde._checks import (
    broadcast,
    check_finite,
    check_nonnegative,
    check_positive,
    coefficients,
    float_dtype,
    is_concrete,
)


def drift_and_noise(M, C, K_eff, q):
    """``F`` (..., 2, 2) and ``L Lᵀ`` (..., 2, 2) for broadcast arrays ``M, C, K_eff`` and ``q = D/(G M²)``."""
    zero = jnp.zeros_like(M)
    one = jnp.ones_like(M)
    F = jnp.stack([jnp.stack([zero, one], -1), jnp.stack([-K_eff / M, -C / M], -1)], -2)
    LLt = jnp.stack([jnp.stack([zero, zero], -1), jnp.stack([zero, q], -1)], -2)
    return F, LLt


_MAX_DOUBLINGS = 40


def van_loan(M, C, K_eff, q, dt):
    """Exact ``(A, Q)`` from broadcast arrays (no validation; the building block used under jit).

    Scaling and squaring keeps the block exponential well conditioned for long steps: Van Loan is applied
    to ``h = Δt / 2^s`` with ``s`` chosen so that ``‖F‖ h ≤ 1/2``, then the semigroup identities
    ``A(2h) = A(h)²`` and ``Q(2h) = A(h) Q(h) A(h)ᵀ + Q(h)`` are applied ``s`` times (a fixed-length,
    differentiable loop; ``s`` is data dependent but capped at 40).
    """
    M, C, K_eff, q, dt = jnp.broadcast_arrays(M, C, K_eff, q, dt)
    F, LLt = drift_and_noise(M, C, K_eff, q)
    norm = jnp.max(jnp.sum(jnp.abs(F), axis=-2), axis=-1) * jnp.abs(dt)  # ‖F Δt‖₁
    s = jnp.clip(jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-30) / 0.5)), 0, _MAX_DOUBLINGS)
    s = jnp.where(jnp.isfinite(s), s, 0.0)
    h = dt / 2.0**s
    Ft = jnp.swapaxes(F, -1, -2)
    top = jnp.concatenate([-F, LLt], -1)
    bottom = jnp.concatenate([jnp.zeros_like(F), Ft], -1)
    H = jnp.concatenate([top, bottom], -2) * h[..., None, None]
    B = expm(H)
    A = jnp.swapaxes(B[..., 2:, 2:], -1, -2)
    Q = A @ B[..., :2, 2:]

    def double(i, AQ):
        A, Q = AQ
        A2 = A @ A
        Q2 = A @ Q @ jnp.swapaxes(A, -1, -2) + Q
        go = (i < s)[..., None, None]
        return jnp.where(go, A2, A), jnp.where(go, Q2, Q)

    A, Q = jax.lax.fori_loop(0, _MAX_DOUBLINGS, double, (A, Q))
    Q = 0.5 * (Q + jnp.swapaxes(Q, -1, -2))
    return A, Q


@eqx.filter_jit
def _exact_transition(c, dt, group_size):
    c = broadcast(c)
    dtype = float_dtype(c.M, dt)
    dt = jnp.asarray(dt, dtype)
    q = c.D.astype(dtype) / (jnp.asarray(group_size, dtype) * c.M.astype(dtype) ** 2)
    return van_loan(c.M.astype(dtype), c.C.astype(dtype), c.K_eff.astype(dtype), q, dt)


def exact_transition(params: Any, dt: Any, *, group_size: Any = 1) -> tuple[jax.Array, jax.Array]:
    """Exact Gaussian transition ``x(t+Δt) | x(t) ~ N(A x(t), Q)`` of the state ``x = (e, ė)``.

    Args:
        params: oscillator parameters with fields ``M, C, K_eff, p_star, D`` (e.g.
            :class:`grpojax.dynamics.OscillatorParams`), arrays of batch shape ``(...)``.
        dt: step(s) ``Δt ≥ 0``, broadcastable against the parameter batch (irregular steps welcome).
        group_size: group size ``G`` (noise variance ``D/G``), broadcastable; default 1.

    Returns:
        ``(A, Q)``, each of shape ``broadcast(batch, dt.shape) + (2, 2)``: ``A = exp(F Δt)`` and the
        process-noise covariance ``Q`` (symmetric, PSD up to round-off; ``Q = 0`` at ``Δt = 0``).

    Raises:
        ValueError: for concrete non-finite parameters, ``M ≤ 0``, ``D < 0``, ``Δt < 0`` or ``G ≤ 0``.
            Traced inputs raise ``EqxRuntimeError`` for the same sign violations, while NaN passes
            through (so it can sit inside a likelihood explored by a sampler).

    Example:
        >>> from types import SimpleNamespace as P
        >>> A, Q = exact_transition(P(M=1.0, C=0.5, K_eff=1.0, p_star=0.0, D=0.1), 0.1)
        >>> A.shape, Q.shape
        ((2, 2), (2, 2))
    """
    dt = check_nonnegative("dt", dt)
    group_size = check_positive("group_size", group_size)
    return _exact_transition(coefficients(params), jnp.asarray(dt), jnp.asarray(group_size))


def _moments(c, ts, x0, P0, q, t0):
    """Exact mean (..., T, 2) and covariance (..., T, 2, 2) at ``ts`` from ``N(x0, P0)`` at ``t0``."""
    dt = ts - t0
    ex = lambda a: a[..., None]  # noqa: E731  (batch, 1) against (T,)
    A, Q = van_loan(ex(c.M), ex(c.C), ex(c.K_eff), ex(q), dt)
    mean = jnp.einsum("...tij,...j->...ti", A, x0)
    cov = A @ P0[..., None, :, :] @ jnp.swapaxes(A, -1, -2) + Q
    return mean, cov


@eqx.filter_jit
def _exact_moments(c, ts, x0, P0, group_size, t0):
    c = broadcast(c)
    dtype = float_dtype(c.M, ts)
    c = type(c)(*(a.astype(dtype) for a in c))
    q = c.D / (jnp.asarray(group_size, dtype) * c.M**2)
    x0 = jnp.broadcast_to(jnp.asarray(x0, dtype), c.M.shape + (2,))
    P0 = jnp.broadcast_to(jnp.asarray(P0, dtype), c.M.shape + (2, 2))
    return _moments(c, jnp.asarray(ts, dtype), x0, P0, q, jnp.asarray(t0, dtype))


def exact_moments(
    params: Any,
    ts: Any,
    *,
    e0: Any = 1.0,
    v0: Any = 0.0,
    cov0: Any = None,
    group_size: Any = 1,
    t0: float = 0.0,
) -> tuple[jax.Array, jax.Array]:
    """Exact mean and covariance of ``x = (e, ė)`` at times ``ts`` (the reference for every test).

    ``mean(t) = exp(F (t − t0)) x0``, ``cov(t) = A P0 Aᵀ + Q(t − t0)``.

    Args:
        params: oscillator parameters (fields ``M, C, K_eff, p_star, D``), batch shape ``(...)``.
        ts: times ``(T,)``, each ``≥ t0``.
        e0, v0: initial deviation and velocity (broadcastable to the batch); default from rest at e0 = 1.
        cov0: optional initial covariance ``(..., 2, 2)`` (default 0: a deterministic start).
        group_size: group size ``G``.
        t0: initial time.

    Returns:
        ``(mean (..., T, 2), cov (..., T, 2, 2))``.
    """
    for name, v in (("ts", ts), ("e0", e0), ("v0", v0), ("t0", t0)):
        check_finite(name, v)
    group_size = check_positive("group_size", group_size)
    ts_np = np.asarray(ts) if is_concrete(ts) else None
    if ts_np is not None and (ts_np.ndim != 1 or np.any(ts_np < t0)):
        raise InvalidValueError(f"ts must be a 1-d array of times >= t0={t0}, got shape {ts_np.shape}, min {ts_np.min()}")
    x0 = jnp.stack(jnp.broadcast_arrays(jnp.asarray(e0, float), jnp.asarray(v0, float)), -1)
    P0 = jnp.zeros((2, 2)) if cov0 is None else jnp.asarray(cov0)
    if cov0 is not None:
        check_finite("cov0", cov0)
    return _exact_moments(coefficients(params), jnp.asarray(ts), x0, P0, jnp.asarray(group_size), jnp.asarray(t0))


def _chol2(Q):
    """Lower Cholesky factor of symmetric PSD 2×2 matrices (..., 2, 2), safe at ``Q = 0``."""
    a, b, c = Q[..., 0, 0], Q[..., 0, 1], Q[..., 1, 1]
    a_pos = a > 0
    l11 = jnp.sqrt(jnp.where(a_pos, a, 0.0))
    l21 = jnp.where(a_pos, b / jnp.where(a_pos, l11, 1.0), 0.0)
    l22 = jnp.sqrt(jnp.maximum(c - l21**2, 0.0))
    zero = jnp.zeros_like(a)
    return jnp.stack([jnp.stack([l11, zero], -1), jnp.stack([l21, l22], -1)], -2)


@eqx.filter_jit
def _sample_exact(c, ts, x0, key, n_paths, group_size, t0):
    c = broadcast(c)
    dtype = float_dtype(c.M, ts)
    batch = c.M.shape
    ts = jnp.asarray(ts, dtype)
    dts = jnp.diff(ts, prepend=jnp.asarray(t0, dtype))
    q = c.D.astype(dtype) / (jnp.asarray(group_size, dtype) * c.M.astype(dtype) ** 2)
    ex = lambda a: a.astype(dtype)[..., None]  # noqa: E731
    A, Q = van_loan(ex(c.M), ex(c.C), ex(c.K_eff), ex(q), dts)  # (..., T, 2, 2)
    Lc = _chol2(Q)
    A = jnp.moveaxis(A, -3, 0)
    Lc = jnp.moveaxis(Lc, -3, 0)
    x = jnp.broadcast_to(jnp.asarray(x0, dtype)[..., None, :], batch + (n_paths, 2))
    keys = jr.split(key, ts.shape[0])

    def step(x, inp):
        A_k, L_k, k = inp
        z = jr.normal(k, x.shape, dtype)
        x = jnp.einsum("...ij,...nj->...ni", A_k, x) + jnp.einsum("...ij,...nj->...ni", L_k, z)
        return x, x

    _, xs = jax.lax.scan(step, x, (A, Lc, keys))  # (T, ..., n, 2)
    return jnp.moveaxis(xs, 0, -2)


def sample_exact(
    params: Any,
    ts: Any,
    *,
    key: jax.Array,
    n_paths: int,
    e0: Any = 1.0,
    v0: Any = 0.0,
    group_size: Any = 1,
    t0: float = 0.0,
) -> jax.Array:
    """Draw paths of ``x = (e, ė)`` at ``ts`` from the exact transition (no discretisation error).

    Uses :func:`exact_transition` over each (possibly irregular) interval and a closed-form 2×2
    Cholesky factor of ``Q``; cost is one 2×2 mat-vec per path and time.

    Args:
        params: oscillator parameters, batch shape ``(...)``.
        ts: increasing times ``(T,)`` with ``ts[0] ≥ t0``.
        key: PRNG key.
        n_paths: number of independent paths per parameter set (static).
        e0, v0: initial state (broadcastable to the batch).
        group_size: group size ``G``.
        t0: initial time.

    Returns:
        Array ``(..., n_paths, T, 2)``.
    """
    check_finite("ts", ts)
    ts_np = np.asarray(ts)
    if ts_np.ndim != 1 or ts_np.size == 0 or np.any(np.diff(ts_np) < 0) or ts_np[0] < t0:
        raise InvalidValueError(f"ts must be a non-empty increasing 1-d array with ts[0] >= t0={t0}")
    if int(n_paths) != n_paths or n_paths < 1:
        raise InvalidValueError(f"n_paths must be a positive integer, got n_paths={n_paths!r}")
    for name, v in (("e0", e0), ("v0", v0)):
        check_finite(name, v)
    check_positive("group_size", group_size)
    x0 = jnp.stack(jnp.broadcast_arrays(jnp.asarray(e0, float), jnp.asarray(v0, float)), -1)
    return _sample_exact(coefficients(params), jnp.asarray(ts_np), x0, key, int(n_paths), jnp.asarray(group_size), jnp.asarray(t0))
