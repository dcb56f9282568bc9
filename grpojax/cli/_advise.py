"""``grpojax advise``: damping ratio, exact stability margin and advised ranges of η, K_ref (or S) and G."""

from __future__ import annotations

import argparse
import math

from grpojax._defaults import ADVICE_MARGIN, ESCAPE_LEVEL, LAG, PLANNED_STEPS, SCHEDULES, ZERO_STD_TARGET, ZETA_BAND
from grpojax.cli._schedule_args import adam_reduction, add_schedule_args, schedule_block, schedule_rows
from grpojax.cli._common import LAG_HELP, CLIError, add_batch_reuse_arg, add_lag_arg, console, err_console
from grpojax.cli._output import add_table_output_args, emit_rows, to_stdout
from grpojax.cli._types import Int, Real, in_path

EXAMPLE = """Example:
  grpojax advise --eta 0.01 --mu 0.9 --k-ref 4 --group-size 8 --curvature 0.5 --pass-rate 0.8
  grpojax advise --eta 1e-6 --beta1 0.9 --staleness 2 --group-size 16 --probe runs/probe/metrics.jsonl
  grpojax advise --from-run outputs/my-grpo-run --curvature 0.5
"""


def register(sub) -> None:
    p = sub.add_parser(
        "advise",
        help="ζ, exact stability margin and advised η, K_ref (or staleness) and group-size ranges",
        description="Advise hyperparameters from the oscillator: the damping ratio, the exact stability "
        "margin, the η and K_ref (or staleness S) ranges that keep ζ within the band with a margin to the "
        "exact threshold, the stationary noise level vs G, and the G that keeps the zero-variance-group "
        "fraction p^G + (1-p)^G under a bound. The curvature is given, or fitted from a short probe run "
        "(--probe).\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--from-run", type=in_path, default=None, metavar="RUN",
                   help="a training run's log file or folder (TRL output folder or trainer_state.json, a verl or "
                        "OpenRLHF console log, a TensorBoard folder, a folder with training_args.json / config.yaml): "
                        "take η (the peak lr), Adam's β₁, K_ref, G, the prompts per step and the schedule from its own "
                        "settings, and fit its "
                        "reward curve for the curvature unless --curvature or --probe is given; flags given override")
    p.add_argument("--eta", type=Real(0, lo_open=True, what="the learning rate"), default=None,
                   help="learning rate η > 0 (required unless --from-run states it)")
    m = p.add_mutually_exclusive_group()
    m.add_argument("--mu", type=Real(0, 1, hi_open=True, what="heavy-ball momentum"), default=None, help="heavy-ball momentum μ in [0, 1) (default 0)")
    m.add_argument("--beta1", type=Real(0, 1, hi_open=True, what="Adam's β₁"), default=None, help="Adam's β₁ in [0, 1) (heavy ball with μ = β₁, step η(1 − β₁))")
    k = p.add_mutually_exclusive_group()
    k.add_argument("--k-ref", type=Int(1, what="updates per rollout"), default=None, help="updates per rollout K_ref >= 1 (periodic refresh)")
    k.add_argument("--staleness", type=Int(1, what="asynchronous delay in steps"), default=None, help="asynchronous delay S >= 1 in steps (constant lag)")
    add_lag_arg(p, default=None, help=LAG_HELP + "; --staleness S is --k-ref S --lag constant")
    p.add_argument("--group-size", type=Int(2, what="completions per prompt"), default=None,
                   help="completions per prompt G >= 2 (required unless --from-run states it)")
    c = p.add_mutually_exclusive_group()
    c.add_argument("--curvature", type=Real(0, lo_open=True, what="stale curvature"), default=None, help="stale curvature K_d > 0 (optimizer units)")
    c.add_argument("--probe", default=None, help="a short probe run's log: fit it for the curvature and pass rate")
    p.add_argument("--k-instant", type=Real(0, what="instant stiffness"), default=0.0, help="instant stiffness K_0 >= 0 (e.g. KL anchor), default 0")
    p.add_argument("--pass-rate", type=Real(0, 1, what="a pass rate"), default=None, help="forecast pass rate p in [0, 1] (default: from --probe)")
    p.add_argument("--noise", type=Real(0, what="a variance"), default=None, help="gradient noise variance σ² (default p(1-p), else 0.25)")
    from grpojax.cli._curvature import add_from_arg  # noqa: PLC0415

    add_from_arg(p, keys=("curvature", "k_instant", "noise"))
    p.add_argument("--zero-std-target", type=Real(0, 1, lo_open=True, hi_open=True, what="a fraction of groups"), default=ZERO_STD_TARGET, help=f"bound on p^G + (1-p)^G (default {ZERO_STD_TARGET:g})")
    p.add_argument("--zeta-band", type=Real(0, lo_open=True, what="damping ratios"), nargs=2, default=ZETA_BAND, metavar=("LO", "HI"),
                   help=f"band of the damping ratio (default {ZETA_BAND[0]:g} {ZETA_BAND[1]:g})")
    p.add_argument("--margin", type=Real(0, 1, hi_open=True, what="relative margin"), default=ADVICE_MARGIN, help=f"relative margin kept from η*_exact (default {ADVICE_MARGIN:g})")
    add_escape_args(p)
    add_schedule_args(p, optimizer_flags=False)
    add_table_output_args(p, json_help="the advice as JSON: on stdout (no FILE, or -) instead of the table, or into FILE")
    p.set_defaults(func=run)


