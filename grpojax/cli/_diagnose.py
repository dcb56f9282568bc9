"""``grpojax diagnose LOG``: failure-mode report of a training log (table, diagnosis.json, dashboard)."""

from __future__ import annotations

import argparse
import sys
import warnings

from grpojax._defaults import SEED as DEFAULT_SEED
from grpojax.cli._common import (CLIError, add_bounds_arg, add_log_read_args, check_bounds_arg, console, err_console,
                                 log_read_kwargs, out_dir, write_json)
from grpojax.cli._runs import read_runs, run_folders
from grpojax.cli._output import SCHEMA_VERSION, add_table_output_args, emit_rows, to_stdout
from grpojax.cli._types import SEED, Int, Real, in_path, out_path

DESCRIPTION = """\
Read a GRPO training log (TRL trainer_state.json or console, verl console/JSONL, TensorBoard,
W&B CSV, OpenRLHF, grpojax JSONL; auto-detected) and diagnose the failure modes -- reward
hacking, advantage degeneracy, policy concentration, dynamical instability, collapse -- the training-health
checks (length pathology, learning plateau, clip saturation, KL drift, gradient spikes, reward
imbalance) and the mean-field validity of the oscillator model. Prints one line per check
(verdict, severity, the deciding statistic) with its evidence and what to change below, writes
DIR/diagnosis.json and DIR/dashboard.svg (--plot png: DIR/dashboard.png, drawn by matplotlib). A log
holding several runs (a TensorBoard folder of runs, a W&B export of several runs, a file whose step
counter restarts) is diagnosed run by run: DIR/<run>/diagnosis.json and DIR/<run>/dashboard.svg for each, and
DIR/diagnosis.json with all of them; --run NAME picks one. A detector whose columns are missing
answers insufficient_data and says which.

Example:
  grpojax diagnose outputs/checkpoint-500/trainer_state.json --out out/diag
  grpojax diagnose run.log --set entropy_ratio=0.1 --set frac_zero_std_late=0.6
  grpojax diagnose run.log --bayes state_space     # posterior P(C <= 0) for the instability check
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("diagnose", help="diagnose failure modes from a training log",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", type=in_path, help="log file or folder")
    p.add_argument("--out", type=out_path, default="out/diagnose", help="output folder (default: out/diagnose)")
    p.add_argument("--format", default=None, help="force a log format instead of auto-detection")
    p.add_argument("--run", default=None, help="only the run with this name (logs with several runs)")
    add_log_read_args(p)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="override a DiagnoseConfig threshold (repeatable)")
    p.add_argument("--plot", choices=PLOTS, default="dashboard",
                   help="figures to write: dashboard (default: DIR/dashboard.svg, every logged metric with the "
                        "detected episodes shaded and the events marked, written without matplotlib), png (the "
                        "same dashboard drawn by matplotlib: DIR/dashboard.png), all (both, and one PNG per "
                        "finding, DIR/finding_<mode>.png) or none")
    p.add_argument("--no-plot", action="store_const", const="none", dest="plot", help="same as --plot none")
    p.add_argument("--fail-on", choices=FAIL_LEVELS, default=None, metavar="{" + ",".join(FAIL_LEVELS) + "}",
                   help="exit with status %d when a finding at or above this level is present (info: any detected "
                        "failure mode or health check; warning: severity medium or high; critical: high), for "
                        "CI; without it diagnose exits 0 whatever it finds" % FINDINGS_STATUS)
    p.add_argument("--no-validity", action="store_true", help="skip the mean-field validity fit")
    p.add_argument("--bayes", choices=("three_phase", "state_space"), default=None,
                   help="also fit this grpojax.fit NUTS model to the reward curve; its posterior P(C <= 0) "
                        "feeds the instability detector (slow: minutes on a CPU)")
    p.add_argument("--bayes-samples", type=Int(1, 10**6, what="NUTS samples per chain"), default=300, help="NUTS warmup = samples per chain (default 300)")
    p.add_argument("--seed", type=SEED, default=DEFAULT_SEED, help=f"PRNG seed of the NUTS fit, in [0, 2^32) (default {DEFAULT_SEED})")
    p.add_argument("--forecast", type=Real(0, 1, lo_open=True, hi_open=True, what="a fraction of the run"), default=None, metavar="PREFIX",
                   help="draw grpojax.fit.forecast_window's band (fitted on this fraction of the run, e.g. "
                        "0.5) over the reward on the dashboard (slow: a posterior fit)")
    add_bounds_arg(p, effect="the --forecast and its band are clipped to it")
    add_table_output_args(p, json_help="one row per check (run, mode, verdict, severity, level, reason, advice) as JSON: "
                                       "on stdout (no FILE, or -) instead of the report, or into FILE")
    p.set_defaults(func=run)


def _config(overrides: list[str]):
    from grpojax._config import apply_overrides  # noqa: PLC0415
    from grpojax.diagnose import DEFAULT_CONFIG  # noqa: PLC0415

    from grpojax._errors import UserError  # noqa: PLC0415

    try:
        return apply_overrides(DEFAULT_CONFIG, overrides) if overrides else DEFAULT_CONFIG
    except UserError as exc:  # the key is named; say which flag it came from
        raise CLIError(f"--set: {exc}") from None


PLOTS = ("dashboard", "png", "all", "none")  # --plot: dashboard is the SVG; png and all draw with matplotlib
FAIL_LEVELS = ("info", "warning", "critical")
FINDINGS_STATUS = 3  # --fail-on: 0 nothing at or above the level, 1 and 2 are the errors of every command
_LEVEL_RANK = {"none": 0, "low": 0, "medium": 1, "high": 2}  # a finding's severity level -> the FAIL_LEVELS index


def failing_findings(reports: list[dict], level: str) -> list[tuple[str, str, str]]:
    """``(run, mode, severity level)`` of each finding at or above ``level`` (one of :data:`FAIL_LEVELS`).

    A finding is a failure mode or health check whose verdict is ``detected``; ``info`` takes every one,
    ``warning`` those of severity level medium or high, ``critical`` those of level high. The mean-field
    validity check speaks of the oscillator model, not of the run, and never fails a build.
    """
    need = FAIL_LEVELS.index(level)
    return [(rp.get("run"), m, res["level"]) for rp in reports for m, res in rp["results"].items()
            if res["verdict"] == "detected" and _LEVEL_RANK.get(res["level"], 0) >= need]


WIDTH = 80  # the report fits an 80-column terminal
_STYLE = {"detected": "bold red", "violated": "bold yellow", "not_detected": "green", "valid": "green",
          "insufficient_data": "dim"}


def _short_stat(res) -> str:
    """The statistic that decided the verdict, compactly (``name=value``)."""
    if res.verdict == "insufficient_data":
        return "-"
    if res.detected:
        shown = [e for e in res.evidence if e.triggered]
    else:  # a statistic past its threshold that a gate held back first (marked "[gated]"), else the first
        # measure of the failure (a blow-up flag or a gate only when there is nothing else)
        compared = [e for e in res.evidence if e.op != "info"]
        shown = ([e for e in compared if e.gated]
                 or [e for e in compared if e.kind not in ("gate", "flag") and e.role == "decisive"]
                 or [e for e in compared if e.kind != "gate"])
    shown = shown or [e for e in res.evidence if e.op != "info"]
    if not shown:
        return "-"
    return shown[0].short()


def report_lines(diagnosis, width: int = WIDTH) -> list[tuple[str, str]]:
    """The report as ``(line, style)`` pairs, no line longer than ``width``.

    One line per detector -- mode, verdict, severity, the deciding statistic -- and below a detected
    (or insufficient) one, indented: its evidence and "change: what to change".
    """
    import textwrap  # noqa: PLC0415

    from grpojax.diagnose import COMPARISON_RE  # noqa: PLC0415

    def lines_of(text: str, **kw) -> list[str]:
        # wrapped at word boundaries; a printed comparison ("0.98 >= 0.8") is never split across lines
        text = COMPARISON_RE.sub(lambda m: m.group(0).replace(" ", "\xa0"), text)
        return [x.replace("\xa0", " ") for x in textwrap.wrap(text, break_long_words=True, break_on_hyphens=False,
                                                              **kw)]

    def wrap(text: str, indent: str) -> list[str]:
        return lines_of(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ") or [indent]

    lines = [(x, "bold") for x in wrap(f"grpojax diagnose: {diagnosis.run}", "")]
    main = getattr(diagnosis, "main_finding", None)
    if main:  # the finding to read first, above the table (a collapse when there is one)
        res = diagnosis.results[main]
        at = (res.panel_data or {}).get("collapse", {}).get("onset") if main == "collapse" else None
        lines += [(x, "bold") for x in wrap(f"main finding: {main.replace('_', ' ')}"
                                            + (f" at step {at:g}" if at is not None else ""), "")]
    lines.append((f"{'mode':22s}{'verdict':14s}{'severity':12s}statistic"[:width], "bold"))
    for mode, res in diagnosis.results.items():
        verdict = {"insufficient_data": "no data", "not_detected": "not detected"}.get(res.verdict, res.verdict)
        sev = f"{res.severity:.2f} {res.level}" if res.detected else "-"
        head = f"{mode.replace('_', ' '):22s}{verdict:14s}{sev:12s}"
        stat = _short_stat(res)
        # the statistic wraps at word boundaries under its column (never cut mid-word); a name longer than
        # the column (a reward function's) moves the statistic onto its own indented lines instead
        room = max(width - len(head), 20)
        if max((len(w) for w in stat.split()), default=0) <= room:
            body = lines_of(stat, width=room) or [""]
            lines.append((head + body[0], _STYLE.get(res.verdict, "")))
            lines += [(" " * len(head) + x, _STYLE.get(res.verdict, "")) for x in body[1:]]
        else:
            lines.append((head.rstrip(), _STYLE.get(res.verdict, "")))
            lines += [(x, _STYLE.get(res.verdict, "")) for x in wrap(stat, "    ")]
        if res.verdict == "insufficient_data":
            lines += [(x, "dim") for x in wrap(res.reason, "    ")]
        elif res.detected:
            for e in [e for e in res.evidence if e.triggered][:3]:
                lines += [(x, "") for x in wrap(e.describe().lstrip("!"), "    ")]
            if mode == "collapse":
                lines += [(x, "") for x in wrap(res.reason, "    ")]
            if res.advice:
                lines += [(x, "italic") for x in wrap("change: " + res.advice, "    ")]
    lines += _event_lines(diagnosis, wrap)
    return lines


_MAX_EVENT_LINES = 12


def _event_lines(diagnosis, wrap) -> list[tuple[str, str]]:
    """The events of every series (step order, the largest first when there are too many to list) and one
    line per series that could not be segmented."""
    events = getattr(diagnosis, "events", None) or {}
    found = [e for se in events.values() for e in se.events]
    notes = [se.note for se in events.values() if se.note]
    if not found and not notes:
        return []
    out = [(x, "bold") for x in wrap(f"events: {len(found)} abrupt level shift{'s' if len(found) != 1 else ''} "
                                     f"in {len(events)} series", "")]
    shown = sorted(sorted(found, key=lambda e: -abs(e.size))[:_MAX_EVENT_LINES], key=lambda e: (e.step, e.metric))
    for e in shown:
        out += [(x, "") for x in wrap(e.describe(), "    ")]
    if len(found) > len(shown):
        out += [(x, "dim") for x in wrap(f"... {len(found) - len(shown)} smaller ones in diagnosis.json", "    ")]
    out += [(x, "dim") for note in notes for x in wrap(note, "    ")]
    return out


def _bayes_fit(r, args):
    """NUTS fit of the reward curve (grpojax.fit.fit_bayes); its p_regime feeds the instability detector."""
    import jax  # noqa: PLC0415

    from grpojax.fit import fit_bayes  # noqa: PLC0415

    s, y = r.series("reward_mean")
    n = int(args.bayes_samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = fit_bayes(s, y, model=args.bayes, key=jax.random.key(args.seed), num_warmup=n, num_samples=n,
                        num_chains=2, progress_bar=sys.stderr.isatty())
    console.print(f"{r.name}: NUTS {args.bayes} fit, P(regime) = "
                  + ", ".join(f"{k} {v:.2f}" for k, v in fit.p_regime.items())
                  + ("" if fit.converged else " (not converged: " + "; ".join(fit.warnings)[:200] + ")"))
    return fit


def _warn_outside_bounds(r, bounds) -> None:
    """A warning when the logged reward leaves ``--bounds`` (the forecast is clipped to a range the data break)."""
    import numpy as np  # noqa: PLC0415

    if bounds is None:
        return
    _, y = r.series("reward_mean")
    y = y[np.isfinite(y)]
    if y.size and (y.min() < bounds[0] or y.max() > bounds[1]):
        err_console.print(f"warning: {r.name}: reward_mean ranges over [{y.min():.4g}, {y.max():.4g}], outside --bounds "
                          f"{bounds[0]:g} {bounds[1]:g}: the forecast is clipped to a range the data leave",
                          markup=False, highlight=False, soft_wrap=True)


def _workers(n_runs: int) -> int:
    """Worker processes for a log of several runs: the cores this process may use, at most one per run."""
    from grpojax._host_devices import usable_cores  # noqa: PLC0415

    return max(1, min(usable_cores(), n_runs))


def _figures(r, d, folder, out, plot: str, forecast=None) -> dict:
    """Draw the figures ``--plot`` asks for of one diagnosed run; their paths (relative to ``out``) for the report.

    ``forecast``: the reward forecast band ``(steps, median, lo, hi)`` or None.
    """
    got = {}
    if plot in ("dashboard", "all"):  # the SVG, from the arrays: no matplotlib
        from grpojax.plot import diagnosis_dashboard_svg  # noqa: PLC0415

        diagnosis_dashboard_svg(r, d, folder / "dashboard.svg", forecast=forecast)
        got["dashboard"] = (folder / "dashboard.svg").relative_to(out).as_posix()
    if plot not in ("png", "all"):
        return got
    from grpojax.plot import diagnosis_dashboard, finding_figure  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diagnosis_dashboard(r, d, folder / "dashboard.png", forecast=forecast)  # a bare Figure: nothing to close
        got["dashboard_png"] = (folder / "dashboard.png").relative_to(out).as_posix()
        got.setdefault("dashboard", got["dashboard_png"])
        if plot == "all":
            got["finding_figures"] = {}
            for mode, res in d.results.items():
                if res.detected:
                    finding_figure(r, res, folder / f"finding_{mode}.png")
                    got["finding_figures"][mode] = (folder / f"finding_{mode}.png").relative_to(out).as_posix()
    return got


_POOL_STATE: dict = {}


def _one_run(i: int):
    """Diagnose run ``i`` of the pool's runs (the report lines, its report dict; the figures and the
    per-run diagnosis.json written): what the sequential loop does, without --bayes / --forecast."""
    from grpojax.diagnose import diagnose  # noqa: PLC0415

    st = _POOL_STATE
    r, folder, out, cfg, args, width = st["runs"][i], st["folders"][i], st["out"], st["cfg"], st["args"], st["width"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = diagnose(r, config=cfg, validity=not args.no_validity)
        lines = report_lines(d, width)
        rep = {"source": r.source, "format": r.format, **d.to_dict()}
    if args.plot != "none":
        rep.update(_figures(r, d, folder, out, args.plot))
    if folder != out:
        write_json(folder, "diagnosis.json", _payload(args, cfg, [rep]))
    return lines, rep


def _warm_imports(args) -> None:
    """Import matplotlib (~0.3 s) before a drawing worker is forked, which inherits it (--plot png and all)."""
    if args.plot in ("png", "all"):
        import matplotlib.figure  # noqa: F401, PLC0415
        import matplotlib.backends.backend_agg  # noqa: F401, PLC0415

        from grpojax.plot import diagnosis_dashboard, finding_figure  # noqa: F401, PLC0415


def _in_pool(runs, folders, out, cfg, args, width):
    """``_one_run`` over every run: the first here (its report comes at once, and every module the detectors and
    the figures import on first use is loaded once, before the fork), the others in worker processes forked from
    this one (the runs are not pickled)."""
    import multiprocessing  # noqa: PLC0415
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

    _POOL_STATE.update(runs=runs, folders=folders, out=out, cfg=cfg, args=args, width=width)
    try:
        yield _one_run(0)
        with ProcessPoolExecutor(_workers(len(runs) - 1), mp_context=multiprocessing.get_context("fork")) as ex:
            yield from ex.map(_one_run, range(1, len(runs)))
    finally:
        _POOL_STATE.clear()


_DRAW_STATE: dict = {}


def _warm_drawer() -> None:
    _warm_imports(_DRAW_STATE["args"])


def _draw_run(i: int, d, band) -> dict:
    st = _DRAW_STATE
    return _figures(st["runs"][i], d, st["folders"][i], st["out"], st["args"].plot, band)


class _Drawer:
    """The matplotlib figures (``--plot png`` and ``all``) drawn in one worker process forked as soon as the log
    is read: it imports matplotlib while this process diagnoses, and draws while this one prints the report
    and writes the JSON (a second core's worth of wall time). The SVG dashboard alone (the default: a few
    milliseconds, no matplotlib), with one core, or once JAX is loaded (a fork of a process running JAX's
    threads may deadlock), the figures are drawn here, in order, after the run's report is printed."""

    def __init__(self, runs, folders, out, args):
        self.ex = None
        _DRAW_STATE.update(runs=runs, folders=folders, out=out, args=args)
        if args.plot in ("png", "all") and _workers(2) > 1 and "jax" not in sys.modules:
            import multiprocessing  # noqa: PLC0415
            from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415

            self.ex = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
            self.ex.submit(_warm_drawer)  # forks the worker now

    def draw(self, i: int, d, band):
        """A callable returning run ``i``'s figure paths once they are written."""
        if self.ex is None:
            got = _draw_run(i, d, band)
            return lambda: got
        return self.ex.submit(_draw_run, i, d, band).result

    def close(self) -> None:
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)
        _DRAW_STATE.clear()


