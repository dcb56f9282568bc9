"""Closed-form, overflow-safe exponential of a real 2×2 matrix, smooth through repeated eigenvalues.

Cayley–Hamilton gives, for F with s = tr(F)/2, d = det(F) and q² = s² − d,

    exp(F t) = e^{s t} [ c(t) I + σ(t) (F − s I) ],   c = cosh(q t),  σ = sinh(q t)/q,

with cosh/sinh continued to cos/sin for q² < 0. Both c and σ are entire functions of q², so the map is
smooth through the critical case q² = 0 (ζ = 1); near it we use their Taylor series in x = q² t². For
q² > 0 the exponentials are combined (e^{λ± t}, λ± = s ± q with the small root taken as d/λ_large) so that
strongly overdamped and nearly massless oscillators neither overflow nor cancel. The formula is
elementwise, hence vectorises over parameter sets and times for free; it is checked against
``jax.scipy.linalg.expm`` in the tests.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

_SERIES_X = 1e-2  # |q² t²| below which the Taylor series is used (next term ≈ x⁴/40320 < 3e-13)


def _coefficients(s, d, t, xp):
    """The body of :func:`expm2_coefficients` for the array namespace ``xp`` (``jax.numpy`` or ``numpy``)."""
    s, d, t = xp.broadcast_arrays(*(xp.asarray(x) * 1.0 for x in (s, d, t)))
    q2 = s * s - d
    x = q2 * t * t
    small = xp.abs(x) < _SERIES_X
    pos = (q2 > 0) & ~small
    neg = (q2 < 0) & ~small

    # Taylor branch: c = Σ x^k/(2k)!, σ = t Σ x^k/(2k+1)!
    xs = xp.where(small, x, 0.0)
    c_ser = 1.0 + xs * (1 / 2 + xs * (1 / 24 + xs * (1 / 720 + xs / 40320)))
    s_ser = t * (1.0 + xs * (1 / 6 + xs * (1 / 120 + xs * (1 / 5040 + xs / 362880))))
    # Each branch sees only its own entries (the others get harmless dummies) so that a branch that is
    # not selected can neither overflow nor send NaN through the gradient of ``xp.where``.
    est_small = xp.exp(xp.where(small, s * t, 0.0))
    series = (est_small * c_ser, est_small * s_ser)

    # Real distinct roots λ± = s ± q, computed without cancellation.
    qp = xp.sqrt(xp.where(pos, q2, 1.0))
    sp = xp.where(pos, s, -1.0)
    dp = xp.where(pos, d, 0.0)
    big = xp.where(sp < 0, sp - qp, sp + qp)  # the root of larger modulus
    big_safe = xp.where(big != 0, big, 1.0)
    other = dp / big_safe
    lam_p = xp.where(sp < 0, other, big)  # s + q
    lam_m = xp.where(sp < 0, big, other)  # s - q
    ep = xp.exp(lam_p * t)
    # (e^{λ+ t} − e^{λ− t}) / (2q) = e^{λ+ t} (1 − e^{−2 q t}) / (2q)
    sig_pos = ep * (-xp.expm1(-2.0 * qp * t)) / (2.0 * qp)
    c_pos = 0.5 * (ep + xp.exp(lam_m * t))

    # Complex roots: cos / sin.
    w = xp.sqrt(xp.where(neg, -q2, 1.0))
    est_neg = xp.exp(xp.where(neg, s * t, 0.0))
    c_neg = est_neg * xp.cos(w * t)
    sig_neg = est_neg * xp.sin(w * t) / w

    c = xp.where(small, series[0], xp.where(pos, c_pos, c_neg))
    sig = xp.where(small, series[1], xp.where(pos, sig_pos, sig_neg))
    return c, sig


@jax.jit
def expm2_coefficients(s: Array, d: Array, t: Array) -> tuple[Array, Array]:
    """Return ``(e^{st} c(t), e^{st} σ(t))`` for trace/2 ``s``, determinant ``d`` and time ``t`` (broadcast)."""
    return _coefficients(s, d, t, jnp)


def expm2_coefficients_numpy(s, d, t) -> tuple[np.ndarray, np.ndarray]:
    """:func:`expm2_coefficients` in NumPy float64, for problems too small for XLA to pay off."""
    with np.errstate(all="ignore"):
        return _coefficients(*(np.asarray(x, float) for x in (s, d, t)), np)


@jax.jit
def expm2(F: Array, t: Array) -> Array:
    """exp(F t) for real 2×2 matrices ``F`` of shape ``(..., 2, 2)`` and times ``t`` of shape ``(...)``."""
    F = jnp.asarray(F) * 1.0
    s = 0.5 * (F[..., 0, 0] + F[..., 1, 1])
    d = F[..., 0, 0] * F[..., 1, 1] - F[..., 0, 1] * F[..., 1, 0]
    c, sig = expm2_coefficients(s, d, t)
    c, sig = jnp.broadcast_arrays(c, sig)
    s = jnp.broadcast_to(s, c.shape)
    F = jnp.broadcast_to(F, c.shape + (2, 2))
    eye = jnp.eye(2, dtype=F.dtype).reshape((1,) * c.ndim + (2, 2))  # explicit ranks: no implicit promotion
    shifted = F - s[..., None, None] * eye
    return c[..., None, None] * eye + sig[..., None, None] * shifted
