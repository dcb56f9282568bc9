"""NUTS posteriors of the reward-curve models, summarised with arviz, with derived quantities.

NUTS samples the dynamics and the noise on unit scales; the two levels are integrated out exactly and drawn
afterwards from their Gaussian conditional (:mod:`grpojax.fit._models`). ``str(fit)`` (:func:`report`) prints
p*, the gain, ζ, M_eff, C_eff, K_eff, P(regime) and the step at 95% of the gain with 90% intervals.

:func:`fit_bayes` samples one of :data:`grpojax.fit.MODELS` with numpyro NUTS (several chains, dense
mass matrix), starting every chain from a jittered point fit, and returns a :class:`BayesFit` with

- posterior summaries (mean, sd, equal-tailed 5/50/95% quantiles, 90% HDI, r_hat, ESS bulk/tail) in
  raw units (steps, reward units), for the sampled parameters and the derived ones (ω₀, ζ, plateau,
  gain, step at 95% of the gain);
- divergences and a convergence verdict (``r_hat ≤ 1.01``, ``ESS_bulk ≥ 100`` per chain, no
  divergences); otherwise a :class:`ConvergenceWarning` is issued and ``status = "not_converged"``;
- ``P(regime)`` over ``REGIMES`` (overdamped / critical / underdamped / unstable);
- a posterior band of the mean curve and of new observations on a step grid, and (state-space and
  mechanistic models) a Kalman forecast from the filtered state at the last observation.

A curve without detectable learning gets ``status = "no_learning"``. Two tests, either suffices:
the 90% interval of the gain ``p* − p0`` contains 0, or the model comparison against a constant curve
does not favour a rise (``ΔBIC < FLAT_DELTA_BIC`` of the three-phase point fit, the Laplace approximation
of the Bayes factor used by :func:`grpojax.fit.fit_laws_batched` too). The second test is needed because
the iid three-phase posterior of a pure-noise curve can put a fast "rise" on the first few points and so
exclude 0 from the gain interval. For such a curve the headline ``plateau``, ``gain``, ``step95`` and
``p_regime`` are NaN (nothing is invented); the posterior itself stays in ``summary`` for inspection.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions.transforms import biject_to

from grpojax._defaults import LAG, NUTS_CHAINS, NUTS_DRAWS, NUTS_WARMUP
from grpojax._errors import InvalidValueError
from grpojax._curve_laws import response_sd
from grpojax.dynamics import REGIMES, OscillatorParams, regime, response_from_rest
from grpojax.fit._data import check_curve
from grpojax.fit._kalman import kalman_filter, kalman_forecast, oscillator_transitions, step_intervals
from grpojax.fit._lsq import FLAT_DELTA_BIC, _levels, fit_laws_batched
from grpojax.fit._batched_nuts import chain_devices, draw_levels, np_rng as _np_rng, run_chains_split
from grpojax.fit._models import (
    MODELS,
    ZETA_RANGE,
    closing_rate,
    folded,
    mechanistic_model,
    mechanistic_oscillator,
    mechanistic_post,
    natural,
    prior_sites,
    state_space_model,
    state_space_post,
    three_phase_model,
    three_phase_post,
    unit_sites,
)

HORIZON = 20.0
"""The step at 95% of the gain is searched up to ``HORIZON`` × the curve's span (else reported +inf)."""


class ConvergenceWarning(UserWarning):
    """NUTS did not converge (r_hat > 1.01, too few effective samples, or divergences)."""


