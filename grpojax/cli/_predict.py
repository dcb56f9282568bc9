"""``grpojax predict``: the oscillator predicted from hyperparameters, with exact and closed-form thresholds."""

from __future__ import annotations

import argparse
import math

from grpojax._defaults import ADVICE_MARGIN, LAG, PLANNED_STEPS
from grpojax._errors import InvalidValueError
from grpojax._io import save_figure
from grpojax.cli._common import (CLIError, add_batch_reuse_arg, add_oscillator_args, check_oscillator_args, console,
                                 err_console, out_dir, write_json)
from grpojax.cli._output import add_table_output_args, emit_rows, to_stdout
from grpojax.cli._schedule_args import adam_reduction, add_schedule_args, schedule_block, schedule_rows
from grpojax.cli._types import Int, Real, out_path

EXAMPLE = """Example:
  grpojax predict --eta 0.01 --mu 0.9 --k-ref 4 --curvature 0.5 --p0 0.2 --p-star 0.8 --out out/predict
"""


def register(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="M, C, K_eff, ζ, regime and thresholds from (η, μ, K_ref, K)",
        description="Predict the GRPO oscillator from optimizer hyperparameters and a measured "
        "curvature, with the closed-form and the exact discrete stability thresholds.\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_oscillator_args(p, group_size_help="group size G for the stationary variance (default 8)",
                        instant_help="instant stiffness K_0 (e.g. KL anchor), default 0")
    p.add_argument("--p0", type=Real(what="initial reward"), default=0.2,
                   help="initial reward for the trajectory figure (default 0.2)")
    p.add_argument("--p-star", type=Real(what="the plateau"), default=0.8,
                   help="plateau for the trajectory figure (default 0.8)")
    p.add_argument("--steps", type=Int(0, 100_000, what="0: eight time constants"), default=0,
                   help="horizon of the figure and planned run length for P(escape), at most 100000 "
                        f"(default 0: 8 time constants for the figure, {PLANNED_STEPS} steps for P(escape))")
    p.add_argument("--basin", type=Real(0, lo_open=True, what="a half-width in reward units"), default=None,
                   help="half-width w of the plateau's basin for P(escape), reward units (default min(p*, 1 − p*))")
    p.add_argument("--prompts-per-step", type=Int(1, what="prompts per optimizer step"), default=1,
                   help="prompts whose groups one step averages: B = G × prompts samples per step (default 1)")
    p.add_argument("--reward-std", type=Real(0, what="a standard deviation"), default=None,
                   help="a log's mean within-group reward std: the noise σ² = G/(G − 1) · std² (instead of --noise)")
    add_batch_reuse_arg(p)
    p.add_argument("--out", type=out_path, default="out/predict", help="output folder (default out/predict)")
    from grpojax.cli._curvature import add_from_arg  # noqa: PLC0415

    add_from_arg(p)
    add_schedule_args(p, optimizer_flags=True)
    add_table_output_args(p)
    p.set_defaults(func=run)


