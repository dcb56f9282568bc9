r"""Nonlinear mean-field SDEs: user drift/diffusion callables, and the two-arm bandit's reduced model.

Generic problem (Itô by default):

.. math::  dy = f(t, y, \text{args})\,dt + g(t, y, \text{args})\,dW_t,\qquad W \in \mathbb{R}^m,

with ``f`` returning the shape of ``y`` and ``g`` returning ``y.shape + (m,)`` (multiplicative noise
allowed). Itô solvers: ``euler`` (Euler–Maruyama), ``milstein`` (``ItoMilstein``, strong order 1 for
commutative noise). Stratonovich solvers (``calculus="stratonovich"``): ``heun``, ``midpoint``,
``milstein`` (``StratonovichMilstein``). Heun/midpoint converge to the *Stratonovich* solution, which
differs from the Itô one by the drift correction ``½ g ∂g/∂y`` when the noise is multiplicative: the
calculus is therefore a required choice, not a detail (tested on geometric Brownian motion).

Bandit reduced model (:func:`bandit_meanfield`): state ``y = (θ, θ̇)`` in logit units, second order from
the heavy-ball update ``θ_{n+1} − θ_n = μ(θ_n − θ_{n−1}) + η g_n`` expanded to second order,

.. math::  M θ̈ + (1 − μ) θ̇ = η f(θ, θ − τ θ̇) + η \frac{σ_θ}{\sqrt G} ξ,\qquad
           M = \tfrac{1+μ}{2} + \tfrac{η K_d τ^2}{2},

where ``f(θ, θ_b)`` is the bandit's exact finite-G mean drift (:func:`grpojax.bandit.drift_logit`), the
behaviour logit is ``θ_b ≈ θ − τ θ̇`` (τ from the lag model) and the inertia uses ``K_d`` at the plateau, so
that the linearisation at ``θ*`` is exactly the oscillator of ``docs/model/oscillator.md`` while the drift stays fully
nonlinear far from it. The noise amplitude ``σ_θ² = σ²/(p*(1 − p*))²`` is the bandit's per-sample gradient
variance at the plateau converted to logit units and held constant (additive in θ, hence multiplicative
``∝ p(1 − p)`` in reward units); away from the plateau the true sampling variance differs — an explicit
approximation.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from grpojax._errors import InvalidValueError
from grpojax.sde._checks import check_finite, check_positive, is_concrete
from grpojax.sde._solve import BROWNIANS, step_grid

ITO_SOLVERS = {"euler": diffrax.Euler, "milstein": diffrax.ItoMilstein}
STRATONOVICH_SOLVERS = {"heun": diffrax.Heun, "midpoint": diffrax.Midpoint, "milstein": diffrax.StratonovichMilstein}


class MeanFieldPaths(eqx.Module):
    """Paths of a mean-field SDE.

    Attributes:
        ts: save times ``(T,)``.
        ys: states ``(n_paths, T) + y0.shape``.
        finite: ``True`` if every saved value is finite.
        ok: ``(n_paths,)`` bool, ``True`` where diffrax reported a successful solve of the path.
    """

    ts: jax.Array
    ys: jax.Array
    finite: jax.Array
    ok: jax.Array


@eqx.filter_jit
def _solve(drift, diffusion, y0, args, keys, grid, ts, solver_cls, noise_dim, brownian, tol):
    dtype = y0.dtype

    def one(key):
        shape = jax.ShapeDtypeStruct((noise_dim,), dtype)
        if brownian == "unsafe":
            bm = diffrax.UnsafeBrownianPath(shape=shape, key=key)
            adjoint = diffrax.ForwardMode()
        else:
            bm = diffrax.VirtualBrownianTree(grid[0], grid[-1], tol=tol, shape=shape, key=key)
            adjoint = diffrax.RecursiveCheckpointAdjoint()
        terms = diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, bm))
        sol = diffrax.diffeqsolve(
            terms, solver_cls(), t0=grid[0], t1=grid[-1], dt0=None, y0=y0, args=args,
            saveat=diffrax.SaveAt(ts=ts), stepsize_controller=diffrax.StepTo(ts=grid),
            max_steps=grid.shape[0] - 1, adjoint=adjoint, throw=False,
        )
        return sol.ys, sol.result == diffrax.RESULTS.successful

    ys, ok = jax.vmap(one)(keys)
    return MeanFieldPaths(ts=ts, ys=ys, finite=jnp.all(jnp.isfinite(ys)), ok=ok)


def solve_meanfield(
    drift: Callable,
    diffusion: Callable,
    y0: Any,
    ts: Any,
    *,
    key: jax.Array,
    n_paths: int = 1000,
    args: Any = None,
    noise_dim: int = 1,
    solver: str = "euler",
    calculus: str = "ito",
    dt: float = 0.01,
    brownian: str = "auto",
    t0: float = 0.0,
) -> MeanFieldPaths:
    """Integrate a nonlinear SDE ``dy = f dt + g dW`` for an ensemble of Brownian paths (one ``jit``).

    Args:
        drift: ``f(t, y, args) -> array like y``.
        diffusion: ``g(t, y, args) -> array of shape y.shape + (noise_dim,)``.
        y0: initial state (any shape; ``()`` for a scalar SDE).
        ts: concrete, strictly increasing save times ``(T,)``, ``≥ t0``.
        key: PRNG key.
        n_paths: number of paths.
        args: pytree passed to ``drift``/``diffusion``.
        noise_dim: dimension ``m`` of the Brownian motion.
        solver: ``euler``/``milstein`` (Itô) or ``heun``/``midpoint``/``milstein`` (Stratonovich).
        calculus: ``"ito"`` or ``"stratonovich"``: how the SDE is to be read.
        dt: nominal fixed step (the grid contains every save time).
        brownian: as in :func:`grpojax.sde.simulate`.
        t0: initial time.

    Returns:
        :class:`MeanFieldPaths` with ``ys`` of shape ``(n_paths, T) + y0.shape``.

    Raises:
        ValueError: unknown solver/calculus pair, non-finite ``y0``/``ts``, ``dt ≤ 0``.
    """
    table = {"ito": ITO_SOLVERS, "stratonovich": STRATONOVICH_SOLVERS}.get(calculus)
    if table is None:
        raise InvalidValueError(f"calculus must be 'ito' or 'stratonovich', got calculus={calculus!r}")
    if solver not in table:
        raise InvalidValueError(f"solver must be one of {tuple(table)} for calculus={calculus!r}, got solver={solver!r}")
    if brownian not in BROWNIANS:
        raise InvalidValueError(f"brownian must be one of {BROWNIANS}, got brownian={brownian!r}")
    if int(n_paths) != n_paths or n_paths < 1 or int(noise_dim) != noise_dim or noise_dim < 1:
        raise InvalidValueError(f"n_paths and noise_dim must be positive integers, got {n_paths!r}, {noise_dim!r}")
    check_positive("dt", dt)
    check_finite("y0", y0)
    if not is_concrete(ts):
        raise InvalidValueError("ts must be concrete (the step grid is built on the host)")
    check_finite("ts", ts)
    ts_np = np.atleast_1d(np.asarray(ts, float))
    if np.any(np.diff(ts_np) <= 0) or ts_np[0] < t0 or ts_np[-1] <= t0:
        raise InvalidValueError(f"ts must be strictly increasing times >= t0={t0} ending after t0")
    grid = step_grid(ts_np, float(t0), float(dt))
    if brownian == "auto":
        brownian = "unsafe" if np.unique(grid.astype(np.float32)).size == grid.size else "virtual"
    y0 = jnp.asarray(y0, float)
    return _solve(
        drift, diffusion, y0, args, jr.split(key, int(n_paths)), jnp.asarray(grid, y0.dtype),
        jnp.asarray(ts_np, y0.dtype), table[solver], int(noise_dim), brownian, float(np.min(np.diff(grid))) / 8,
    )


class BanditMeanField(NamedTuple):
    """Drift and diffusion of the bandit's reduced second-order model in logit units (see module docs).

    Attributes:
        drift: ``f(t, y, args)`` for ``y = (θ, θ̇)``.
        diffusion: ``g(t, y, args)`` of shape ``(2, 1)``.
        theta_star: plateau logit θ*.
        M: inertia used.
        sigma_theta: per-sample gradient standard deviation at the plateau, logit units.
    """

    drift: Callable
    diffusion: Callable
    theta_star: jax.Array
    M: jax.Array
    sigma_theta: jax.Array


def bandit_meanfield(config: Any, *, noise: bool = True) -> BanditMeanField:
    """The two-arm bandit's nonlinear mean-field SDE, from :mod:`grpojax.bandit` (must be importable).

    Args:
        config: an unbatched :class:`grpojax.bandit.BanditConfig`.
        noise: include the finite-G sampling noise (``False``: the deterministic reduced model).

    Returns:
        :class:`BanditMeanField`; integrate with :func:`solve_meanfield` from ``y0 = (θ0, 0)``
        (``calculus="ito"``; the noise is additive in θ, so Itô = Stratonovich here).
    """
    try:
        from grpojax import bandit
    except ImportError as exc:  # pragma: no cover - the bandit package ships with grpojax
        raise InvalidValueError("bandit_meanfield needs grpojax.bandit; pass your own drift/diffusion instead") from exc
    from grpojax.dynamics import lag_tau

    p_star = bandit.fixed_point(config)
    kd, _ = bandit.stiffness(config)
    sig2 = jnp.maximum(bandit.gradient_noise(config), 0.0)
    if not is_concrete(p_star) or np.ndim(p_star) != 0:
        raise InvalidValueError("bandit_meanfield takes one concrete (unbatched) BanditConfig")
    theta_star = jnp.log(p_star) - jnp.log1p(-p_star)
    eta, mu, G = config.eta, config.mu, config.group_size
    tau = lag_tau(config.k_ref, config.lag)
    M = (1.0 + mu) / 2.0 + eta * kd * tau**2 / 2.0
    sigma_theta = jnp.sqrt(sig2) / (p_star * (1.0 - p_star))
    amp = jnp.where(noise, eta * sigma_theta / jnp.sqrt(G) / M, 0.0)

    def drift(t, y, args):
        del t, args
        theta, vel = y[0], y[1]
        f = bandit.drift_logit(theta, theta - tau * vel, config)
        return jnp.stack([vel, (eta * f - (1.0 - mu) * vel) / M])

    def diffusion(t, y, args):
        del t, args
        return jnp.stack([jnp.zeros_like(amp), amp])[:, None].astype(y.dtype)

    return BanditMeanField(drift, diffusion, theta_star, M, sigma_theta)
