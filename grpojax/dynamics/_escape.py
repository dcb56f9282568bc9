"""Noise-driven escape from the plateau's basin: P(escape within T steps) of the stochastic linear update.

The exact threshold η* is that of the *mean* update. Each step's gradient is noisy, and the linearised
update with its noise is the stochastic linear recurrence

    e_{n+1} = (1 + μ − a₀) e_n − μ e_{n−1} − a e_{b(n)} + η ξ_n,     ξ_n ~ N(0, σ²/B) independent,

(a = η K_d, a₀ = η K_0, σ² the per-sample gradient variance along the error coordinate, B the samples per
step). In state-space form x_{n+1} = A_n x_n + η u ξ_n with the matrices of the exact stability analysis
(``_stability.py``: the (d+1)×(d+1) companion matrix for a constant lag d, the maps S·R (first step of a
period) and S (the others) on (e_n, e_{n−1}, s) for periodic refresh) and u = (1, 0, …, 0).

Moments (exact). From x_0 = (e₀, …, e₀) (at rest at e₀; e₀ = 0: started at the plateau) the mean is
m_{n+1} = A_n m_n and the covariance P_{n+1} = A_n P_n A_nᵀ + (η²σ²/B) u uᵀ; the lag-one covariance is
Cov(x_{n+1}, x_n) = A_n P_n. Stationary covariance (stable update): the discrete Lyapunov equation
P = A P Aᵀ + Q per step (constant lag), or P_0 = Φ P_0 Φᵀ + Q_Φ over one period (periodic refresh, Φ the
monodromy S^{K_ref−1}(S R), Q_Φ the noise the period accumulates), solved by
``scipy.linalg.solve_discrete_lyapunov``. The transient covariance is iterated step by step until it has
converged to the stationary one (relative change below 1e-9 on every element), after which each period
repeats the stationary period.

Escape (a Gaussian first-passage approximation). The basin is |e| ≤ w. Because (e_n, e_{n+1}) is exactly
bivariate normal, the probability of an exit at step n, q_n = P(|e_n| ≤ w, |e_{n+1}| > w), is exact
(bivariate normal rectangles through Owen's T function, ``scipy.special.owens_t``); it is the discrete
analogue of Rice's crossing rate. Counting exits as independent rare events (a Poisson process),

    P(escape within T) = 1 − exp(−N_T),    N_T = P(|e_0| > w) + Σ_{n<T} q_n,

Assumptions: Gaussian noise, a linear update everywhere inside the basin, and exits that are independent
(no clustering). N_T is the exact expected number of exits of the linear Gaussian process, so
1 − exp(−N_T) ≤ N_T bounds the exact first passage from above whenever exits do not cluster; clustered
exits (a slowly varying, strongly correlated e near the edge: small steps, large momentum) make N_T count
one escape more than once, and the formula then overestimates. ``docs/model/escape.md`` states the error
measured against simulation. Above η* the variance (and a non-zero mean) grows without bound, N_T → ∞ and
P → 1.

Noise that grows with the state (``noise_growth`` c > 0). Where the step's noise is smallest at the plateau
and grows away from it, take its variance as σ²/B · (1 + c e²) at error e (ξ_n conditionally centred given
the past, of that variance). The moment recursion stays exact and closed: the mean is unchanged, and the
covariance gains c·q·E[e_n²] on its (0, 0) element, q = η²σ²/B,

    P_{n+1} = A_n P_n A_nᵀ + q (1 + c (P_n[0, 0] + m_n[0]²)) u uᵀ,

an affine map of P_n. Over one period it is vec P ↦ M vec P + b (M, b built from the n² unit matrices): the
stationary covariance solves (I − M) vec P = b, and the update is mean-square stable iff the spectral radius
of M is below 1 (``stable`` and ``stationary_variance`` report that). Because the noise feeds on the state,
M's radius reaches 1 below η*: the variance then grows without bound although the mean update is stable.
The exits are still counted from the bivariate normal with these exact moments, which is an approximation
here: the law of e is no longer normal (its tails are heavier).

One batch for the whole refresh period (``batch_reuse=True``, periodic refresh only). Trainers that take
the K_ref updates of a period on the rollouts sampled at its refresh (TRL's ``num_iterations``, verl's
``ppo_epochs``, this project's trainers) draw the sampling noise once per period: every step of the period
sees the same draw ζ_k ~ N(0, σ²/B), independent across periods. The state gains the held noise z = η ζ_k,
x' = (x, z): at the refresh step z is redrawn and enters at once, x_{n+1} = S R x_n + u z_new, z_{n+1} = z_new
(the noise enters along g = (u, 1) with variance q = η²σ²/B); the other steps of the period carry it,
x_{n+1} = S x_n + u z_n, z_{n+1} = z_n, without new noise. The moments, the stationary covariance (the
Lyapunov equation over the augmented monodromy, whose spectrum is Φ's and 0), the lag-one covariance and the
exits are then computed exactly as above; with K_ref = 1 the model is the per-step one. With ``noise_growth``
the redrawn noise has variance q (1 + c E[e²]) at the refresh.

Closed forms (on-policy, no lag: periodic refresh with K_ref = 1, total a_t = η(K_0 + K_d)): with μ = 0 the
update is AR(1), e_{n+1} = (1 − a_t) e_n + η ξ_n, stationary variance η²σ²/(B (1 − (1 − a_t)²)), lag-one
correlation 1 − a_t, transient variance v_∞ (1 − (1 − a_t)^{2n}); with μ > 0 it is AR(2) with φ₁ = 1 + μ − a_t,
φ₂ = −μ and stationary variance (1 − φ₂) η²σ²/(B (1 + φ₂)((1 − φ₂)² − φ₁²)) (``escape_variance_closed_form``).

Everything here is a host computation in NumPy float64 (the matrices come from the JAX constructions of
``_stability.py``, evaluated once per call), vectorised over broadcast arrays of η, μ, K_d, K_0, noise and
basin; ``k_ref``, ``lag`` and ``steps`` are scalars.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from grpojax._checks import check_int as _check_int
from grpojax._defaults import LAG
from grpojax._errors import InvalidValueError
from grpojax.dynamics._checks import check, check_hyperparams, check_lag
from grpojax.dynamics._stability import EXACT_RADIUS_MAX_LAG, companion_constant, periodic_maps

__all__ = ["EscapeEstimate", "escape_probability", "escape_onset", "escape_variance_closed_form",
           "noise_from_gradients", "noise_from_reward_std", "noise_from_samples"]

ESCAPE_MAX_LAG = 256
"""Largest constant lag d of the escape model (its covariance is (d+1)×(d+1) per element and step)."""

GROWTH_MAX_LAG = 16
"""Largest constant lag d of the escape model with noise that grows with the state (``noise_growth > 0``: its
stationary covariance solves a (d+1)²-dimensional linear system per element)."""

_MAX_EXACT_STEPS = 20_000  # transient steps iterated one by one at most (then sampled through Φ^k: module notes)
_SAMPLES = 65  # periods sampled for the rest of a slowly converging transient
_ONSET_GRID = 15  # points per refinement round of escape_onset (log η)
_SATURATED = 40.0  # cumulative hazard beyond which P(escape) = 1 − e^−40 is 1 to double precision
_CONVERGED = 1e-9


class EscapeEstimate(NamedTuple):
    """P(escape within T steps) and the moments it comes from (NumPy float64, the broadcast shape).

    Attributes:
        probability: P(escape within ``steps``) = 1 − exp(−expected_exits).
        expected_exits: N_T, the expected number of exits from |e| ≤ w within the run.
        variance: Var(e) at the last step.
        stationary_variance: Var(e) of the stationary process (averaged over a refresh period for periodic
            refresh); ``inf`` when the update is unstable.
        lag1_correlation: stationary correlation of (e_n, e_{n+1}) (``nan`` when unstable).
        stable: spectral radius of the update below 1.
    """

    probability: np.ndarray
    expected_exits: np.ndarray
    variance: np.ndarray
    stationary_variance: np.ndarray
    lag1_correlation: np.ndarray
    stable: np.ndarray


# ----------------------------------------------------------------------------------- the step maps
def _step_maps(eta, mu, k_ref: int, kd, k0, lag: str) -> np.ndarray:
    """The per-phase one-step maps, shape (period, N, n, n): constant lag period 1 (the companion matrix),
    periodic refresh period K_ref (phase 0: S·R, the refresh then the step; phases 1..K_ref−1: S)."""
    a, a0 = eta * kd, eta * k0
    with jax.enable_x64(True):
        if lag == "constant":
            f = jax.vmap(lambda a_, m_, b_: companion_constant(a_, m_, k_ref, b_))
            return np.asarray(f(jnp.asarray(a), jnp.asarray(mu), jnp.asarray(a0)))[None]
        S, R = jax.vmap(periodic_maps)(jnp.asarray(a), jnp.asarray(mu), jnp.asarray(a0))
        S, R = np.asarray(S), np.asarray(R)
    return np.stack([S @ R] + [S] * (k_ref - 1))


def _matmul_t(A, P):
    """A P Aᵀ over the leading batch axis."""
    return A @ P @ np.swapaxes(A, -1, -2)


def _hold_noise(maps: np.ndarray):
    """The step maps of a refresh period whose noise is drawn once at the refresh and held (module notes):
    the state augmented with the held noise, shape (period, N, n+1, n+1), and the direction the fresh noise
    enters per phase as unit outer products, shape (period, n+1, n+1) (g g^T with g = (u, 1) at the refresh,
    0 at the other phases)."""
    period, N, n, _ = maps.shape
    out = np.zeros((period, N, n + 1, n + 1))
    out[:, :, :n, :n] = maps
    out[1:, :, 0, n] = 1.0  # the held noise enters e_{n+1} at every step after the refresh
    out[1:, :, n, n] = 1.0  # and is carried
    g = np.zeros(n + 1)
    g[0] = g[n] = 1.0
    G = np.zeros((period, n + 1, n + 1))
    G[0] = np.outer(g, g)
    return out, G


def _add_noise(P1, val, G, j):
    """P1 += val · (the noise direction of phase j): the (0, 0) element (fresh noise every step, G None) or
    val · G[j] (held noise)."""
    if G is None:
        P1[:, 0, 0] += val
    else:
        P1 += np.asarray(val)[:, None, None] * G[j]


def _stationary_start(maps: np.ndarray, q: np.ndarray, c: np.ndarray | None = None, G: np.ndarray | None = None):
    """Stationary covariance at the start of a period and the radius per step; NaN-filled where the update is
    unstable. Additive noise (c = 0): the discrete Lyapunov equation over the period map, radius that of the
    period map. Noise that grows with the state (c > 0): the period's affine map on the covariance (module
    notes) solved as a linear system, radius that of its linear part (mean-square stability)."""
    from scipy.linalg import solve_discrete_lyapunov

    period, N, n, _ = maps.shape
    Phi = np.broadcast_to(np.eye(n), (N, n, n)).copy()
    Q = np.zeros((N, n, n))
    for j, A in enumerate(maps):
        Phi = A @ Phi
        Q = _matmul_t(A, Q)
        _add_noise(Q, q, G, j)
    radius = np.abs(np.linalg.eigvals(Phi)).max(-1) ** (1.0 / period)
    P = np.full((N, n, n), np.nan)
    c = np.zeros(N) if c is None else np.broadcast_to(c, (N,))
    grow = c > 0
    for i in np.nonzero((radius < 1.0) & ~grow)[0]:
        P[i] = solve_discrete_lyapunov(Phi[i], Q[i])
    if grow.any():
        idx = np.nonzero(grow)[0]
        M, b = _covariance_period_map(maps[:, idx], q[idx], c[idx], G)
        r_ms = np.abs(np.linalg.eigvals(M)).max(-1) ** (1.0 / period)
        radius[idx] = np.maximum(radius[idx], r_ms)
        for j, i in enumerate(idx):
            if r_ms[j] < 1.0:
                P[i] = np.linalg.solve(np.eye(n * n) - M[j], b[j]).reshape(n, n)
    return P, radius


def _covariance_period_map(maps, q, c, G=None):
    """The covariance over one period as an affine map vec(P) ↦ M vec(P) + b, for noise of variance
    q (1 + c E[e²]) per step (mean 0): M from the n² unit matrices, b from P = 0."""
    period, N, n, _ = maps.shape
    basis = np.eye(n * n).reshape(n * n, n, n)
    L = np.broadcast_to(basis, (N, n * n, n, n)).copy()  # the linear part applied to each unit matrix
    B = np.zeros((N, n, n))
    for j, A in enumerate(maps):
        A_ = A[:, None]
        L1 = A_ @ L @ np.swapaxes(A_, -1, -2)
        if G is None:
            L1[:, :, 0, 0] += (q * c)[:, None] * L[:, :, 0, 0]
        else:
            L1 += (q * c)[:, None, None, None] * L[:, :, 0, 0][..., None, None] * G[j]
        B1 = _matmul_t(A, B)
        _add_noise(B1, q * (1.0 + c * B[:, 0, 0]), G, j)
        L, B = L1, B1
    M = np.swapaxes(L.reshape(N, n * n, n * n), -1, -2)  # column k: the image of unit matrix k
    return M, B.reshape(N, n * n)


def _bvn_cdf(h, k, rho):
    """Φ₂(h, k; ρ), the standard bivariate normal CDF, through Owen's T (elementwise, h, k finite)."""
    from scipy.special import ndtr, owens_t

    h, k, rho = np.broadcast_arrays(*(np.asarray(x, float) for x in (h, k, rho)))
    rho = np.clip(rho, -1.0 + 1e-15, 1.0 - 1e-15)
    s = np.sqrt((1.0 - rho) * (1.0 + rho))
    hs = np.where(h == 0, 1e-300, h)
    ks = np.where(k == 0, 1e-300, k)
    th = owens_t(hs, (k - rho * hs) / (hs * s))
    tk = owens_t(ks, (h - rho * ks) / (ks * s))
    beta = np.where((h * k < 0) | ((h * k == 0) & (h + k < 0)), 0.5, 0.0)
    return np.clip(0.5 * ndtr(h) + 0.5 * ndtr(k) - th - tk - beta, 0.0, 1.0)