def predict(eta, mu, k_ref, curvature, *, lag=LAG, k_instant=0.0, group_size=8, noise=0.25, p_star=0.8,
            steps=PLANNED_STEPS, basin=None, prompts_per_step=1, batch_reuse=False) -> dict:
    """All closed-form and exact quantities for one configuration, as plain floats.

    ``regime`` is the exact answer (spectral radius of the discrete update and the exact oscillatory
    boundary); the closed form's own regime is reported under ``closed_form.regime``. The two can differ
    near a boundary because the closed form is a second-order approximation; ``regimes_agree`` says so.
    ``escape`` is P(the reward leaves |p − p*| ≤ ``basin`` within ``steps``) (default basin min(p*, 1 − p*);
    B = ``group_size`` × ``prompts_per_step`` samples per step) and the η where it reaches 1/2 (the onset).
    When the exact routines refuse ``k_ref`` (above their size limit) the exact block is ``None`` and
    ``regime`` falls back to the closed form, with ``regime_source`` saying which one answered.
    """
    import grpojax.dynamics as dyn

    if group_size < 1:
        raise InvalidValueError(f"group_size must be >= 1, got group_size={group_size}")
    p = dyn.from_hyperparams(eta, mu, k_ref, curvature, lag=lag, k_instant=k_instant, noise=noise, p_star=p_star)
    ratio = k_instant / curvature
    a = eta * curvature
    closed_regime = dyn.regime_name(dyn.regime(p))
    try:
        exact_eta = float(dyn.exact_critical_eta(mu, k_ref, curvature, lag=lag, k_instant=k_instant))
        exact_osc_eta = float(dyn.exact_oscillatory_a(mu, k_ref, lag=lag, a0_ratio=ratio)) / curvature
    except ValueError as exc:
        if "limit" not in str(exc):
            raise
        exact, exact_regime, note = None, None, str(exc)
    else:
        note = None
        rho = None  # the per-step spectral radius needs the eigenvalues: only up to a size limit for constant lag
        if lag == "periodic":
            rho = float(dyn.spectral_radius_periodic(a, mu, k_ref, a0=eta * k_instant))
        elif k_ref <= dyn.EXACT_RADIUS_MAX_LAG:
            rho = float(dyn.spectral_radius_constant(a, mu, k_ref, a0=eta * k_instant))
        sm = None  # every instability window (up to the windows' lag limit): a margin that agrees with ρ
        if lag == "periodic" or k_ref <= 4096:
            sm = dyn.stability_margin(eta, mu, k_ref, curvature, lag=lag, k_instant=k_instant)
        stable = rho < 1.0 if rho is not None else (sm["stable"] if sm is not None else eta < exact_eta)
        if not stable:
            exact_regime = "unstable"
        elif eta >= exact_osc_eta:
            exact_regime = "underdamped"
        else:
            exact_regime = "overdamped"
        exact = dict(
            regime=exact_regime,
            spectral_radius_per_step=rho,
            stable=stable,
            critical_eta=exact_eta,
            oscillatory_eta=exact_osc_eta,
            eta_ratio=eta / exact_eta,
            margin=sm["margin"] if sm is not None else 1.0 - eta / exact_eta,
            instability_windows=sm["windows"] if sm is not None else None,
        )
    var = float(dyn.stationary_variance(p, group_size))
    regime = exact_regime if exact is not None else closed_regime
    out = dict(
        inputs=dict(eta=eta, mu=mu, k_ref=k_ref, curvature=curvature, k_instant=k_instant, lag=lag,
                    group_size=group_size, noise=noise),
        M=float(p.M), C=float(p.C), K_eff=float(p.K_eff), D=float(p.D),
        damping_ratio=float(dyn.damping_ratio(p)),
        natural_frequency=float(dyn.natural_frequency(p)),
        regime=regime,
        regime_source="exact" if exact is not None else "closed_form",
        regimes_agree=exact is None or _same_regime(closed_regime, exact_regime),
        stationary_variance=var,
        escape=_escape(eta, mu, k_ref, curvature, lag, k_instant, noise, group_size * prompts_per_step,
                       basin if basin is not None else min(p_star, 1.0 - p_star), steps, batch_reuse),
        closed_form=dict(
            regime=closed_regime,
            critical_eta=float(dyn.critical_eta(mu, k_ref, curvature, lag=lag)),
            critical_k_ref=float(dyn.critical_k_ref(eta, mu, curvature, lag=lag)),
            oscillatory_eta=float(dyn.oscillatory_eta(mu, k_ref, curvature, lag=lag, k_instant=k_instant)),
            oscillatory_k_ref=float(dyn.oscillatory_k_ref(eta, mu, curvature, lag=lag, k_instant=k_instant)),
        ),
        exact=exact,
        params=p,
    )
    if note is not None:
        out["exact_unavailable"] = note
    return out


def _escape(eta, mu, k_ref, curvature, lag, k_instant, noise, samples, basin, steps, batch_reuse=False) -> dict | None:
    """P(escape within ``steps``) and the onset η (P = 1/2); None where the model does not apply (K_ref above its
    constant-lag limit, or a basin that is not > 0)."""
    import grpojax.dynamics as dyn

    if not basin > 0:
        return None
    kw = dict(noise=noise, basin=basin, steps=steps, lag=lag, k_instant=k_instant, samples_per_step=samples,
              batch_reuse=batch_reuse)
    try:
        est = dyn.escape_probability(eta, mu, k_ref, curvature, **kw)
        onset = float(dyn.escape_onset(mu, k_ref, curvature, **kw))
    except ValueError as exc:
        if "limit" not in str(exc):
            raise
        return None
    return dict(probability=float(est.probability), steps=int(steps), basin=float(basin), samples_per_step=int(samples),
                onset_eta=onset, expected_exits=float(est.expected_exits), batch_reuse=bool(batch_reuse))


