"""``grpojax watch``: follow a log that is still being written and keep a live panel of the forecast."""

from __future__ import annotations

import argparse
import math
import time

from grpojax.cli._common import (CLIError, add_bounds_arg, add_log_read_args, check_bounds_arg, console, explain_runs,
                                 log_read_kwargs, write_json)
from grpojax._errors import UserError
from grpojax.cli._types import Int, Real, in_path, out_path

EXAMPLE = """Example:
  grpojax watch runs/tiny/metrics.jsonl --every 20 --idle-timeout 120 --json out/watch.json

The panel refreshes when the log grows (appended lines, new TensorBoard event files); the watch ends on
Ctrl-C or when the log has not grown for --idle-timeout seconds. Hyperparameters in the log's meta
(eta, mu or beta1, k_ref or staleness, lag, curvature, max_steps) add the stability margin and set the
forecast horizon.
"""


def register(sub) -> None:
    p = sub.add_parser(
        "watch",
        help="live forecast, stability margin, findings and best checkpoint of a run being written",
        description="Follow a log that is still being written (any format grpojax reads) and refresh a "
        "panel with the forecast plateau and its interval, the time to plateau, the stability margin, "
        "the detectors' findings as they appear and the best checkpoint so far.\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("log", type=in_path, help="log file or folder (TRL, verl, OpenRLHF, TensorBoard, W&B CSV, JSONL)")
    p.add_argument("--every", type=Int(1, what="new points between refreshes"), default=10, help="refresh the forecast after this many new points (default 10)")
    p.add_argument("--idle-timeout", type=Real(0, 1e9, lo_open=True, what="seconds", float32=False), default=300.0,
                   help="stop when the log has not grown for this many seconds (default 300)")
    p.add_argument("--poll", type=Real(0, 86400, lo_open=True, what="seconds", float32=False), default=1.0, help="seconds between checks of the log (default 1)")
    p.add_argument("--json", type=out_path, default=None, help="write the latest report to this JSON file after each refresh")
    p.add_argument("--metric", default="reward_mean", help="column to forecast (default reward_mean)")
    p.add_argument("--method", default="combined", choices=("combined", "creep", "persistence", "exponential", "sigmoid"),
                   help="forecasting method (default combined: the calibrated average of the four others)")
    p.add_argument("--end-step", type=Real(0, lo_open=True, what="a step"), default=None,
                   help="planned last step (default: the log's max_steps, else twice the last step)")
    add_bounds_arg(p, effect="the forecast and its interval are clipped to it")
    p.add_argument("--run", default=None, help="run to follow in a log of several runs (default: the last)")
    p.add_argument("--format", default=None, help="log format (default: detected)")
    add_log_read_args(p)
    p.add_argument("--no-live", action="store_true", help="print one line per refresh instead of a live panel")
    p.set_defaults(func=run)


def _fmt(x, spec=".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def render(report, *, log: str, idle_s: float = 0.0):
    """The panel of one :class:`grpojax.monitor.WatchReport` (a rich renderable)."""
    from rich.panel import Panel
    from rich.table import Table

    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row("run", f"{report.run}  (step {_fmt(report.step, 'g')}, {report.n_points} points)")
    f = report.forecast
    if f is not None:
        t.add_row("forecast", f"{_fmt(f['mean'])} [{_fmt(f['lo'])}, {_fmt(f['hi'])}] ({f['level']:.0%}, "
                  f"mean over steps {_fmt(f['window'][0], '.0f')}-{_fmt(f['window'][1], '.0f')}, {f['method']}, {f['status']})")
        if f.get("plateau"):
            pl = f["plateau"]
            t.add_row("plateau p*", f"{_fmt(pl['median'])} [{_fmt(pl['lo'])}, {_fmt(pl['hi'])}]")
        ttp = f.get("time_to_plateau")
        if ttp:
            t.add_row("time to plateau", f"{_fmt(ttp['steps_left'], '.0f')} steps (at step {_fmt(ttp['step'], '.0f')})"
                      if ttp.get("step") is not None else f"beyond step {_fmt(ttp.get('beyond'), '.0f')}")
    s = report.stability
    if s is not None:
        t.add_row("stability", f"ζ = {_fmt(s['damping_ratio'])} ({s['regime']}), margin 1 − η/η*_exact = "
                  f"{_fmt(s['margin'])}, ρ = {_fmt(s['spectral_radius'], '.4f')}"
                  + ("" if s["in_range"] else "  [outside the advised range]"))
        t.add_row("", f"curvature {_fmt(s['curvature'])} ({s['curvature_source']})")
    b = report.best
    if b is not None:
        t.add_row("best so far", f"step {_fmt(b['step'], 'g')}: smoothed {b['metric']} {_fmt(b['value'])}")
    for fd in report.findings:
        t.add_row(f"[red]{fd['mode']}[/red]", f"since step {_fmt(fd['first_step'], 'g')} ({fd['level']}): {fd['advice'] or fd['reason']}")
    for n in report.notes:
        t.add_row("note", n)
    return Panel(t, title=f"grpojax watch {log}", subtitle=f"log idle {idle_s:.0f} s")


def run(args) -> int:
    from grpojax.monitor import MonitorConfig, init_state, update
    from grpojax.cli._follow import log_signature, read_growing

    if args.every < 1:
        raise CLIError(f"--every must be >= 1 (new points between refreshes), got {args.every}")
    for name in ("idle_timeout", "poll"):
        v = getattr(args, name)
        if not (math.isfinite(v) and v > 0):
            raise CLIError(f"--{name.replace('_', '-')} must be a number > 0 (seconds), got {v}")
    if args.end_step is not None and not (math.isfinite(args.end_step) and args.end_step > 0):
        raise CLIError(f"--end-step must be a number > 0, got {args.end_step}")
    from grpojax.cli._runs import check_format_arg  # noqa: PLC0415

    check_format_arg(args.format)
    log_signature(args.log)  # FileNotFoundError -> one line
    config = MonitorConfig(metric=args.metric, every=args.every, method=args.method, end_step=args.end_step,
                           bounds=check_bounds_arg(args))
    state, report = init_state(), None
    read_kw, explained = log_read_kwargs(args), False
    sig, last_change = None, time.monotonic()
    live = None
    if not args.no_live:
        from rich.live import Live

        live = Live(console=console, refresh_per_second=2, transient=False)
        live.start()
    reason = "idle"
    try:
        while True:
            now = time.monotonic()
            new_sig = log_signature(args.log)
            if new_sig != sig:
                sig, last_change = new_sig, now
                try:
                    runlog = read_growing(args.log, format=args.format, run=args.run, mapping=read_kw["mapping"])
                except UserError as exc:  # name the flag when the run it asks for is not in the log
                    if args.run is not None and f"no run named {args.run!r}" in str(exc):
                        raise CLIError(f"--run {args.run!r}: {exc}") from None
                    raise
                if runlog is not None and read_kw["explain"] and not explained:
                    explain_runs([runlog])
                    explained = True
                if runlog is not None:
                    state, report = update(state, runlog, config)
                    if args.json:
                        write_json(*_split(args.json), {"log": str(args.log), "status": "watching",
                                                        "updates": state.updates, **report.to_dict()})
                    if live is None and report.refreshed:
                        f = report.forecast
                        console.print(f"step {report.step:g}: forecast "
                                      + (f"{f['mean']:.3g} [{f['lo']:.3g}, {f['hi']:.3g}]" if f else "-")
                                      + (f", margin {report.stability['margin']:.3g}" if report.stability else "")
                                      + "".join(f", new finding {m}" for m in report.new_findings), soft_wrap=True)
            idle = now - last_change
            if live is not None and report is not None:
                live.update(render(report, log=str(args.log), idle_s=idle))
            if idle >= args.idle_timeout:
                break
            time.sleep(min(args.poll, max(args.idle_timeout - idle, 0.01)))
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        if live is not None:
            live.stop()
    if args.json and report is not None:
        write_json(*_split(args.json), {"log": str(args.log), "status": f"stopped ({reason})",
                                        "updates": state.updates, **report.to_dict()})
    console.print(f"watch stopped ({'Ctrl-C' if reason == 'interrupted' else f'log idle for {args.idle_timeout:g} s'})"
                  + (f"; report in {args.json}" if args.json and report is not None else ""), soft_wrap=True)
    return 0


def _split(path: str):
    import pathlib

    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p.parent, p.name