def _exit_probability(m0, v0, m1, v1, c01, w):
    """q = P(|X| ≤ w, |Y| > w) and −log(1 − q/P(|X| ≤ w)) for (X, Y) bivariate normal (means m0, m1, variances
    v0, v1, covariance c01), stacked on a last axis of 2."""
    from scipy.special import ndtr

    s0, s1 = np.sqrt(np.maximum(v0, 1e-300)), np.sqrt(np.maximum(v1, 1e-300))
    rho = c01 / (s0 * s1)
    lo0, hi0 = (-w - m0) / s0, (w - m0) / s0
    lo1, hi1 = (-w - m1) / s1, (w - m1) / s1
    inside0 = ndtr(hi0) - ndtr(lo0)
    if not (np.any(m0) or np.any(m1)):  # centred: F(−h, −k; ρ) = 1 − Φ(h) − Φ(k) + F(h, k; ρ), F(h, −k; ρ) = Φ(h) − F(h, k; −ρ)
        rect = 2.0 * (_bvn_cdf(hi0, hi1, rho) + _bvn_cdf(hi0, hi1, -rho)) + 1.0 - 2.0 * (ndtr(hi0) + ndtr(hi1))
    else:
        rect = _bvn_cdf(hi0, hi1, rho) - _bvn_cdf(lo0, hi1, rho) - _bvn_cdf(hi0, lo1, rho) + _bvn_cdf(lo0, lo1, rho)
    q = np.maximum(inside0 - rect, 0.0)
    h = np.clip(q / np.maximum(inside0, 1e-300), 0.0, 1.0)  # P(out at n+1 | in at n)
    return np.stack([q, -np.log1p(-h)], -1)  # expected exits, cumulative hazard


