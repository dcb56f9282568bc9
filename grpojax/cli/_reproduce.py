"""``grpojax reproduce``: run every experiment and write ``report.md`` (claims of the paper, verdicts, figures).

Each experiment is a script ``experiments/<name>.py`` with ``--quick`` and ``--out DIR`` that writes
``summary.json`` (``claims`` rows: claim, paper, measured, verdict; ``figures``) and PNG figures, through
the experiment harness :mod:`grpojax._experiment`. They run
as subprocesses (two at a time by default, so one experiment's failure or memory cannot take the report
down); the report lists every claim and links every figure, and says plainly which experiments failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import pathlib
import subprocess
import sys
import time

from grpojax._experiment import SUMMARY_FILE
from grpojax._io import write_text_atomic
from grpojax.cli._common import CLIError, console, out_dir, progress, write_json

EXPERIMENTS = (
    ("thresholds_table", "Exact vs closed-form stability thresholds"),
    ("bandit_stability", "Softmax-bandit GRPO: threshold, transition, group size"),
    ("sde_validation", "Stochastic oscillator: diffrax vs exact transition"),
    ("fit_real_runs", "Reward-curve laws and Bayesian fits on real and simulated runs"),
    ("fit_calibration", "Calibration of the state-space posterior on simulated curves"),
    ("failure_benchmark", "Failure-mode separation on labelled runs"),
    ("grpo_tiny", "GRPO loop on a tiny decoder (tiny-arith)"),
    ("advisor_validation", "Hyperparameter advisor vs measured bandit outcomes"),
    ("diagnose_real_runs", "Detectors on hand-labelled real runs, beside rldoctor"),
    ("forecast_real_runs", "Window forecasts of real runs against three baselines"),
    ("network_stability_atlas", "Stability map of a policy network against the exact threshold"),
    ("transformer_atlas", "Stability map of a transformer LM against eta* and the escape model"),
)

EXAMPLE = """Example:
  grpojax reproduce --quick --out out/report        # 9 minutes measured on an idle 2-core CPU
  grpojax reproduce --only thresholds_table --out out/report
