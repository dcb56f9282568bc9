"""``grpojax fit LOG``: fit reward-curve laws (and optionally a NUTS posterior) to a training log."""

from __future__ import annotations

import argparse
import math
import sys
import warnings

from grpojax._defaults import FORECAST_METHOD, FORECAST_WINDOW, NUTS_CHAINS, NUTS_DRAWS, NUTS_WARMUP, SEED
from grpojax._io import save_figure
from grpojax.cli._common import (LAG_HELP, CLIError, add_bounds_arg, add_lag_arg, err_console, add_log_read_args, check_bounds_arg, console, log_read_kwargs, print_table,
                                 out_dir, write_json)
from grpojax.cli._fit_pool import add_pool_args, run_pooled
from grpojax.cli._output import add_table_output_args, emit_rows, to_stdout
from grpojax.cli._runs import read_runs, run_folders, slug
from grpojax.cli._types import SEED as SEED_ARG, Int, Real, in_path, out_path

DESCRIPTION = """\
Fit the reward-curve laws (exponential, three_phase, sigmoid) to the reward column of a training log
by batched Levenberg-Marquardt; report R² (raw, after --smooth, and the noise ceiling), AIC/BIC and
the residual autocorrelation, with a status per law: ok, not_converged, no_learning, decreasing or
law_cannot_describe (the laws describe a rise to a plateau: a falling curve, negative damping on a
curve that does not oscillate, or a plateau the curve never approaches or outside --bounds is not
fitted silently; the reason is printed under the table and stored in fit.json, and the parameters
are left out). With --bayes, also sample a numpyro NUTS posterior (state_space by default;
three_phase; mechanistic with --eta/--mu/--k-ref) and report the plateau, the oscillator's M_eff, C_eff,
K_eff and zeta, P(regime) and the step at
95% of the gain with 90% credible intervals. With --prefix F, fit on the first fraction F of
the steps and score the forecast of the rest; every run also gets a window forecast with an interval:
the mean of the metric over the last --window of the run (default 10%) predicted from the prefix alone
by --forecast-method (default combined: the creep posterior -- a fast rise plus a slow power-law creep,
the mean of many prompts with different stiffness -- averaged with persistence, an exponential and a
sigmoid, with a 90% interval calibrated on the errors of past forecasts on real runs of many
repositories), set beside what the run then reached; an accuracy or pass rate is kept in [0, 1]; --target T
adds the probability that the window mean reaches T. Each window forecast also states P(the reward
collapses before the window's end), a base rate per unit of run fraction learned from labelled real runs
(--collapse-hazard sets another); --collapse-mixture mixes that collapse branch into the forecast and its
interval. A prefix that already holds a collapse is forecast from the level the reward fell to.
Writes DIR/fit.json and DIR/fit_<run>.png. A log
holding several runs (a TensorBoard folder of runs, a W&B export of several runs, a file whose step
counter restarts) is fitted run by run: DIR/<run>/fit.json and its PNG for each, and DIR/fit.json
with all of them; --run NAME picks one. With --pool, every run of the logs given (several logs, a
sweep folder, a multi-run TensorBoard folder) is fitted together: one hierarchical posterior that pools
plateau, rate and noise across the runs, with the log learning rate, group size and epochs per rollout
as covariates where the runs' meta carry them; with --prefix, each run is then forecast from its prefix
plus its siblings' curves, beside the single-run forecast.

Example:
  grpojax fit outputs/checkpoint-500/trainer_state.json --prefix 0.5 --out out/fit
  grpojax fit run.log --bayes state_space --smooth 10 --out out/fit
  grpojax fit sweep/run1.jsonl sweep/run2.jsonl sweep/run3.jsonl --pool --prefix 0.25 --out out/pool
"""


def _votes_line(name: str, wf) -> str:
    """Which forecasters the combined forecast is the median of, and which abstained (and why)."""
    voted = [f"{m} {c['mean']:.4g}" for m, c in wf.components.items() if wf.weights.get(m, 0.0) > 0]
    out = [f"{m} ({c['status']})" for m, c in wf.components.items() if not wf.weights.get(m, 0.0) > 0]
    return f"{name}: median of {', '.join(voted)}" + (f"; abstained: {', '.join(out)}" if out else "")


