"""``grpojax watch``: follow a log that is still being written and keep a live panel of the forecast."""

from __future__ import annotations

import argparse
import math
import re
import time

from grpojax._defaults import FORECAST_METHOD
from grpojax.cli._common import (CLIError, add_bounds_arg, add_log_read_args, check_bounds_arg, console, explain_runs,
                                 err_console, log_read_kwargs, out_dir, write_json)
from grpojax._errors import UserError
from grpojax.cli._types import Int, Real, in_path, out_path

EXAMPLE = """Example:
  grpojax watch runs/tiny/metrics.jsonl --every 20 --idle-timeout 120 --out out/watch

The panel refreshes when the log grows (appended lines, new TensorBoard event files); the watch ends on
Ctrl-C or when the log has not grown for --idle-timeout seconds. A log that goes back (truncated,
rotated, replaced, or a new run written into it) is said so in one line and watched again from what it
holds now. Hyperparameters in the log's meta (eta, mu or beta1, k_ref or staleness, lag, curvature,
max_steps) add the stability margin and set the forecast horizon. --out DIR keeps DIR/watch.json (the
latest report) and DIR/updates.jsonl (one line per report and per restart); --json FILE the latest
report in FILE.

Collapse-risk alerts (a precursor jump -- entropy, response length, KL, grad norm, zero-std share -- while
the reward has not yet fallen; a small or negative stability margin) are printed as they are raised, with
their level (info, warning, critical). --alert-file PATH appends one JSON line per alert; --on-alert CMD
runs CMD (through the shell) for each alert, with the alert as JSON on its standard input and in the
environment: GRPOJAX_ALERT (the JSON), GRPOJAX_ALERT_LEVEL, GRPOJAX_ALERT_STEP, GRPOJAX_ALERT_RUN,
GRPOJAX_ALERT_REASON.
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
    p.add_argument("--out", type=out_path, default=None,
                   help="output folder: DIR/watch.json (the latest report, rewritten after each refresh) and "
                        "DIR/updates.jsonl (one line per report and per restart of the watch)")
    p.add_argument("--json", type=out_path, default=None, help="write the latest report to this JSON file after each refresh")
    p.add_argument("--metric", default="reward_mean", help="column to forecast (default reward_mean)")
    p.add_argument("--method", default=FORECAST_METHOD, choices=("combined", "creep", "persistence", "exponential", "sigmoid"),
                   help="forecasting method (default combined: the median of the four others that vouch for their fit, with a calibrated interval)")
    p.add_argument("--end-step", type=Real(0, lo_open=True, what="a step"), default=None,
                   help="planned last step (default: the log's max_steps, else twice the last step)")
    add_bounds_arg(p, effect="the forecast and its interval are clipped to it")
    p.add_argument("--run", default=None, help="run to follow in a log of several runs (default: the last)")
    p.add_argument("--from", dest="from_curvature", type=in_path, default=None, metavar="CURVATURE_JSON",
                   help="a curvature.json written by `grpojax curvature`: its K_d, K_0 and gradient noise σ² "
                        "(over those of the log's meta) for the stability margin and the escape probability")
    p.add_argument("--format", default=None, help="log format (default: detected)")
    add_log_read_args(p)
    p.add_argument("--no-live", action="store_true", help="print one line per refresh instead of a live panel")
    p.add_argument("--alert-file", type=out_path, default=None,
                   help="append one JSON line per collapse-risk alert to this file")
    p.add_argument("--on-alert", default=None, metavar="CMD",
                   help="run CMD (shell) on each collapse-risk alert: the alert as JSON on stdin and in "
                        "GRPOJAX_ALERT, with GRPOJAX_ALERT_LEVEL, _STEP, _RUN and _REASON")
    p.add_argument("--alert-timeout", type=Real(0, 86400, lo_open=True, what="seconds", float32=False), default=30.0,
                   help="seconds an --on-alert command may run before it is stopped (default 30)")
    p.set_defaults(func=run)


def _fmt(x, spec=".3g") -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def render(report, *, log: str, idle_s: float = 0.0, pending: tuple | None = None, run_status: str | None = None):
    """The panel of one :class:`grpojax.monitor.WatchReport` (a rich renderable); ``pending``: ``(n_points,
    step)`` of a forecast being computed; ``run_status``: the run folder's status line (grpojax runs)."""
    from rich.panel import Panel
    from rich.table import Table

    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row("run", f"{report.run}  (step {_fmt(report.step, 'g')}, {report.n_points} points)")
    if run_status:
        t.add_row("status", ("[red]" + run_status + "[/red]") if run_status.startswith("stale") else run_status)
    f = report.forecast
    if f is not None:
        t.add_row("forecast", f"{_fmt(f['mean'])} [{_fmt(f['lo'])}, {_fmt(f['hi'])}] ({f['level']:.0%}, "
                  f"mean over steps {_fmt(f['window'][0], '.0f')}-{_fmt(f['window'][1], '.0f')}, {f['method']}, {f['status']})")
        if "at_step" in f:
            t.add_row("computed at", f"step {_fmt(f['at_step'], 'g')} ({f['n_points']} points)"
                      + (f"; computing from {pending[0]} points" if pending else ""))
        if f.get("collapse_onset") is not None:
            t.add_row("collapsed", f"at step {_fmt(f['collapse_onset'], 'g')}: the forecast starts from the level after it")
        if f.get("p_collapse") is not None and math.isfinite(f["p_collapse"]):
            lo, hi = f.get("p_collapse_interval") or (float("nan"), float("nan"))
            t.add_row("P(collapse)", f"{_fmt(f['p_collapse'])} [{_fmt(lo)}, {_fmt(hi)}] before step "
                      f"{_fmt(f.get('end_step'), '.0f')} (a base rate of labelled runs, not a warning)")
        if f.get("plateau"):
            pl = f["plateau"]
            t.add_row("plateau p*", f"{_fmt(pl['median'])} [{_fmt(pl['lo'])}, {_fmt(pl['hi'])}]")
        ttp = f.get("time_to_plateau")
        if ttp:
            t.add_row("time to plateau", f"{_fmt(ttp['steps_left'], '.0f')} steps (at step {_fmt(ttp['step'], '.0f')})"
                      if ttp.get("step") is not None else f"beyond step {_fmt(ttp.get('beyond'), '.0f')}")
    elif pending:
        t.add_row("forecast", f"computing (from {pending[0]} points at step {_fmt(pending[1], 'g')})")
    s = report.stability
    if s is not None:
        t.add_row("stability", f"ζ = {_fmt(s['damping_ratio'])} ({s['regime']}), margin 1 − η/η*_exact = "
                  f"{_fmt(s['margin'])}, ρ = {_fmt(s['spectral_radius'], '.4f')}"
                  + ("" if s["in_range"] else "  [outside the advised range]"))
        t.add_row("", f"curvature {_fmt(s['curvature'])} ({s['curvature_source']})")
        if s.get("logged_lr") is not None:
            t.add_row("", f"at the logged lr {s['logged_lr']:.3g} (step {s['logged_lr_step']:.0f}): margin "
                      f"{_fmt(s['margin_at_logged_lr'])}")
    b = report.best
    if b is not None:
        t.add_row("best so far", f"step {_fmt(b['step'], 'g')}: smoothed {b['metric']} {_fmt(b['value'])}")
    for fd in report.findings:
        if not fd.get("active", True):  # held once, no longer: its step range
            t.add_row(f"[dim]{fd['mode']}[/dim]", f"past: held from step {_fmt(fd['first_step'], 'g')} to "
                      f"{_fmt(fd['last_step'], 'g')}, not at step {_fmt(fd['until_step'], 'g')}")
            continue
        t.add_row(f"[red]{fd['mode']}[/red]", f"since step {_fmt(fd['first_step'], 'g')} ({fd['level']}): {fd['advice'] or fd['reason']}")
    if report.alerts:
        a = report.alerts[-1]
        t.add_row(f"[red]alert {a['level']}[/red]", f"step {_fmt(a['step'], 'g')}: {a['kind']}: {a['reason']}"
                  + (f"  ({len(report.alerts)} so far)" if len(report.alerts) > 1 else ""))
    for n in report.notes:
        t.add_row("note", n)
    return Panel(t, title=f"grpojax watch {log}", subtitle=f"log idle {idle_s:.0f} s")


