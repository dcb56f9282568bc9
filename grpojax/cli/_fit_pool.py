"""``grpojax fit LOG [LOG ...] --pool``: one hierarchical posterior of several runs of a sweep."""

from __future__ import annotations

import math
import sys

from grpojax.cli._common import CLIError, console, log_read_kwargs, out_dir, print_table, write_json
from grpojax.cli._runs import read_runs

POOL_NUTS = {"num_warmup": 500, "num_samples": 500}
"""NUTS settings of the pooled posterior (one chain)."""

POOL_HELP = ("fit the runs of every LOG together (several logs, a sweep folder, a multi-run TensorBoard folder): a "
             "hierarchical posterior with partial pooling of plateau, rate and noise, the log learning rate, group "
             "size and epochs per rollout as covariates where the runs' meta carry them; with --prefix F, each run is "
             "forecast from its first F plus its siblings' full curves, beside the single-run forecast")


def add_pool_args(p) -> None:
    """``--pool`` and ``--pool-law`` of ``grpojax fit``."""
    p.add_argument("--pool", action="store_true", help=POOL_HELP)
    p.add_argument("--pool-law", default="exponential", choices=("exponential", "creep"),
                   help="with --pool: the curve law of every run (default exponential)")


def run_pooled(args) -> int:
    """The ``--pool`` branch of ``grpojax fit``: the pooled posterior of every run read from ``args.log``."""
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415

    from grpojax.fit import fit_pooled, forecast_pooled, forecast_windows, run_covariates  # noqa: PLC0415

    logs = list(args.log)
    if not args.pool:
        raise CLIError(f"{len(logs)} logs given: several logs are fitted together with --pool (or pass one log)")
    if args.bayes:
        raise CLIError("--pool and --bayes cannot be combined: --pool is its own posterior")
    runs = []
    for log in logs:
        runs += read_runs(log, args.format, args.run, **log_read_kwargs(args))
    runs = [r for r in runs if r.has(args.metric)]
    if len(runs) < 2:
        raise CLIError(f"--pool needs at least two runs with a {args.metric!r} column, got {len(runs)} in "
                       f"{', '.join(logs)}")
    names = [r.name for r in runs]
    curves = [r.series(args.metric) for r in runs]
    cov = run_covariates(runs)
    key = jax.random.key(args.seed)
    out = out_dir(args.out)
    try:
        post = fit_pooled(curves, key=key, names=names, covariates=cov, law=args.pool_law, **POOL_NUTS)
    except ValueError as e:
        raise CLIError(str(e)) from None
    plateau = post.plateau(0.9)
    rates = {n: np.quantile(np.exp(post.samples["log_rate"][i]) / post.span[i], [0.5, 0.05, 0.95])
             for i, n in enumerate(names)}
    report = {"logs": logs, "metric": args.metric, "pooled": True, "law": args.pool_law, "covariates": list(cov),
              "divergences": post.divergences, "runtime_s": post.runtime_s, "nuts": POOL_NUTS,
              "effects": {f"{q}~log({c})": dict(zip(("median", "lo", "hi"), v)) for (q, c), v in post.effects().items()},
              "runs": {n: {"n_points": int(post.n_obs[i]), "ess": float(post.ess[i]),
                           "plateau": dict(zip(("median", "lo", "hi"), plateau[n])),
                           "rate_per_step": dict(zip(("median", "lo", "hi"), map(float, rates[n])))}
                       for i, n in enumerate(names)}}
    table = Table(title=f"grpojax fit --pool: {len(runs)} runs, {args.metric} ({args.pool_law} law, 90% intervals)")
    for col in ("run", "points", "plateau p*", "rate per step", "ESS"):
        table.add_column(col)
    for i, n in enumerate(names):
        m, lo, hi = plateau[n]
        r = rates[n]
        table.add_row(n, str(int(post.n_obs[i])), f"{m:.4g} [{lo:.4g}, {hi:.4g}]", f"{r[0]:.3g} [{r[1]:.3g}, {r[2]:.3g}]",
                      f"{post.ess[i]:.0f}")
    print_table(table)
    if post.effects():
        et = Table(title="covariate effects per unit of log(hyperparameter) (90% intervals)")
        for col in ("quantity", "covariate", "effect"):
            et.add_column(col)
        for (q, c), (m, lo, hi) in post.effects().items():
            et.add_row(q, f"log {c}", f"{m:+.3g} [{lo:+.3g}, {hi:+.3g}]")
        console.print(et)
    else:
        console.print("no covariate: the runs' meta carry no learning rate, group size or epochs per rollout that "
                      "differ between them", soft_wrap=True)
    if post.divergences:
        console.print(f"[yellow]warning[/]: {post.divergences} divergent transitions: treat the intervals with care")
    if args.prefix is not None:
        if not 0.0 < args.window <= 1.0 - args.prefix:
            raise CLIError(f"--window must be in (0, 1 - prefix] = (0, {1.0 - args.prefix:g}], got {args.window}")
        try:
            pooled = forecast_pooled(curves, targets=range(len(runs)), prefix=args.prefix, window=args.window,
                                     names=names, covariates=cov, law=args.pool_law, key=jax.random.fold_in(key, 1),
                                     bounds=args.bounds, show_progress=sys.stderr.isatty(), **POOL_NUTS)
            single = forecast_windows(curves, prefix=args.prefix, window=args.window, method="creep",
                                      key=jax.random.fold_in(key, 2), bounds=args.bounds)
        except ValueError as e:
            raise CLIError(str(e)) from None
        wt = Table(title=f"forecast of the mean {args.metric} over the last {args.window:.0%} from the first "
                         f"{args.prefix:.0%}: the run's prefix plus its siblings (pooled) and alone (single), 90%")
        for col in ("run", "pooled", "single", "reached"):
            wt.add_column(col)
        for i, n in enumerate(names):
            s, y = curves[i]
            w = pooled[i].window
            sel = (s > w[0]) & (s <= w[1]) & np.isfinite(y)
            reached = float(np.mean(y[sel])) if sel.any() else float("nan")
            entry = report["runs"][n]
            for label, fc in (("pooled", pooled[i]), ("single", single[i])):
                entry[f"forecast_{label}"] = {"mean": fc.mean, "lo": fc.lo, "hi": fc.hi, "status": fc.status,
                                              "window": list(fc.window),
                                              "covered": bool(fc.lo <= reached <= fc.hi) if math.isfinite(reached)
                                              else None}
            entry["reached"] = reached
            wt.add_row(n, f"{pooled[i].mean:.4g} [{pooled[i].lo:.4g}, {pooled[i].hi:.4g}]",
                       f"{single[i].mean:.4g} [{single[i].lo:.4g}, {single[i].hi:.4g}]",
                       f"{reached:.4g}" if math.isfinite(reached) else "-")
        console.print(wt)
    path = write_json(out, "fit.json", report)
    console.print(f"wrote {path}")
    return 0