def register(subparsers) -> None:
    p = subparsers.add_parser("fit", help="fit reward-curve laws / posteriors to a training log",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", type=in_path, nargs="+",
                   help="log file or folder (any format grpojax.logs reads); several only with --pool")
    p.add_argument("--out", type=out_path, default="out/fit", help="output folder (default: out/fit)")
    p.add_argument("--law", default="all", choices=("all", "exponential", "three_phase", "sigmoid"),
                   help="law to fit (default: all)")
    p.add_argument("--metric", default="reward_mean", help="column to fit (default: reward_mean)")
    p.add_argument("--format", default=None, help="force a log format instead of auto-detection")
    p.add_argument("--run", default=None, help="only the run with this name")
    add_log_read_args(p)
    p.add_argument("--smooth", type=Int(1, what="points in the moving average"), default=None, metavar="W",
                   help="also report R² after a centred moving average of W points")
    p.add_argument("--bayes", nargs="?", const="state_space", default=None,
                   choices=("state_space", "three_phase", "mechanistic"),
                   help="also sample a NUTS posterior of this model (default model: state_space)")
    p.add_argument("--prefix", type=Real(0, 1, lo_open=True, hi_open=True, what="a fraction of the steps"), default=None, metavar="F",
                   help="forecast: fit on the first fraction F of the steps, score the rest")
    p.add_argument("--window", type=Real(0, 1, lo_open=True, what="a fraction of the run"), default=FORECAST_WINDOW, metavar="W",
                   help="with --prefix: the final fraction W of the run whose mean is forecast (default 0.1)")
    p.add_argument("--forecast-method", default=FORECAST_METHOD,
                   choices=("combined", "creep", "persistence", "exponential", "sigmoid"),
                   help="with --prefix: the window forecaster (default combined: the median of the four others that "
                        "vouch for their fit, with a calibrated interval)")
    p.add_argument("--target", type=Real(float32=False, what="a value of the metric"), default=None, metavar="T",
                   help="with --prefix: also give P(the forecast window mean >= T), from the forecast's predictive "
                        "distribution")
    p.add_argument("--collapse-hazard", type=Real(0, float32=False, what="collapses per unit of run fraction"),
                   default=None, metavar="H",
                   help="with --prefix: the collapse hazard behind P(collapse) (default: the base rate learned from "
                        "labelled real runs; 0: none)")
    p.add_argument("--collapse-mixture", action="store_true",
                   help="with --prefix: mix the collapse branch (the level after losing half to all of the rise) into "
                        "the forecast, its interval and --target's probability, weighted by P(collapse)")
    p.add_argument("--chains", type=Int(1, 1024, what="NUTS chains"), default=NUTS_CHAINS, help=f"NUTS chains (default {NUTS_CHAINS})")
    p.add_argument("--draws", type=Int(1, 10**6, what="NUTS draws per chain"), default=NUTS_DRAWS, help=f"NUTS draws per chain after warmup (default {NUTS_DRAWS})")
    p.add_argument("--warmup", type=Int(1, 10**6, what="NUTS warmup per chain"), default=NUTS_WARMUP, help=f"NUTS warmup per chain (default {NUTS_WARMUP})")
    p.add_argument("--seed", type=SEED_ARG, default=SEED,
                   help=f"seed of NUTS and of the window forecast in [0, 2^32) (default {SEED}, as from Python)")
    p.add_argument("--eta", type=Real(0, lo_open=True, what="the learning rate"), default=None, help="mechanistic: learning rate")
    p.add_argument("--mu", type=Real(0, 1, hi_open=True, what="heavy-ball momentum"), default=None, help="mechanistic: momentum")
    p.add_argument("--k-ref", type=Real(1, what="optimizer steps"), default=None, help="mechanistic: refresh interval / lag K_ref")
    add_lag_arg(p, help="mechanistic: " + LAG_HELP)
    p.add_argument("--group-size", type=Real(1, what="completions per prompt"), default=1.0, help="mechanistic: group size G")
    add_bounds_arg(p, effect="a fitted plateau outside it is reported as law_cannot_describe, and the window "
                             "forecast is clipped to it")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG figures")
    add_table_output_args(p)
    add_pool_args(p)
    p.set_defaults(func=run)


