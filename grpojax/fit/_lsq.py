r"""Point fits of the reward-curve laws: Levenberg–Marquardt under transforms, vmapped over curves.

For every curve (in normalised units, see :mod:`grpojax.fit._data`):

1. *Seed by variable projection.* Each law is linear in its two level parameters given its shape
   parameters: ``R(t) = P₀ u(t; θ) + P₁ (1 − u(t; θ))`` with ``(P₀, P₁) = (r0, r_inf)`` (exponential,
   three_phase) or ``(r0, A)`` (sigmoid). On a fixed grid of shape parameters ``θ`` the levels are
   solved in closed form (weighted 2-parameter regression) and the grid point with the least squared
   error is kept. This multi-start is one vectorised pass, so it costs less than a few LM steps.
2. *Polish* with ``optimistix.LevenbergMarquardt`` in the unconstrained coordinates of the law
   (:meth:`RewardLaw.to_unconstrained`), so the solution always respects the law's bounds.
3. *Report* (host side, NumPy): R², AIC, BIC (Gaussian errors, σ² profiled: ``n ln(SSE/n) + 2(k+1)``
   and ``n ln(SSE/n) + (k+1) ln n``), the lag-1 autocorrelation of the residuals, the noise ceiling
   ``1 − n σ̂²/SST`` (σ̂² from second differences), optionally R² after a declared centred moving
   average (applied to data *and* fit), and ΔBIC against a constant curve. A curve with
   ``ΔBIC < FLAT_DELTA_BIC`` is reported as ``no_learning`` with NaN parameters: no plateau or rate is
   invented for a curve that does not rise (or fall) detectably.
4. *Check that the law can describe the curve* (the laws describe learning: a rise towards a
   plateau). Each fit carries a ``status`` and a one-line ``reason``; parameters are NaN unless the
   status is ``ok`` or ``not_converged``:

   * ``decreasing``: the fitted curve ends below where it starts (a falling reward, a collapse),
     unless it is a growing oscillation (ζ < 0) caught in a trough;
   * ``law_cannot_describe``: three_phase with ζ < 0 (oscillation growing without bound) on a curve
     whose fit does not reverse direction by more than 2σ inside the observed range; or a plateau
     farther outside the observed range of the rewards than :data:`PLATEAU_RANGE_FACTOR` times its
     width (the curve never approaches it), or outside ``bounds`` (the rewards' possible range,
     when given).

A large batch is one ``jit`` + ``vmap`` call (sizes static), so thousands of curves fit at once. A small
one (at most ``_NUMPY_MAX`` padded points: a command-line fit, a bootstrap of a hundred prefixes) is fitted
by the same seed and the same Levenberg–Marquardt method in NumPy (:mod:`grpojax._lsq_host`), where
compiling the program would cost seconds and running either costs milliseconds.
"""

from __future__ import annotations

import functools
import os
import warnings
from functools import partial
from typing import NamedTuple

import numpy as np

from grpojax import _lsq_host
from grpojax._curve_laws import PARAMS as LAW_PARAMS, law_params
from grpojax._arrays import real_array
from grpojax._checks import check_int
from grpojax._errors import InvalidValueError
from grpojax._chunks import padded_chunks
from grpojax.fit._data import MIN_POINTS, check_bounds, check_curve, check_steps, noise_variance
from grpojax.logs import moving_average, read_log

STATUSES = ("ok", "not_converged", "no_learning", "insufficient_data", "decreasing", "law_cannot_describe")
"""Status names of a point fit: converged fit / LM did not converge / no detectable learning /
too few points or a constant curve (batched fits only; single-curve fits raise instead) / the
curve falls / the law cannot describe the curve (negative damping on a curve that does not
oscillate, a plateau the curve never approaches or outside the rewards' bounds). ``LawFit.reason``
says why in one line."""