def probe_fit(path: str, *, eta_hb: float, mu: float, k: int, lag: str, k_instant: float) -> dict:
    """Fit a probe run: the creep forecast's fast rate λ = K_eff/C, inverted into K_d; its plateau as p."""
    from grpojax.fit import forecast_window
    from grpojax.logs import read_log
    from grpojax.monitor import curvature_from_rate

    run = read_log(path)
    s, y = run.series("reward_mean")
    if s.size < 8:
        raise CLIError(f"{path}: the probe log holds {s.size} reward points; at least 8 are needed")
    f = forecast_window(run, prefix=0.999, window=0.001, method="creep",
                        end_step=float(s[-1]) + 1e-6 * max(1.0, float(s[-1])))
    rate = f.params["fast_rate"]
    if not all(math.isfinite(r) for r in rate):
        raise CLIError(f"{path}: the probe's rise is a logistic slow start (no exponential rate K_eff/C to invert); "
                       "give --curvature, or probe a run that starts nearer its plateau")
    kd = [curvature_from_rate(r, eta_hb, mu, k, lag=lag, k_instant=k_instant) for r in rate]
    p_star = f.params["p_star"]
    how = (f"fitted from {path}: fast rate λ = K_eff/C = {rate[0]:.3g}/step [{rate[1]:.3g}, {rate[2]:.3g}] "
           f"(creep fit, 90%); with C = (1 − μ) − ηK_dτ and K_eff = η(K_0 + K_d) from the hyperparameters, "
           f"K_d = a/η with a = (λ(1 − μ) − ηK_0)/(1 + λτ): K_d = {kd[0]:.3g} [{min(kd[1:]):.3g}, {max(kd[1:]):.3g}]")
    return dict(curvature=kd[0], curvature_interval=(min(kd[1:]), max(kd[1:])), pass_rate=p_star[0],
                plateau=p_star, how=how, status=f.status)


def from_run(args) -> object:
    """Fill the flags a run's own settings state (η, β₁, K_ref, G, prompts per step) and not given; the run's log becomes the
    probe when neither --curvature nor --probe is given. Returns the :class:`grpojax.logs.RunSettings`."""
    from grpojax.logs import run_settings  # noqa: PLC0415

    where = f"--from-run {args.from_run}"
    try:
        s = run_settings(args.from_run)
    except (OSError, ValueError) as exc:  # no such file, or not a log grpojax reads: name the flag
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).split("\n")[0]
        raise CLIError(f"{where}: {detail.removeprefix(str(args.from_run) + ': ')}") from None
    if args.eta is None:
        if s.lr is None or not s.lr > 0:
            raise CLIError(f"{where}: no learning rate found in the run's files or its log; give --eta")
        args.eta = float(s.lr)
    args.assumed = []
    if args.mu is None and args.beta1 is None:  # TRL, verl and OpenRLHF train with AdamW
        args.beta1 = float(s.beta1) if s.beta1 is not None else 0.9
        if s.beta1 is None:
            args.assumed.append("Adam's β₁ is not stated in the run's files: 0.9 (AdamW's default; --beta1 to change)")
    if args.k_ref is None and args.staleness is None:
        args.k_ref = int(s.k_ref) if s.k_ref is not None else 1
        if s.k_ref is None:
            args.assumed.append("the updates per rollout are not stated in the run's files: K_ref = 1 (the default of "
                                "TRL's num_iterations and verl's ppo_epochs; --k-ref to change)")
    if args.prompts_per_step is None:  # B = G × prompts samples per step: the noise σ²/B of P(escape)
        args.prompts_per_step = int(s.prompts_per_step) if s.prompts_per_step is not None else 1
        if s.prompts_per_step is None:
            args.assumed.append("the prompts per optimizer step are not stated in the run's files: 1 (the fewest, "
                                "so the noise σ²/B is the largest; --prompts-per-step to change)")
    if args.group_size is None:
        if s.group_size is None:
            raise CLIError(f"{where}: the group size G is not stated in the run's files; give --group-size"
                           + (f" (note: {s.notes[0]})" if s.notes else ""))
        args.group_size = int(s.group_size)
    if args.curvature is None and args.probe is None:
        args.probe = args.from_run
    return s