def _payload(args, cfg, reports: list[dict]) -> dict:
    """diagnosis.json: the schema version of grpojax's JSON, the log, the thresholds and the runs' reports."""
    return {"schema_version": SCHEMA_VERSION, "log": str(args.log), "config": cfg.to_dict(), "runs": reports}


def run(args) -> int:
    from grpojax.diagnose import diagnose  # noqa: PLC0415

    cfg = _config(args.set)
    if args.forecast is not None and not 0.0 < args.forecast < 1.0:
        raise CLIError(f"--forecast must be a fraction of the run in (0, 1), got {args.forecast}")
    if args.forecast is not None and args.forecast > 0.9:
        raise CLIError(f"--forecast {args.forecast:g} leaves less than the final 10% of the run, whose mean is "
                       "forecast; use at most 0.9")
    bounds = check_bounds_arg(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = read_runs(args.log, args.format, args.run, **log_read_kwargs(args))
    for w in caught:
        err_console.print(f"warning: {str(w.message).splitlines()[0]}", markup=False, highlight=False)
    out = out_dir(args.out)
    folders = run_folders(out, runs)
    reports = []
    width = min(WIDTH, console.width or WIDTH)
    say = err_console if to_stdout(args) else console  # stdout carries --json / --csv rows
    if len(runs) > 1 and args.bayes is None and args.forecast is None and _workers(len(runs)) > 1:
        # several runs, nothing that needs JAX: one worker process per core, reports printed in order
        for lines, rep in _in_pool(runs, folders, out, cfg, args, width):
            for line, style in lines:
                say.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)
            reports.append(rep)
    else:  # the report of each run printed first, its figures drawn beside by a worker process
        drawer, pending = _Drawer(runs, folders, out, args), []
        try:
            for i, (r, folder) in enumerate(zip(runs, folders)):
                pending.append(_diagnose_one(i, r, args, cfg, bounds, width, say, drawer, diagnose))
            for rep, figures in pending:
                rep.update(figures())
                reports.append(rep)
        finally:
            drawer.close()
        if len(runs) > 1:
            for rep, folder in zip(reports, folders):
                write_json(folder, "diagnosis.json", _payload(args, cfg, [rep]))
    path = write_json(out, "diagnosis.json", _payload(args, cfg, reports))
    where = "" if len(runs) == 1 else f" (one folder per run: {', '.join(f.name for f in folders)})"
    rows = [{"run": rp.get("run"), "mode": m, "verdict": res["verdict"], "severity": res["severity"],
             "level": res["level"], "reason": res["reason"], "advice": res["advice"]}
            for rp in reports for m, res in rp["results"].items()]
    emit_rows(args, rows, extra={"log": str(args.log), "forecasts": {rp.get("run"): rp["forecast"] for rp in reports
                                                                     if "forecast" in rp}})
    figures = {"none": "", "dashboard": " and the dashboard SVG(s)", "png": " and the dashboard PNG(s)",
               "all": " and the dashboard SVG(s), PNG(s) and finding PNG(s)"}[args.plot]
    say.print(f"wrote {path}" + figures + where)
    if args.fail_on is not None:
        failing = failing_findings(reports, args.fail_on)
        if failing:
            named = ", ".join(f"{m} ({lv})" if len(runs) == 1 else f"{rn}: {m} ({lv})" for rn, m, lv in failing)
            err_console.print(f"grpojax diagnose: {len(failing)} finding{'s' if len(failing) != 1 else ''} at or "
                              f"above --fail-on {args.fail_on}: {named}; exit status {FINDINGS_STATUS}",
                              markup=False, highlight=False, soft_wrap=True)
            return FINDINGS_STATUS
    return 0