FLAT_DELTA_BIC = 10.0
"""A law must beat a constant curve by ΔBIC ≥ 10 ("very strong" on Kass & Raftery's scale) for the
curve to count as learning; below, the fit is reported as ``no_learning``."""

# How each parameter maps from normalised to raw units.
_KIND = {"r0": "level", "r_inf": "level", "A": "level", "omega0": "rate", "T": "time", "t_mid": "time", "zeta": "none", "B": "none"}

# The variable-projection seed's shape grids and point budget: the host solver's (one seed for both paths).
_GRIDS, _SEED_POINTS = _lsq_host.GRIDS, _lsq_host.SEED_POINTS


class LawFit(NamedTuple):
    """Result of a point fit (arrays carry a leading batch axis for :func:`fit_laws_batched`).

    Attributes:
        law: law name.
        params: ``{name: value}`` in raw units (steps counted from ``t0``; rewards as given); NaN when
            the status is ``no_learning`` or ``insufficient_data``.
        status: one of :data:`STATUSES` (str, or array of str).
        r2: R² on the raw curve.
        r2_smoothed: R² after the declared moving average (NaN if ``smooth`` is None).
        noise_ceiling: the R² a perfect law would reach given the estimated noise variance.
        noise_ceiling_smoothed: same after smoothing (noise variance / window).
        aic, bic: information criteria (lower is better; compare laws on the same data only).
        sigma: residual standard deviation (reward units).
        lag1_autocorr: lag-1 autocorrelation of the residuals (≫ 0: autocorrelated noise or misfit).
        delta_bic_flat: BIC(constant) − BIC(law); < :data:`FLAT_DELTA_BIC` means no detectable learning.
        n_obs: number of observed points.
        t0: first step (the law's time origin).
        smooth: the declared smoothing window or None.
        fitted_params: the fitted parameters even when flagged (for diagnostics; do not report them).
        reason: why the status is not ``ok``, one line (``""`` when ok; str, or array of str).
    """

    law: str
    params: dict
    status: object
    r2: object
    r2_smoothed: object
    noise_ceiling: object
    noise_ceiling_smoothed: object
    aic: object
    bic: object
    sigma: object
    lag1_autocorr: object
    delta_bic_flat: object
    n_obs: object
    t0: object
    smooth: int | None
    fitted_params: dict
    reason: object = ""

    def model(self, index=None):
        """The fitted law as an ``eqx.Module`` of raw-unit parameters (time measured from ``t0``)."""
        from grpojax.dynamics import get_law  # noqa: PLC0415  (JAX: only for the JAX law object)

        cls = get_law(self.law)
        vals = [np.asarray(self.fitted_params[n]) for n in cls.param_names]
        if index is not None:
            vals = [v[index] for v in vals]
        return cls(*vals)

    def predict(self, steps, index=None):
        """Fitted curve at ``steps`` (shape ``(T,)``; batched fits: ``(N, T)`` unless ``index``).

        Evaluated in NumPy (float64): eager jax.numpy would compile a small program per operation and per
        length of ``steps``."""
        steps = np.asarray(steps, float)
        t0 = np.asarray(self.t0, float) if index is None else np.asarray(self.t0, float)[index]
        names = law_params(self.law)
        v = np.stack([np.asarray(self.fitted_params[n], float) for n in names], -1)
        if index is not None:
            v = v[index]
        if np.ndim(t0) == 0:
            return _lsq_host.law_curve(self.law, v, steps - t0)
        return _lsq_host.law_curve(self.law, v[:, None, :], steps[None, :] - t0[:, None])


# The compiled path (large batches, the posteriors' seeds) imports JAX, lineax and optimistix where it runs: a
# command-line fit, which the NumPy solver serves, imports none of them.


def _levels(u, y, w):
    """Weighted LS of ``y ≈ a + b u``; returns (P0, P1) = (a + b, a) and SSE. Shapes (..., T); jax.numpy."""
    import jax.numpy as jnp  # noqa: PLC0415

    return _lsq_host._levels(u, y, w, jnp)