class BayesFit(NamedTuple):
    """Posterior of one model on one curve (raw units: steps and reward as given).

    Attributes:
        model: model name.
        status: ``"ok"``, ``"not_converged"`` or ``"no_learning"``.
        converged: r_hat/ESS/divergence criteria all met.
        warnings: human-readable warnings (also issued as :class:`ConvergenceWarning`).
        summary: ``{param: {mean, sd, q05, q50, q95, hdi_5%, hdi_95%, r_hat, ess_bulk, ess_tail}}``.
        divergences: number of divergent transitions after warmup.
        p_regime: ``{regime name: posterior probability}``.
        plateau, gain: summaries of ``p*`` and ``p* − p0`` (``{mean, q05, q50, q95}``).
        step95: step at which 95% of the gain is first reached (``{q05, q50, q95, p_defined}``; +inf
            beyond the horizon; undefined for unstable draws).
        band: ``{steps, mean_q05, mean_q50, mean_q95, obs_q05, obs_q95}`` on a grid over the data.
        samples: ``{param: (chains, draws)}`` raw-unit draws (sampled and derived).
        runtime_s: wall time of the sampler (compile included).
        info: curve normalisation, model settings, sampler settings.
    """

    model: str
    status: str
    converged: bool
    warnings: list
    summary: dict
    divergences: int
    p_regime: dict
    plateau: dict
    gain: dict
    step95: dict
    band: dict
    samples: dict
    runtime_s: float
    info: dict

    def __str__(self) -> str:
        return report(self)


def _init_values(model, curve, a_init, a_loc, lf):
    """Starting values of the sampled unit-scale sites (constrained) from the LM three-phase fit ``lf``."""
    fp = {k: float(v[0]) for k, v in lf.fitted_params.items()}
    ok = all(np.isfinite(list(fp.values())))
    om = fp["omega0"] * curve.span if ok else 8.0
    ze = fp["zeta"] if ok else 1.0
    sig = float(lf.sigma[0]) / curve.scale if np.isfinite(lf.sigma[0]) else 0.5
    ze = float(np.clip(ze, ZETA_RANGE[0] + 0.05, ZETA_RANGE[1] - 0.05))
    v = unit_sites(model, {"omega0": max(om, 1e-3), "zeta": ze, "sigma": float(np.clip(sig, 0.02, 2.0)), "s_proc": 0.05,
                           "a": a_init if a_init is not None else 1.0}, a_loc=a_loc)
    return {k: float(np.clip(x, -3.0, 3.0)) if k in ("rate_z", "a_z") else float(x) for k, x in v.items()}


def _init_params(model, values, num_chains, key):
    sites = prior_sites(model)
    out = {}
    for i, (name, d) in enumerate(sites.items()):
        u = biject_to(d.support).inv(jnp.asarray(values[name], jnp.float64 if jax.config.jax_enable_x64 else jnp.float32))
        jit = 0.05 * jax.random.normal(jax.random.fold_in(key, i), (num_chains,), u.dtype)
        out[name] = u + jit if num_chains > 1 else u + jit[0]
    return out


def _mechanistic_a_init(curve, hp):
    """Grid search of ``a = ηK`` by variable projection on the mean curve (raw steps)."""
    grid = np.geomspace(1e-5, 2.0, 200)
    M, C, K = mechanistic_oscillator(jnp.asarray(grid), hp["eta"], hp["mu"], hp["k_ref"], hp["lag"], hp["k_instant"])
    t = jnp.asarray(curve.steps - curve.t0)
    u = jax.vmap(lambda m, c, k: response_from_rest(OscillatorParams(m, c, k), t))(M, C, K)
    u = jnp.where(jnp.isfinite(u) & (jnp.abs(u) < 1e6), u, 0.0)
    w = jnp.asarray(curve.mask, float)
    _, _, sse = _levels(u, jnp.asarray(np.where(curve.mask, curve.yn, 0.0))[None, :], w[None, :])
    return float(grid[int(jnp.nanargmin(jnp.where(jnp.isfinite(sse), sse, jnp.inf)))])


def _quant(x):
    x = np.asarray(x, float).ravel()
    x = x[~np.isnan(x)]
    if x.size == 0:
        return {"mean": float("nan"), "q05": float("nan"), "q50": float("nan"), "q95": float("nan")}
    q = np.quantile(x, [0.05, 0.5, 0.95], method="nearest")
    fin = x[np.isfinite(x)]
    return {"mean": float(fin.mean()) if fin.size else float("nan"), "q05": float(q[0]), "q50": float(q[1]), "q95": float(q[2])}