def _diagnose_one(i, r, args, cfg, bounds, width, say, drawer, diagnose):
    """Diagnose one run, print its report, hand its figures to ``drawer``: ``(report dict, figure paths)``."""
    fit = _bayes_fit(r, args) if args.bayes else None
    d = diagnose(r, config=cfg, validity=not args.no_validity, fit=fit)
    for line, style in report_lines(d, width):
        say.print(line, style=style or None, markup=False, highlight=False, soft_wrap=True)
    rep = {"source": r.source, "format": r.format, **d.to_dict()}
    fc = None
    if args.forecast is not None:
        if r.count("reward_mean") >= 8:
            from grpojax.fit import forecast_window  # noqa: PLC0415

            fc = forecast_window(r, prefix=args.forecast, bounds=bounds)
            _warn_outside_bounds(r, bounds)
            rep["forecast"] = {"method": fc.method, "status": fc.status, "prefix": args.forecast,
                               "mean": fc.mean, "lo": fc.lo, "hi": fc.hi, "level": fc.level,
                               "window": list(fc.window)}
            say.print(f"forecast of the final-window mean reward from the first "
                      f"{args.forecast:.0%}: {fc.mean:.4g} [{fc.lo:.4g}, {fc.hi:.4g}] ({fc.level:.0%}, "
                      f"{fc.method}, {fc.status})", markup=False, highlight=False, soft_wrap=True)
        else:
            err_console.print(f"warning: {r.name}: no forecast: it needs >= 8 points of reward_mean "
                              f"(has {r.count('reward_mean')})", markup=False, highlight=False)
    if args.plot == "none":
        return rep, dict
    from grpojax._forecast_band import forecast_band  # noqa: PLC0415  (no matplotlib: arrays only)

    return rep, drawer.draw(i, d, forecast_band(fc))