class _Forecaster:
    """The forecast engine (``update`` with ``forecast=True, diagnose=False``) in a background thread.

    The forecast imports JAX and fits a model (seconds, more on a first call that compiles); the NumPy
    part of the watch (detectors, best checkpoint) reports at once and merges the forecast in when it is
    ready. ``submit`` hands over the newest run (an older one still waiting is replaced) and ``start``
    wakes the thread (after the caller has written its report: the thread's imports compete for the
    interpreter); ``poll`` returns a new report once, else None; ``pending`` is ``(n_points, step)`` of the
    run queued or being forecast.
    """

    def __init__(self, config):
        import threading  # noqa: PLC0415

        self._stopped = False
        self._config = config
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._queued = None
        self._running = None
        self._report = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="grpojax-watch-forecast", daemon=True)
        self._started = False

    def submit(self, runlog) -> None:
        with self._lock:
            self._queued = runlog
            self._idle.clear()

    def start(self) -> None:
        if not self._started:
            self._thread.start()
            self._started = True
        self._wake.set()

    @property
    def pending(self) -> tuple | None:
        with self._lock:
            r = self._running if self._running is not None else self._queued
        if r is None:
            return None
        return r.count(self._config.metric), float(r.steps[-1]) if r.steps.size else float("nan")

    def poll(self):
        with self._lock:
            if self._error is not None:
                raise self._error
            rep, self._report = self._report, None
        return rep

    def wait(self, timeout: float) -> bool:
        """Block until nothing is queued or running (or ``timeout`` s); True when idle."""
        return self._idle.wait(timeout)

    def stop(self) -> None:
        """End the thread after the forecast it is computing (the watch started over on another log)."""
        with self._lock:
            self._stopped, self._queued = True, None
        self._wake.set()

    def _loop(self) -> None:
        from grpojax.monitor import init_state, update  # noqa: PLC0415

        state, config = init_state(), None
        while True:
            self._wake.wait()
            with self._lock:
                if self._stopped:
                    return
                self._wake.clear()
                run, self._queued, self._running = self._queued, None, self._queued
            if run is None:
                continue
            try:
                if config is None:  # validating the method imports grpojax.fit: here, not before the first report
                    config = self._config.replace(forecast=True, diagnose=False)
                state, rep = update(state, run, config)
            except BaseException as exc:  # noqa: BLE001  (re-raised in the main thread by poll)
                with self._lock:
                    self._error, self._running = exc, None
                    self._idle.set()
                return
            with self._lock:
                self._report, self._running = rep, None
                if self._queued is None:
                    self._idle.set()