def _law_json(f):
    return {k: getattr(f, k) for k in ("status", "reason", "params", "r2", "r2_smoothed", "noise_ceiling", "noise_ceiling_smoothed",
                                       "aic", "bic", "sigma", "lag1_autocorr", "delta_bic_flat", "n_obs", "t0")}


def _window_json(wf, observed: float) -> dict:
    covered = bool(wf.lo <= observed <= wf.hi) if math.isfinite(observed) else None
    return {"method": wf.method, "status": wf.status, "mean": wf.mean, "lo": wf.lo, "hi": wf.hi, "level": wf.level,
            "prefix_end": wf.prefix_end, "window": list(wf.window), "n_window": wf.n_window,
            "observed_mean": observed, "covered": covered,
            "params": {k: {"median": v[0], "lo": v[1], "hi": v[2]} for k, v in wf.params.items()},
            "p_variant": wf.p_variant, "components": wf.components, "weights": wf.weights, "features": wf.features,
            "p_collapse": wf.p_collapse, "p_collapse_interval": list(wf.p_collapse_interval),
            "collapse_onset": wf.collapse_onset, "collapse_mixture": wf.collapse_mixture, "smooth": wf.smooth}


def _collapse_line(name: str, wf) -> str:
    """P(collapse before the window's end) with its interval, the mixture if used, a collapse the prefix holds."""
    lo, hi = wf.p_collapse_interval
    line = (f"{name}: P(collapse between steps {wf.prefix_end:g} and {wf.window[1]:g}) = {wf.p_collapse:.3f}"
            + (f" [{lo:.3f}, {hi:.3f}] (90%)" if hi > lo else ""))
    if wf.collapse_mixture:
        s = wf.smooth
        line += f"; mixed into the forecast (without it: {s['mean']:.4g} [{s['lo']:.4g}, {s['hi']:.4g}])"
    if wf.collapse_onset is not None:
        line += f"; the prefix holds a collapse at step {wf.collapse_onset:g}: forecast from the level after it"
    return line


def _target_json(wf, target: float, observed: float, bounds, metric: str) -> dict:
    """``--target``: P(window mean >= target) from the forecast's predictive distribution (the metric's range:
    ``bounds``, or the known range of the metric's name, as the forecast's), and whether the run got there
    (None while the window is not logged)."""
    from grpojax.fit import metric_bounds  # noqa: PLC0415  (loaded with the forecast)

    bounds = metric_bounds(metric) if bounds is None else bounds
    return {"target": target, "p_at_least": wf.prob_at_least(target, bounds=bounds),
            "reached_target": bool(observed >= target) if math.isfinite(observed) else None}


def _window_forecasts(runs, args, key):
    """One window forecast per run (the creep posteriors fitted in one batch) and the mean each run reached."""
    import numpy as np  # noqa: PLC0415

    from grpojax.diagnose import collapse_onset  # noqa: PLC0415
    from grpojax.fit import forecast_windows  # noqa: PLC0415

    if not 0.0 < args.window <= 1.0 - args.prefix:
        raise CLIError(f"--window must be in (0, 1 - prefix] = (0, {1.0 - args.prefix:g}], got {args.window}")
    curves = [r.series(args.metric) for r in runs]
    bounds = args.bounds  # None: the library's default, the metric's known range (accuracies: [0, 1])
    fcs = forecast_windows(curves, prefix=args.prefix, window=args.window, method=args.forecast_method,
                           metric=args.metric, key=key, bounds=bounds,
                           show_progress=sys.stderr.isatty(), collapse_hazard=args.collapse_hazard,
                           collapse_mixture=args.collapse_mixture,
                           collapse_onsets=collapse_onset)  # a collapse the prefix holds: forecast from after it
    observed = []
    for (steps, y), wf in zip(curves, fcs):
        m = (steps >= wf.window[0]) & (steps <= wf.window[1]) & np.isfinite(y)
        observed.append(float(np.mean(y[m])) if m.any() else float("nan"))
    return fcs, observed