def _outside(m, v, w):
    from scipy.special import ndtr

    s = np.sqrt(np.maximum(v, 1e-300))
    return np.where(v > 0, ndtr((-w - m) / s) + ndtr((m - w) / s), (np.abs(m) > w) * 1.0)


# ------------------------------------------------------------------------------------- the model
def _prepare(eta, mu, k_ref, curvature, k_instant, lag, noise, samples_per_step, basin, steps, e0, noise_growth,
             batch_reuse=False):
    check_lag(lag)
    _check_batch_reuse(batch_reuse, lag)
    k_ref = _check_int("k_ref", k_ref, 1)
    steps = _check_int("steps", steps, 1)
    if lag == "constant" and k_ref > ESCAPE_MAX_LAG:
        raise InvalidValueError(f"k_ref={k_ref} is above the limit {ESCAPE_MAX_LAG} of the escape model for "
                                "constant lag; use lag='periodic' or a shorter lag")
    eta, mu, _, curvature, k_instant = check_hyperparams(eta, mu, None, curvature, k_instant)
    noise = check("noise", noise, lambda x: x >= 0, ">= 0 (per-sample gradient noise variance)")
    samples_per_step = check("samples_per_step", samples_per_step, lambda x: x >= 1,
                             ">= 1 (samples per optimizer step)")
    basin = check("basin", basin, lambda x: x > 0, "> 0 (half-width of the basin, in the units of e)")
    e0 = check("e0", e0, lambda x: x == x, "finite")
    noise_growth = check("noise_growth", noise_growth, lambda x: x >= 0,
                         ">= 0 (relative growth of the noise variance per unit e², 0: additive noise)")
    if np.any(np.asarray(noise_growth) > 0):
        if steps > _MAX_EXACT_STEPS:
            raise InvalidValueError(f"steps={steps} is above the limit {_MAX_EXACT_STEPS} of the escape model with "
                                    "noise_growth > 0 (its moments are iterated step by step)")
        if lag == "constant" and k_ref > GROWTH_MAX_LAG:
            raise InvalidValueError(f"k_ref={k_ref} is above the limit {GROWTH_MAX_LAG} of the escape model with "
                                    "noise_growth > 0 for constant lag; use lag='periodic' or a shorter lag")
    arrs = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in
                                 (eta, mu, curvature, k_instant, noise, samples_per_step, basin, e0, noise_growth)))
    return k_ref, steps, arrs[0].shape, [a.ravel() for a in arrs]


