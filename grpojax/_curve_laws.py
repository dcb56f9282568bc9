"""The reward-curve laws, written once for any array namespace (NumPy or ``jax.numpy``).

Every evaluation of a law goes through this module: the JAX classes of :mod:`grpojax.dynamics` (fits under
``jit``, posteriors), the NumPy least squares of :mod:`grpojax._lsq_host` (command-line fits, the
detectors' validity check) and predictions of fitted laws. It imports only NumPy (``xp`` is passed in),
so the diagnose path, which never imports JAX, evaluates the same formulas.

Laws (``t`` in steps from the law's origin):

    exponential   R(t) = R∞ − (R∞ − R₀) e^{−t/T}
    three_phase   R(t) = R∞ − (R∞ − R₀) φ(t; ω₀, ζ),  φ the oscillator-from-rest response (zero slope at 0)
    sigmoid       R(t) = R₀ + (A − R₀) / (1 + (t_mid/t)^B)            (ScaleRL, Khatri et al. 2025)

φ solves φ'' + 2ζω₀ φ' + ω₀² φ = 0 from rest (φ(0) = 1, φ'(0) = 0): φ = c − σ s with s = −ζω₀ and the
coefficients ``(c, σ)`` of the closed-form 2×2 matrix exponential (:func:`expm2_terms`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["BOUNDS", "PARAMS", "expm2_terms", "from_unconstrained", "law_curve", "law_params", "law_value", "logistic", "response", "response_sd",
           "to_unconstrained"]

_INF = math.inf

PARAMS: dict[str, tuple[str, ...]] = {
    "exponential": ("r0", "r_inf", "T"),
    "three_phase": ("r0", "r_inf", "omega0", "zeta"),
    "sigmoid": ("r0", "A", "t_mid", "B"),
}
"""Parameter names of each law, in the order of its parameter vectors."""


def law_params(name: str) -> tuple[str, ...]:
    """The parameter names of the law ``name``; :class:`grpojax.InvalidValueError` listing the known laws otherwise."""
    if name not in PARAMS:
        from grpojax._errors import InvalidValueError  # noqa: PLC0415

        raise InvalidValueError(f"unknown law {name!r}; expected one of {sorted(PARAMS)}")
    return PARAMS[name]


BOUNDS: dict[str, tuple[tuple[float, float], ...]] = {
    "exponential": ((-_INF, _INF), (-_INF, _INF), (0.0, _INF)),
    "three_phase": ((-_INF, _INF), (-_INF, _INF), (0.0, _INF), (-1.0, 50.0)),  # ζ < 0: a growing oscillation
    "sigmoid": ((-_INF, _INF), (-_INF, _INF), (0.0, _INF), (0.0, _INF)),
}
"""(lower, upper) limits of each parameter, used for fitting (``to_unconstrained`` maps them onto R)."""

_SERIES_X = 1e-2  # |q² t²| below which the Taylor series is used (next term ≈ x⁴/40320 < 3e-13)


def logistic(x, xp):
    """1 / (1 + e^{−x}) without overflow for any x: ``exp(−log(1 + e^{−x}))``."""
    return xp.exp(-xp.logaddexp(0.0, -x))


def expm2_terms(s, d, t, xp):
    """``(e^{st} c(t), e^{st} σ(t))`` of exp(F t) = e^{st} [c I + σ (F − s I)] for a real 2×2 matrix F with
    trace/2 ``s`` and determinant ``d`` (broadcast with ``t``).

    With NumPy each branch below is evaluated on its own entries only (:func:`_expm2_terms_numpy`, the same
    numbers); with ``jax.numpy`` every branch on every entry, selected by ``where`` (traceable, differentiable).

    With q² = s² − d, c = cosh(q t) and σ = sinh(q t)/q (continued to cos/sin for q² < 0). Both are entire
    in q², so the map is smooth through q² = 0 (ζ = 1), where their Taylor series in x = q² t² is used.
    For q² > 0 the exponentials are combined (e^{λ± t}, λ± = s ± q, the small root taken as d/λ_large)
    so that strongly overdamped and nearly massless oscillators neither overflow nor cancel.
    """
    if xp is np:
        return _expm2_terms_numpy(s, d, t)
    return _expm2_terms_where(s, d, t, xp)


def _expm2_terms_where(s, d, t, xp):
    """:func:`expm2_terms` with every branch evaluated on every entry and selected by ``xp.where``."""
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


def _expm2_terms_numpy(s, d, t):
    """:func:`_expm2_terms_where`'s numbers in NumPy, each branch computed on its own entries only (a third of
    the work where one regime holds, as in a least-squares fit of one curve). Entries that are neither small nor
    of real roots (complex roots, and NaN) take the complex-roots branch, as there."""
    s, d, t = np.broadcast_arrays(*(np.asarray(x) * 1.0 for x in (s, d, t)))
    q2 = s * s - d
    x = q2 * t * t
    small = np.abs(x) < _SERIES_X
    pos = (q2 > 0) & ~small
    rest = ~small & ~pos
    c, sig = np.empty(q2.shape), np.empty(q2.shape)
    if small.any():
        xs, ts = x[small], t[small]
        c_ser = 1.0 + xs * (1 / 2 + xs * (1 / 24 + xs * (1 / 720 + xs / 40320)))
        s_ser = ts * (1.0 + xs * (1 / 6 + xs * (1 / 120 + xs * (1 / 5040 + xs / 362880))))
        est_small = np.exp(s[small] * ts)
        c[small], sig[small] = est_small * c_ser, est_small * s_ser
    if pos.any():
        qp, sp, dp, tp = np.sqrt(q2[pos]), s[pos], d[pos], t[pos]
        big = np.where(sp < 0, sp - qp, sp + qp)
        big_safe = np.where(big != 0, big, 1.0)
        other = dp / big_safe
        lam_p = np.where(sp < 0, other, big)
        lam_m = np.where(sp < 0, big, other)
        ep = np.exp(lam_p * tp)
        sig[pos] = ep * (-np.expm1(-2.0 * qp * tp)) / (2.0 * qp)
        c[pos] = 0.5 * (ep + np.exp(lam_m * tp))
    if rest.any():
        q2r, tr = q2[rest], t[rest]
        neg = q2r < 0
        w = np.sqrt(np.where(neg, -q2r, 1.0))
        est_neg = np.exp(np.where(neg, s[rest] * tr, 0.0))
        c[rest] = est_neg * np.cos(w * tr)
        sig[rest] = est_neg * np.sin(w * tr) / w
    return c, sig


def response_sd(s, d, t, xp, terms=None):
    """φ(t) = [exp(F t)]₀₀, the response from rest (φ(0) = 1, φ'(0) = 0) of the oscillator whose drift
    matrix F = [[0, 1], [−d, 2s]] has trace/2 ``s`` and determinant ``d``: e^{st} (c + σ (F₀₀ − s)) with
    F₀₀ = 0. ``terms`` computes :func:`expm2_terms` (default: in ``xp``; JAX callers pass its compiled
    version)."""
    c, sig = (terms or (lambda a, b, c_: expm2_terms(a, b, c_, xp)))(s, d, t)
    return c - sig * xp.broadcast_to(s, c.shape)


def response(omega0, zeta, t, xp, terms=None):
    """φ(t; ω₀, ζ): :func:`response_sd` with s = −ζω₀ and d = ω₀²."""
    return response_sd(-zeta * omega0, omega0 * omega0, t, xp, terms)


def law_value(law: str, p, t, xp, terms=None):
    """Law ``law`` with parameters ``p`` (a sequence in :data:`PARAMS` order, each broadcast with ``t``) at
    steps ``t``. ``terms``: see :func:`response`."""
    if law == "exponential":
        r0, r_inf, T = p
        return r_inf - (r_inf - r0) * xp.exp(-t / T)
    if law == "three_phase":
        r0, r_inf, omega0, zeta = p
        return r_inf - (r_inf - r0) * response(omega0, zeta, t, xp, terms)
    if law == "sigmoid":
        r0, A, t_mid, B = p
        t = t * 1.0
        pos = t > 0
        ts = xp.where(pos, t, 1.0)
        # 1/(1 + (t_mid/t)^B) = logistic(B (log t − log t_mid)), stable for all magnitudes
        frac = logistic(B * (xp.log(ts) - xp.log(t_mid)), xp)
        return xp.where(pos, r0 + (A - r0) * frac, r0 + 0.0 * frac)
    raise KeyError(law)


def _forward(u, lo: float, hi: float, xp):
    if lo == -_INF and hi == _INF:
        return u
    if hi == _INF:
        return lo + xp.exp(u)
    if lo == -_INF:
        return hi - xp.exp(u)
    return lo + (hi - lo) * logistic(u, xp)


def _inverse(x, lo: float, hi: float, xp):
    if lo == -_INF and hi == _INF:
        return x
    if hi == _INF:
        return xp.log(x - lo)
    if lo == -_INF:
        return xp.log(hi - x)
    y = (x - lo) / (hi - lo)
    return xp.log(y) - xp.log1p(-y)


def from_unconstrained(law: str, u, xp):
    """Constrained parameters ``(..., k)`` from unconstrained ``u`` ``(..., k)``: identity for an unbounded
    parameter, ``lo + e^u`` / ``hi − e^u`` for a one-sided bound, a scaled logistic for two bounds."""
    return xp.stack([_forward(u[..., i], lo, hi, xp) for i, (lo, hi) in enumerate(BOUNDS[law])], axis=-1)


def to_unconstrained(law: str, v, xp):
    """The inverse of :func:`from_unconstrained`."""
    return xp.stack([_inverse(v[..., i], lo, hi, xp) for i, (lo, hi) in enumerate(BOUNDS[law])], axis=-1)


def law_curve(law: str, v, t) -> np.ndarray:
    """NumPy float64: the law with constrained parameters ``v`` (``(..., k)``) at ``t`` (broadcast against
    ``v[..., 0]``)."""
    v = np.asarray(v, float)
    t = np.asarray(t, float)
    with np.errstate(all="ignore"):
        return law_value(law, [v[..., i] for i in range(v.shape[-1])], t, np)
