"""Levenberg–Marquardt fits of the reward-curve laws in NumPy, for batches too small for XLA to pay off.

A command-line fit is one curve of a few hundred points per law (and a bootstrap of a hundred): compiling
the batched ``optimistix`` program of :mod:`grpojax.fit._lsq` for each law and each shape takes seconds,
running it takes milliseconds. This module fits the same laws by the same method, vectorised over the
curves of a batch in NumPy (float64), with no compilation:

1. the seed of :mod:`grpojax.fit._lsq` (variable projection on the same grid of shape parameters);
2. Levenberg–Marquardt in the law's unconstrained coordinates (the same bijections as
   :meth:`grpojax.dynamics.RewardLaw.from_unconstrained`), the Jacobian by central differences, damping
   ``JᵀJ + λI`` adapted by the gain ratio (Nielsen's rule); a curve stops when its accepted step and the
   change of its cost are both within ``atol + rtol·|value|`` (``atol = rtol/100``, as in the JAX path),
   or when its gradient vanishes; one that does not within ``max_steps`` iterations is not converged.

The laws are evaluated by NumPy ports of :class:`grpojax.dynamics.Exponential`, ``ThreePhase`` (through
the overflow-safe 2×2 exponential of :mod:`grpojax.dynamics._expm2`) and ``Sigmoid``; the tests check
them against the JAX classes and the fits against the JAX path.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from grpojax.dynamics import expm2_coefficients_numpy, get_law

def law_curve(law: str, v, t):
    """The law with constrained parameters ``v`` (``(..., k)``, in ``param_names`` order) at times ``t``
    (broadcast against ``v[..., 0]``)."""
    v = np.asarray(v, float)
    t = np.asarray(t, float)
    p = [v[..., i] for i in range(v.shape[-1])]
    with np.errstate(all="ignore"):
        if law == "exponential":
            r0, r_inf, T = p
            return r_inf - (r_inf - r0) * np.exp(-t / T)
        if law == "three_phase":
            r0, r_inf, om, zeta = p
            s = -zeta * om
            c, sig = expm2_coefficients_numpy(s, om**2, t)
            return r_inf - (r_inf - r0) * (c - sig * s)
        if law == "sigmoid":
            r0, A, t_mid, B = p
            pos = t > 0
            ts = np.where(pos, t, 1.0)
            frac = expit(B * (np.log(ts) - np.log(t_mid)))
            return np.where(pos, r0 + (A - r0) * frac, r0 + 0.0 * frac)
    get_law(law)  # raises the clear error for an unknown name
    raise AssertionError(law)  # pragma: no cover - get_law raised


def _forward(u, lo, hi):
    if lo == -np.inf and hi == np.inf:
        return u
    if hi == np.inf:
        return lo + np.exp(u)
    if lo == -np.inf:
        return hi - np.exp(u)
    return lo + (hi - lo) * expit(u)


def _inverse(x, lo, hi):
    if lo == -np.inf and hi == np.inf:
        return x
    if hi == np.inf:
        return np.log(x - lo)
    if lo == -np.inf:
        return np.log(hi - x)
    y = (x - lo) / (hi - lo)
    return np.log(y) - np.log1p(-y)


def from_unconstrained(law: str, u):
    bounds = get_law(law).bounds
    u = np.asarray(u, float)
    with np.errstate(all="ignore"):
        return np.stack([_forward(u[..., i], lo, hi) for i, (lo, hi) in enumerate(bounds)], -1)


def to_unconstrained(law: str, v):
    bounds = get_law(law).bounds
    v = np.asarray(v, float)
    with np.errstate(all="ignore"):
        return np.stack([_inverse(v[..., i], lo, hi) for i, (lo, hi) in enumerate(bounds)], -1)


def _levels(u, y, w, xp=np):
    """Weighted LS of ``y ≈ a + b u`` on the last axis; returns ``(a + b, a, SSE)`` (``xp``: numpy or jax.numpy)."""
    sw = xp.sum(w, -1)
    ub = xp.sum(w * u, -1) / sw
    yb = xp.sum(w * y, -1) / sw
    du = u - ub[..., None]
    var = xp.sum(w * du * du, -1)
    cov = xp.sum(w * du * (y - yb[..., None]), -1)
    ok = var > 1e-12 * sw
    b = xp.where(ok, cov / xp.where(ok, var, 1.0), 0.0)
    a = yb - b * ub
    r = y - a[..., None] - b[..., None] * u
    return a + b, a, xp.sum(w * r * r, -1)


def seed(law: str, grids, n_points: int, t, y, w):
    """Best point of the shape grid by variable projection, per curve: constrained ``(N, k)``."""
    stride = max(1, -(-t.shape[-1] // n_points))
    t, y, w = t[:, ::stride], y[:, ::stride], w[:, ::stride]
    shape = [m.ravel() for m in np.meshgrid(*grids, indexing="ij")]  # each (S,)
    S = shape[0].size
    v = np.stack([np.ones(S), np.zeros(S), *shape], -1)  # (S, k): R0 = 1, plateau 0: the law's shape function
    with np.errstate(all="ignore"):
        u = law_curve(law, v[None, :, None, :], t[:, None, :])  # (N, S, T)
        u = np.where(np.isfinite(u), u, 0.0)
        p0, p1, sse = _levels(u, y[:, None, :], w[:, None, :])
    sse = np.where(np.isfinite(sse), sse, np.inf)
    i = np.argmin(sse, -1)
    rows = np.arange(t.shape[0])
    return np.stack([p0[rows, i], p1[rows, i]] + [s[i] for s in shape], -1)


def levenberg_marquardt(law: str, t, y, w, u0, *, max_steps: int, rtol: float):
    """Minimise ``½‖w·(law(u; t) − y)‖²`` per row from ``u0`` (unconstrained, ``(N, k)``).

    Returns ``(u, converged)``. Rows whose start is not finite are returned unchanged and not converged.
    """
    atol = rtol * 1e-2
    N, k = u0.shape
    u = u0.copy()

    def resid(uu, rows):
        with np.errstate(all="ignore"):
            return w[rows] * (law_curve(law, from_unconstrained(law, uu)[..., None, :], t[rows]) - y[rows])

    rows_all = np.arange(N)
    r = resid(u, rows_all)
    cost = 0.5 * np.sum(r * r, -1)
    active = np.isfinite(cost) & np.all(np.isfinite(u), -1)
    done = np.zeros(N, bool)
    lam = np.full(N, np.nan)
    nu = np.full(N, 2.0)
    eye = np.eye(k)
    for _ in range(int(max_steps)):
        idx = np.flatnonzero(active & ~done)
        if idx.size == 0:
            break
        ua, ra, ca = u[idx], r[idx], cost[idx]
        h = 6e-6 * np.maximum(1.0, np.abs(ua))  # central differences: h ~ eps^(1/3)
        J = np.empty(ra.shape + (k,))
        for j in range(k):
            e = np.zeros(k)
            e[j] = 1.0
            J[..., j] = (resid(ua + h[:, j:j + 1] * e, idx) - resid(ua - h[:, j:j + 1] * e, idx)) / (2.0 * h[:, j:j + 1])
        J = np.where(np.isfinite(J), J, 0.0)
        A = np.einsum("nti,ntj->nij", J, J)
        g = np.einsum("nti,nt->ni", J, ra)
        la = lam[idx]
        la = np.where(np.isnan(la), 1e-3 * np.maximum(np.max(np.diagonal(A, 0, 1, 2), -1), 1e-12), la)
        small_grad = np.max(np.abs(g), -1) <= atol * np.maximum(1.0, ca)
        with np.errstate(all="ignore"):
            try:
                step = -np.linalg.solve(A + la[:, None, None] * eye, g[..., None])[..., 0]
            except np.linalg.LinAlgError:
                step = np.stack([-np.linalg.lstsq(A[i] + la[i] * eye, g[i], rcond=None)[0] for i in range(idx.size)])
            un = ua + step
            rn = resid(un, idx)
            cn = 0.5 * np.sum(rn * rn, -1)
            pred_red = -(g * step).sum(-1) - 0.5 * np.einsum("ni,nij,nj->n", step, A, step)
            rho = (ca - cn) / pred_red
        ok = np.isfinite(cn) & np.all(np.isfinite(un), -1) & (cn <= ca) & (pred_red > 0)
        conv = ok & np.all(np.abs(step) <= atol + rtol * np.abs(un), -1) & (np.abs(ca - cn) <= atol + rtol * np.abs(cn))
        # Nielsen's damping update: shrink on a good step, double (then quadruple...) on a rejected one
        with np.errstate(all="ignore"):
            shrink = np.maximum(1.0 / 3.0, 1.0 - (2.0 * np.clip(rho, 0.0, 1.0) - 1.0) ** 3)
        lam[idx] = np.where(ok, la * shrink, la * nu[idx])
        nu[idx] = np.where(ok, 2.0, nu[idx] * 2.0)
        acc = idx[ok]
        u[acc], r[acc], cost[acc] = un[ok], rn[ok], cn[ok]
        done[idx] = conv | small_grad
    return u, done & active


def fit_batch(law: str, grids, n_points: int, max_steps: int, rtol: float, t, y, w):
    """NumPy counterpart of ``_lsq._fit_batch``: ``(v, pred, ok)`` for rows ``(N, T)`` of normalised data."""
    t, y, w = (np.asarray(a, float) for a in (t, y, w))
    v0 = seed(law, grids, n_points, t, y, w)
    u0 = to_unconstrained(law, v0)
    yz = np.where(w > 0, y, 0.0)
    u, ok = levenberg_marquardt(law, t, yz, w, u0, max_steps=max_steps, rtol=rtol)
    finite = np.all(np.isfinite(u), -1)
    u = np.where(finite[:, None], u, u0)
    v = from_unconstrained(law, u)
    pred = law_curve(law, v[:, None, :], t)
    return v, pred, ok & finite