def _check_batch_reuse(batch_reuse, lag):
    if not isinstance(batch_reuse, (bool, np.bool_)):
        raise InvalidValueError(f"batch_reuse must be True or False, got {batch_reuse!r}")
    if batch_reuse and lag != "periodic":
        raise InvalidValueError(f"batch_reuse=True needs lag='periodic' (one batch held over a refresh period), "
                                f"got lag={lag!r}")


def _escape_flat(eta, mu, kd, k0, noise, batch, w, e0, k_ref, lag, steps, c, batch_reuse=False):
    maps = _step_maps(eta, mu, k_ref, kd, k0, lag)
    G = None
    if batch_reuse:
        maps, G = _hold_noise(maps)
    period, N, n, _ = maps.shape
    q = eta**2 * noise / batch
    P_stat, radius = _stationary_start(maps, q, c, G)
    stable = radius < 1.0
    # exact moments, step by step, until the covariance has converged to the stationary period
    m = np.repeat(e0[:, None], n, axis=1)[..., None]  # (N, n, 1): at rest at e0
    if G is not None:
        m[:, -1] = 0.0  # no noise held before the first refresh
    P = np.zeros((N, n, n))
    out0 = _outside(m[:, 0, 0], P[:, 0, 0], w)
    exits = np.stack([out0, -np.log1p(-np.minimum(out0, 1.0))], -1)  # (N, 2): exits, cumulative hazard
    done = np.zeros(N, bool)
    var_last = np.zeros(N)
    t = 0
    cap = max(period, _MAX_EXACT_STEPS // period * period)
    while t < steps:
        A = maps[t % period]
        m1 = A @ m
        C = A @ P  # Cov(x_{t+1}, x_t)
        P1 = _matmul_t(A, P)
        _add_noise(P1, q * (1.0 + c * (P[:, 0, 0] + m[:, 0, 0] ** 2)), G, t % period)
        live = ~done
        with np.errstate(all="ignore"):
            exits[live] += _exit_probability(m[live, 0, 0], P[live, 0, 0], m1[live, 0, 0], P1[live, 0, 0],
                                             C[live, 0, 0], w[live])
        m, P = m1, P1
        t += 1
        var_last = np.where(done, var_last, P[:, 0, 0])
        saturated = ~done & ~(exits[:, 1] < _SATURATED)  # escaped for sure (NaN: the moments overflowed)
        exits[saturated, 1] = np.inf
        done |= saturated
        if t % period == 0 and (t >= 4 * period or t >= cap):
            # converged to the stationary period (and the mean to 0)?
            scale = np.maximum(np.abs(P_stat).max((1, 2)), 1e-300)
            with np.errstate(all="ignore"):
                conv = stable & ~done & (np.abs(P - P_stat).max((1, 2)) <= _CONVERGED * scale) \
                    & (np.abs(m[:, 0, 0]) <= 1e-9 * w)
            if conv.any():
                idx = np.nonzero(conv)[0]
                rate, _, _ = _stationary_period(maps[:, idx], P_stat[idx], q[idx], w[idx], c=c[idx], G=G)
                full, rest = divmod(steps - t, period)
                exits[idx] += full * rate[:, -1] + (rate[:, rest - 1] if rest else 0.0)
                var_last[idx] = _stationary_var_at(maps[:, idx], P_stat[idx], q[idx], steps % period, c[idx], G)
                done |= conv
            if done.all() or t >= cap:
                break
    left = np.nonzero(~done)[0]
    if t < steps and left.size:  # a slow transient: the rest sampled at a few periods (module notes)
        exits[left] += _sampled_rest(maps[:, left], P[left], m[left, :, 0], P_stat[left], stable[left], q[left],
                                     w[left], steps - t, G)
    sv, sc = np.full(N, np.inf), np.full(N, np.nan)
    if stable.any():
        idx = np.nonzero(stable)[0]
        _, sv[idx], sc[idx] = _stationary_period(maps[:, idx], P_stat[idx], q[idx], w[idx], c=c[idx], G=G)
    exits = np.where(np.isnan(exits), np.inf, exits)
    return -np.expm1(-exits[:, 1]), exits[:, 0], var_last, sv, sc, stable


def _stationary_period(maps, P0, q, w, mean=None, c=None, G=None):
    """Cumulative exits over one period started from covariance P0 (and mean), the period-averaged variance
    and lag-one correlation."""
    period, N, n, _ = maps.shape
    c = np.zeros(N) if c is None else c
    m = np.zeros((N, n, 1)) if mean is None else mean[..., None]
    P = P0.copy()
    cum = np.zeros((N, period, 2))
    acc = np.zeros((N, 2))
    v_sum = np.zeros(N)
    c_sum = np.zeros(N)
    for j in range(period):
        A = maps[j]
        m1 = A @ m
        C = A @ P
        P1 = _matmul_t(A, P)
        _add_noise(P1, q * (1.0 + c * (P[:, 0, 0] + m[:, 0, 0] ** 2)), G, j)
        acc = acc + _exit_probability(m[:, 0, 0], P[:, 0, 0], m1[:, 0, 0], P1[:, 0, 0], C[:, 0, 0], w)
        cum[:, j] = acc
        v_sum += P[:, 0, 0]
        c_sum += C[:, 0, 0] / np.sqrt(np.maximum(P[:, 0, 0] * P1[:, 0, 0], 1e-300))
        m, P = m1, P1
    return cum, v_sum / period, c_sum / period


def _sampled_rest(maps, P, m, P_stat, stable, q, w, remaining, G=None):
    """Expected exits over the ``remaining`` steps from phase 0 with covariance P and mean m, the period rate
    evaluated at ``_SAMPLES`` periods (exact moments there: P_k = P_∞ + Φ^k (P − P_∞) Φ^kᵀ for a stable
    update, Φ^k P Φ^kᵀ + Σ_j Φ^j Q_Φ Φ^jᵀ otherwise, summed by doubling) and summed by the trapezoid rule."""
    period, N, n, _ = maps.shape
    Phi = np.broadcast_to(np.eye(n), (N, n, n)).copy()
    Q = np.zeros((N, n, n))
    for j, A in enumerate(maps):
        Phi = A @ Phi
        Q = _matmul_t(A, Q)
        _add_noise(Q, q, G, j)
    full, rest = divmod(remaining, period)
    ks = np.unique(np.linspace(0, max(full - 1, 0), _SAMPLES).round().astype(int))
    rates = np.zeros((N, ks.size, 2))
    P_inf = np.where(stable[:, None, None], P_stat, 0.0)
    for j, k in enumerate(ks):
        Fk = np.linalg.matrix_power(Phi, int(k))
        with np.errstate(all="ignore"):
            Pk = np.where(stable[:, None, None], P_inf + _matmul_t(Fk, P - P_inf), _matmul_t(Fk, P) + _noise_sum(Phi, Q, int(k)))
            mk = (Fk @ m[..., None])[..., 0]
            rates[:, j] = _stationary_period(maps, Pk, q, w, mean=mk, G=G)[0][:, -1]
    rates = np.where(np.isnan(rates), np.inf, rates)
    total = (np.trapezoid(rates, ks, axis=1) + 0.5 * (rates[:, 0] + rates[:, -1])) if ks.size > 1 \
        else rates[:, 0] * full
    if rest:
        total = total + rates[:, -1] * (rest / period)
    return total


def _noise_sum(Phi, Q, k):
    """Σ_{j<k} Φ^j Q Φ^jᵀ by doubling (the covariance a period map accumulates over k periods from 0)."""
    n_ = Phi.shape[-1]
    S = np.zeros_like(Q)
    F = np.broadcast_to(np.eye(n_), Phi.shape).copy()  # Φ^(done)
    blockF, blockS = Phi.copy(), Q.copy()  # Φ^(2^i), Σ_{j<2^i}
    while k:
        if k & 1:
            S = S + _matmul_t(F, blockS)
            F = blockF @ F
        blockS = blockS + _matmul_t(blockF, blockS)
        blockF = blockF @ blockF
        k >>= 1
    return S


def _stationary_var_at(maps, P0, q, phase, c=None, G=None):
    P = P0.copy()
    c = np.zeros(P.shape[0]) if c is None else c
    for j in range(phase):
        P1 = _matmul_t(maps[j], P)
        _add_noise(P1, q * (1.0 + c * P[:, 0, 0]), G, j)
        P = P1
    return P[:, 0, 0]


def escape_probability(
    eta: ArrayLike,
    mu: ArrayLike,
    k_ref: int,
    curvature: ArrayLike,
    *,
    noise: ArrayLike,
    basin: ArrayLike,
    steps: int,
    lag: str = LAG,
    k_instant: ArrayLike = 0.0,
    samples_per_step: ArrayLike = 1,
    e0: ArrayLike = 0.0,
    noise_growth: ArrayLike = 0.0,
    batch_reuse: bool = False,
) -> EscapeEstimate:
    """P(the error leaves |e| ≤ basin within ``steps`` steps) of the noisy linearised update.

    Args:
        eta: heavy-ball learning rate η > 0 (for Adam: η(1 − β₁) with μ = β₁ and the preconditioned
            stiffness, as :func:`grpojax.monitor.advise` maps it).
        mu: momentum μ ∈ [0, 1).
        k_ref: lag d (constant) or refresh interval (periodic), an integer ≥ 1.
        curvature: stale stiffness K_d (any sign).
        noise: per-sample gradient variance σ² along the error coordinate (≥ 0).
        basin: half-width w of the basin: the run has escaped once |e| > w.
        steps: planned length T of the run in optimizer steps.
        lag: ``"constant"`` or ``"periodic"``.
        k_instant: instant stiffness K_0 (any sign).
        samples_per_step: samples B whose mean gradient one step takes (prompts per step × G): the step's
            gradient noise variance is σ²/B.
        e0: starting error (at rest); 0 starts at the plateau.
        noise_growth: c ≥ 0, the growth of the step's noise variance with the state: σ²/B · (1 + c e²) at
            error e (module notes: exact second moments; 0, the default, is additive noise).
        batch_reuse: the K_ref steps of a refresh period take their gradients on the one batch sampled at the
            refresh, so its noise is drawn once per period and held (module notes; ``lag="periodic"`` only).
            False (the default): a fresh draw every step.

    Returns:
        :class:`EscapeEstimate` broadcast over the array arguments (module notes: the exact moments of the
        linear Gaussian recurrence, exits counted as a Poisson process).

    Raises:
        ValueError: a value out of range, an unknown ``lag``, a constant lag above ``ESCAPE_MAX_LAG`` (above
            ``GROWTH_MAX_LAG`` with ``noise_growth > 0``, or more than 20,000 steps), ``batch_reuse`` not a bool
            or with a constant lag.

    Example:
        >>> est = escape_probability(0.1, 0.0, 1, 1.0, noise=1.0, basin=1.0, steps=1000)
        >>> 0.0 < float(est.probability) < 1.0
        True
    """
    k_ref, steps, shape, flat = _prepare(eta, mu, k_ref, curvature, k_instant, lag, noise, samples_per_step,
                                         basin, steps, e0, noise_growth, batch_reuse)
    eta, mu, kd, k0, noise, batch, w, e0, c = flat
    with np.errstate(over="ignore", invalid="ignore"):  # an unstable update's moments overflow: handled as escape
        out = _escape_flat(eta, mu, kd, k0, noise, batch, w, e0, k_ref, lag, steps, c, bool(batch_reuse))
    return EscapeEstimate(*(np.asarray(x).reshape(shape) for x in out))


def escape_onset(
    mu: ArrayLike,
    k_ref: int,
    curvature: ArrayLike,
    *,
    noise: ArrayLike,
    basin: ArrayLike,
    steps: int,
    lag: str = LAG,
    k_instant: ArrayLike = 0.0,
    samples_per_step: ArrayLike = 1,
    level: float = 0.5,
    eta_max: ArrayLike | None = None,
    noise_growth: ArrayLike = 0.0,
    iters: int = 40,
    rtol: float = 1e-4,
    batch_reuse: bool = False,
) -> np.ndarray:
    """The learning rate at which P(escape within ``steps``) reaches ``level`` (the predicted onset at 1/2).

    Grid refinement in log η (15 points a round, each round one vectorised evaluation; ``iters`` rounds at
    most), vectorised over the broadcast arguments, on [η_max·1e-6, η_max] with η_max the exact
    threshold η* (:func:`exact_critical_eta`) unless given: P is taken as increasing in η there (the noise
    and the response to it both grow with η). Returns η_max where P stays below ``level`` up to η_max
    (``inf`` where η* is infinite and no η_max was given), and ``0`` where it is already above it at the
    bottom of the range. The refinement stops at a relative width ``rtol`` in η. ``noise_growth`` and
    ``batch_reuse`` are passed to :func:`escape_probability`.
    """
    from grpojax.dynamics._stability import exact_critical_eta

    level = float(check("level", level, lambda x: (x > 0) & (x < 1), "in (0, 1) (a probability)"))
    k_ref = _check_int("k_ref", k_ref, 1)
    iters = _check_int("iters", iters, 1)
    check_lag(lag)
    _check_batch_reuse(batch_reuse, lag)
    mu_a, kd_a, k0_a, nz, b, w, cg = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in
                                                           (mu, curvature, k_instant, noise, samples_per_step, basin,
                                                            noise_growth)))
    if eta_max is None:
        hi = np.asarray(exact_critical_eta(mu_a, k_ref, kd_a, lag=lag, k_instant=k0_a), np.float64)
    else:
        hi = np.broadcast_to(np.asarray(check("eta_max", eta_max, lambda x: x > 0, "> 0"), np.float64), mu_a.shape)
    hi = np.array(hi, np.float64)
    out = np.full(mu_a.shape, np.inf)
    ok = np.isfinite(hi) & (hi > 0)
    out[hi == 0] = 0.0
    if not ok.any():
        return out

    sel = np.nonzero(ok.ravel())[0]
    cols = [x.ravel()[sel] for x in (mu_a, kd_a, k0_a, nz, b, w, cg)]

    def prob(eta, rows):
        m_, kd_, k0_, nz_, b_, w_, cg_ = (c[rows] for c in cols)
        return escape_probability(eta, m_, k_ref, kd_, noise=nz_, basin=w_, steps=steps, lag=lag, k_instant=k0_,
                                  samples_per_step=b_, noise_growth=cg_, batch_reuse=batch_reuse).probability

    every = np.arange(sel.size)
    top = hi.ravel()[sel] * (1.0 - 1e-9)
    lo, up = np.log(top * 1e-6), np.log(top)
    res = np.where(prob(top, every) < level, hi.ravel()[sel], np.nan)
    res = np.where(np.isnan(res) & (prob(np.exp(lo), every) >= level), 0.0, res)
    todo = np.nonzero(np.isnan(res))[0]
    frac = np.linspace(0.0, 1.0, _ONSET_GRID + 2)[1:-1]
    for _ in range(iters):  # grid refinement: every round evaluates _ONSET_GRID points per element in one call
        if not todo.size or np.all(up[todo] - lo[todo] < rtol):
            break
        pts = lo[todo, None] + frac[None, :] * (up[todo] - lo[todo])[:, None]  # (n, grid) in log η
        rows = np.repeat(todo, frac.size)
        hit = (prob(np.exp(pts.ravel()), rows) >= level).reshape(pts.shape)
        first = np.where(hit.any(1), np.argmax(hit, 1), frac.size)
        new_lo = np.where(first > 0, pts[np.arange(todo.size), np.maximum(first - 1, 0)], lo[todo])
        new_up = np.where(first < frac.size, pts[np.arange(todo.size), np.minimum(first, frac.size - 1)], up[todo])
        lo[todo], up[todo] = new_lo, new_up
    res = np.where(np.isnan(res), np.exp(0.5 * (lo + up)), res)
    flat = out.ravel()
    flat[sel] = res
    return flat.reshape(mu_a.shape)


