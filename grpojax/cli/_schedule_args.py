"""The learning-rate schedule and Adam / AdamW flags shared by ``grpojax predict`` and ``grpojax advise``."""

from __future__ import annotations

from grpojax.cli._common import CLIError

OPTIMIZERS = ("momentum", "adamw")


def add_schedule_args(p, *, optimizer_flags: bool) -> None:
    """``--schedule --warmup --warmup-ratio`` and Adam's ``--beta2 --eps --weight-decay --grad-rms``
    (with ``optimizer_flags``, also ``--optimizer`` and ``--beta1``)."""
    from grpojax.cli._types import Int, Real  # noqa: PLC0415
    from grpojax._defaults import SCHEDULES  # noqa: PLC0415

    g = p.add_argument_group("learning-rate schedule and AdamW")
    g.add_argument("--schedule", choices=SCHEDULES, default=None,
                   help="the lr schedule (transformers / TRL names): print the exact margin along it over --steps and "
                        "the advised peak lr (the given lr is the peak)")
    g.add_argument("--warmup", type=Int(0, what="warmup steps"), default=0, help="linear warmup steps (default 0)")
    g.add_argument("--warmup-ratio", type=Real(0, 1, what="a fraction of the run"), default=None,
                   help="warmup as a fraction of --steps, rounded up (instead of --warmup)")
    if optimizer_flags:
        g.add_argument("--optimizer", choices=OPTIMIZERS, default="momentum",
                       help="momentum (heavy ball, --mu) or adamw (--beta1 .. --weight-decay; default momentum)")
        g.add_argument("--beta1", type=Real(0, 1, hi_open=True, what="Adam's β₁"), default=0.9,
                       help="AdamW's β₁ (default 0.9)")
    g.add_argument("--beta2", type=Real(0, 1, hi_open=True, what="Adam's β₂"), default=0.999,
                   help="AdamW's β₂ (default 0.999)")
    g.add_argument("--eps", type=Real(0, what="Adam's epsilon"), default=1e-8, help="AdamW's ε (default 1e-8)")
    g.add_argument("--weight-decay", type=Real(0, what="decoupled weight decay"), default=0.0,
                   help="AdamW's decoupled weight decay λ: adds λ(sqrt(v) + ε)/(1 − β₁) to K_0 (default 0)")
    g.add_argument("--grad-rms", type=Real(0, lo_open=True, what="a gradient scale"), default=None,
                   help="AdamW: measured sqrt(E[g²]) along the error coordinate; the curvature is then in the "
                        "gradient's units (default: none, the curvature is in Adam's units)")


def adam_reduction(args, beta1):
    """The :class:`AdamReduction` of the flags (None for heavy ball)."""
    from grpojax.dynamics import adam_to_heavy_ball  # noqa: PLC0415

    if beta1 is None:
        if args.weight_decay or args.grad_rms is not None:
            raise CLIError("--weight-decay and --grad-rms are AdamW settings: give --optimizer adamw (advise: --beta1)")
        return None
    try:
        return adam_to_heavy_ball(beta1=beta1, beta2=args.beta2, eps=args.eps, weight_decay=args.weight_decay,
                                  grad_rms=args.grad_rms)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def schedule_block(args, *, lr, mu, adam, k_ref, curvature, lag, k_instant, steps, margin, noise=None, basin=None,
                   samples_per_step=1, batch_reuse=False, noise_growth=0.0) -> dict | None:
    """The margin along ``--schedule`` (None without it), as :meth:`ScheduleMargin.summary` plus the schedule; with
    ``noise`` and ``basin``, P(escape) along it (AdamW: the gain law's, from the preconditioner's path)."""
    from grpojax.dynamics import schedule_margin  # noqa: PLC0415

    if args.schedule is None:
        if args.warmup or args.warmup_ratio is not None:
            raise CLIError("--warmup / --warmup-ratio need --schedule NAME")
        return None
    try:
        r = schedule_margin(lr, k_ref, curvature, schedule=args.schedule, steps=steps, warmup_steps=args.warmup,
                            warmup_ratio=args.warmup_ratio, mu=None if adam is not None else mu, adam=adam, lag=lag,
                            k_instant=k_instant, margin=margin, beta2=args.beta2, noise=noise, basin=basin,
                            samples_per_step=samples_per_step, batch_reuse=batch_reuse, noise_growth=noise_growth)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return dict(schedule=args.schedule, steps=int(steps), warmup=args.warmup, warmup_ratio=args.warmup_ratio,
                optimizer="adamw" if adam is not None else "momentum", **r.summary())


def schedule_rows(block: dict) -> list[tuple[str, str]]:
    """Table rows for :func:`schedule_block`'s answer."""
    adam = block["optimizer"] == "adamw"
    crit = f"exact critical lr {block['critical_lr']:.4g} ({block['optimizer']})"
    if adam:
        crit = f"critical lr {block['critical_lr']:.4g} (adamw at the noise-floor v: oscillation grows from here)"
    rows = [(f"schedule ({block['schedule']}, {block['steps']} steps)", f"peak lr {block['peak_lr']:.4g}; {crit}"),
            ("smallest margin along the schedule",
             f"{block['min_margin']:.3g} at step {block['min_margin_step']}"),
            (f"advised peak lr (margin ≥ {block['required_margin']:g} at every step)", f"{block['advised_peak_lr']:.4g}")]
    if block["growth_efolds"] > 0 and not adam:
        rows.append(("growth above the threshold", f"{block['growth_efolds']:.3g} e-folds (frozen coefficients)"))
    if adam and block.get("adam_rms_gain") is not None:
        rows.append(("AdamW second moment (model)", f"sqrt(v) up to {block['adam_rms_gain']:.3g}× its noise floor "
                     f"(step {block['adam_rms_gain_step']})"))
        if block["peak_lr"] > block["critical_lr"]:
            rows.append(("AdamW past the critical lr", "no divergence (v grows with the oscillation); "
                         "may still leave the plateau (P(escape) along the schedule)"))
    if block.get("escape_probability") is not None:
        rows.append(("P(escape along the schedule)" + (", AdamW gain law" if adam else ""),
                     f"{block['escape_probability']:.3g}" + (" (sqrt(v) on its modelled path, not at the noise floor)"
                                                              if adam else "")))
    if block["bias_corrected_steps"]:
        rows.append(("Adam bias correction", f"steps 1–{block['bias_corrected_steps']} take > 1.05× the scheduled lr "
                     "(left out of the margin)"))
    return rows