def _seed(law_name: str, t, y, w):
    """Best grid point by variable projection, as constrained parameter vector (k,)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415

    from grpojax.dynamics import get_law  # noqa: PLC0415

    cls = get_law(law_name)
    stride = max(1, -(-t.shape[-1] // _SEED_POINTS))
    t, y, w = t[::stride], y[::stride], w[::stride]
    mesh = np.meshgrid(*_GRIDS[law_name], indexing="ij")
    shape = [jnp.asarray(m.ravel(), t.dtype) for m in mesh]  # each (S,)
    one, zero = jnp.ones_like(shape[0]), jnp.zeros_like(shape[0])
    law = cls(one, zero, *shape)
    u = jax.vmap(lambda m: m(t))(law)  # (S, T)
    u = jnp.where(jnp.isfinite(u), u, 0.0)
    p0, p1, sse = _levels(u, y[None, :], w[None, :])
    sse = jnp.where(jnp.isfinite(sse), sse, jnp.inf)
    i = jnp.argmin(sse)
    return jnp.stack([p0[i], p1[i]] + [s[i] for s in shape])


@functools.cache
def _normal_cholesky():
    """LM's damped step by the normal equations (JᵀJ + λI, 3–4 parameters) with Cholesky instead of the
default QR of the (T × k) Jacobian: a little faster under vmap (~9% in a one-off timing, not a benchmark); the
squared condition number is harmless for 3–4 well-scaled parameters in normalised units (the real-log R²
values of ``experiments/fit_real_runs.py`` in float32 did not change)."""
    import lineax as lx  # noqa: PLC0415

    return lx.Normal(lx.Cholesky())


def _fit_one(law_name: str, max_steps: int, rtol: float, t, y, w):
    import jax.numpy as jnp  # noqa: PLC0415
    import optimistix as optx  # noqa: PLC0415

    from grpojax.dynamics import get_law  # noqa: PLC0415

    cls = get_law(law_name)
    v0 = _seed(law_name, t, y, w)
    u0 = cls.from_vector(v0).to_unconstrained()
    yz = jnp.where(w > 0, y, 0.0)

    def residual(u, args):
        return w * (cls.from_unconstrained(u)(t) - yz)

    solver = optx.LevenbergMarquardt(rtol=rtol, atol=rtol * 1e-2, linear_solver=_normal_cholesky())  # normalised units
    sol = optx.least_squares(residual, solver, u0, max_steps=max_steps, throw=False)
    u = jnp.where(jnp.all(jnp.isfinite(sol.value)), sol.value, u0)
    v = cls.from_unconstrained(u).to_vector()
    ok = (sol.result == optx.RESULTS.successful) & jnp.all(jnp.isfinite(sol.value))
    pred = cls.from_vector(v)(t)
    return v, pred, ok


@functools.cache
def _compiled_fit_batch():
    import jax  # noqa: PLC0415

    def fit_batch(law_name: str, max_steps: int, rtol: float, t, y, w):
        return jax.vmap(partial(_fit_one, law_name, max_steps, rtol))(t, y, w)

    return jax.jit(fit_batch, static_argnums=(0, 1, 2))


def _fit_batch(law_name: str, max_steps: int, rtol: float, t, y, w):
    """The jitted, vmapped LM fit of a batch (JAX arrays in and out)."""
    return _compiled_fit_batch()(law_name, max_steps, rtol, t, y, w)


_NUMPY_MAX = 1 << 17
"""Batches of at most this many (padded) points are fitted in NumPy (:mod:`grpojax._lsq_host`): below it,
compiling the JAX program costs seconds where running either takes milliseconds (one curve of a command-line
fit, a bootstrap of a hundred prefixes). Larger batches run the compiled, vmapped program."""

_FIRST_PASS_STEPS = 30
"""Large batches: every curve gets this many LM iterations first; only the unconverged ones get more."""
_CHUNK, _RETRY_CHUNK, _TWO_PASS_MIN = 256, 64, 256


def _solve(law: str, max_steps: int, rtol: float, t, y, w):
    """LM fits of a batch as NumPy ``(v, pred, ok)``, identical to one ``_fit_batch(max_steps)`` call.

    A vmapped LM loop runs until its slowest curve stops, so one curve that needs ``max_steps``
    iterations makes every curve of its batch pay for them. For ``N ≥ _TWO_PASS_MIN`` curves the batch
    is cut into chunks of ``_CHUNK`` that get ``_FIRST_PASS_STEPS`` iterations (98% of the benchmark's
    curves converge by then); the unconverged rest is refitted from the same start with ``max_steps``
    in chunks of ``_RETRY_CHUNK``. LM is deterministic and a converged curve stops iterating, so the
    result equals the single call (tested); the shapes are fixed, so it costs two compilations at most.
    """
    N = t.shape[0]
    if N * t.shape[1] <= _NUMPY_MAX:
        return _lsq_host.fit_batch(law, max_steps, rtol, t, y, w)
    import jax.numpy as jnp  # noqa: PLC0415
    if N < _TWO_PASS_MIN or max_steps <= _FIRST_PASS_STEPS:
        return tuple(np.asarray(a) for a in _fit_batch(law, max_steps, rtol, jnp.asarray(t), jnp.asarray(y), jnp.asarray(w)))

    def chunked(rows, size, steps):
        outs = []
        for idx, m in padded_chunks(len(rows), size):
            sel = rows[idx]
            o = _fit_batch(law, steps, rtol, jnp.asarray(t[sel]), jnp.asarray(y[sel]), jnp.asarray(w[sel]))
            outs.append([np.asarray(a)[:m] for a in o])
        return [np.concatenate(parts) for parts in zip(*outs)]

    v, pred, ok = chunked(np.arange(N), min(_CHUNK, N), _FIRST_PASS_STEPS)
    redo = np.flatnonzero(~ok)
    if redo.size:
        v[redo], pred[redo], ok[redo] = chunked(redo, _RETRY_CHUNK, max_steps)
    return v, pred, ok


def _bucket(T: int) -> int:
    """Padded length: the next power of two, at least 64. Few distinct lengths mean few compiled programs,
    and with the persistent compilation cache a later call on a series of another length compiles
    nothing; padding costs at most a factor 2 in run time, which is small next to a compilation."""
    b = 64
    while b < T:
        b *= 2
    return b


def _to_raw(law_name, v, t0, span, center, scale):
    out = {}
    for i, n in enumerate(law_params(law_name)):
        kind = _KIND[n]
        x = v[..., i]
        if kind == "level":
            x = center + scale * x
        elif kind == "rate":
            x = x / span
        elif kind == "time":
            x = x * span
        out[n] = x
    return out


def _metrics(yraw, pred, mask, k, smooth, scale):
    """Host-side metrics; arrays (N, T) → dict of (N,).

    ``yraw`` and ``pred`` are in normalised units (rewards minus the centre, over ``scale`` (N,)), so that no
    sum of squares overflows or underflows whatever the rewards' magnitude; σ, AIC and BIC are mapped back
    to reward units (σ² scales by ``scale²``: AIC and BIC shift by ``2 n ln scale``)."""
    n = mask.sum(-1)
    log_scale2 = 2.0 * np.log(scale)
    yo = np.where(mask, yraw, np.nan)
    ybar = np.nanmean(yo, -1)
    res = np.where(mask, yraw - pred, np.nan)
    sse = np.nansum(res**2, -1)
    sst = np.nansum((yo - ybar[:, None]) ** 2, -1)
    r2 = 1.0 - sse / sst
    s2 = sse / n
    aic = n * (np.log(s2) + log_scale2) + 2 * (k + 1)
    bic = n * (np.log(s2) + log_scale2) + (k + 1) * np.log(n)
    bic_flat = n * (np.log(sst / n) + log_scale2) + 2 * np.log(n)
    num = np.nansum(res[:, 1:] * res[:, :-1], -1)
    den = np.nansum(res**2, -1)
    rho1 = num / den
    nv = noise_variance(yraw, mask)
    ceiling = np.clip(1.0 - n * nv / sst, 0.0, 1.0)
    if smooth is None:
        r2s = np.full_like(r2, np.nan)
        ceil_s = np.full_like(r2, np.nan)
    else:
        ys = moving_average(yo, smooth, edge="nan")
        ps = moving_average(np.where(mask, pred, np.nan), smooth, edge="nan")
        ok = np.isfinite(ys) & np.isfinite(ps)
        ysb = np.nanmean(np.where(ok, ys, np.nan), -1)
        sse_s = np.nansum(np.where(ok, (ys - ps) ** 2, np.nan), -1)
        sst_s = np.nansum(np.where(ok, (ys - ysb[:, None]) ** 2, np.nan), -1)
        r2s = 1.0 - sse_s / sst_s
        ceil_s = np.clip(1.0 - ok.sum(-1) * nv / smooth / sst_s, 0.0, 1.0)
    return dict(
        r2=r2,
        r2_smoothed=r2s,
        noise_ceiling=ceiling,
        noise_ceiling_smoothed=ceil_s,
        aic=aic,
        bic=bic,
        sigma=np.sqrt(s2) * scale,
        lag1_autocorr=rho1,
        delta_bic_flat=bic_flat - bic,
        n_obs=n,
    )


PLATEAU_RANGE_FACTOR = 2.0
"""A plateau farther outside the observed range of the rewards than this many times its width is one
the curve never approaches (``law_cannot_describe``). For a saturating exponential that is a curve
observed for less than 0.4 time constants: nearly straight, its plateau not identified."""

_LEVELS = {"exponential": ("r0", "r_inf"), "three_phase": ("r0", "r_inf"), "sigmoid": ("r0", "A")}


def _describe(law: str, status, fitted, pred, Y, mask, steps, sigma, delta_bic, max_steps: int, bounds):
    """Status after the checks that the law can describe each curve, and the one-line reason (host side)."""
    N = Y.shape[0]
    status = status.astype("<U19")
    reason = np.full(N, "", dtype=object)
    plateau = np.asarray(fitted[_LEVELS[law][1]], float)
    zeta = np.asarray(fitted["zeta"], float) if law == "three_phase" else np.full(N, np.nan)
    for i in range(N):
        st = status[i]
        if st == "insufficient_data":
            reason[i] = f"fewer than {MIN_POINTS} observed points, or a constant curve"
            continue
        if st == "no_learning":
            reason[i] = (f"the law beats a constant curve by ΔBIC = {delta_bic[i]:.3g} < {FLAT_DELTA_BIC:g}: "
                         "no detectable learning")
            continue
        m = mask[i]
        p, y, s = pred[i][m], Y[i][m], steps[i][m]
        lo, hi = float(np.min(y)), float(np.max(y))
        width = hi - lo
        two_sigma = 2.0 * float(sigma[i])
        k = int(np.argmax(p)), int(np.argmin(p))
        reverses = any(min(abs(p[j] - p[0]), abs(p[j] - p[-1])) > two_sigma for j in k)
        if p[-1] < p[0] and not (zeta[i] < 0 and reverses):  # (a growing oscillation may end in a trough)
            status[i] = "decreasing"
            reason[i] = (f"the curve falls: the fit goes from {p[0]:.4g} at step {s[0]:g} to {p[-1]:.4g} at step "
                         f"{s[-1]:g}; the {law} law describes a rise")
            continue
        if zeta[i] < 0 and not reverses:
            status[i] = "law_cannot_describe"
            reason[i] = (f"zeta = {zeta[i]:.3g} < 0 (an oscillation growing without bound) but the fit does not "
                         "reverse direction by more than 2 sigma within the observed steps: no plateau")
            continue
        P = float(plateau[i])
        if zeta[i] >= 0 or np.isnan(zeta[i]):
            beyond = max(lo - P, P - hi, 0.0)
            if bounds is not None and not bounds[0] <= P <= bounds[1]:
                status[i] = "law_cannot_describe"
                reason[i] = f"plateau {P:.4g} outside the rewards' bounds [{bounds[0]:g}, {bounds[1]:g}]"
                continue
            if beyond > PLATEAU_RANGE_FACTOR * width:
                status[i] = "law_cannot_describe"
                reason[i] = (f"plateau {P:.4g} lies {beyond / width:.3g}x the observed range [{lo:.4g}, {hi:.4g}] "
                             "beyond it: the curve never approaches it")
                continue
        if st == "not_converged":
            reason[i] = f"Levenberg-Marquardt did not converge in {max_steps} iterations"
    return status, reason


def fit_laws_batched(
    steps,
    Y,
    law: str = "three_phase",
    *,
    smooth: int | None = None,
    max_steps: int = 100,
    rtol: float = 1e-6,
    bounds: tuple[float, float] | None = None,
) -> LawFit:
    """Fit one law to many curves in one batched call (vmapped and jitted; in NumPy for small batches).

    Args:
        steps: ``(T,)`` steps shared by all curves, or ``(N, T)`` per curve; strictly increasing.
        Y: ``(N, T)`` rewards; NaN marks a missing observation (pad ragged curves with NaN). ±inf is
            an error.
        law: ``"exponential"``, ``"three_phase"`` or ``"sigmoid"``.
        smooth: optional declared moving-average window for ``r2_smoothed`` (the fit itself always
            uses the raw curve).
        max_steps: Levenberg–Marquardt iteration cap.
        rtol: LM relative tolerance (normalised units).
        bounds: ``(lo, hi)`` the rewards can take (e.g. ``(0, 1)`` for an accuracy), if known: a
            plateau outside is ``law_cannot_describe``.

    Returns:
        :class:`LawFit` with arrays of shape ``(N,)``. Curves with fewer than 8 observed points or
        with zero variance get status ``insufficient_data`` (NaN parameters) instead of an error,
        so that one bad row cannot sink a batch. See the module docstring for the statuses
        ``decreasing`` and ``law_cannot_describe``; ``reason`` says why in one line.

    Raises:
        ValueError: unknown law, bad shapes, ±inf rewards, non-increasing steps, bad ``smooth`` or
            ``bounds``.
    """
    names = law_params(law)
    max_steps = check_int("max_steps", max_steps, 1)
    if not (isinstance(rtol, (int, float, np.floating, np.integer)) and 0.0 < float(rtol) < 1.0):
        raise InvalidValueError(f"rtol must be a number in (0, 1), got rtol={rtol!r}")
    Y = real_array(Y, "Y", text=True)
    if Y.ndim != 2:
        raise InvalidValueError(f"Y must have shape (N, T), got {Y.shape}")
    N, T = Y.shape
    S = np.asarray(steps, dtype=float)
    if S.ndim == 1:
        S = np.broadcast_to(check_steps(S), (N, T))
    elif S.shape == (N, T):
        for i in range(N):
            check_steps(S[i], f"steps[{i}]")
    else:
        raise InvalidValueError(f"steps must have shape (T,) = ({T},) or (N, T) = {Y.shape}, got {S.shape}")
    if S.shape[-1] != T:
        raise InvalidValueError(f"steps must have length T={T}, got {S.shape[-1]}")
    if np.any(np.isinf(Y)):
        i, j = np.argwhere(np.isinf(Y))[0]
        raise InvalidValueError(f"rewards must be finite or NaN (missing), got Y[{i}, {j}]={Y[i, j]!r}")
    if smooth is not None and (int(smooth) != smooth or smooth < 1):
        raise InvalidValueError(f"smooth must be a positive integer window or None, got {smooth!r}")
    if bounds is not None:
        bounds = check_bounds(bounds)
    mask = np.isfinite(Y)
    n = mask.sum(-1)
    Yo = np.where(mask, Y, np.nan)
    # per row, as fit._data.spread and is_flat: computed on Y / max|Y| (no overflow or underflow at 1e200
    # or 1e-300), a curve is flat when its spread is below 1e-12 of its largest magnitude
    top = np.max(np.abs(np.where(mask, Y, 0.0)), -1)
    top_safe = np.where(top > 0, top, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        warnings.filterwarnings("ignore", "Degrees of freedom", RuntimeWarning)
        Z = np.where(n[:, None] > 0, Yo, 0.0) / top_safe[:, None]
        center = np.where(n > 0, np.nanmean(Z, -1) * top_safe, 0.0)
        scale = np.nanstd(Z, -1) * top_safe
    bad = (n < MIN_POINTS) | ~(scale > 1e-12 * top)
    scale = np.where(bad, 1.0, scale)
    t0 = S[:, 0]
    span = S[:, -1] - S[:, 0]
    tn = (S - t0[:, None]) / span[:, None]
    yn = np.where(mask, (Y - center[:, None]) / scale[:, None], 0.0)
    w = (mask & ~bad[:, None]).astype(float)
    w[bad] = 1.0  # dummy data for bad rows: keep the solver well posed; results are discarded
    yn[bad] = np.linspace(0.0, 1.0, T)[None, :]
    # Pad T to a bucket (zero weight, t = 1) so that curves of similar length share one compilation.
    Tp = _bucket(T)
    pad = ((0, 0), (0, Tp - T))
    tn_p = np.pad(tn, pad, constant_values=1.0)
    yn_p = np.pad(yn, pad)
    w_p = np.pad(w, pad)
    v, pred_n, ok = _solve(law, int(max_steps), float(rtol), tn_p, yn_p, w_p)
    pred_n = pred_n[:, :T]
    pred = center[:, None] + scale[:, None] * pred_n
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
        Yn = np.where(mask, (Y - center[:, None]) / scale[:, None], np.nan)
        met = _metrics(Yn, pred_n, mask, len(names), smooth, scale)
    fitted = _to_raw(law, v, t0, span, center, scale)
    status = np.where(ok, "ok", "not_converged").astype("<U17")
    status = np.where(met["delta_bic_flat"] < FLAT_DELTA_BIC, "no_learning", status)
    status = np.where(bad, "insufficient_data", status)
    status, reason = _describe(law, status, fitted, pred, Y, mask, S, met["sigma"], met["delta_bic_flat"],
                               int(max_steps), bounds)
    report = status == "ok"
    report |= status == "not_converged"
    params = {k: np.where(report, x, np.nan) for k, x in fitted.items()}
    for key in ("r2", "r2_smoothed", "aic", "bic", "sigma", "lag1_autocorr", "delta_bic_flat", "noise_ceiling", "noise_ceiling_smoothed"):
        met[key] = np.where(bad, np.nan, met[key])
    return LawFit(law=law, params=params, status=status, t0=t0, smooth=smooth, fitted_params=fitted, reason=reason,
                  **met)


def fit_law(steps, values, law: str = "three_phase", *, smooth: int | None = None, max_steps: int = 100,
            bounds: tuple[float, float] | None = None) -> LawFit:
    """Fit one law to one reward curve (see :func:`fit_laws_batched` for the method).

    Args:
        steps: ``(T,)`` strictly increasing steps.
        values: ``(T,)`` finite rewards (drop missing steps first; ``RunLog.series`` does).
        law: ``"exponential"``, ``"three_phase"`` or ``"sigmoid"``.
        smooth: optional declared moving-average window for ``r2_smoothed``.
        max_steps: Levenberg–Marquardt iteration cap.
        bounds: ``(lo, hi)`` the rewards can take, if known (a plateau outside is flagged).

    Returns:
        :class:`LawFit` with scalar entries; ``status`` is ``"ok"``, ``"not_converged"``,
        ``"no_learning"`` (flat curve), ``"decreasing"`` or ``"law_cannot_describe"`` (parameters
        NaN for the last three; ``fitted_params`` keeps the fit), with ``reason`` saying why.

    Raises:
        ValueError: fewer than 8 points, NaN/inf rewards, non-increasing steps, a constant curve, an
            unknown law.

    Example:
        >>> import numpy as np
        >>> s = np.arange(100.0)
        >>> fit = fit_law(s, 0.8 - 0.6 * np.exp(-s / 20), "exponential")
        >>> round(float(fit.params["T"]), 3), str(fit.status)
        (20.0, 'ok')
    """
    law_params(law)
    curve = check_curve(steps, values)
    f = fit_laws_batched(curve.steps, curve.y[None, :], law, smooth=smooth, max_steps=max_steps, bounds=bounds)
    scal = lambda x: x[0] if isinstance(x, np.ndarray) else x  # noqa: E731
    return LawFit(
        law=law,
        params={k: float(v[0]) for k, v in f.params.items()},
        fitted_params={k: float(v[0]) for k, v in f.fitted_params.items()},
        status=str(f.status[0]),
        reason=str(f.reason[0]),
        t0=float(f.t0[0]),
        smooth=smooth,
        **{k: (float(scal(getattr(f, k))) if k != "n_obs" else int(f.n_obs[0])) for k in (
            "r2", "r2_smoothed", "noise_ceiling", "noise_ceiling_smoothed", "aic", "bic", "sigma",
            "lag1_autocorr", "delta_bic_flat", "n_obs")},
    )


class LawFits(dict):
    """``{law: LawFit}`` from :func:`fit_all_laws`; ``str()`` is a text table, one line per law."""

    def __str__(self) -> str:
        lines = []
        for name, f in self.items():
            plateau = f.params.get("r_inf", f.params.get("A", float("nan")))
            lines.append(f"{name:<12} {str(f.status):<20} R² {float(f.r2):.3f}  AIC {float(f.aic):.1f}  "
                         f"plateau {float(plateau):.4g}" + (f"  ({f.reason})" if f.reason else ""))
        return "\n".join(lines)


def fit_all_laws(steps, values=None, *, smooth: int | None = None, bounds: tuple[float, float] | None = None,
                 metric: str = "reward_mean") -> LawFits:
    """:func:`fit_law` for every law in :data:`grpojax.dynamics.LAWS`.

    Args:
        steps: ``(T,)`` steps with ``values``; or, without ``values``, a log file or folder (read by
            :func:`grpojax.logs.read_log`, as ``grpojax fit`` reads it) or a :class:`grpojax.logs.RunLog`,
            whose ``metric`` column is fitted.
        values: ``(T,)`` rewards, or None (see ``steps``).
        smooth, bounds: as :func:`fit_law` (``--smooth``, ``--bounds`` of ``grpojax fit``).
        metric: the column fitted when ``steps`` is a log.

    Returns:
        :class:`LawFits`, a dict ``{law: LawFit}`` whose ``str()`` is a text table.
    """
    if values is None:
        run = read_log(steps) if isinstance(steps, (str, os.PathLike)) else steps
        if not hasattr(run, "series"):
            raise InvalidValueError(f"fit_all_laws takes (steps, values), a log path or a RunLog, got "
                                    f"{type(steps).__name__} without values")
        if not run.has(metric):
            raise InvalidValueError(f"metric {metric!r} is not a column of the run "
                                    f"(columns: {', '.join(sorted(run.columns)) or 'none'})")
        steps, values = run.series(metric)
    return LawFits({name: fit_law(steps, values, name, smooth=smooth, bounds=bounds) for name in LAW_PARAMS})