def _merge(fast, slow):
    """The NumPy report ``fast`` with the forecast and stability of the forecast engine's latest ``slow``."""
    if slow is None:
        return fast
    notes = tuple(fast.notes) + tuple(n for n in slow.notes if n not in fast.notes)
    return fast._replace(forecast=slow.forecast, stability=slow.stability, notes=notes, cost_s=fast.cost_s + slow.cost_s,
                         alerts=tuple(sorted(tuple(fast.alerts) + tuple(slow.alerts), key=lambda a: a["step"])))


def _line(report, pending, *, new_forecast: bool) -> str:
    """One --no-live line."""
    f = report.forecast
    if f is not None:
        text = (f"forecast {f['mean']:.3g} [{f['lo']:.3g}, {f['hi']:.3g}] (from {f.get('n_points', report.n_points)} "
                f"points at step {f.get('at_step', report.step):g}" + ("; refreshing)" if pending else ")"))
    elif pending:
        text = f"forecast pending (computing from {pending[0]} points at step {pending[1]:g})"
    else:
        text = "forecast -"
    return (f"step {report.step:g}: " + ("new " if new_forecast and f is not None else "") + text
            + (f", margin {report.stability['margin']:.3g}" if report.stability else "")
            + ("" if new_forecast else "".join(f", new finding {m}" for m in report.new_findings)))