def _first_reach(phi, grid):
    """First grid time with φ ≤ 0.05 along the last axis; +inf if never."""
    hit = phi <= 0.05
    idx = np.argmax(hit, axis=-1)
    return np.where(hit.any(-1), grid[idx], np.inf)


def _check_key(key) -> None:
    """A JAX PRNG key: typed (``jax.random.key(0)``) or raw (``jax.random.PRNGKey(0)``, two uint32)."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and getattr(key, "ndim", None) == 0 and jnp.issubdtype(dtype, jax.dtypes.prng_key):
        return
    if dtype is not None and getattr(key, "shape", None) == (2,) and dtype == jnp.uint32:
        return
    raise InvalidValueError(f"key must be a JAX PRNG key such as jax.random.key(0), got key={key!r}")


def fit_bayes(
    steps,
    values,
    model: str = "state_space",
    *,
    key: jax.Array,
    num_warmup: int = NUTS_WARMUP,
    num_samples: int = NUTS_DRAWS,
    num_chains: int = NUTS_CHAINS,
    chain_method: str = "vectorized",
    hyperparams: dict | None = None,
    forecast_to: float | None = None,
    target_accept_prob: float = 0.85,
    progress_bar: bool = False,
    band_points: int = 200,
    band_steps=None,
    max_band_draws: int = 400,
) -> BayesFit:
    """Sample the posterior of ``model`` for one reward curve with NUTS.

    Args:
        steps: ``(T,)`` strictly increasing steps (irregular welcome).
        values: ``(T,)`` rewards; NaN marks a missing observation (needs ≥ 8 finite ones).
        model: ``"three_phase"`` (iid noise), ``"state_space"`` (linear SDE + noise, Kalman
            likelihood) or ``"mechanistic"`` (needs ``hyperparams``).
        key: PRNG key (keyword-only).
        num_warmup, num_samples, num_chains: NUTS settings (per chain).
        chain_method: ``"vectorized"`` (chains ``vmap``-ed), ``"sequential"`` (one after the other, ``lax.map``)
            or ``"parallel"`` (as sequential on each device). With several local devices, ``"vectorized"`` and
            ``"parallel"`` split the chains evenly between them and run the devices at the same time
            (:func:`grpojax.fit._batched_nuts.run_chains_split`): the draws are the same as on one device, and
            on a CPU with host devices (``jax.config.update("jax_num_cpu_devices", 2)`` before JAX starts, as
            the command line does) two cores share the work. Either way warm-up, sampling and the per-draw
            level posteriors run as one compiled program per device
            (:func:`grpojax.fit._batched_nuts.run_chains`).
        hyperparams: mechanistic model only: ``{"eta", "mu", "k_ref", "lag", "group_size", "k_instant"}``
            (``lag`` default ``"periodic"``, ``group_size`` 1, ``k_instant`` = K₀ default 0).
        forecast_to: extend the band to this step (Kalman forecast beyond the last observation for
            the state-space and mechanistic models).
        target_accept_prob: NUTS target acceptance.
        progress_bar: kept for compatibility and has no effect: the chains run inside one compiled program,
            which reports nothing until it returns (the command line shows the elapsed time instead).
        band_points: grid size of the band.
        band_steps: explicit increasing steps for the band (overrides ``band_points``/``forecast_to``).
        max_band_draws: posterior draws used for the band.

    Returns:
        :class:`BayesFit`.

    Raises:
        ValueError: bad curve (see :func:`grpojax.fit.check_curve`), unknown model, missing or bad
            hyperparameters.
    """
    if model not in MODELS:
        raise InvalidValueError(f"unknown model {model!r}; expected one of {MODELS}")
    _check_key(key)
    if chain_method not in ("vectorized", "sequential", "parallel"):
        raise InvalidValueError(f"chain_method must be 'vectorized', 'sequential' or 'parallel', got {chain_method!r}")
    for name, v in (("num_warmup", num_warmup), ("num_samples", num_samples), ("num_chains", num_chains)):
        if int(v) != v or v < 1:
            raise InvalidValueError(f"{name} must be a positive integer, got {v!r}")
    curve = check_curve(steps, values, allow_missing=True)
    grid = _band_grid(curve, forecast_to, band_points, band_steps)
    y = jnp.asarray(np.where(curve.mask, curve.yn, 0.0))
    mask = jnp.asarray(curve.mask)
    hp = {}
    a_loc = 0.0
    a_init = None
    if model == "mechanistic":
        if hyperparams is None:
            raise InvalidValueError("model='mechanistic' needs hyperparams={'eta', 'mu', 'k_ref', 'lag', 'group_size'}")
        missing = {"eta", "mu", "k_ref"} - set(hyperparams)
        if missing:
            raise InvalidValueError(f"hyperparams is missing {sorted(missing)} (needs eta, mu, k_ref; lag, group_size optional)")
        hp = {"eta": float(hyperparams["eta"]), "mu": float(hyperparams["mu"]), "k_ref": float(hyperparams["k_ref"]),
              "lag": str(hyperparams.get("lag", LAG)), "group_size": float(hyperparams.get("group_size", 1.0)),
              "k_instant": float(hyperparams.get("k_instant", 0.0))}
        mechanistic_oscillator(jnp.asarray(1e-3), hp["eta"], hp["mu"], hp["k_ref"], hp["lag"], hp["k_instant"])  # validates
        if not hp["group_size"] > 0:
            raise InvalidValueError(f"group_size must be > 0, got {hp['group_size']!r}")
        a_loc = float(np.log(5.0 * (1.0 - hp["mu"]) / curve.span))
        a_init = _mechanistic_a_init(curve, hp)

    fn, post_fn, data, static = _model_and_args(model, curve, y, mask, hp, a_loc)
    k_init, k_run, k_band = jax.random.split(key, 3)
    lsq = fit_laws_batched(curve.steps, curve.y[None, :], "three_phase")
    init = _init_params(model, _init_values(model, curve, a_init, a_loc, lsq), num_chains, k_init)
    init = {k: jnp.reshape(v, (1, int(num_chains))) for k, v in init.items()}
    keys = jax.random.split(k_run, int(num_chains))[None]
    t_start = time.perf_counter()
    # numpyro's adaptation mixes integer counters with floats: standard promotion for the sampler,
    # whatever the caller's jax_numpy_dtype_promotion (the models themselves are explicit).
    with jax.numpy_dtype_promotion("standard"):
        _, div, _, extra = run_chains_split(init, tuple(jnp.asarray(a)[None] for a in data), keys, model=fn, static=static,
                                            post=post_fn, num_warmup=int(num_warmup), num_samples=int(num_samples),
                                            target_accept_prob=float(target_accept_prob),
                                            sequential=chain_method != "vectorized",
                                            devices=1 if chain_method == "sequential" else chain_devices(int(num_chains)))
    extra = {k: v[0] for k, v in extra.items()}  # the sampler's dtype (float32 unless x64)
    divergences = int(np.asarray(div).sum())
    post = folded({k: extra[k] for k in prior_sites(model)})
    norm = _normalised_draws(model, post, extra["level_mean"], extra["level_cov"], a_loc, k_band)
    runtime = time.perf_counter() - t_start
    return _summarise(model, curve, post, norm, divergences, runtime, hp, grid, jax.random.fold_in(k_band, 1), max_band_draws,
                      float(lsq.delta_bic_flat[0]), dict(num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains, chain_method=chain_method))


def _model_and_args(model, curve, y, mask, hp, a_loc):
    """``(model, post, data, static)`` for one normalised curve: the numpyro model and its per-draw
    post-processing, called as ``model(*data, *static)`` (``data`` traced, ``static`` hashable host values)."""
    if model == "three_phase":
        return three_phase_model, three_phase_post, (curve.t, y, mask), ()
    if model == "state_space":
        uniq, index = step_intervals(curve.t)
        return state_space_model, state_space_post, (curve.t, y, mask, index), (tuple(float(u) for u in uniq),)
    uniq, index = step_intervals(curve.steps)
    return (mechanistic_model, mechanistic_post, (curve.steps - curve.t0, y, mask, index),
            (tuple(float(u) for u in uniq), hp["eta"], hp["mu"], hp["k_ref"], hp["lag"], hp["group_size"], a_loc, hp["k_instant"]))


def _oscillator_of(model, nat, hp):
    """``(M, C, K_eff)`` in the model's time unit (normalised for the phenomenological models, steps for the
    mechanistic one) from the natural parameters ``nat`` (NumPy or JAX arrays)."""
    if model == "mechanistic":
        return mechanistic_oscillator(nat["a"], hp["eta"], hp["mu"], hp["k_ref"], hp["lag"], hp["k_instant"])
    om = nat["omega0"]
    return om * 0.0 + 1.0, 2.0 * nat["zeta"] * om, om**2


def _phi(M, C, K, t):
    """φ(t) from rest of the oscillator (M, C, K_eff), in NumPy: the law's one definition
    (:func:`grpojax._curve_laws.response_sd`), broadcast over the draws and ``t``."""
    with np.errstate(all="ignore"):
        return response_sd(-C / (2.0 * M), K / M, t, np)


def _normalised_draws(model, post, level_mean, level_cov, a_loc, key):
    """The natural parameters (normalised units) per draw, shape ``(chains, draws)``, with one draw of the two
    levels from their exact conditional posterior (``level_mean``, ``level_cov``) for each posterior draw."""
    nat = natural(model, post, a_loc=a_loc)
    lv = draw_levels(level_mean, level_cov, _np_rng(key))
    return {**nat, "p0": lv[..., 0], "p_star": lv[..., 1]}


def _dynamics(model, norm, curve, hp):
    """(M, C, K_eff) arrays in the model's time unit and the time scale to steps."""
    M, C, K = (np.asarray(x, float) for x in _oscillator_of(model, norm, hp))
    return M, C, K, (1.0 if model == "mechanistic" else curve.span)