def _sampling(label: str, n_points: int, args, fn):
    """Run one NUTS posterior (``fn()``) where the user sees it: a live line with the elapsed time on a terminal
    (the project's progress bar on stderr), one line before and one after otherwise; the time it took either way."""
    import time  # noqa: PLC0415

    from grpojax.cli._common import progress  # noqa: PLC0415

    chains = f"{args.chains} chain{'s' if args.chains != 1 else ''}"
    what = f"{label}: NUTS on {n_points} points, {chains} x ({args.warmup} warmup + {args.draws} draws)"
    t0 = time.perf_counter()
    if err_console.is_terminal:
        with progress() as bar:
            bar.add_task(what, total=None)
            out = fn()
    else:
        err_console.print(f"{what}: sampling (about half a minute per posterior for a few hundred points on two CPU "
                          "cores; a minute the first time, which compiles the sampler)", markup=False, highlight=False, soft_wrap=True)
        out = fn()
    err_console.print(f"{label}: sampled in {time.perf_counter() - t0:.0f} s", markup=False, highlight=False,
                      soft_wrap=True)
    return out


def _law_fits(r, laws, args):
    """One run's curve, its law fits and, with --prefix, the laws' forecasts from the prefix; or the error that
    refused them, for the caller to raise where it reports the run (after the window forecasts' own errors)."""
    try:
        return _law_fits_or_raise(r, laws, args)
    except ValueError as exc:
        return exc


def _law_fits_or_raise(r, laws, args):
    from grpojax.fit import fit_law, forecast_law  # noqa: PLC0415  (NumPy: JAX and numpyro only with --bayes)

    steps, y = r.series(args.metric)
    fits = {}
    for law in laws:
        try:
            fits[law] = fit_law(steps, y, law, smooth=args.smooth, bounds=args.bounds)
        except ValueError as exc:  # a curve the fit refuses (too short, constant): say whose
            raise CLIError(f"{args.log}: run {r.name!r}, {args.metric}: {exc}") from None
    fcs = {law: forecast_law(steps, y, args.prefix, law) for law in laws} if args.prefix is not None else {}
    return steps, y, fits, fcs


def _draw_fit(path, steps, y, fits, fcs, bayes, bfc, title: str, metric: str) -> None:
    """Draw one run's figure and write it to ``path`` (PNG)."""
    from grpojax.plot import fit_figure  # noqa: PLC0415  (a bare Figure: no pyplot, nothing to close)

    fig = fit_figure(steps, y, law_fits=fits, bayes=bayes, forecasts=fcs or None, bayes_forecast=bfc,
                     title=title, ylabel=f"{metric} (as logged)")
    save_figure(fig, path, dpi=110)


def _warm_drawer() -> None:
    import matplotlib.backends.backend_agg  # noqa: F401, PLC0415

    from grpojax.plot import fit_figure  # noqa: F401, PLC0415


class _Drawer:
    """The figures drawn by one worker process forked before the window forecasts: it imports matplotlib and draws
    on a second core while this process forecasts (about half a second of a 1,000-step fit --prefix). With one
    core, or with JAX loaded (--bayes: a fork of a process running JAX's threads may deadlock, and the figure
    needs the posterior), ``submit`` returns None and the caller draws in this process."""

    def __init__(self, enabled: bool):
        from grpojax._host_devices import usable_cores  # noqa: PLC0415

        self.ex = None
        if enabled and usable_cores() > 1 and "jax" not in sys.modules:
            import multiprocessing  # noqa: PLC0415
            from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

            self.ex = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            self.ex.submit(_warm_drawer)  # forks the worker now

    def submit(self, *args):
        """``_draw_fit(*args)`` in the worker: a callable that waits for the file (and raises the worker's error)."""
        return None if self.ex is None else self.ex.submit(_draw_fit, *args).result

    def close(self) -> None:
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)