class _Alerts:
    """Where the collapse-risk alerts go: printed, appended to ``--alert-file`` and handed to ``--on-alert``.

    Each alert is sent once, whichever engine raised it (the NumPy engine: precursors; the forecast engine:
    the stability margin): a key of run, source, step and level.
    """

    def __init__(self, path: str | None, command: str | None, timeout: float, log: str):
        self.path, self.command, self.timeout, self.log = path, command, float(timeout), log
        self.sent: set = set()
        self.count = 0

    def send(self, report, *, quiet: bool) -> None:
        for a in report.new_alerts:
            key = (report.run, a["step"], a["level"], a["reason"])
            if key in self.sent:
                continue
            self.sent.add(key)
            self.count += 1
            self._one(report.run, a, quiet=quiet)

    def _one(self, run_name: str, alert: dict, *, quiet: bool) -> None:
        import json as _json  # noqa: PLC0415
        import os  # noqa: PLC0415
        import subprocess  # noqa: PLC0415

        from grpojax._io import to_jsonable  # noqa: PLC0415

        rec = {"time": _now_iso(), "log": self.log, "run": run_name, **alert}
        text = _json.dumps(to_jsonable(rec), allow_nan=False)
        if not quiet:
            err_console.print(f"alert {alert['level']} at step {alert['step']:g}: {alert['kind']}: {alert['reason']}",
                              soft_wrap=True, markup=False, highlight=False)
        if self.path:
            import pathlib  # noqa: PLC0415

            p = pathlib.Path(self.path)
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
        if self.command:
            env = dict(os.environ, GRPOJAX_ALERT=text, GRPOJAX_ALERT_LEVEL=str(alert["level"]),
                       GRPOJAX_ALERT_STEP=f"{alert['step']:g}", GRPOJAX_ALERT_RUN=str(run_name),
                       GRPOJAX_ALERT_REASON=str(alert["reason"]))
            try:
                r = subprocess.run(self.command, shell=True, input=text, text=True, env=env,  # noqa: S602
                                   timeout=self.timeout, capture_output=True, check=False)
            except subprocess.TimeoutExpired:
                err_console.print(f"warning: --on-alert command still running after {self.timeout:g} s; stopped",
                                  markup=False, highlight=False)
                return
            if r.returncode != 0:
                err_console.print(f"warning: --on-alert command exited with status {r.returncode}"
                                  + (f": {r.stderr.strip().splitlines()[-1]}" if r.stderr.strip() else ""),
                                  markup=False, highlight=False, soft_wrap=True)


def _run_folder_of(log: str):
    """The grpojax run folder ``log`` is or lies in (it holds ``summary.json``), else None."""
    import pathlib  # noqa: PLC0415

    p = pathlib.Path(log)
    for d in (p, p.parent) if p.is_file() else (p,):
        if (d / "summary.json").is_file():
            return d
    return None


def _run_status(folder) -> dict | None:
    """``summary.json``'s status, checked for a writer that is gone (see grpojax._run_status)."""
    if folder is None:
        return None
    from grpojax._run_status import run_status  # noqa: PLC0415

    try:
        st = run_status(folder)
    except (OSError, ValueError) as exc:
        return {"status": "unknown", "text": f"unreadable summary.json ({exc})"}
    return {"status": st.status, "last_step": st.last_step, "pid": st.pid, "updated": st.updated, "text": st.text}