"""


def register(sub) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run every experiment and write report.md with figures",
        description=__doc__.split("\n\n")[0] + "\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small, fast versions of every experiment")
    p.add_argument("--out", default="out/report", help="output folder (default out/report)")
    p.add_argument("--only", action="append", default=None, metavar="NAME",
                   help=f"run only these experiments (repeatable); known: {', '.join(n for n, _ in EXPERIMENTS)}")
    p.add_argument("--jobs", type=int, default=2, help="experiments run in parallel (default 2)")
    p.add_argument("--experiments-dir", default=None, help="folder of the experiment scripts (default: the checkout's experiments/)")
    p.set_defaults(func=run)


def _experiments_dir(arg: str | None) -> pathlib.Path:
    candidates = [pathlib.Path(arg)] if arg else [
        pathlib.Path(__file__).resolve().parents[2] / "experiments",
        pathlib.Path.cwd() / "experiments",
    ]
    for c in candidates:
        if c.is_dir():
            return c
    raise CLIError(f"experiments folder not found (looked in {', '.join(map(str, candidates))}); pass --experiments-dir")


def _run_one(script: pathlib.Path, out: pathlib.Path, quick: bool) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(script), "--out", str(out.resolve())] + (["--quick"] if quick else [])
    shown = " ".join([os.path.relpath(script), "--out", str(out)] + (["--quick"] if quick else []))
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONUNBUFFERED="1")
    t0 = time.perf_counter()
    with open(out / "log.txt", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=script.parents[1])
    seconds = time.perf_counter() - t0
    summary_path = out / SUMMARY_FILE
    summary = None
    if summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text())
        except json.JSONDecodeError as exc:
            summary = None
            err = f"summary.json is not valid JSON: {exc}"
    if proc.returncode != 0 or summary is None:
        tail = (out / "log.txt").read_text().strip().splitlines()[-1:] or ["(no output)"]
        err = f"exit code {proc.returncode}: {tail[0][:300]}" if proc.returncode != 0 else "no summary.json written"
        return dict(status="failed", error=err, seconds=seconds, command=shown)
    return dict(status="ok", summary=summary, seconds=seconds, command=shown)


def _md_escape(x) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def write_report(out: pathlib.Path, results: dict, quick: bool) -> pathlib.Path:
    lines = ["# grpojax reproduction report", ""]
    lines.append(f"Mode: {'quick' if quick else 'full'}. Generated by `grpojax reproduce{' --quick' if quick else ''} --out {out}`.")
    lines.append("Each row is one claim; *measured* is what this run computed on this machine.")
    lines.append("")
    paper_rows, own_rows = [], []
    for name, title in EXPERIMENTS:
        r = results.get(name)
        if r is None:
            continue
        if r["status"] != "ok":
            paper_rows.append((name, dict(claim=f"{title}", paper="—", measured=f"experiment failed: {r['error']}", verdict="error")))
            continue
        for c in r["summary"].get("claims", []):
            (paper_rows if c.get("paper") else own_rows).append((name, c))
    for heading, rows in (("Claims of the paper", paper_rows), ("grpojax's own additions", own_rows)):
        lines += [f"## {heading}", "", "| experiment | claim | paper | measured | verdict |", "|---|---|---|---|---|"]
        for name, c in rows:
            lines.append(f"| {name} | {_md_escape(c.get('claim'))} | {_md_escape(c.get('paper') or '—')} | "
                         f"{_md_escape(c.get('measured'))} | **{_md_escape(c.get('verdict'))}** |")
        lines.append("")
    lines += ["## Experiments", ""]
    for name, title in EXPERIMENTS:
        r = results.get(name)
        if r is None:
            continue
        lines.append(f"### {title} (`{name}`)")
        lines.append("")
        lines.append(f"Command: `python {r['command']}` — {r['seconds']:.0f} s, status **{r['status']}**.")
        lines.append("")
        if r["status"] != "ok":
            lines.append(f"Error: {r['error']} (full log: `{name}/log.txt`).")
            lines.append("")
            continue
        for fig in r["summary"].get("figures", []):
            lines.append(f"![{name}: {fig}]({name}/{fig})")
            lines.append("")
    path = out / "report.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


def run(args) -> int:
    out = out_dir(args.out)
    exp_dir = _experiments_dir(args.experiments_dir)
    known = {n for n, _ in EXPERIMENTS}
    selected = args.only or [n for n, _ in EXPERIMENTS]
    for n in selected:
        if n not in known:
            raise CLIError(f"unknown experiment {n!r}; expected one of {sorted(known)}")
    if args.jobs < 1:
        raise CLIError(f"--jobs must be >= 1, got {args.jobs}")
    results: dict = {}
    todo = []
    for n in selected:
        script = exp_dir / f"{n}.py"
        if not script.exists():
            results[n] = dict(status="failed", error=f"script {script} not found", seconds=0.0, command=str(script))
        else:
            todo.append((n, script))
    with progress() as bar, cf.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        task = bar.add_task("experiments", total=len(todo))
        futures = {pool.submit(_run_one, s, out / n, args.quick): n for n, s in todo}
        for fut in cf.as_completed(futures):
            n = futures[fut]
            results[n] = fut.result()
            status = results[n]["status"]
            bar.console.print(f"{n}: {status} ({results[n]['seconds']:.0f} s)")
            bar.advance(task)
    report = write_report(out, results, args.quick)
    write_json(out, "reproduce.json", {n: {k: v for k, v in r.items() if k != "summary"} | {
        "claims": r.get("summary", {}).get("claims", [])} for n, r in results.items()})
    failed = [n for n, r in results.items() if r["status"] != "ok"]
    console.print(f"wrote {report}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