def add_escape_args(p) -> None:
    """The planned run and its noise, for P(escape from the plateau's basin within the run)."""
    p.add_argument("--steps", type=Int(1, what="the planned run length in optimizer steps"), default=PLANNED_STEPS,
                   help=f"planned run length T in optimizer steps for P(escape) (default {PLANNED_STEPS})")
    p.add_argument("--basin", type=Real(0, lo_open=True, what="a half-width in reward units"), default=None,
                   help="half-width w of the plateau's basin in reward units (default min(p, 1 − p) at the plateau "
                        "or pass rate p)")
    p.add_argument("--escape-level", type=Real(0, 1, lo_open=True, hi_open=True, what="a probability"),
                   default=ESCAPE_LEVEL, help=f"bound on P(escape within the run) the advice keeps (default {ESCAPE_LEVEL:g})")
    p.add_argument("--prompts-per-step", type=Int(1, what="prompts per optimizer step"), default=None,
                   help="prompts whose groups one optimizer step averages: B = G × prompts samples per step "
                        "(default 1, or the run's own with --from-run)")
    p.add_argument("--reward-std", type=Real(0, what="a standard deviation"), default=None,
                   help="a log's mean within-group reward std: σ² = G/(G − 1) · std² when --noise is not given")
    p.add_argument("--noise-growth", type=Real(0, what="a growth of the noise variance per unit e²"), default=0.0,
                   metavar="C", help="growth c >= 0 of the step's noise variance with the reward error e, "
                                     "σ²/B · (1 + c e²), measured from the noise at displaced points "
                                     "(default 0: additive noise)")
    p.add_argument("--escape-sweep", type=in_path, default=None, metavar="FILE",
                   help="a measured sweep: a CSV (header eta,escaped[,steps]) or JSON-lines file, one run per row, "
                        "runs at least --steps long at several learning rates, each marked escaped or not; the "
                        "largest rate it certifies (P(escape) <= --escape-level at --sweep-confidence) caps the "
                        "advised η beside the escape model")
    p.add_argument("--sweep-confidence", type=Real(0, 1, lo_open=True, hi_open=True, what="a confidence"),
                   default=0.95, help="confidence of the sweep's bound (default 0.95)")
    add_batch_reuse_arg(p)