def _now_iso() -> str:
    import datetime  # noqa: PLC0415

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class _Outputs:
    """What the watch writes: ``--json FILE`` (the latest report) and ``--out DIR`` (``watch.json``, the
    latest report, and ``updates.jsonl``, one line per report and per restart)."""

    def __init__(self, json_path: str | None, out: str | None):
        import pathlib  # noqa: PLC0415

        self.json = json_path
        self.out = pathlib.Path(out) if out is not None else None
        self.lines: list[str] = []

    @property
    def any(self) -> bool:
        return bool(self.json or self.out)

    def report(self, payload: dict) -> None:
        import json as _json  # noqa: PLC0415

        from grpojax._io import to_jsonable  # noqa: PLC0415
        from grpojax.cli._output import SCHEMA_VERSION  # noqa: PLC0415

        payload = {"schema_version": SCHEMA_VERSION, **payload}  # the version of grpojax's JSON, as in --json rows
        if self.json:
            write_json(*_split(self.json), payload)
        if self.out is not None:
            write_json(out_dir(self.out), "watch.json", payload)
            f = payload.get("forecast") or {}
            self._line({"event": "report", "time": _now_iso(), "status": payload["status"], "run": payload.get("run"),
                        "step": payload.get("step"), "n_points": payload.get("n_points"),
                        "refreshed": payload.get("refreshed"),
                        "forecast": {k: f.get(k) for k in ("mean", "lo", "hi", "at_step")} if f else None,
                        "new_findings": payload.get("new_findings", []), "restarts": len(payload.get("restarts", []))},
                       _json, to_jsonable)

    def restart(self, event: dict) -> None:
        import json as _json  # noqa: PLC0415

        from grpojax._io import to_jsonable  # noqa: PLC0415

        if self.out is not None:
            self._line({"event": "restart", **event}, _json, to_jsonable)

    def _line(self, rec: dict, _json, to_jsonable) -> None:
        from grpojax._io import write_text_atomic  # noqa: PLC0415

        self.lines.append(_json.dumps(to_jsonable(rec), allow_nan=False))
        write_text_atomic(out_dir(self.out) / "updates.jsonl", "".join(ln + "\n" for ln in self.lines))

    def where(self) -> str:
        return " and ".join(str(x) for x in (self.json, self.out and self.out / "watch.json") if x)