def _fc_json(fc):
    return {k: getattr(fc, k) for k in ("method", "fraction", "n_train", "n_test", "rmse", "mae", "coverage90", "status")}


def run(args) -> int:
    import numpy as np  # noqa: PLC0415

    from grpojax._curve_laws import PARAMS as LAWS  # noqa: PLC0415  (the law names, without JAX)

    if args.prefix is not None and not 0.0 < args.prefix < 1.0:
        raise CLIError(f"--prefix must be in (0, 1), got {args.prefix}")
    if args.smooth is not None and args.smooth < 1:
        raise CLIError(f"--smooth must be a positive integer, got {args.smooth}")
    args.bounds = check_bounds_arg(args)
    if getattr(args, "target", None) is not None and (args.prefix is None or args.pool or len(args.log) > 1):
        raise CLIError(f"--target {args.target:g} needs --prefix F (the window forecast whose probability it is) and "
                       "one log without --pool")
    for flag, given in (("--collapse-hazard", getattr(args, "collapse_hazard", None) is not None),
                        ("--collapse-mixture", getattr(args, "collapse_mixture", False))):
        if given and (args.prefix is None or args.pool or len(args.log) > 1):
            raise CLIError(f"{flag} needs --prefix F (the window forecast it acts on) and one log without --pool")
    if args.pool or len(args.log) > 1:
        return run_pooled(args)
    args.log = args.log[0]
    for name in ("chains", "draws", "warmup"):
        if getattr(args, name) < 1:
            raise CLIError(f"--{name} must be >= 1, got {getattr(args, name)}")
    hp = None
    if args.bayes == "mechanistic":
        if None in (args.eta, args.mu, args.k_ref):
            raise CLIError("--bayes mechanistic needs --eta, --mu and --k-ref")
        hp = dict(eta=args.eta, mu=args.mu, k_ref=args.k_ref, lag=args.lag, group_size=args.group_size)
    runs = read_runs(args.log, args.format, args.run, **log_read_kwargs(args))
    laws = list(LAWS) if args.law == "all" else [args.law]
    out = out_dir(args.out)
    folders = run_folders(out, runs)
    report = {"log": str(args.log), "metric": args.metric, "runs": {}}
    # JAX (its import, keys and the small programs that make them) only for NUTS; the window forecasts draw from NumPy
    if args.bayes:
        import jax  # noqa: PLC0415

        from grpojax.fit import ConvergenceWarning, fit_bayes, forecast_bayes, to_summary_dict  # noqa: PLC0415
    key = jax.random.key(args.seed) if args.bayes else None
    # the progress shown is _sampling's (numpyro's own bar would draw over it)
    nuts = dict(num_chains=args.chains, num_samples=args.draws, num_warmup=args.warmup, hyperparams=hp,
                progress_bar=False)
    from rich.table import Table  # noqa: PLC0415

    table = Table(title=f"grpojax fit: {args.log}")
    for col in ("run", "law/model", "status", "R² raw", "R² smooth", "ceiling", "AIC", "plateau") + (
            () if args.prefix is None else (f"RMSE from {args.prefix:g}",)):  # the forecast column with --prefix only
        table.add_column(col)
    above_ceiling: list[str] = []
    reasons: list[str] = []
    bayes_reports: list[str] = []
    for r in runs:
        if not r.has(args.metric):
            raise CLIError(f"run {r.name!r} has no {args.metric!r} column (has: {', '.join(sorted(r.columns))}); "
                           "choose one with --metric")
        if args.smooth is not None and args.smooth > r.count(args.metric):
            raise CLIError(f"--smooth {args.smooth} is longer than run {r.name!r}, which has {r.count(args.metric)} "
                           f"points of {args.metric}; use at most {r.count(args.metric)}")
    # the law fits first: without --bayes each run's figure needs only them, and is drawn by a worker process
    # while the window forecasts run here
    drawer = _Drawer(not args.no_plot and not args.bayes)
    curves = [_law_fits(r, laws, args) for r in runs]
    figures = [folder / f"fit_{slug(r.name)}.png" for r, folder in zip(runs, folders)]
    drawn = [None if isinstance(c, ValueError) else drawer.submit(path, *c, None, None, f"{r.name}: {args.metric}",
                                                                   args.metric)
             for r, path, c in zip(runs, figures, curves)]
    windows, observed = (_window_forecasts(runs, args, args.seed) if args.prefix is not None
                         else ([None] * len(runs), [None] * len(runs)))
    wtable, vote_lines, target_lines, collapse_lines = None, [], [], []
    if args.prefix is not None:
        wtable = Table(title=f"forecast of the mean {args.metric} over the last {args.window:.0%} from the first "
                             f"{args.prefix:.0%} (90% interval)")
        for col in ("run", "method", "status", "forecast", "interval", "reached", "covered"):
            wtable.add_column(col)
    for r, folder, wf, obs, curve, figure, done in zip(runs, folders, windows, observed, curves, figures, drawn):
        if isinstance(curve, ValueError):
            raise curve
        steps, y, fits, fcs = curve
        entry = {"n_points": int(len(steps)), "laws": {law: _law_json(f) for law, f in fits.items()},
                 "forecasts": {law: _fc_json(fc) for law, fc in fcs.items()}}
        bayes = bfc = None
        if args.bayes:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                bayes = _sampling(f"{r.name}: {args.bayes} posterior", int(len(steps)), args,
                                  lambda: fit_bayes(steps, y, args.bayes, key=jax.random.fold_in(key, 0), **nuts))
                entry["bayes"] = to_summary_dict(bayes)
                if args.prefix is not None:
                    n_pre = int(np.sum(steps <= steps[0] + args.prefix * (steps[-1] - steps[0])))
                    bfc = _sampling(f"{r.name}: {args.bayes} posterior of the first {args.prefix:g}", n_pre, args,
                                    lambda: forecast_bayes(steps, y, args.prefix, args.bayes, key=jax.random.fold_in(key, 1),
                                                           **nuts))
                    entry["forecasts"][f"bayes:{args.bayes}"] = _fc_json(bfc)
            for w in caught:
                console.print(f"[yellow]warning[/]: {w.message}")
        if wf is not None:
            entry["window_forecast"] = _window_json(wf, obs)
            if wf.components:
                vote_lines.append(_votes_line(r.name, wf))
            collapse_lines.append(_collapse_line(r.name, wf))
            if args.target is not None:
                tj = _target_json(wf, args.target, obs, args.bounds, args.metric)
                entry["window_forecast"].update(tj)
                reached = {True: f"; reached {obs:.4g}: yes", False: f"; reached {obs:.4g}: no",
                           None: ""}[tj["reached_target"]]
                target_lines.append(f"{r.name}: P(mean {args.metric} over steps {wf.window[0]:g}-{wf.window[1]:g} "
                                    f">= {args.target:g}) = {tj['p_at_least']:.3f}{reached}")
            wtable.add_row(r.name, wf.method, wf.status, f"{wf.mean:.4g}", f"[{wf.lo:.4g}, {wf.hi:.4g}]",
                           f"{obs:.4g}" if math.isfinite(obs) else "-",
                           {True: "yes", False: "no", None: "-"}[entry["window_forecast"]["covered"]])
        report["runs"][r.name] = entry
        for law, f in fits.items():
            if f.reason:
                reasons.append(f"{r.name} {law}: {f.status}: {f.reason}")
            plateau = f.params.get("r_inf", f.params.get("A"))
            over = bool(f.r2 > f.noise_ceiling)  # marked, and said below the table
            if over:
                above_ceiling.append(f"{r.name} {law}")
            table.add_row(*[r.name, law, f.status, f"{f.r2:.3f}" + ("*" if over else ""),
                            "-" if args.smooth is None else f"{f.r2_smoothed:.3f}",
                            f"{f.noise_ceiling:.3f}", f"{f.aic:.1f}", f"{plateau:.4g}",
                            f"{fcs[law].rmse:.4g}" if law in fcs else "-"][:len(table.columns)])
        if bayes is not None:
            bayes_reports.append(f"{r.name}: {bayes}")
            pl = bayes.plateau
            table.add_row(*[r.name, f"bayes:{bayes.model}", bayes.status, "-", "-", "-", "-",
                            f"{pl['q50']:.4g} [{pl['q05']:.4g}, {pl['q95']:.4g}]",
                            f"{bfc.rmse:.4g}" if bfc else "-"][:len(table.columns)])
        if not args.no_plot:
            if done is None:
                _draw_fit(figure, steps, y, fits, fcs, bayes, bfc, f"{r.name}: {args.metric}", args.metric)
            else:
                done()  # the worker's figure is written (its error, if any, raised here)
            entry["figure"] = figure.relative_to(out).as_posix()
        if folder != out:
            write_json(folder, "fit.json", {"log": str(args.log), "metric": args.metric, "runs": {r.name: entry}})
    drawer.close()
    path = write_json(out, "fit.json", report)
    say = err_console if to_stdout(args) else console
    if emit_rows(args, _rows(report), extra={"log": str(args.log), "metric": args.metric}):
        table = wtable = None
    else:
        print_table(table)
        if above_ceiling:
            console.print(f"* R² above the noise ceiling ({', '.join(above_ceiling)}): the law fits as well as the "
                          "noise allows; the ceiling (1 - noise variance / variance, the noise from first "
                          "differences) is an estimate, which a curve that bends between points lowers.",
                          markup=False, highlight=False, soft_wrap=True)
    for text in bayes_reports:  # the posterior's plateau, oscillator, P(regime) and step at 95% of the gain
        say.print(text, markup=False, highlight=False, soft_wrap=True)
    if wtable is not None:
        print_table(wtable)
        for line in vote_lines:
            console.print(line, highlight=False)
        for line in collapse_lines + target_lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if args.forecast_method in ("creep", "combined"):
            console.print("A reward curve identifies the plateau, the rates and the noise, not the oscillator's M, C "
                          "and K separately: M follows from the hyperparameters (η, μ, K_ref) when they are known "
                          "(fit --bayes mechanistic, grpojax advise --probe).", soft_wrap=True)
    for line in reasons:
        say.print(line, markup=False, highlight=False, soft_wrap=True)
    say.print(f"wrote {path}")
    return 0