def _adam_escape(hb: dict, adam, args, f: float, noise: float) -> dict:
    """P(escape) of AdamW at the gain law's step η_hb / r (v̂ grown with the oscillation), with the same planned
    length, basin and samples as the heavy-ball block ``hb``; the onset as an lr and in η_hb units."""
    from grpojax.dynamics import adam_escape  # noqa: PLC0415

    try:
        e = adam_escape(f, args.k_ref, args.curvature, adam=adam, noise=noise, basin=hb["basin"], steps=hb["steps"],
                        lag=args.lag, k_instant=args.k_instant, samples_per_step=hb["samples_per_step"])
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    crit_hb = args.eta * adam.step_scale / f
    return dict(hb, model="adamw gain law", probability=e.probability, expected_exits=e.expected_exits,
                rms_ratio=e.rms_ratio, step_fraction=e.step_fraction, onset_eta=e.onset_lr_over_critical * crit_hb,
                onset_lr=e.onset_lr_over_critical * crit_hb / adam.step_scale,
                onset_lr_over_critical=e.onset_lr_over_critical, noise_floor_probability=hb["probability"])


def _same_regime(closed: str, exact: str) -> bool:
    """The closed form's "critical" (ζ = 1 exactly) counts as either side of the oscillatory boundary."""
    return closed == exact or (closed == "critical" and exact in ("overdamped", "underdamped"))