def escape_variance_closed_form(eta: ArrayLike, mu: ArrayLike, curvature: ArrayLike, *, noise: ArrayLike,
                                k_instant: ArrayLike = 0.0, samples_per_step: ArrayLike = 1,
                                steps: int | None = None) -> np.ndarray:
    """Closed-form Var(e) of the on-policy update (periodic refresh with K_ref = 1: no lag).

    With a_t = η (K_0 + K_d) and s² = η²σ²/B: μ = 0 is AR(1), Var = s²/(1 − (1 − a_t)²), and from the plateau
    after n steps s² (1 − (1 − a_t)^{2n})/(1 − (1 − a_t)²) (``steps`` = n); μ > 0 is AR(2) with φ₁ = 1 + μ − a_t,
    φ₂ = −μ, stationary Var = (1 − φ₂) s² / ((1 + φ₂)((1 − φ₂)² − φ₁²)) (``steps`` must be None). ``inf``
    where the update is unstable.
    """
    eta, mu, _, curvature, k_instant = check_hyperparams(eta, mu, None, curvature, k_instant)
    noise = check("noise", noise, lambda x: x >= 0, ">= 0 (per-sample gradient noise variance)")
    eta, mu, kd, k0, nz, b = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in
                                                   (eta, mu, curvature, k_instant, noise, samples_per_step)))
    s2 = eta**2 * nz / b
    at = eta * (kd + k0)
    if steps is not None:
        steps = _check_int("steps", steps, 0)
        if np.any(mu != 0):
            raise InvalidValueError("the transient closed form is the AR(1) case: mu must be 0 with steps given")
        phi = 1.0 - at
        denom = 1.0 - phi**2
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(denom != 0, s2 * (1.0 - phi ** (2 * steps)) / np.where(denom != 0, denom, 1.0),
                            s2 * steps)
    p1, p2 = 1.0 + mu - at, -mu
    denom = (1.0 + p2) * ((1.0 - p2) ** 2 - p1**2)
    stable = (np.abs(p2) < 1) & (np.abs(p1) < 1 - p2)
    return np.where(stable & (denom > 0), (1.0 - p2) * s2 / np.where(denom > 0, denom, 1.0), np.inf)