def _rows(report: dict) -> list[dict]:
    """The tables as flat rows (``--json`` / ``--csv``): one per run and law, one per window forecast."""
    rows = []
    for run, entry in report["runs"].items():
        for law, f in entry["laws"].items():
            plateau = f["params"].get("r_inf", f["params"].get("A"))
            rows.append({"run": run, "law": law, "status": f["status"], "r2": f["r2"], "r2_smoothed": f["r2_smoothed"],
                         "noise_ceiling": f["noise_ceiling"], "aic": f["aic"], "bic": f["bic"], "plateau": plateau,
                         "forecast_rmse": entry["forecasts"].get(law, {}).get("rmse")})
        if "bayes" in entry:
            rows.append({"run": run, "law": f"bayes:{entry['bayes'].get('model')}", "status": entry["bayes"].get("status"),
                         "plateau": (entry["bayes"].get("plateau") or {}).get("q50"), **entry["bayes"].get("headline", {})})
        wf = entry.get("window_forecast")
        if wf is not None:
            rows.append({"run": run, "law": f"window:{wf['method']}", "status": wf["status"], "forecast": wf["mean"],
                         "forecast_lo": wf["lo"], "forecast_hi": wf["hi"], "reached": wf["observed_mean"],
                         "covered": wf["covered"], "p_collapse": wf["p_collapse"],
                         **({"target": wf["target"], "p_at_least": wf["p_at_least"]} if "target" in wf else {})})
    return rows

