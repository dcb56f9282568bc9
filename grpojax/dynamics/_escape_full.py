"""Escape of the whole displacement: the noisy linearised update in every parameter direction.

The one-direction escape model (``_escape.py``) follows the error along the stiffest direction only. Here
the error is the whole displacement e = θ − θ* ∈ ℝⁿ under the linearised heavy-ball update with periodic
refresh of the behaviour policy (the trainer's lag) and Gaussian gradient noise of a full covariance:

    e_{t+1} = e_t + μ (e_t − e_{t−1}) − η (K_0 e_t + K_d s_t + ξ_t),    ξ_t ~ N(0, Σ_step) independent,

with s_t the displacement at the last refresh (s ← e at every step t ≡ 0 mod K_ref, before the step), K_0 =
−∂u/∂θ and K_d = −∂u/∂θ_b the n×n Jacobians of the mean update at the plateau and Σ_step the covariance of one
step's sampled gradient (the per-sample covariance over the samples per step). In state-space form
x = (e_t, e_{t−1}, s_t) ∈ ℝ³ⁿ the refresh phase maps x by S·R, the other phases by S, the block versions of
``_stability.periodic_maps``:

    S = [[(1 + μ) I − η K_0, −μ I, −η K_d], [I, 0, 0], [0, 0, I]],    R = [[I, 0, 0], [0, I, 0], [I, 0, 0]],

and the noise η ξ_t enters the first block. With n = 1 this is exactly the state of the one-direction model.

Moments (exact, from rest at θ*): P_{t+1} = A_t P_t A_tᵀ + η² [Σ_step, 0, 0; 0, 0, 0; 0, 0, 0], the lag-one
covariance Cov(x_{t+1}, x_t) = A_t P_t; the stationary covariance at the start of a period solves the discrete
Lyapunov equation over the period map (``scipy.linalg.solve_discrete_lyapunov``).

Reduction. The displacement never leaves the smallest subspace that holds the noise (the range of Σ_step) and
is invariant under K_0 and K_d: :func:`invariant_subspace` finds an orthonormal basis U of it (a Krylov
closure), and the model on Uᵀ K_0 U, Uᵀ K_d U, Uᵀ Σ U gives the same law for e = U e_r. A policy network has
many parameter directions its policy does not depend on (the noise and the mean update are zero there), so
the reduced state is much smaller.

Escape (a Gaussian first-passage approximation, the one-direction model's, in n dimensions). The basin is a
set of displacements given by a predicate ``outside(e)`` (for a policy: the total-variation distance of the
policy at θ* + e from the plateau's above a level). Because (e_t, e_{t+1}) is exactly jointly normal, the
probability of an exit at step t, q_t = P(e_t inside, e_{t+1} outside), is estimated by Monte Carlo from
``samples`` joint draws per step (fresh standard normal draws at every step, the same sequence for every call
with the same ``seed``: common random numbers across calls, so that P is smooth in η). Counting exits as a
Poisson process,

    P(escape within T) = 1 − exp(−Σ_t h_t),    h_t = −log(1 − q_t / P(e_t inside)),

exactly as the one-direction model counts them (with n = 1 and ``outside = |e| > w`` the exact bivariate
exits give that model's number: :func:`escape_full` with ``exits="exact_1d"``). Assumptions: Gaussian noise
of the covariance at θ*, a linear update everywhere inside the basin, exits that do not cluster. The Monte
Carlo error of Σ_t q_t is about √(Σ_t q_t / samples) (independent draws at every step).

Noise that grows with the state (``noise_growth`` c > 0). Where the step's noise is smallest at the plateau and
grows away from it, take the conditional covariance of ξ_t given the past as

    Σ(e_t) = Σ_step (1 + c eₜᵀ M eₜ),

the covariance at θ* scaled by one scalar that grows with a quadratic form of the displacement (``growth_metric``
M, symmetric positive semi-definite; the identity by default: q(e) = |e|²). The shape of the noise is kept,
its size grows. From rest at θ* the mean stays 0 and the covariance recursion stays closed and exact, an affine
map of P:

    P_{t+1} = A_t P_t A_tᵀ + η² [Σ_step, 0, 0; …] (1 + c tr(M Cov(e_t))),

which with n = 1 and M = 1 is the one-direction model's recursion with ``noise_growth`` (``_escape.py``).
Mean-square stability: with ρ(Φ) < 1 (the mean update stable), let H be the K_ref × K_ref matrix whose entry
(j, i) is tr(M Cov(e)) at phase j of the stationary response to the unit noise Σ_step injected at phase i of
every period (K_ref discrete Lyapunov solves over the period maps). The stationary values τ_j = tr(M Cov(e))
at phase j solve τ = H 1 + c H τ, and the covariance is bounded iff the loop gain c ρ(H) is below 1 (H is
non-negative and the moment map is positive, so the spectral radius of the full moment map is below 1 exactly
then). Because the noise feeds on the state, the gain reaches 1 below η*: the spread then grows without bound
although the mean update is stable (:func:`growth_stationary`). The exits are still counted from the Gaussian
with these exact moments, an approximation here: the law of e is then a scale mixture of normals, with heavier
tails than the normal of the same covariance.

The exact first passage (:func:`escape_simulated`). The Gaussian of the exact moments and the Poisson count of its
exits are two approximations; the first passage of the recurrence itself needs neither: simulate ``paths`` paths
of the same update, each path's noise drawn at its own displacement, Σ_step (1 + c eₜᵀ M eₜ), and count the paths
whose displacement is outside the basin at some step 1..T. Its only error is the binomial one of the count,
√(P (1 − P) / paths). The draws of a path are the same for every call with the same ``seed`` (common random
numbers across η).

Host computation in NumPy float64; ``k_ref`` and ``steps`` are scalars, ``eta`` and ``mu`` scalars.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from grpojax._checks import check_int as _check_int
from grpojax._errors import InvalidValueError
from grpojax.dynamics._checks import check_hyperparams

_BATCH = 1 << 16  # displacements handed to ``outside`` per call (at most, and at least one step's draws)
_CHUNK_STEPS = 50  # steps per call at most (the count stops once the cumulative hazard passes _SATURATED)
_SATURATED = 40.0  # cumulative hazard beyond which P(escape) = 1 − e^−40 is 1 to double precision

__all__ = ["FullEscape", "GrowthStationary", "SimulatedEscape", "displacement_moments", "escape_full",
           "escape_simulated", "growth_stationary", "invariant_subspace", "stationary_displacement"]


class FullEscape(NamedTuple):
    """P(escape within T steps) of the whole displacement and what it comes from.

    Attributes:
        probability: 1 − exp(−cumulative hazard).
        expected_exits: Σ_t q_t, the expected number of exits within the run (Monte Carlo exits: counted up to
            the step where the cumulative hazard passes 40, after which P is 1 to double precision).
        exits: q_t per step, shape (steps,) (0 after the count stopped).
        mean_square: E|e_t|² per step t = 0..steps, shape (steps + 1,).
        covariance: Cov(e_T) at the last step, shape (n, n).
        radius: spectral radius per step of the period map (below 1: the mean update is stable).
        gain: loop gain c ρ(H) of the noise's growth (0 for additive noise; the covariance is bounded iff the
            radius and the gain are both below 1; ``inf`` where the radius is ≥ 1).
    """

    probability: float
    expected_exits: float
    exits: np.ndarray
    mean_square: np.ndarray
    covariance: np.ndarray
    radius: float
    gain: float = 0.0


class GrowthStationary(NamedTuple):
    """Stationary law of the displacement with noise that grows with the state (module notes).

    Attributes:
        covariance: stationary Cov(e) at the start of a refresh period (NaN where not mean-square stable).
        radius: spectral radius per step of the period map of the mean update.
        gain: loop gain c ρ(H) (``inf`` where the radius is ≥ 1).
        stable: radius < 1 and gain < 1 (the covariance stays bounded).
        growth_trace: stationary tr(M Cov(e)) at each phase of the period, shape (k_ref,) (NaN where unstable).
    """

    covariance: np.ndarray
    radius: float
    gain: float
    stable: bool
    growth_trace: np.ndarray


def _check_matrices(k_instant, k_stale, noise_cov):
    mats = []
    for name, m in (("k_instant", k_instant), ("k_stale", k_stale), ("noise_cov", noise_cov)):
        a = np.asarray(m, np.float64)
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise InvalidValueError(f"{name} must be a square matrix (n, n), got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise InvalidValueError(f"{name} must be finite, got a non-finite entry")
        mats.append(a)
    n = {m.shape[0] for m in mats}
    if len(n) != 1:
        raise InvalidValueError(f"k_instant, k_stale and noise_cov must have the same size n, got sizes "
                                f"{[m.shape[0] for m in mats]}")
    cov = mats[2]
    scale = max(float(np.abs(cov).max()), 1e-300)
    if np.abs(cov - cov.T).max() > 1e-8 * scale:
        raise InvalidValueError("noise_cov must be symmetric (a covariance matrix), got an asymmetric matrix")
    low = float(np.linalg.eigvalsh(0.5 * (cov + cov.T)).min())
    if low < -1e-8 * scale:
        raise InvalidValueError(f"noise_cov must be positive semi-definite (a covariance matrix), got an "
                                f"eigenvalue {low:.3g}")
    return mats[0], mats[1], 0.5 * (cov + cov.T)


def _maps(k0, kd, eta, mu):
    """The one-step map S and the refresh R on x = (e_t, e_{t−1}, s_t), 3n × 3n each."""
    n = k0.shape[0]
    I, Z = np.eye(n), np.zeros((n, n))
    S = np.block([[(1.0 + mu) * I - eta * k0, -mu * I, -eta * kd], [I, Z, Z], [Z, Z, I]])
    R = np.block([[I, Z, Z], [Z, I, Z], [I, Z, Z]])
    return S, R


def _check_growth(noise_growth, growth_metric, n):
    c = noise_growth
    if isinstance(c, bool) or not isinstance(c, (int, float, np.integer, np.floating)) or not np.isfinite(c) or c < 0:
        raise InvalidValueError(f"noise_growth must be a finite number >= 0 (relative growth of the noise per unit "
                                f"of the quadratic form; 0: additive noise), got noise_growth={noise_growth!r}")
    if growth_metric is None:
        return float(c), np.eye(n)
    M = np.asarray(growth_metric, np.float64)
    if M.shape != (n, n):
        raise InvalidValueError(f"growth_metric must be a square matrix of the size of k_instant ({n}, {n}), got "
                                f"shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise InvalidValueError("growth_metric must be finite, got a non-finite entry")
    scale = max(float(np.abs(M).max()), 1e-300)
    if np.abs(M - M.T).max() > 1e-8 * scale or float(np.linalg.eigvalsh(0.5 * (M + M.T)).min()) < -1e-8 * scale:
        raise InvalidValueError("growth_metric must be symmetric positive semi-definite (a quadratic form q(e) = "
                                "e^T M e >= 0)")
    return float(c), 0.5 * (M + M.T)


def _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps=None):
    k0, kd, cov = _check_matrices(k_instant, k_stale, noise_cov)
    eta, mu = (float(x) for x in check_hyperparams(eta=eta, mu=mu)[:2])
    k_ref = _check_int("k_ref", k_ref, 1)
    if steps is not None:
        steps = _check_int("steps", steps, 1)
    S, R = _maps(k0, kd, eta, mu)
    n = k0.shape[0]
    Q = np.zeros((3 * n, 3 * n))
    Q[:n, :n] = eta**2 * cov
    return S, R, Q, n, k_ref, steps


def displacement_moments(k_instant, k_stale, noise_cov, eta: float, mu: float, k_ref: int, steps: int, *,
                         noise_growth: float = 0.0, growth_metric=None):
    """Exact covariances of the displacement of the noisy linearised update, started at rest at θ*.

    Args:
        k_instant: K_0 = −∂u/∂θ at the plateau, (n, n).
        k_stale: K_d = −∂u/∂θ_b at the plateau, (n, n).
        noise_cov: covariance of one step's sampled gradient at θ*, (n, n).
        eta, mu: heavy-ball learning rate and momentum.
        k_ref: refresh interval of the behaviour policy (periodic refresh; 1: on-policy).
        steps: number of steps T.
        noise_growth: c ≥ 0, the noise's covariance at displacement e is ``noise_cov`` (1 + c eᵀ M e) (module
            notes; 0: additive noise).
        growth_metric: M, symmetric positive semi-definite (n, n); the identity when None.

    Returns:
        ``(cov, lag1)``: Cov(e_t) for t = 0..T, shape (T + 1, n, n), and Cov(e_{t+1}, e_t) for t = 0..T − 1,
        shape (T, n, n). Entries overflow to ``inf`` where the spread grows without bound.
    """
    S, R, Q, n, k_ref, steps = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps)
    c, M = _check_growth(noise_growth, growth_metric, n)
    SR = S @ R
    P = np.zeros((3 * n, 3 * n))
    cov = np.zeros((steps + 1, n, n))
    lag1 = np.zeros((steps, n, n))
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps):
            A = SR if t % k_ref == 0 else S
            AP = A @ P
            lag1[t] = AP[:n, :n]
            scale = 1.0 + c * float(np.sum(M * P[:n, :n])) if c > 0 else 1.0
            P = AP @ A.T + Q * scale
            cov[t + 1] = P[:n, :n]
    return cov, lag1


def growth_stationary(k_instant, k_stale, noise_cov, eta: float, mu: float, k_ref: int, *,
                      noise_growth: float = 0.0, growth_metric=None) -> GrowthStationary:
    """Stationary covariance and mean-square stability of the update with noise that grows with the state.

    The stationary response to the unit noise injected at each phase of the period (K_ref discrete Lyapunov
    solves), the K_ref × K_ref matrix H of its tr(M Cov(e)) per phase, the loop gain c ρ(H) and, where the gain
    is below 1, the stationary tr(M Cov(e)) per phase τ = (I − c H)⁻¹ H 1 and the covariance at the start of a
    period (module notes). With ``noise_growth`` 0 the covariance is :func:`stationary_displacement`'s.
    """
    from scipy.linalg import solve_discrete_lyapunov

    S, R, Q, n, k_ref, _ = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref)
    c, M = _check_growth(noise_growth, growth_metric, n)
    maps = [S @ R] + [S] * (k_ref - 1)

    def period_from(p):
        Phi = np.eye(3 * n)
        for j in range(k_ref):
            Phi = maps[(p + j) % k_ref] @ Phi
        return Phi

    radius = float(np.abs(np.linalg.eigvals(period_from(0))).max() ** (1.0 / k_ref))
    if radius >= 1.0:
        return GrowthStationary(np.full((n, n), np.nan), radius, math.inf, False, np.full(k_ref, np.nan))
    H = np.zeros((k_ref, k_ref))
    at_start = np.zeros((k_ref, 3 * n, 3 * n))  # response at phase 0 to the unit noise of phase i
    for i in range(k_ref):
        p = (i + 1) % k_ref  # the noise of the step at phase i is first seen at phase i + 1
        X = solve_discrete_lyapunov(period_from(p), Q)
        for j in range(k_ref):
            ph = (p + j) % k_ref
            H[ph, i] = float(np.sum(M * X[:n, :n]))
            if ph == 0:
                at_start[i] = X
            X = maps[ph] @ X @ maps[ph].T
    gain = c * float(np.abs(np.linalg.eigvals(H)).max())
    if gain >= 1.0:
        return GrowthStationary(np.full((n, n), np.nan), radius, gain, False, np.full(k_ref, np.nan))
    tau = np.linalg.solve(np.eye(k_ref) - c * H, H.sum(1))
    P0 = np.tensordot(1.0 + c * tau, at_start, axes=1)
    return GrowthStationary(P0[:n, :n], radius, gain, True, tau)


def stationary_displacement(k_instant, k_stale, noise_cov, eta: float, mu: float, k_ref: int):
    """Stationary Cov(e) at the start of a refresh period (just before the refresh step) and the spectral
    radius per step of the period map; the covariance is NaN where the radius is ≥ 1 (no stationary law)."""
    from scipy.linalg import solve_discrete_lyapunov

    S, R, Q, n, k_ref, _ = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref)
    Phi, Qp = np.eye(3 * n), np.zeros((3 * n, 3 * n))
    for t in range(k_ref):
        A = S @ R if t == 0 else S
        Phi = A @ Phi
        Qp = A @ Qp @ A.T + Q
    radius = float(np.abs(np.linalg.eigvals(Phi)).max() ** (1.0 / k_ref))
    if radius >= 1.0:
        return np.full((n, n), np.nan), radius
    return solve_discrete_lyapunov(Phi, Qp)[:n, :n], radius


def invariant_subspace(k_instant, k_stale, noise_cov, rtol: float = 1e-9) -> np.ndarray:
    """Orthonormal basis U (n, r) of the smallest subspace that holds the range of ``noise_cov`` and is invariant
    under K_0 and K_d (directions with singular values below ``rtol`` × the largest are dropped)."""
    k0, kd, cov = _check_matrices(k_instant, k_stale, noise_cov)
    vals, vecs = np.linalg.eigh(cov)
    U = vecs[:, vals > rtol * max(vals.max(), 1e-300)]
    if U.shape[1] == 0:
        return U

    def basis(W):
        u, s, _ = np.linalg.svd(W, full_matrices=False)
        return u[:, s > rtol * s[0]]

    for _ in range(k0.shape[0]):
        scale = max(np.abs(k0).max(), np.abs(kd).max(), 1e-300)
        W = basis(np.hstack([U, k0 @ U / scale, kd @ U / scale]))
        if W.shape[1] == U.shape[1]:
            return W
        U = W
    return U


def _exact_1d_exits(v0, v1, c01, width):
    from grpojax.dynamics._escape import _exit_probability

    z = np.zeros(1)
    return _exit_probability(z, np.atleast_1d(v0), z, np.atleast_1d(v1), np.atleast_1d(c01), width)[0]


def _factor(M):
    """F with F Fᵀ = M for a stack of covariance matrices: Cholesky with a jitter of 1e-12 of the largest
    diagonal entry (the covariance at the start is 0), the symmetric square root where that fails."""
    diag = np.abs(np.diagonal(M, axis1=-2, axis2=-1)).max(-1)
    jitter = 1e-12 * np.maximum(diag, 1e-300)[:, None, None] * np.eye(M.shape[-1])
    try:
        return np.linalg.cholesky(M + jitter)
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh(0.5 * (M + np.swapaxes(M, -1, -2)))
        return vecs * np.sqrt(np.clip(vals, 0.0, None))[..., None, :]


def escape_full(
    k_instant,
    k_stale,
    noise_cov,
    eta: float,
    mu: float,
    k_ref: int,
    steps: int,
    outside: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    samples: int = 1000,
    seed: int = 0,
    exits: str = "monte_carlo",
    width: float | None = None,
    noise_growth: float = 0.0,
    growth_metric=None,
) -> FullEscape:
    """P(the displacement leaves the basin within ``steps``) of the noisy linearised update in n dimensions.

    Args:
        k_instant, k_stale, noise_cov, eta, mu, k_ref, steps: as in :func:`displacement_moments`.
        outside: ``outside(e)`` for a batch of displacements e of shape (m, n) returns a boolean array (m,):
            True where e is outside the basin. Needed with ``exits="monte_carlo"``.
        samples: joint draws of (e_t, e_{t+1}) per step for the Monte Carlo exits.
        seed: seed of the standard normal draws (fresh at every step; the same sequence for every call with the
            same seed).
        exits: ``"monte_carlo"`` (module notes), or ``"exact_1d"`` (n = 1 and the basin |e| ≤ ``width``: the
            exact bivariate-normal exits of the one-direction model).
        width: basin half-width for ``exits="exact_1d"``.
        noise_growth, growth_metric: noise that grows with the state, as in :func:`displacement_moments` (the
            exits are then counted from the Gaussian of the exact moments: module notes).

    Returns:
        :class:`FullEscape`.
    """
    if exits not in ("monte_carlo", "exact_1d"):
        raise InvalidValueError(f"exits must be 'monte_carlo' or 'exact_1d', got exits={exits!r}")
    cov, lag1 = displacement_moments(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps,
                                     noise_growth=noise_growth, growth_metric=growth_metric)
    n = cov.shape[1]
    S, R, _, _, k_ref, steps = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps)
    if noise_growth > 0:
        st = growth_stationary(k_instant, k_stale, noise_cov, eta, mu, k_ref, noise_growth=noise_growth,
                               growth_metric=growth_metric)
        radius, gain = st.radius, st.gain
    else:
        Phi = np.linalg.matrix_power(S, k_ref - 1) @ (S @ R)
        radius, gain = float(np.abs(np.linalg.eigvals(Phi)).max() ** (1.0 / k_ref)), 0.0
    q = np.zeros(steps)
    hazard = np.zeros(steps)
    if exits == "exact_1d":
        if n != 1 or width is None or not width > 0:
            raise InvalidValueError(f"exits='exact_1d' needs n = 1 and width > 0, got n={n}, width={width!r}")
        for t in range(steps):
            if not np.isfinite(cov[t + 1, 0, 0]):  # overflowed: the spread grew without bound, escaped
                q[t:], hazard[t:] = 1.0, np.inf
                break
            q[t], hazard[t] = _exact_1d_exits(cov[t, 0, 0], cov[t + 1, 0, 0], lag1[t, 0, 0], float(width))
    else:
        if outside is None:
            raise InvalidValueError("outside must be given with exits='monte_carlo' (a predicate on displacements)")
        samples = _check_int("samples", samples, 1)
        rng = np.random.default_rng(seed)
        # steps whose draws go to ``outside`` in one call (the draws are the same sequence for any chunking)
        chunk = max(1, min(_BATCH // samples, _CHUNK_STEPS))
        for start in range(0, steps, chunk):
            if np.sum(hazard[:start]) > _SATURATED:  # P = 1 to double precision: the later exits change nothing
                break
            ts = range(start, min(start + chunk, steps))
            joint = np.stack([np.block([[cov[t], lag1[t].T], [lag1[t], cov[t + 1]]]) for t in ts])
            finite = np.all(np.isfinite(joint), axis=(1, 2))
            blown = None if finite.all() else start + int(np.argmin(finite))  # overflowed: unstable, escaped
            z = rng.standard_normal((len(ts), samples, 2 * n))
            x = z @ np.swapaxes(_factor(np.where(finite[:, None, None], joint, 0.0)), -1, -2)
            m = len(ts) if blown is None else blown - start
            if m:
                out0 = np.asarray(outside(x[:m, :, :n].reshape(-1, n)), bool).reshape(m, samples)
                out1 = np.asarray(outside(x[:m, :, n:].reshape(-1, n)), bool).reshape(m, samples)
                inside = np.maximum(np.mean(~out0, axis=1), 1.0 / samples)
                q[start:start + m] = np.mean(~out0 & out1, axis=1)
                hazard[start:start + m] = -np.log1p(-np.minimum(q[start:start + m] / inside, 1.0 - 1e-16))
            if blown is not None:
                q[blown:] = 1.0
                hazard[blown:] = np.inf
                break
    total = float(np.sum(hazard))
    return FullEscape(probability=float(-np.expm1(-total)), expected_exits=float(np.sum(q)), exits=q,
                      mean_square=np.trace(cov, axis1=1, axis2=2), covariance=cov[-1], radius=radius, gain=gain)


class SimulatedEscape(NamedTuple):
    """P(escape within T steps) of the recurrence itself, by direct simulation of its first passage.

    Attributes:
        probability: fraction of the paths whose displacement was outside the basin at some step 1..T.
        standard_error: binomial standard error of ``probability``, √(max(P (1 − P), 1 / paths) / paths).
        paths: number of simulated paths.
        first_exit: per path the first step t (1..T) with e_t outside, 0 for a path that stayed inside, shape (paths,).
        displacement: per path the displacement at step T, or at its first exit for a path that left, shape (paths, n).
    """

    probability: float
    standard_error: float
    paths: int
    first_exit: np.ndarray
    displacement: np.ndarray


def escape_simulated(
    k_instant,
    k_stale,
    noise_cov,
    eta: float,
    mu: float,
    k_ref: int,
    steps: int,
    outside: Callable[[np.ndarray], np.ndarray],
    *,
    paths: int = 2000,
    seed: int = 0,
    noise_growth: float = 0.0,
    growth_metric=None,
    start=None,
) -> SimulatedEscape:
    """P(the displacement leaves the basin within ``steps``): the first passage of the noisy linearised update,
    simulated path by path (module notes), with no Gaussian approximation and no Poisson counting.

    Every path follows e_{t+1} = (1 + μ) e_t − μ e_{t−1} − η (K_0 e_t + K_d s_t + ξ_t), s_t the displacement at the
    last refresh (t ≡ 0 mod K_ref, before the step), ξ_t = √(1 + c e_tᵀ M e_t) Σ_step^½ z_t with z_t standard normal:
    given the path's past, ξ_t ~ N(0, Σ_step (1 + c e_tᵀ M e_t)). A path has left at the first step t ≥ 1 where
    ``outside(e_t)`` is True or e_t is not finite (the update overflowed); it is not followed after that.

    Args:
        k_instant, k_stale, noise_cov, eta, mu, k_ref, steps, noise_growth, growth_metric: as in
            :func:`displacement_moments`.
        outside: ``outside(e)`` for displacements e of shape (m, n) returns a boolean array (m,), True outside the
            basin (only finite displacements are passed).
        paths: number of simulated paths.
        seed: seed of the standard normal draws; path i gets the same draws at every call with the same seed and
            ``paths``, whatever η (common random numbers).
        start: the displacement at step 0, shape (n,) (at rest: e_{−1} = e_0); θ* (zero) when None.

    Returns:
        :class:`SimulatedEscape`.
    """
    if outside is None or not callable(outside):
        raise InvalidValueError(f"outside must be a predicate on displacements (a callable), got {outside!r}")
    _, _, _, n, k_ref, steps = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps)
    k0, kd, cov = _check_matrices(k_instant, k_stale, noise_cov)
    c, M = _check_growth(noise_growth, growth_metric, n)
    paths = _check_int("paths", paths, 1)
    eta, mu = float(eta), float(mu)
    if start is None:
        e0 = np.zeros(n)
    else:
        e0 = np.asarray(start, np.float64)
        if e0.shape != (n,) or not np.all(np.isfinite(e0)):
            raise InvalidValueError(f"start must be a finite displacement of shape ({n},), got shape {e0.shape}")
    L = _factor(cov[None])[0]
    rng = np.random.default_rng(seed)
    e = np.tile(e0, (paths, 1))
    e_prev = e.copy()
    s = e.copy()
    first = np.zeros(paths, np.int64)
    final = e.copy()
    active = np.arange(paths)  # paths still inside
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps):
            z = rng.standard_normal((paths, n))[active]  # drawn for every path: common random numbers across calls
            if t % k_ref == 0:
                s = e.copy()
            xi = z @ L.T
            if c > 0:
                xi *= np.sqrt(1.0 + c * np.sum((e @ M) * e, axis=1))[:, None]
            e_next = (1.0 + mu) * e - mu * e_prev - eta * (e @ k0.T + s @ kd.T + xi)
            finite = np.all(np.isfinite(e_next), axis=1)
            out = ~finite
            if finite.any():
                out[finite] = np.asarray(outside(e_next[finite]), bool).reshape(-1)
            if out.any():
                idx = active[out]
                first[idx] = t + 1
                final[idx] = e_next[out]
                keep = ~out
                active, e, e_prev, s, e_next = active[keep], e[keep], e_prev[keep], s[keep], e_next[keep]
            if active.size == 0:
                break
            e_prev, e = e, e_next
    final[active] = e
    p = float(np.mean(first > 0))
    return SimulatedEscape(probability=p, standard_error=math.sqrt(max(p * (1.0 - p), 1.0 / paths) / paths),
                           paths=paths, first_exit=first, displacement=final)
