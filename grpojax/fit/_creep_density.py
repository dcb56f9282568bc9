"""The creep model's log posterior density and its gradient, in NumPy, in numpyro's unconstrained coordinates.

:func:`grpojax.fit._creep.creep_model` states the model in numpyro; its posterior is explored by a mode
search and importance sampling (:mod:`grpojax.fit._creep`) that evaluate the density tens of thousands of
times on one curve of a few hundred points. Written out in NumPy (float64) with its analytic gradient, the
same density costs no compilation: a command-line forecast answers in a second instead of spending ten
compiling XLA programs. The tests check :func:`potential` against ``numpyro.infer.util.potential_energy`` of
``creep_model`` and :func:`potential_and_grad` against ``jax.grad`` of it.

Coordinates (numpyro's ``biject_to`` of each site's support), in the order of ``SITES``:
``y0``, ``p_star``, ``log_rate``, ``log_theta``, ``log_k`` as they are; ``w = sigmoid(z)``;
``sigma = exp(z)``; ``rho = −0.5 + 1.45·sigmoid(z)``; ``nu = exp(z)``. The potential is minus the log prior,
the log Jacobian of these maps and the Student-t AR(1) likelihood of the residuals.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import betaln, digamma, expit, gammaln

_LOG2PI = math.log(2.0 * math.pi)
_RHO_LO, _RHO_WIDTH = -0.5, 1.45  # rho ~ Uniform(-0.5, 0.95)
_NU_MIN = 2.5  # smallest Student-t degrees of freedom (grpojax.fit._creep.NU_MIN)

# The rates are in units of 1/(time span of the fitted data), and a prefix does not know the run's
# time scale: a tight prior here asserts that the rise is mostly over within the data, which makes
# the forecast of a run that is still far from its plateau confidently too low. The priors are
# therefore broad in log-rate (±2 sd spans a factor ~50 either way) and on the plateau.
_LOG_RATE_PRIOR = (math.log(4.0), 2.0)  # fast rate
_LOG_THETA_PRIOR = (math.log(2.0), 2.0)  # creep rate scale
_LOG_K_PRIOR = (math.log(0.7), 0.8)  # creep shape (tail exponent)
_P_STAR_PRIOR_SD = 4.0  # plateau, in units of the curve's sd, around the mean of its last fifth


def _prior_params():
    return _LOG_RATE_PRIOR, _LOG_THETA_PRIOR, _LOG_K_PRIOR, _P_STAR_PRIOR_SD


def constrain(Z):
    """``(..., 9)`` unconstrained → dict of constrained site values (``SITES`` order)."""
    Z = np.asarray(Z, float)
    return {"y0": Z[..., 0], "p_star": Z[..., 1], "w": expit(Z[..., 2]), "log_rate": Z[..., 3], "log_theta": Z[..., 4],
            "log_k": Z[..., 5], "sigma": np.exp(Z[..., 6]), "rho": _RHO_LO + _RHO_WIDTH * expit(Z[..., 7]),
            "nu": np.exp(Z[..., 8])}


def unconstrain(v: dict):
    """Inverse of :func:`constrain`: dict of constrained values → ``(..., 9)``."""
    w = np.asarray(v["w"], float)
    r = (np.asarray(v["rho"], float) - _RHO_LO) / _RHO_WIDTH
    cols = [v["y0"], v["p_star"], np.log(w) - np.log1p(-w), v["log_rate"], v["log_theta"], v["log_k"],
            np.log(v["sigma"]), np.log(r) - np.log1p(-r), np.log(v["nu"])]
    return np.stack(np.broadcast_arrays(*(np.asarray(c, float) for c in cols)), -1)


def _log_sigmoid(x):
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def potential_and_grad(Z, t, y, anchors, variant, *, grad: bool = True):
    """Potential ``U = −log p`` (up to nothing: numpyro's constants included) of each row of ``Z``, and its gradient.

    Args:
        Z: ``(R, 9)`` unconstrained points.
        t, y: ``(n,)`` normalised times and rewards of one curve (no padding).
        anchors: ``(y_first, y_last)``, the prior centres of ``y0`` and ``p_star``.
        variant: ``(R,)`` or scalar flag per row: 1 the creep model, 0 its single-exponential case (``w = 1``
            in the curve), 2 the logistic slow start.
        grad: also return the gradient.

    Returns:
        ``U`` ``(R,)`` (and ``dU/dZ`` ``(R, 9)``); non-finite where the density is not finite.
    """
    lr_p, lt_p, lk_p, ps_sd = _prior_params()
    Z = np.atleast_2d(np.asarray(Z, float))
    R = Z.shape[0]
    flag = np.broadcast_to(np.asarray(variant, float), (R,))
    creep, logistic = flag > 0.5, flag > 1.5
    t = np.asarray(t, float)[None, :]
    y = np.asarray(y, float)[None, :]
    a0, a1 = float(anchors[0]), float(anchors[1])
    y0, ps, zw, lr, lt, lk, zs, zr, zn = (Z[:, i] for i in range(9))
    with np.errstate(all="ignore"):
        w = expit(zw)
        log_w, log_1mw = _log_sigmoid(zw), _log_sigmoid(-zw)
        sigma, nu = np.exp(zs), np.exp(zn)
        sr = expit(zr)
        rho = _RHO_LO + _RHO_WIDTH * sr
        rate, theta, k = np.exp(lr), np.exp(lt), np.exp(lk)
        df = _NU_MIN + nu
        # log prior + log |Jacobian| of the maps to the constrained sites
        lp = (-0.5 * (y0 - a0) ** 2 - 0.5 * _LOG2PI
              - 0.5 * ((ps - a1) / ps_sd) ** 2 - math.log(ps_sd) - 0.5 * _LOG2PI
              + 0.5 * log_w + 0.5 * log_1mw - betaln(1.5, 1.5) + log_w + log_1mw
              - 0.5 * ((lr - lr_p[0]) / lr_p[1]) ** 2 - math.log(lr_p[1]) - 0.5 * _LOG2PI
              - 0.5 * ((lt - lt_p[0]) / lt_p[1]) ** 2 - math.log(lt_p[1]) - 0.5 * _LOG2PI
              - 0.5 * ((lk - lk_p[0]) / lk_p[1]) ** 2 - math.log(lk_p[1]) - 0.5 * _LOG2PI
              + math.log(2.0) - 0.5 * _LOG2PI - 0.5 * sigma**2 + zs
              + _log_sigmoid(zr) + _log_sigmoid(-zr)  # Uniform prior −log 1.45 and the affine map's +log 1.45 cancel
              + 2.0 * math.log(0.1) + np.log(nu) - 0.1 * nu - gammaln(2.0) + zn)
        # the mean curve, each shape computed only for the rows that use it
        w_eff = np.where(creep, w, 1.0)[:, None]
        n = y.shape[1]
        S = np.empty((R, n))
        rc, rl = np.flatnonzero(~logistic), np.flatnonzero(logistic)
        if rc.size:
            E = np.exp(-rate[rc, None] * t)
            L1 = np.log1p(theta[rc, None] * t)
            P = np.exp(-k[rc, None] * L1)
            S[rc] = w_eff[rc] * E + (1.0 - w_eff[rc]) * P
        if rl.size:
            a = rate[rl, None] * (theta[rl, None] - t)
            b = (rate * theta)[rl, None]
            S[rl] = np.exp(_log_sigmoid(a) - _log_sigmoid(b))
        D = (ps - y0)[:, None]
        m = ps[:, None] - D * S
        # Student-t AR(1) likelihood of the residuals
        e = y - m
        u = e[:, 1:] - rho[:, None] * e[:, :-1]
        s0 = sigma / np.sqrt(1.0 - rho**2)
        c_df = gammaln(0.5 * (df + 1.0)) - gammaln(0.5 * df) - 0.5 * np.log(df * math.pi)
        q = u**2 / (sigma[:, None] ** 2 * df[:, None])
        q0 = e[:, 0] ** 2 / (s0**2 * df)
        ll = (n * c_df - (n - 1) * np.log(sigma) - np.log(s0) - 0.5 * (df + 1.0) * np.log1p(q0)
              - 0.5 * ((df + 1.0)[:, None] * np.log1p(q)).sum(-1))
        U = -(lp + ll)
        if not grad:
            return U
        g = np.empty((R, 9))
        # d ll / d u_i and d ll / d e_0
        gu = -(df + 1.0)[:, None] * u / (sigma[:, None] ** 2 * df[:, None] + u**2)
        g0 = -(df + 1.0) * e[:, 0] / (s0**2 * df + e[:, 0] ** 2)
        ge = np.zeros_like(e)
        ge[:, 1:] += gu
        ge[:, :-1] -= rho[:, None] * gu
        ge[:, 0] += g0
        gS = ge * D  # d ll / d S  (dm/dS = −D, d ll/dm = −ge)
        g[:, 0] = -np.sum(ge * S, -1)  # d ll / d y0 (dm/dy0 = S)
        g[:, 1] = -np.sum(ge * (1.0 - S), -1)  # d ll / d p_star
        dS = np.zeros((4, R, n))  # d S / d (z_w, log_rate, log_theta, log_k)
        if rc.size:
            wc = w_eff[rc]
            tt = np.broadcast_to(t, E.shape)
            dS[0, rc] = np.where(creep[rc, None], (E - P) * (w[rc] * (1.0 - w[rc]))[:, None], 0.0)
            dS[1, rc] = wc * (-tt * rate[rc, None]) * E
            dS[2, rc] = (1.0 - wc) * (-k[rc, None]) * P / (1.0 + theta[rc, None] * tt) * theta[rc, None] * tt
            dS[3, rc] = (1.0 - wc) * P * (-L1) * k[rc, None]
        if rl.size:  # logistic shape: d log S = σ(−a) da − σ(−b) db
            sa, sb = expit(-a), expit(-b)
            dS[1, rl] = S[rl] * (sa * a - sb * b)
            dS[2, rl] = S[rl] * (rate * theta)[rl, None] * (sa - sb)
        g[:, 2:6] = np.einsum("rn,jrn->rj", gS, dS)
        # noise: sigma (through every term), rho, df
        r_u = (df + 1.0)[:, None] * u**2 / (sigma[:, None] ** 2 * df[:, None] + u**2)
        r_0 = (df + 1.0) * e[:, 0] ** 2 / (s0**2 * df + e[:, 0] ** 2)
        g[:, 6] = np.sum(r_u - 1.0, -1) + (r_0 - 1.0)
        d_rho = np.sum(gu * (-e[:, :-1]), -1) + (r_0 - 1.0) * rho / (1.0 - rho**2)
        g[:, 7] = d_rho * _RHO_WIDTH * sr * (1.0 - sr)
        dc = 0.5 * digamma(0.5 * (df + 1.0)) - 0.5 * digamma(0.5 * df) - 0.5 / df
        d_df = (n * dc - 0.5 * np.log1p(q).sum(-1) - 0.5 * np.log1p(q0)
                + 0.5 * (df + 1.0) * ((q / (1.0 + q)).sum(-1) + q0 / (1.0 + q0)) / df)
        g[:, 8] = d_df * nu
        # the prior and Jacobian terms
        g[:, 0] += -(y0 - a0)
        g[:, 1] += -(ps - a1) / ps_sd**2
        g[:, 2] += 1.5 - 3.0 * w
        g[:, 3] += -(lr - lr_p[0]) / lr_p[1] ** 2
        g[:, 4] += -(lt - lt_p[0]) / lt_p[1] ** 2
        g[:, 5] += -(lk - lk_p[0]) / lk_p[1] ** 2
        g[:, 6] += 1.0 - sigma**2
        g[:, 7] += 1.0 - 2.0 * sr
        g[:, 8] += 2.0 - 0.1 * nu
    return U, -g
