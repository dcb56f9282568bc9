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

Host computation in NumPy float64; ``k_ref`` and ``steps`` are scalars, ``eta`` and ``mu`` scalars.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from grpojax._checks import check_int as _check_int
from grpojax._errors import InvalidValueError
from grpojax.dynamics._checks import check_hyperparams

_BATCH = 1 << 16  # displacements handed to ``outside`` per call (at most, and at least one step's draws)

__all__ = ["FullEscape", "displacement_moments", "escape_full", "invariant_subspace", "stationary_displacement"]


class FullEscape(NamedTuple):
    """P(escape within T steps) of the whole displacement and what it comes from.

    Attributes:
        probability: 1 − exp(−cumulative hazard).
        expected_exits: Σ_t q_t, the expected number of exits within the run.
        exits: q_t per step, shape (steps,).
        mean_square: E|e_t|² per step t = 0..steps, shape (steps + 1,).
        covariance: Cov(e_T) at the last step, shape (n, n).
        radius: spectral radius per step of the period map (below 1: the mean update is stable).
    """

    probability: float
    expected_exits: float
    exits: np.ndarray
    mean_square: np.ndarray
    covariance: np.ndarray
    radius: float


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


def displacement_moments(k_instant, k_stale, noise_cov, eta: float, mu: float, k_ref: int, steps: int):
    """Exact covariances of the displacement of the noisy linearised update, started at rest at θ*.

    Args:
        k_instant: K_0 = −∂u/∂θ at the plateau, (n, n).
        k_stale: K_d = −∂u/∂θ_b at the plateau, (n, n).
        noise_cov: covariance of one step's sampled gradient, (n, n).
        eta, mu: heavy-ball learning rate and momentum.
        k_ref: refresh interval of the behaviour policy (periodic refresh; 1: on-policy).
        steps: number of steps T.

    Returns:
        ``(cov, lag1)``: Cov(e_t) for t = 0..T, shape (T + 1, n, n), and Cov(e_{t+1}, e_t) for t = 0..T − 1,
        shape (T, n, n).
    """
    S, R, Q, n, k_ref, steps = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps)
    SR = S @ R
    P = np.zeros((3 * n, 3 * n))
    cov = np.zeros((steps + 1, n, n))
    lag1 = np.zeros((steps, n, n))
    for t in range(steps):
        A = SR if t % k_ref == 0 else S
        AP = A @ P
        lag1[t] = AP[:n, :n]
        P = AP @ A.T + Q
        cov[t + 1] = P[:n, :n]
    return cov, lag1


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

    Returns:
        :class:`FullEscape`.
    """
    if exits not in ("monte_carlo", "exact_1d"):
        raise InvalidValueError(f"exits must be 'monte_carlo' or 'exact_1d', got exits={exits!r}")
    cov, lag1 = displacement_moments(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps)
    n = cov.shape[1]
    S, R, _, _, k_ref, steps = _prepare(k_instant, k_stale, noise_cov, eta, mu, k_ref, steps)
    Phi = np.linalg.matrix_power(S, k_ref - 1) @ (S @ R)
    radius = float(np.abs(np.linalg.eigvals(Phi)).max() ** (1.0 / k_ref))
    q = np.zeros(steps)
    hazard = np.zeros(steps)
    if exits == "exact_1d":
        if n != 1 or width is None or not width > 0:
            raise InvalidValueError(f"exits='exact_1d' needs n = 1 and width > 0, got n={n}, width={width!r}")
        for t in range(steps):
            q[t], hazard[t] = _exact_1d_exits(cov[t, 0, 0], cov[t + 1, 0, 0], lag1[t, 0, 0], float(width))
    else:
        if outside is None:
            raise InvalidValueError("outside must be given with exits='monte_carlo' (a predicate on displacements)")
        samples = _check_int("samples", samples, 1)
        rng = np.random.default_rng(seed)
        chunk = max(1, _BATCH // samples)  # steps whose draws go to ``outside`` in one call
        for start in range(0, steps, chunk):
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
                      mean_square=np.trace(cov, axis1=1, axis2=2), covariance=cov[-1], radius=radius)