def run(args) -> int:
    from rich.table import Table

    from grpojax.monitor import advise

    from grpojax.cli._curvature import apply_from  # noqa: PLC0415

    if args.from_curvature is not None and args.probe is not None:
        raise CLIError("--from and --probe both give the curvature; give one")
    measured = apply_from(args)
    settings = from_run(args) if args.from_run is not None else None
    if args.prompts_per_step is None:
        args.prompts_per_step = 1
    if measured is not None and args.group_size is None:
        args.group_size = measured["group_size"]
    for flag, value in (("--eta", args.eta), ("--group-size", args.group_size)):
        if value is None:
            raise CLIError(f"{flag} is required (or --from-run RUN, a run whose settings state it)")
    if args.k_ref is None and args.staleness is None:
        raise CLIError("one of --k-ref or --staleness is required (or --from-run RUN)")
    if args.curvature is None and args.probe is None:
        raise CLIError("one of --curvature or --probe is required (or --from-run RUN, whose reward curve is then fitted)")

    for name in ("eta", "mu", "beta1", "curvature", "k_instant", "pass_rate", "noise", "zero_std_target", "margin"):
        v = getattr(args, name)
        if v is not None and not math.isfinite(v):
            raise CLIError(f"--{name.replace('_', '-')} must be a finite number, got {v}")
    if args.eta <= 0:
        raise CLIError(f"--eta must be > 0 (the learning rate), got {args.eta}")
    m = args.beta1 if args.beta1 is not None else (args.mu if args.mu is not None else 0.0)
    if not 0 <= m < 1:
        raise CLIError(f"--{'beta1' if args.beta1 is not None else 'mu'} must be in [0, 1), got {m}")
    kval = args.k_ref if args.k_ref is not None else args.staleness
    if kval < 1:
        raise CLIError(f"--{'k-ref' if args.k_ref is not None else 'staleness'} must be >= 1, got {kval}")
    if args.group_size < 2:
        raise CLIError(f"--group-size must be >= 2, got {args.group_size}")
    if not args.zeta_band[0] < args.zeta_band[1]:
        raise CLIError(f"--zeta-band must be two damping ratios LO < HI, got {args.zeta_band[0]:g} {args.zeta_band[1]:g}")
    if args.staleness is not None and args.lag == "periodic":
        raise CLIError("--staleness S is a constant lag (--k-ref S --lag constant); drop --lag periodic")
    lag = args.lag or (LAG if args.k_ref is not None else "constant")
    curvature, pass_rate, source, probe = args.curvature, args.pass_rate, None, None
    if args.probe is not None:
        eta_hb = args.eta * ((1 - m) if args.beta1 is not None else 1.0)
        try:
            probe = probe_fit(args.probe, eta_hb=eta_hb, mu=m, k=kval, lag=lag, k_instant=args.k_instant)
        except CLIError as exc:
            if settings is None or args.probe != args.from_run:
                raise
            raise CLIError(f"--from-run {args.from_run}: the settings were read (η {args.eta:g}, G {args.group_size}, "
                           f"K_ref {kval}) but the curvature is missing: "
                           f"{str(exc).split(': ', 1)[-1].split('; give')[0].replace('the probe', 'the run')} (give a "
                           "measured K_d with --curvature, or fit a short probe run with --probe LOG)") from None
        curvature, source = probe["curvature"], probe["how"]
        if pass_rate is None:
            pr = probe["pass_rate"]
            pass_rate = min(max(pr, 0.0), 1.0) if math.isfinite(pr) else None
    noise = args.noise
    if noise is None and args.reward_std is not None:
        from grpojax.dynamics import noise_from_reward_std

        noise = float(noise_from_reward_std(args.reward_std, args.group_size))
    sweep = None
    if args.escape_sweep is not None:
        from grpojax._errors import InvalidValueError  # noqa: PLC0415
        from grpojax.monitor import read_escape_sweep  # noqa: PLC0415

        try:
            sweep = read_escape_sweep(args.escape_sweep, steps=args.steps)
        except InvalidValueError as exc:
            raise CLIError(f"--escape-sweep {exc}") from None
    a = advise(eta=args.eta, mu=args.mu, beta1=args.beta1, k_ref=args.k_ref, staleness=args.staleness, lag=lag,
               group_size=args.group_size, curvature=curvature, k_instant=args.k_instant, noise=noise,
               pass_rate=pass_rate, zero_std_target=args.zero_std_target, zeta_band=tuple(args.zeta_band),
               margin=args.margin, curvature_source=source, steps=args.steps, basin=args.basin,
               escape_level=args.escape_level, prompts_per_step=args.prompts_per_step,
               batch_reuse=args.batch_reuse, noise_growth=args.noise_growth, escape_sweep=sweep,
               sweep_confidence=args.sweep_confidence)
    if settings is not None and args.schedule is None and settings.schedule in SCHEDULES:
        args.schedule, args.warmup = settings.schedule, int(settings.warmup_steps or 0)
    if args.noise_growth and args.beta1 is not None and args.schedule is not None:
        raise CLIError(f"--noise-growth {args.noise_growth:g} is not modelled for Adam (--beta1) along --schedule "
                       f"{args.schedule} (additive noise only there): drop --noise-growth, or give no schedule")
    sched = schedule_block(args, lr=args.eta, mu=m, adam=adam_reduction(args, args.beta1), k_ref=kval,
                           curvature=curvature, lag=lag, k_instant=args.k_instant, steps=args.steps, margin=args.margin,
                           **({} if a.escape_basin is None else
                              dict(noise=a.inputs["noise"], basin=a.escape_basin, samples_per_step=a.samples_per_step,
                                   batch_reuse=args.batch_reuse, noise_growth=args.noise_growth)))
    kname = "K_ref" if args.k_ref is not None else "staleness S"
    t = Table(title=f"grpojax advise ({lag} lag, {'Adam' if a.optimizer == 'adam' else 'heavy-ball momentum'})")
    t.add_column("quantity")
    t.add_column("value")
    t.add_row("damping ratio ζ", f"{a.damping_ratio:.3g} ({a.regime}; band {a.zeta_band[0]:g}-{a.zeta_band[1]:g})")
    t.add_row("exact critical η*", f"{a.exact_critical_eta:.4g}")
    t.add_row("margin 1 − η/η_next", f"{a.margin:.3g} (η_next: start of the next unstable η window, or of the one η is in; spectral radius {a.spectral_radius:.5f} per step; advice keeps ≥ {a.required_margin:g})")
    t.add_row(f"P(escape within {a.escape_steps} steps)" + (", Adam gain law" if a.optimizer == "adam" else ""),
              f"{a.escape_probability:.3g} (basin ±{a.escape_basin:.3g}, {a.samples_per_step} samples per step"
              f"{', one batch per refresh' if args.batch_reuse else ''}"
              f"{f', noise growth c = {args.noise_growth:g}' if args.noise_growth else ''}; "
              f"≤ {a.escape_level:g} up to η = {a.eta_escape:.3g})")
    if a.escape_sweep is not None:
        t.add_row("measured escape sweep", a.escape_sweep.describe())
    t.add_row("advised η", f"{a.eta_range[0]:.3g} – {a.eta_range[1]:.3g}" if a.eta_range else "none at this K_ref")
    t.add_row(f"advised {kname}", f"{a.k_range[0]} – {a.k_range[1]}" if a.k_range else "none at this η")
    t.add_row("this configuration", "inside the advised range" if a.in_range else "OUTSIDE the advised range")
    t.add_row("stationary reward std", ", ".join(f"G={g}: {s:.3g}" for g, s in a.noise_std.items()))
    if a.pass_rate is not None:
        t.add_row("zero-variance groups", f"p^G + (1-p)^G = {a.zero_std_fraction:.3g} at p = {a.pass_rate:.3g}, "
                  f"G = {args.group_size}")
        t.add_row(f"G for ≤ {a.zero_std_target:g}", str(a.group_size_needed) if a.group_size_needed
                  else "none up to 1024 (p too close to 0 or 1)")
    else:
        t.add_row("zero-variance groups", "give --pass-rate or --probe")
    out = {"lag": lag, **a.to_dict()}
    if settings is not None:
        out["run_settings"] = {**{k: getattr(settings, k) for k in settings.NAMES},
                               "prompts_per_device": settings.prompts_per_device, "sources": settings.sources}
    if probe is not None:
        out["probe"] = {k: v for k, v in probe.items()}
    if sched is not None:
        if a.escape_sweep is not None:  # the sweep's runs ran the schedule: its certified rate is a peak lr
            cert = a.escape_sweep.eta
            sched["advised_peak_lr_with_sweep"] = None if cert is None else min(sched["advised_peak_lr"], cert)
        out["schedule"] = sched
        for name, value in schedule_rows(sched):
            t.add_row(name, value)
        if a.escape_sweep is not None:
            v = sched["advised_peak_lr_with_sweep"]
            t.add_row("advised peak lr with the measured sweep", "none (the sweep certifies no rate)" if v is None
                      else f"{v:.4g} (the sweep's runs are taken to have run this schedule)")
    rows = [{"quantity": k, "value": v} for k, v in out.items() if not isinstance(v, (dict, list, tuple))]
    say = err_console if to_stdout(args) else console
    if not emit_rows(args, rows, extra=out):
        console.print(t)
    if settings is not None:
        say.print(f"settings of {args.from_run} (η = the peak lr"
                  + (f" of its {settings.schedule} schedule" if settings.schedule else "") + "):", soft_wrap=True)
        say.print(str(settings), markup=False, highlight=False, soft_wrap=True)
    say.print(f"curvature: {a.curvature_source}" if probe else f"curvature: given ({curvature:g})", soft_wrap=True)
    for n in [*a.notes, *getattr(args, "assumed", [])]:
        say.print(f"note: {n}", soft_wrap=True)
    for dest in (args.json, args.csv):
        if dest not in (None, "-"):
            say.print(f"wrote {dest}")
    return 0