def _band_grid(curve, forecast_to, band_points, band_steps):
    if band_steps is not None:
        g = np.asarray(band_steps, dtype=float)
        if g.ndim != 1 or g.size == 0 or not np.all(np.isfinite(g)) or np.any(np.diff(g) <= 0) or g[0] < curve.t0:
            raise InvalidValueError(f"band_steps must be finite, strictly increasing and >= the first step {curve.t0:g}")
        return g
    end = max(float(curve.steps[-1]), float(forecast_to) if forecast_to is not None else -np.inf)
    return np.linspace(curve.t0, end, int(band_points))


def _summarise(model, curve, post, norm, divergences, runtime, hp, grid, key, max_band_draws, delta_bic_flat, settings):
    latent = list(post)
    c, s = curve.center, curve.scale
    M, C, K, tscale = _dynamics(model, norm, curve, hp)
    p0n, psn = norm["p0"], norm["p_star"]
    omega0 = np.sqrt(np.maximum(K, 0) / M) / tscale
    zeta = C / (2.0 * np.sqrt(np.maximum(M * K, 1e-300)))
    raw = {
        "p0": c + s * p0n,
        "p_star": c + s * psn,
        "gain": s * (psn - p0n),
        "sigma": s * norm["sigma"],
        "omega0": omega0,
        "zeta": zeta,
        "rate": closing_rate(omega0, zeta),
        # the oscillator in optimizer steps: M_eff = 1 for the phenomenological models (a reward curve fixes only
        # C/M and K_eff/M), from the hyperparameters for the mechanistic one
        "M_eff": M * np.ones_like(omega0),
        "C_eff": C / tscale,
        "K_eff": K / tscale**2,
    }
    if "s_proc" in norm:
        raw["s_proc"] = s * norm["s_proc"]
    if model == "mechanistic":
        raw["K"] = norm["a"] / hp["eta"]
        q = 4.0 * (np.sqrt(K / M)) ** 3 * norm["s_proc"] ** 2
        raw["noise_var"] = q * hp["group_size"] * M**2 * s**2 / hp["eta"] ** 2
    # Regimes and the step at 95% of the gain.
    codes = np.asarray(regime(OscillatorParams(jnp.asarray(M), jnp.asarray(C), jnp.asarray(K))))
    p_regime = {name: float(np.mean(codes == i)) for i, name in enumerate(REGIMES)}
    flatM, flatC, flatK = (np.ravel(x) for x in (M, C, K))
    tgrid = np.linspace(0.0, HORIZON * curve.span / tscale, 4001)
    t95 = np.empty(flatM.size)
    for lo in range(0, flatM.size, 500):
        sl = slice(lo, lo + 500)
        t95[sl] = _first_reach(_phi(flatM[sl, None], flatC[sl, None], flatK[sl, None], tgrid[None, :]), tgrid)
    t95 = np.where(np.ravel(codes) == REGIMES.index("unstable"), np.nan, t95)
    raw["step95"] = (curve.t0 + t95 * tscale).reshape(codes.shape)
    step95 = _quant(raw["step95"])
    step95["p_defined"] = float(np.mean(np.isfinite(raw["step95"])))
    # arviz summary (raw units); imported here: importing arviz takes seconds, which the commands that
    # do not sample (a forecast, a law fit) should not pay
    import arviz as az  # noqa: PLC0415

    idata = az.from_dict(posterior={k: v for k, v in raw.items() if k != "step95"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tab = az.summary(idata, hdi_prob=0.9, round_to="none")
        diag = az.summary(az.from_dict(posterior=post), kind="diagnostics", round_to="none")
    summary = {}
    for name in raw:
        row = tab.loc[name].to_dict() if name in tab.index else {}
        summary[name] = {**_quant(raw[name]), **{k: float(v) for k, v in row.items() if k not in ("mean",)}}
    nch, ndr = next(iter(post.values())).shape[:2]
    rhat = float(np.nanmax(diag["r_hat"].to_numpy())) if nch > 1 else float("nan")
    ess = float(np.nanmin(diag["ess_bulk"].to_numpy()))
    warn = []
    if nch > 1 and not rhat <= 1.01:
        warn.append(f"r_hat = {rhat:.3f} > 1.01 (chains disagree)")
    if not ess >= 100 * nch:
        warn.append(f"ESS_bulk = {ess:.0f} < {100 * nch} (100 per chain)")
    if divergences:
        warn.append(f"{divergences} divergent transitions")
    converged = not warn
    gain = _quant(raw["gain"])
    plateau = _quant(raw["p_star"])
    status = "ok" if converged else "not_converged"
    flat_reasons = []
    if gain["q05"] <= 0.0 <= gain["q95"]:
        flat_reasons.append("the 90% interval of the gain p* - p0 contains 0")
    if np.isfinite(delta_bic_flat) and delta_bic_flat < FLAT_DELTA_BIC:
        flat_reasons.append(f"a constant curve is not worse than a rise (Delta BIC = {delta_bic_flat:.1f} < {FLAT_DELTA_BIC:g})")
    if flat_reasons:
        status = "no_learning"
        warn.append("no detectable learning: " + " and ".join(flat_reasons) + "; plateau, gain, rate and regime are "
                    "not identified and are not reported (the posterior stays in summary)")
        nan = {k: float("nan") for k in gain}
        gain, plateau, step95 = dict(nan), dict(nan), {**nan, "p_defined": 0.0}
        p_regime = {name: float("nan") for name in p_regime}
    if not converged:
        warnings.warn(f"{model} NUTS fit did not converge: " + "; ".join(w for w in warn if "learning" not in w), ConvergenceWarning, stacklevel=3)
    band = _band(model, curve, norm, raw, M, C, K, tscale, hp, grid, key, max_band_draws)
    info = dict(curve=dict(t0=curve.t0, span=curve.span, center=curve.center, scale=curve.scale, n_obs=int(curve.mask.sum())),
                hyperparams=hp, max_r_hat=rhat, min_ess_bulk=ess, latent=latent, delta_bic_flat=delta_bic_flat, **settings)
    return BayesFit(model, status, converged, warn, summary, divergences, p_regime, plateau, gain, step95, band,
                    raw, runtime, info)


def _band(model, curve, norm, raw, M, C, K, tscale, hp, grid, key, max_draws):
    """Quantile bands of the mean curve and of new observations over the data (and a forecast)."""
    last = float(curve.steps[curve.mask][-1])
    flat = {k: np.ravel(v) for k, v in raw.items()}
    n = flat["p0"].size
    rng = _np_rng(key)
    idx = rng.choice(n, min(n, max_draws), replace=False)
    m, cc, kk = (np.ravel(x)[idx] for x in (M, C, K))
    tt = (grid - curve.t0) / tscale
    phi = _phi(m[:, None], cc[:, None], kk[:, None], tt[None, :])
    p0, ps, sig = flat["p0"][idx], flat["p_star"][idx], flat["sigma"][idx]
    mean = ps[:, None] + (p0 - ps)[:, None] * phi
    z = rng.standard_normal(mean.shape)
    obs = mean + sig[:, None] * z
    fc = np.zeros(0)
    if model != "three_phase" and grid[-1] > last:
        fut = grid > last
        fc = grid[fut]
        fm, fv = _kalman_forecast_draws(model, curve, norm, idx, M, C, K, tscale, hp, (fc - last) / tscale)
        s = curve.scale
        mean[:, fut] = curve.center + s * fm
        obs[:, fut] = mean[:, fut] + s * np.sqrt(np.maximum(fv, 0.0) + (sig[:, None] / s) ** 2) * z[:, fut]
    q = lambda a, p: np.quantile(a, p, axis=0)  # noqa: E731
    return {"steps": grid, "mean_q05": q(mean, 0.05), "mean_q50": q(mean, 0.5), "mean_q95": q(mean, 0.95),
            "obs_q05": q(obs, 0.05), "obs_q95": q(obs, 0.95), "forecast_from": last if fc.size else None}


def _kalman_forecast_draws(model, curve, norm, idx, M, C, K, tscale, hp, dts):
    """Per draw: filter the data given the draw's levels, then the predictive mean/var (normalised units) at
    ``dts`` after the last obs."""
    times = curve.t if model == "state_space" else curve.steps
    uniq, index = step_intervals(times)
    flat = {k: np.ravel(v)[idx] for k, v in norm.items()}
    m, cc, kk = (jnp.asarray(np.ravel(x)[idx]) for x in (M, C, K))
    om = jnp.sqrt(jnp.maximum(kk, 0.0) / m)
    q = 4.0 * om**3 * jnp.asarray(flat["s_proc"]) ** 2
    y = jnp.asarray(np.where(curve.mask, curve.yn, 0.0))
    mask = jnp.asarray(curve.mask)
    last = int(np.nonzero(curve.mask)[0][-1])

    def one(M_, C_, K_, q_, p0, ps, sig):
        params = OscillatorParams(M_, C_, K_, ps, q_ * M_**2)
        A, Q = oscillator_transitions(params, uniq, index)
        m0 = jnp.stack([p0 - ps, jnp.zeros_like(p0)])
        res = kalman_filter(y, mask, A, Q, sig**2, m0, jnp.zeros((2, 2), m0.dtype), offset=ps)
        fm, fv = kalman_forecast(params, res.means[last], res.covs[last], jnp.asarray(dts))
        return ps + fm, fv

    fm, fv = jax.jit(jax.vmap(one))(m, cc, kk, q, jnp.asarray(flat["p0"]), jnp.asarray(flat["p_star"]), jnp.asarray(flat["sigma"]))
    return np.asarray(fm), np.asarray(fv)


def _interval(d, unit="") -> str:
    return f"{d['q50']:.4g} [{d['q05']:.4g}, {d['q95']:.4g}]{unit}"


def headline(fit: BayesFit) -> dict[str, float]:
    """Flat medians and 90% intervals of the quantities :func:`report` prints (for ``--json`` / ``--csv`` rows)."""
    out: dict[str, float] = {}
    for name in ("p_star", "zeta", "M_eff", "C_eff", "K_eff", "omega0"):
        d = fit.plateau if name == "p_star" else fit.summary.get(name, {})
        for k, suffix in (("q50", ""), ("q05", "_lo"), ("q95", "_hi")):
            out[name + suffix] = d.get(k, float("nan"))
    for r in ("overdamped", "underdamped", "unstable"):
        out[f"p_{r}"] = fit.p_regime.get(r, float("nan"))
    out.update(step95=fit.step95["q50"], step95_lo=fit.step95["q05"], step95_hi=fit.step95["q95"])
    out.update(divergences=fit.divergences, max_r_hat=fit.info["max_r_hat"], min_ess_bulk=fit.info["min_ess_bulk"])
    return out


def report(fit: BayesFit) -> str:
    """The posterior in words: plateau, the oscillator (M_eff, C_eff, K_eff, ζ), P(regime), the step at 95% of
    the gain, with 90% intervals (median [5%, 95%]) and the convergence diagnostics."""
    mech = fit.model == "mechanistic"
    lines = [f"{fit.model} posterior: {fit.status} ({fit.divergences} divergent transitions, max r_hat "
             f"{fit.info['max_r_hat']:.3f}, min ESS_bulk {fit.info['min_ess_bulk']:.0f}; {fit.runtime_s:.0f} s)"]
    S = fit.summary
    lines.append(f"  p* (plateau)          {_interval(fit.plateau)}")
    lines.append(f"  gain p* - p0          {_interval(fit.gain)}")
    lines.append(f"  zeta                  {_interval(S['zeta'])}")
    if mech:
        lines.append(f"  M_eff                 {_interval(S['M_eff'])}")
    else:
        lines.append("  M_eff                 1 (a reward curve fixes only C/M and K_eff/M; M needs the hyperparameters: "
                     "model 'mechanistic')")
    lines.append(f"  C_eff                 {_interval(S['C_eff'])} per step")
    lines.append(f"  K_eff                 {_interval(S['K_eff'])} per step^2")
    pr = fit.p_regime
    lines.append("  P(regime)             " + ", ".join(f"{r} {pr.get(r, float('nan')):.2f}"
                                                      for r in ("overdamped", "underdamped", "unstable")))
    st = fit.step95
    lines.append(f"  step at 95% of gain   {_interval(st)}" + (f" (defined for {st['p_defined']:.1%} of draws)"
                                                                 if st.get("p_defined", 1.0) < 1.0 else ""))
    lines += [f"  warning: {w}" for w in fit.warnings]
    return "\n".join(lines)


def regime_probabilities(fit: BayesFit) -> dict[str, float]:
    """``P(regime)`` of a :class:`BayesFit` (convenience accessor)."""
    return dict(fit.p_regime)


def to_summary_dict(fit: BayesFit) -> dict[str, Any]:
    """A JSON-friendly digest of a :class:`BayesFit` (no raw draws)."""
    return {
        "model": fit.model, "status": fit.status, "converged": fit.converged, "warnings": fit.warnings,
        "divergences": fit.divergences, "p_regime": fit.p_regime, "plateau": fit.plateau, "gain": fit.gain,
        "step95": fit.step95, "summary": fit.summary, "runtime_s": fit.runtime_s, "info": fit.info,
        "headline": headline(fit),
    }