# ----------------------------------------------------------------------------------- the noise
def noise_from_gradients(grads: ArrayLike, direction: ArrayLike | None = None) -> float:
    """Per-sample gradient variance σ² from per-sample gradients, shape ``(n_samples, n_params)``.

    With a ``direction`` (a unit vector of length n_params: the stiffest direction of the one-number
    reduction) σ² is the unbiased sample variance of the gradients projected on it, Var(gᵢ · v); without
    one it is the total variance, the trace of the gradient covariance Σⱼ Var(gᵢⱼ). The gradient of a
    step that averages B independent samples then has variance σ²/B along the same direction.
    """
    g = np.asarray(grads, np.float64)
    if g.ndim != 2 or g.shape[0] < 2:
        raise InvalidValueError(f"grads must have shape (n_samples >= 2, n_params), got shape {g.shape}")
    if not np.all(np.isfinite(g)):
        raise InvalidValueError("grads must be finite, got a non-finite per-sample gradient")
    if direction is not None:
        v = np.asarray(direction, np.float64).ravel()
        if v.shape[0] != g.shape[1]:
            raise InvalidValueError(f"direction must have {g.shape[1]} entries (one per parameter), got {v.shape[0]}")
        nrm = np.linalg.norm(v)
        if not np.isfinite(nrm) or nrm == 0:
            raise InvalidValueError("direction must be a finite, non-zero vector")
        return float(np.var(g @ (v / nrm), ddof=1))
    return float(np.var(g, axis=0, ddof=1).sum())


