"""Least-squares fits of the reward-curve laws on the host (NumPy float64), vectorised over the curves of a batch.

The one host solver of the laws: the command-line fits (a curve of a few hundred points per law, a
bootstrap of a hundred prefixes; :mod:`grpojax.fit._lsq` hands every batch too small for XLA to pay off
here, and fits larger ones with the compiled ``optimistix`` program of the same method) and the
detectors' mean-field validity check (:mod:`grpojax.diagnose._validity`, which imports no JAX). For each
curve, in normalised units (time in [0, 1], rewards centred and scaled):

1. a seed by variable projection: on a grid of the law's shape parameters (:data:`GRIDS`) the two level
   parameters are a weighted linear regression, and the grid point with the least squared error is kept;
2. Levenberg–Marquardt in the law's unconstrained coordinates (:func:`grpojax._curve_laws.to_unconstrained`),
   the Jacobian by central differences, damping ``JᵀJ + λI`` adapted by the gain ratio (Nielsen's rule);
   a curve stops when its accepted step and the change of its cost are both within ``atol + rtol·|value|``
   (``atol = rtol/100``, as in the JAX path), or when its gradient vanishes; one that does not within
   ``max_steps`` iterations is not converged.

The laws are evaluated by :mod:`grpojax._curve_laws` (the same formulas as the JAX classes); this module
imports only NumPy.
"""

from __future__ import annotations

import numpy as np

from grpojax._curve_laws import from_unconstrained as _from_u, law_curve, to_unconstrained as _to_u

__all__ = ["GRIDS", "SEED_POINTS", "fit_batch", "law_curve", "levenberg_marquardt", "seed"]

GRIDS = {
    "exponential": (np.geomspace(0.003, 10.0, 24),),
    "three_phase": (np.geomspace(0.8, 400.0, 12), np.array([-0.2, 0.2, 0.5, 0.85, 1.3, 2.5, 6.0])),
    "sigmoid": (np.geomspace(0.005, 3.0, 12), np.array([0.5, 1.0, 2.0, 4.0, 10.0])),
}
"""Shape-parameter grids of the variable-projection seed, in normalised time (t ∈ [0, 1])."""

SEED_POINTS = 64
"""The seed's grid search uses at most this many (evenly strided) points of a curve."""


def from_unconstrained(law: str, u):
    with np.errstate(all="ignore"):
        return _from_u(law, np.asarray(u, float), np)


def to_unconstrained(law: str, v):
    with np.errstate(all="ignore"):
        return _to_u(law, np.asarray(v, float), np)


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
        # the 2k shifted parameter vectors of every row evaluated in one call: (2k, rows, T)
        hk = h[None] * np.eye(k)[:, None, :]  # (k, rows, k): row j shifts parameter j by its h
        shifted = resid(np.concatenate([ua[None] + hk, ua[None] - hk]), idx)
        J = np.ascontiguousarray(np.moveaxis((shifted[:k] - shifted[k:]) / (2.0 * h.T[:, :, None]), 0, -1))
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


def fit_batch(law: str, max_steps: int, rtol: float, t, y, w):
    """Fits of rows ``(N, T)`` of normalised data (weights ``w``, 0 where missing): ``(v, pred, ok)`` with the
    constrained parameters ``(N, k)``, the fitted curves ``(N, T)`` and whether each converged."""
    t, y, w = (np.asarray(a, float) for a in (t, y, w))
    v0 = seed(law, GRIDS[law], SEED_POINTS, t, y, w)
    u0 = to_unconstrained(law, v0)
    yz = np.where(w > 0, y, 0.0)
    u, ok = levenberg_marquardt(law, t, yz, w, u0, max_steps=max_steps, rtol=rtol)
    finite = np.all(np.isfinite(u), -1)
    u = np.where(finite[:, None], u, u0)
    v = from_unconstrained(law, u)
    pred = law_curve(law, v[:, None, :], t)
    return v, pred, ok & finite