def run(args) -> int:
    from grpojax.monitor import MonitorConfig, init_state, update
    from grpojax.cli._follow import log_signature, log_view, read_growing, went_back

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
    if str(args.log).startswith("wandb://"):
        raise CLIError(f"{args.log}: watch follows a log file or folder as it is written; for a run on a W&B "
                       "server, watch its local run folder (wandb/run-...), or read it with fit or diagnose")
    log_signature(args.log)  # FileNotFoundError -> one line
    from grpojax._curvature_file import curvature_meta  # noqa: PLC0415
    from grpojax.cli._curvature import naming_from_flag  # noqa: PLC0415

    with naming_from_flag():
        measured = curvature_meta(args.from_curvature) if args.from_curvature is not None else {}
    # the NumPy engine (detectors, best checkpoint): its first report needs no JAX; the forecast and the
    # stability margin come from a second engine in a background thread and are merged in when ready
    config = MonitorConfig(metric=args.metric, every=args.every, forecast=False, method=args.method,
                           end_step=args.end_step, bounds=check_bounds_arg(args))
    forecaster = _Forecaster(config)
    state, fast, slow = init_state(), None, None
    last_run = None  # the log as last read: the watch ends with a refresh of all of it
    read_kw, explained = log_read_kwargs(args), False
    outputs = _Outputs(args.json, getattr(args, "out", None))
    alerts = _Alerts(getattr(args, "alert_file", None), getattr(args, "on_alert", None),
                     getattr(args, "alert_timeout", 30.0), str(args.log))
    sig, seen = None, None  # the log's signature and what it held at the last read (see went_back)
    run_folder, said_status = _run_folder_of(args.log), None
    said_warnings: set[str] = set()
    restarts: list[dict] = []
    live = None
    if not args.no_live:
        from rich.live import Live

        live = Live(console=console, refresh_per_second=2, transient=False)
        live.start()
    reason = "idle"

    def publish(status: str, *, printed: bool, new_forecast: bool = False):
        nonlocal said_status
        report, pending = _merge(fast, slow), forecaster.pending
        rs = _run_status(run_folder)
        if outputs.any:
            outputs.report({"log": str(args.log), "status": status, "updates": state.updates,
                            "forecast_pending": pending is not None, "restarts": restarts, "run_status": rs,
                            **report.to_dict()})
        if rs is not None and rs["status"] != said_status and (live is None or rs["status"] == "stale"):
            said_status = rs["status"]  # one line when the run folder's status changes (a stale run: also live)
            console.print(f"run status: {rs['text']}", soft_wrap=True, markup=False, highlight=False)
        if live is None and printed:
            console.print(_line(report, pending, new_forecast=new_forecast), soft_wrap=True, markup=False,
                          highlight=False)
        return report, pending

    try:
        while True:
            now = time.monotonic()
            new_sig = log_signature(args.log)
            if new_sig != sig:
                if sig is None:  # idle counts from the log's last write, also before the watch began
                    last_change = now - max(0.0, time.time() - new_sig[1] / 1e9)
                else:
                    last_change = now
                sig = new_sig
                try:
                    warned: list[str] = []
                    runlog = read_growing(args.log, format=args.format, run=args.run, mapping=read_kw["mapping"],
                                          warned=warned)
                except UserError as exc:  # name the flag when the run it asks for is not in the log
                    if args.run is not None and f"no run named {args.run!r}" in str(exc):
                        raise CLIError(f"--run {args.run!r}: {exc}") from None
                    raise
                if runlog is not None:  # None: the log holds no readable row yet (or was emptied)
                    runlog.meta.update(measured)
                for w in warned:  # each kind of warning once (a growing log repeats them with new numbers)
                    key = re.sub(r"\d+", "N", w)
                    if key not in said_warnings:
                        said_warnings.add(key)
                        err_console.print(f"warning: {w}", markup=False, highlight=False, soft_wrap=True)
                view = log_view(args.log, new_sig, runlog, args.metric)
                why = went_back(seen, view, args.metric)
                if why is not None:  # start over: the engines' state describes a log that is gone
                    event = {"time": _now_iso(), "reason": why, "step_before": seen.last,
                             "step_after": view.last, "points_before": seen.n_points, "points_after": view.n_points}
                    restarts.append(event)
                    outputs.restart(event)
                    console.print(f"{args.log} {why}; the watch starts over from what it holds now"
                                  + (f" (step {view.last:g})" if view.last is not None else ""),
                                  soft_wrap=True, markup=False, highlight=False)
                    forecaster.stop()
                    forecaster = _Forecaster(config)
                    state, fast, slow = init_state(), None, None
                if runlog is not None or why is not None:
                    seen = view
                if runlog is not None and read_kw["explain"] and not explained:
                    explain_runs([runlog])
                    explained = True
                if runlog is not None:
                    last_run = runlog
                    state, fast = update(state, runlog, config)
                    alerts.send(fast, quiet=live is not None)
                    forecaster.submit(runlog)
                    publish("watching", printed=fast.refreshed)
                    forecaster.start()
            if fast is not None:
                got = forecaster.poll()
                if got is not None:
                    slow = got
                    alerts.send(got, quiet=live is not None)
                    publish("watching", printed=got.refreshed, new_forecast=got.refreshed)
            idle = now - last_change
            if live is not None and fast is not None:
                rs = _run_status(run_folder)
                live.update(render(_merge(fast, slow), log=str(args.log), idle_s=idle, pending=forecaster.pending,
                                   run_status=rs["text"] if rs else None))
            elif live is not None and restarts:  # started over on a log that holds no run yet
                from rich.panel import Panel  # noqa: PLC0415

                live.update(Panel(f"{restarts[-1]['reason']}; waiting for a run", title=f"grpojax watch {args.log}",
                                  subtitle=f"log idle {idle:.0f} s"))
            if idle >= args.idle_timeout:
                if forecaster.pending is not None:  # the log is done; finish the forecast it is computing
                    forecaster.wait(min(args.poll, 0.5))
                    continue
                if last_run is not None and fast is not None and not fast.refreshed:
                    # the findings of the whole log, as grpojax diagnose gives them (not those of the last refresh)
                    state, fast = update(state, last_run, config, force=True)
                    alerts.send(fast, quiet=live is not None)
                    if live is not None:
                        live.update(render(_merge(fast, slow), log=str(args.log), idle_s=idle))
                break
            time.sleep(min(args.poll, max(args.idle_timeout - idle, 0.01)))
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        forecaster.stop()
        if live is not None:
            live.stop()
            if not console.is_terminal:  # rich ends the panel's last line only on a terminal
                console.line()
    if outputs.any and fast is not None:
        publish(f"stopped ({reason})", printed=False)
    console.print(f"watch stopped ({'Ctrl-C' if reason == 'interrupted' else f'log idle for {args.idle_timeout:g} s'})"
                  + (f"; report in {outputs.where()}" if outputs.any and fast is not None else ""), soft_wrap=True)
    return 0


def _split(path: str):
    import pathlib

    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p.parent, p.name
