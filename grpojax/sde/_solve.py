r"""Diffrax ensembles of the stochastic GRPO oscillator ``M ë + C ė + K_eff e = sqrt(D/G) ξ``.

The state ``x = (e, ė)`` solves ``dx = F x dt + L dW`` (see :mod:`grpojax.sde._exact`), written for diffrax
as ``MultiTerm(ODETerm(F x), ControlTerm(L, W))``. All paths of one parameter set are a single
``diffeqsolve`` with state ``(e, ė)`` of shape ``(n_paths,)`` each and an ``n_paths``-dimensional Brownian
motion (the diffusion is the diagonal lineax operator ``(0, s/M)``): one RNG call and one loop step serve
every path, which is several times cheaper than ``vmap``-ing a one-path solve (each path hashing its own
key every step). Parameter sets are vmapped.

Solvers (``SOLVERS``; strong orders are for additive noise, which this SDE has):

=========  ==========================  ============  ==================  ============
name       diffrax solver              strong order  Brownian increment  drift evals
=========  ==========================  ============  ==================  ============
euler      ``Euler`` (Euler–Maruyama)  1.0           W                   1
heun       ``Heun``                    1.0           W                   2
sra1       ``SRA1``                    1.5 (2.0*)    W, space-time Lévy  2
shark      ``ShARK``                   1.5 (2.0*)    W, space-time Lévy  2
=========  ==========================  ============  ==================  ============

(*) with a linear drift, as here; see :func:`grpojax.sde.strong_errors`.

Brownian motion: ``brownian="virtual"`` uses ``VirtualBrownianTree`` (one consistent path that can be
queried at any resolution: needed for strong-convergence studies and for reverse-mode gradients);
``brownian="unsafe"`` uses ``UnsafeBrownianPath``, which draws each increment ``W(t1) − W(t0)`` from
``fold_in(key, t0, t1)``. That is statistically exact when every interval is queried once, which is the
case here (fixed steps on a prescribed grid, no step rejection, one Brownian evaluation per step) and is
~5–20× faster than descending a tree per step, so it is the default for ensembles (``"auto"``). It needs
the step times to be distinct in float32 (diffrax hashes them as float32) and supports forward-mode
autodiff only; ``"auto"`` falls back to the tree when the grid is not float32-distinct.

Steps are made on a fixed grid (``StepTo``) that contains every save time, so saved values are solver
nodes, not interpolants.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import lineax as lx
import numpy as np

from grpojax._errors import InvalidValueError
from grpojax._checks import check_int
from grpojax.sde._checks import broadcast, check_finite, check_positive, coefficients, is_concrete, unstable_mask


class SolverSpec(NamedTuple):
    """A solver choice: diffrax class, the Brownian Lévy area it needs, its strong orders.

    ``strong_order`` is the textbook order for additive noise; ``linear_strong_order`` the order for
    additive noise *and linear drift* (this oscillator), where the SRKs gain half an order (see
    :func:`grpojax.sde.strong_errors`).
    """

    solver: type
    levy_area: type
    strong_order: float
    linear_strong_order: float
    description: str


SOLVERS: dict[str, SolverSpec] = {
    "euler": SolverSpec(diffrax.Euler, diffrax.BrownianIncrement, 1.0, 1.0, "Euler–Maruyama"),
    "heun": SolverSpec(diffrax.Heun, diffrax.BrownianIncrement, 1.0, 1.0, "Heun (stochastic trapezoid)"),
    "sra1": SolverSpec(diffrax.SRA1, diffrax.SpaceTimeLevyArea, 1.5, 2.0, "SRA1 (Rößler additive-noise SRK)"),
    "shark": SolverSpec(diffrax.ShARK, diffrax.SpaceTimeLevyArea, 1.5, 2.0, "ShARK (shifted additive-noise SRK)"),
}
BROWNIANS = ("auto", "virtual", "unsafe")


class Ensemble(eqx.Module):
    """Simulated paths of the oscillator state, with flags.

    Attributes:
        ts: save times ``(T,)``.
        ys: states ``(..., n_paths, T, 2)``: ``ys[..., 0] = e = p − p*`` and ``ys[..., 1] = ė``.
        p_star: plateau per parameter set ``(...)`` (so ``rewards = p_star + e``).
        unstable: ``(...)`` bool, ``True`` where ``C ≤ 0`` or ``K_eff ≤ 0`` (integrated anyway).
        finite: ``(...)`` bool, ``True`` where every saved value of every path is finite (an unstable
            run can overflow on a long horizon; this says so instead of hiding NaN/inf).
        ok: ``(...)`` bool, ``True`` where diffrax reported a successful solve (``sol.result``); a solve
            that stopped early (e.g. ``max_steps`` reached) is ``False`` and its unreached saves are inf.
        solver: solver name (static).
        dt: nominal step (static).
        brownian: Brownian-path kind actually used (static).
    """

    ts: jax.Array
    ys: jax.Array
    p_star: jax.Array
    unstable: jax.Array
    finite: jax.Array
    ok: jax.Array
    solver: str = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    brownian: str = eqx.field(static=True)

    @property
    def e(self) -> jax.Array:
        """Deviation from the plateau ``(..., n_paths, T)``."""
        return self.ys[..., 0]

    @property
    def rewards(self) -> jax.Array:
        """Expected-reward paths ``p = p* + e``, ``(..., n_paths, T)``."""
        return self.p_star[..., None, None] + self.ys[..., 0]

    def mean(self) -> jax.Array:
        """Ensemble mean of the state ``(..., T, 2)``."""
        return self.ys.mean(-3)

    def var(self) -> jax.Array:
        """Unbiased ensemble variance of the state ``(..., T, 2)``."""
        return self.ys.var(-3, ddof=1)


def step_grid(ts: np.ndarray, t0: float, dt: float) -> np.ndarray:
    """Uniform grid ``t0, t0 + dt, …`` up to ``ts[-1]``, merged with the save times ``ts``.

    Grid points closer than ``dt/1000`` to a save time are dropped, so no step is degenerate.
    """
    t1 = float(ts[-1])
    n = max(1, int(np.ceil((t1 - t0) / dt - 1e-9)))
    uniform = t0 + dt * np.arange(n + 1)
    uniform = uniform[uniform < t1 - 1e-3 * dt]
    if ts.size:
        near = np.min(np.abs(uniform[:, None] - ts[None, :]), axis=1) < 1e-3 * dt
        uniform = uniform[~near | (uniform == t0)]
    grid = np.unique(np.concatenate([[t0], uniform, ts, [t1]]))
    return grid


def _terms(M, C, K, s, bm):
    def drift(t, y, args):
        del t, args
        return jnp.stack([y[1], -(C * y[1] + K * y[0]) / M])

    def diffusion(t, y, args):
        del t
        return jnp.stack([jnp.zeros_like(s), s / M])[:, None].astype(y.dtype)

    return diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, bm))


def _batched_terms(M, C, K, s, bm, n):
    """Terms for ``n`` paths at once: state ``(e (n,), ė (n,))``, Brownian motion ``(W_e (n,), W_v (n,))``.

    The diffusion is the diagonal lineax operator ``(0, s/M)``: ``W_e`` is multiplied by zero (diffrax ≥ 0.7
    requires the control to match the state's structure, so it is drawn and discarded: 2n normals per step
    instead of n), and one RNG call per step serves every path, as in a hand-written loop.
    """

    def drift(t, y, args):
        del t, args
        e, v = y
        return v, -(C * v + K * e) / M

    def diffusion(t, y, args):
        del t, args
        e, v = y
        return lx.DiagonalLinearOperator((jnp.zeros_like(e), jnp.full_like(v, s / M)))

    return diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, bm))


def solve_paths(coef, x0, key, grid, ts, n_paths: int, *, solver: str, brownian: str, tol: float,
                max_steps: int | None = None):
    """``n_paths`` paths of one parameter set in a single ``diffeqsolve`` (the unit :func:`simulate` vmaps
    over parameter sets); differentiable by reverse mode with ``brownian="virtual"``.

    Args:
        coef: ``(M, C, K_eff, s)`` scalars with ``s = sqrt(D/G)``.
        x0: initial state ``(2,)``.
        key: PRNG key of the (``n_paths``-dimensional) Brownian motion.
        grid: step times ``(N,)`` (``grid[0] = t0``), containing ``ts``.
        ts: save times ``(T,)``.
        n_paths: number of paths (static).
        solver: key of :data:`SOLVERS`.
        brownian: ``"virtual"`` or ``"unsafe"``.
        tol: ``VirtualBrownianTree`` tolerance.
        max_steps: cap on the solver steps (static; default the ``N − 1`` steps of the grid).

    Returns:
        ``(ys (n_paths, T, 2), ok ())``: ``ok`` is ``True`` when diffrax reports success.
    """
    spec = SOLVERS[solver]
    dtype = x0.dtype
    t0, t1 = grid[0], grid[-1]
    shape = (jax.ShapeDtypeStruct((n_paths,), dtype), jax.ShapeDtypeStruct((n_paths,), dtype))
    if brownian == "unsafe":
        bm = diffrax.UnsafeBrownianPath(shape=shape, key=key, levy_area=spec.levy_area)
        adjoint = diffrax.ForwardMode()
    else:
        bm = diffrax.VirtualBrownianTree(t0, t1, tol=tol, shape=shape, key=key, levy_area=spec.levy_area)
        adjoint = diffrax.RecursiveCheckpointAdjoint()
    M, C, K, s = coef
    y0 = (jnp.full((n_paths,), x0[0]), jnp.full((n_paths,), x0[1]))
    sol = diffrax.diffeqsolve(
        _batched_terms(M, C, K, s, bm, n_paths),
        spec.solver(),
        t0=t0,
        t1=t1,
        dt0=None,
        y0=y0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.StepTo(ts=grid),
        max_steps=grid.shape[0] - 1 if max_steps is None else max_steps,
        adjoint=adjoint,
        throw=False,
    )
    ok = sol.result == diffrax.RESULTS.successful
    return jnp.stack([sol.ys[0].T, sol.ys[1].T], -1), ok


@eqx.filter_jit
def _simulate(c, group_size, x0, keys, grid, ts, n_paths, solver, brownian, tol, dt, max_steps):
    c = broadcast(c)
    dtype = c.M.dtype
    batch = c.M.shape
    s = jnp.sqrt(c.D / jnp.asarray(group_size, dtype))
    s = jnp.broadcast_to(s, batch)
    flat = [a.reshape(-1) for a in (c.M, c.C, c.K_eff, s)]
    nb = flat[0].shape[0]
    x0 = jnp.broadcast_to(jnp.asarray(x0, dtype), batch + (2,)).reshape(nb, 2)
    grid = grid.astype(dtype)
    ts = ts.astype(dtype)

    def one(coef, x0_b, key):
        return solve_paths(coef, x0_b, key, grid, ts, n_paths, solver=solver, brownian=brownian, tol=tol,
                           max_steps=max_steps)

    ys, ok = jax.vmap(one)(tuple(flat), x0, keys)
    ys = ys.reshape(batch + ys.shape[1:])
    ok = ok.reshape(batch)
    finite = jnp.all(jnp.isfinite(ys), axis=(-3, -2, -1))
    return Ensemble(
        ts=ts,
        ys=ys,
        p_star=c.p_star,
        unstable=unstable_mask(c),
        finite=finite,
        ok=ok,
        solver=solver,
        dt=dt,
        brownian=brownian,
    )


def simulate(
    params: Any,
    ts: Any,
    *,
    key: jax.Array,
    n_paths: int = 1000,
    solver: str = "euler",
    dt: float = 0.01,
    e0: Any = 1.0,
    v0: Any = 0.0,
    group_size: Any = 1,
    brownian: str = "auto",
    t0: float = 0.0,
    common_noise: bool = False,
    max_steps: int | None = None,
) -> Ensemble:
    """Simulate an ensemble of the stochastic oscillator with diffrax (one ``jit``): all paths of a
    parameter set in one batched solve, parameter sets vmapped, each set with its own key (``split(key)``).

    Args:
        params: parameters with fields ``M, C, K_eff, p_star, D`` (e.g.
            :class:`grpojax.dynamics.OscillatorParams`), batch shape ``(...)``; every parameter set gets
            ``n_paths`` paths.
        ts: save times ``(T,)``, strictly increasing, ``≥ t0`` (must be concrete: the step grid is built on the host).
        key: PRNG key.
        n_paths: paths per parameter set.
        solver: one of :data:`SOLVERS` (``"euler"``, ``"heun"``, ``"sra1"``, ``"shark"``).
        dt: nominal step; steps are ``dt`` on a uniform grid merged with ``ts``.
        e0, v0: initial state (broadcastable to the batch); the default is "from rest at e = 1".
        group_size: group size ``G`` (noise variance ``D/G``), broadcastable to the batch.
        brownian: ``"auto"`` (unsafe path when valid, see module docs), ``"virtual"`` or ``"unsafe"``.
        t0: initial time.
        common_noise: reuse the same ``n_paths`` Brownian paths for every parameter set (common random
            numbers, for comparisons across parameters) instead of independent ones.
        max_steps: cap on the solver steps per parameter set (default: the number of steps of the grid,
            which never stops early). A solve that reaches the cap stops there and is flagged in ``ok``.

    Returns:
        :class:`Ensemble` with ``ys`` of shape ``(..., n_paths, T, 2)``. Unstable parameter sets
        (``C ≤ 0`` or ``K_eff ≤ 0``) are integrated and flagged in ``unstable``; overflow is reported in
        ``finite``; diffrax's ``sol.result`` in ``ok``.

    Raises:
        ValueError: non-finite parameters/times/initial state, an unknown solver or Brownian kind,
            ``dt ≤ 0``, ``n_paths < 1``, or save times that are not increasing and ``> t0``.
    """
    if solver not in SOLVERS:
        raise InvalidValueError(f"solver must be one of {tuple(SOLVERS)}, got solver={solver!r}")
    if brownian not in BROWNIANS:
        raise InvalidValueError(f"brownian must be one of {BROWNIANS}, got brownian={brownian!r}")
    if isinstance(n_paths, bool) or int(n_paths) != n_paths or n_paths < 1:
        raise InvalidValueError(f"n_paths must be a positive integer, got n_paths={n_paths!r}")
    if max_steps is not None:
        max_steps = check_int("max_steps", max_steps, 1)
    check_positive("dt", dt)
    check_finite("t0", t0)
    for name, v in (("e0", e0), ("v0", v0)):
        check_finite(name, v)
    check_positive("group_size", group_size)
    if not is_concrete(ts):
        raise InvalidValueError("ts must be concrete (the step grid is built on the host); pass a NumPy array")
    check_finite("ts", ts)
    ts_np = np.atleast_1d(np.asarray(ts, dtype=np.float64))
    if ts_np.ndim != 1 or np.any(np.diff(ts_np) <= 0) or ts_np[0] < t0 or ts_np[-1] <= t0:
        raise InvalidValueError(f"ts must be strictly increasing 1-d times >= t0={t0} ending after t0, got {ts_np[:5]}...")
    c = coefficients(params)
    grid = step_grid(ts_np, float(t0), float(dt))
    if brownian == "auto":
        distinct = np.unique(grid.astype(np.float32)).size == grid.size
        brownian = "unsafe" if distinct else "virtual"
    tol = float(np.min(np.diff(grid))) / 8.0
    batch = jnp.broadcast_shapes(*(jnp.shape(a) for a in c), jnp.shape(group_size), jnp.shape(e0), jnp.shape(v0))
    nb = int(np.prod(batch)) if batch else 1
    keys = jnp.broadcast_to(key, (nb,) + key.shape) if common_noise else jr.split(key, nb)
    x0 = jnp.stack(jnp.broadcast_arrays(jnp.asarray(e0, float), jnp.asarray(v0, float)), -1)
    c = c._replace(M=jnp.broadcast_to(c.M, batch))
    return _simulate(
        c, jnp.asarray(group_size), x0, keys, jnp.asarray(grid), jnp.asarray(ts_np), int(n_paths), solver, brownian,
        tol, float(dt), max_steps,
    )