def run(args) -> int:
    from rich.table import Table

    import grpojax.dynamics as dyn
    from grpojax.plot import predicted_trajectory_figure

    from grpojax.cli._curvature import apply_from  # noqa: PLC0415

    apply_from(args)
    if args.curvature is None:
        raise CLIError("--curvature is required (or --from curvature.json, written by `grpojax curvature`)")
    check_oscillator_args(args)
    noise = args.noise
    if args.reward_std is not None:
        if args.group_size < 2:
            raise CLIError(f"--reward-std needs --group-size >= 2 (a group's std), got {args.group_size}")
        noise = float(dyn.noise_from_reward_std(args.reward_std, args.group_size))
    if args.basin is None and not 0 < args.p_star < 1:
        raise CLIError(f"--p-star {args.p_star:g} leaves no basin inside [0, 1] (default min(p*, 1 − p*)); give --basin")
    if args.optimizer == "adamw" and args.mu:
        raise CLIError("--mu is heavy-ball momentum; with --optimizer adamw the momentum is --beta1")
    if args.batch_reuse and (args.optimizer == "adamw" or args.lag != "periodic"):
        raise CLIError(f"--batch-reuse is modelled for heavy-ball momentum with --lag periodic only, got --optimizer "
                       f"{args.optimizer} --lag {args.lag}")
    adam = adam_reduction(args, args.beta1 if args.optimizer == "adamw" else None)
    eta_hb, mu_hb, k0_hb = ((args.eta * adam.step_scale, adam.mu, args.k_instant + adam.k_instant_extra)
                            if adam is not None else (args.eta, args.mu, args.k_instant))
    res = predict(eta_hb, mu_hb, args.k_ref, args.curvature, lag=args.lag, k_instant=k0_hb,
                  group_size=args.group_size, noise=noise, p_star=args.p_star,
                  steps=args.steps if args.steps > 0 else PLANNED_STEPS, basin=args.basin,
                  prompts_per_step=args.prompts_per_step, batch_reuse=args.batch_reuse)
    params = res.pop("params")
    if adam is not None:
        res["adamw"] = dict(lr=args.eta, beta1=args.beta1, beta2=args.beta2, eps=args.eps,
                            weight_decay=args.weight_decay, **adam._asdict())
        if res["escape"] is not None and res["exact"] is not None:
            res["escape"] = _adam_escape(res["escape"], adam, args, eta_hb / res["exact"]["critical_eta"], noise)
    res["schedule"] = schedule_block(args, lr=args.eta, mu=args.mu, adam=adam, k_ref=args.k_ref,
                                     curvature=args.curvature, lag=args.lag, k_instant=args.k_instant,
                                     steps=args.steps if args.steps > 0 else PLANNED_STEPS, margin=ADVICE_MARGIN,
                                     **({} if res["escape"] is None else
                                        dict(noise=noise, basin=res["escape"]["basin"],
                                             samples_per_step=res["escape"]["samples_per_step"],
                                             batch_reuse=args.batch_reuse)))
    out = out_dir(args.out)
    steps = args.steps
    if steps <= 0:
        rate = max(abs(float(params.C)) / (2 * float(params.M)), 1e-6)
        if float(params.C) > 0:
            rate = min(rate, float(params.K_eff) / float(params.C)) if float(params.K_eff) > 0 else rate
        steps = int(min(max(8.0 / rate, 50), 100_000))
    std = math.sqrt(res["stationary_variance"]) if math.isfinite(res["stationary_variance"]) else None
    fig = predicted_trajectory_figure(params, args.p0, steps, std=std)
    save_figure(fig, out / "trajectory.png", dpi=120)
    res["figures"] = ["trajectory.png"]
    write_json(out, "prediction.json", res)

    t = Table(title=f"GRPO oscillator ({args.lag} lag)")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    for k in ("M", "C", "K_eff", "damping_ratio", "stationary_variance"):
        t.add_row(k, f"{res[k]:.4g}")
    t.add_row(f"regime ({res['regime_source'].replace('_', ' ')})", res["regime"])
    cf, ex = res["closed_form"], res["exact"]
    if ex is None:
        t.add_row("critical η (closed form)", f"{cf['critical_eta']:.4g}")
        t.add_row("oscillatory η (closed form)", f"{cf['oscillatory_eta']:.4g}")
    else:
        t.add_row("regime (closed form)", cf["regime"])
        t.add_row("critical η (closed form / exact)", f"{cf['critical_eta']:.4g} / {ex['critical_eta']:.4g}")
        t.add_row("oscillatory η (closed form / exact)", f"{cf['oscillatory_eta']:.4g} / {ex['oscillatory_eta']:.4g}")
        if ex["spectral_radius_per_step"] is not None:
            t.add_row("exact spectral radius per step", f"{ex['spectral_radius_per_step']:.6f}")
        t.add_row("η / exact critical η", f"{ex['eta_ratio']:.3f}")
        if ex["instability_windows"] is not None:
            wins = ", ".join(f"[{lo:.4g}, {hi:.4g})" for lo, hi in ex["instability_windows"][:4])
            t.add_row("unstable η windows", wins + (" …" if len(ex["instability_windows"]) > 4 else ""))
            t.add_row("margin to the next window", f"{ex['margin']:.3g}")
    esc = res["escape"]
    if esc is not None and esc.get("model") == "adamw gain law":
        t.add_row(f"P(escape within {esc['steps']} steps), AdamW gain law",
                  f"{esc['probability']:.3g} at the step η_hb/r, sqrt(v) r = {esc['rms_ratio']:.3g}× its noise floor "
                  f"(basin ±{esc['basin']:.3g}, {esc['samples_per_step']} samples per step)")
        t.add_row("escape onset lr (P = 1/2, gain law)",
                  f"{esc['onset_lr']:.4g} ({esc['onset_lr_over_critical']:.3g}× the critical lr)"
                  if math.isfinite(esc["onset_lr"]) else "none: P stays below 1/2 at every lr (the step stays below η*)")
    elif esc is not None:
        t.add_row(f"P(escape within {esc['steps']} steps)",
                  f"{esc['probability']:.3g} (basin ±{esc['basin']:.3g}, {esc['samples_per_step']} samples per step"
                  + ("; one batch per refresh)" if esc.get("batch_reuse") else ")"))
        t.add_row("escape onset η (P = 1/2)", f"{esc['onset_eta']:.4g}")
    if adam is not None:
        t.add_row("AdamW as heavy ball", f"η_hb = {eta_hb:.4g} (lr × {adam.step_scale:.4g}), μ = β₁ = {adam.mu:g}, "
                  f"K_0 += {adam.k_instant_extra:.4g}; the thresholds above are in η_hb (v at its noise floor)")
    for name, value in schedule_rows(res["schedule"]) if res["schedule"] else ():
        t.add_row(name, value)
    rows = [{"quantity": k, "value": res[k]} for k in ("M", "C", "K_eff", "damping_ratio", "stationary_variance",
                                                          "regime", "regime_source")]
    rows += [{"quantity": f"closed_form.{k}", "value": v} for k, v in cf.items()]
    rows += [{"quantity": f"exact.{k}", "value": v} for k, v in (ex or {}).items() if not isinstance(v, (list, dict))]
    say = err_console if to_stdout(args) else console
    if not emit_rows(args, rows, extra={k: v for k, v in res.items() if k != "figures"}):
        console.print(t)
    if "exact_unavailable" in res:
        say.print(f"exact thresholds not computed: {res['exact_unavailable']}")
    say.print(f"wrote {out / 'prediction.json'} and {out / 'trajectory.png'}")
    del dyn
    return 0