def noise_from_reward_std(reward_std: ArrayLike, group_size: ArrayLike, *, pass_rate: ArrayLike | None = None,
                          eps: float = 0.0) -> np.ndarray:
    """Per-sample gradient variance σ² in reward units from a log's mean within-group reward std and G.

    The model's error is e = p − p* (reward units). For a group-normalised advantage Aᵢ = (rᵢ − r̄)/(s + eps)
    the per-sample update of the mean reward along the reward direction is Aᵢ times the reward's own
    standard deviation, so its variance is Var(A) · s_r² where s_r² is the per-sample reward variance. With
    the population std over the group, Var(A) = s²/(s + eps)² (1 for eps = 0) and E[s²] = (G − 1)/G · s_r²,
    so σ² = s_r² = G/(G − 1) · E[s²]: the unbiased reward variance. ``reward_std`` is that within-group std
    averaged over the log (a mean of stds: squared here, which underestimates E[s²] by the spread of s).
    With ``pass_rate`` p (binary rewards) the Bernoulli variance p (1 − p) is used instead, which needs no
    std. Assumptions: mean field (one reward coordinate), rewards independent within a group, the
    advantage's normalisation taken at its mean.
    """
    group_size = check("group_size", group_size, lambda x: x >= 2, ">= 2 (a group needs two samples)")
    g = np.asarray(group_size, np.float64)
    if pass_rate is not None:
        p = np.asarray(check("pass_rate", pass_rate, lambda x: (x >= 0) & (x <= 1), "in [0, 1]"), np.float64)
        return p * (1.0 - p) + 0.0 * g
    s = np.asarray(check("reward_std", reward_std, lambda x: x >= 0, ">= 0 (a standard deviation)"), np.float64)
    eps = float(check("eps", eps, lambda x: x >= 0, ">= 0"))
    scale = np.where(s > 0, s**2 / np.maximum((s + eps) ** 2, 1e-300), 1.0)
    return g / (g - 1.0) * s**2 * scale


def noise_from_samples(loss, params, batch, direction: ArrayLike | None = None) -> float:
    """Per-sample gradient variance σ² of ``loss(params, sample)`` over a batch of samples.

    The per-sample gradients are taken with ``jax.vmap(jax.grad(loss), in_axes=(None, 0))`` over the leading
    axis of every leaf of ``batch`` and flattened (``jax.flatten_util.ravel_pytree``); σ² is then
    :func:`noise_from_gradients` of them, along ``direction`` (flattened like ``params``) when given.
    """
    from jax.flatten_util import ravel_pytree

    leaves = jax.tree_util.tree_leaves(batch)
    if not leaves:
        raise InvalidValueError("batch must hold at least one array of samples")
    n = {np.shape(x)[0] if np.ndim(x) else -1 for x in leaves}
    if len(n) != 1 or min(n) < 2:
        raise InvalidValueError(f"every leaf of batch must have the same leading (sample) axis of length >= 2, "
                                f"got lengths {sorted(n)}")
    grads = jax.vmap(jax.grad(loss), in_axes=(None, 0))(params, batch)
    flat = jax.vmap(lambda g: ravel_pytree(g)[0])(grads)
    return noise_from_gradients(np.asarray(flat, np.float64), direction)
