"""Command-line latency: grpojax beside rldoctor 0.2.0 on the same files, in the same run.

What a user waits for, each command a fresh process timed wall-clock from start to exit (or, for
``watch``, to its first report):

- ``diagnose`` of one 1,000-step log (grpojax: report, diagnosis.json and the dashboard PNG, the
  defaults; rldoctor: its JSON report);
- ``diagnose`` of a folder of 20 runs (grpojax: one call on the folder; rldoctor reads one run per call,
  so 20 calls, summed);
- ``--help``;
- ``grpojax fit LOG --prefix 0.3`` (forecast from the first 30 %; rldoctor has no equivalent);
- ``grpojax watch LOG``: seconds until its first report is written (``--json``).

First and second calls apart: each repeat starts with an empty JAX compilation cache
(``GRPOJAX_JAX_CACHE`` set to a new folder), runs the command once (first call) and again with the
cache the first call filled (second call). Medians over ``--repeats`` (>= 3) repeats. The logs are
simulated (a saturating 0/1-reward curve with binomial noise, entropy, KL, grad norm, completion
length) and written as plain JSONL, which both tools read.

Budgets (on 2 idle cores): diagnose of a 1,000-step log <= 3 s, a 20-run folder <= 20 s, fit --prefix
<= 10 s, watch's first report <= 5 s, --help <= 1 s. Run it alone: ``flock /tmp/grpojax-heavy.lock
python benchmarks/cli_latency.py``; the machine line (cores, load average before and after, thread
settings) is printed with the table, since a loaded machine stretches every number.

Usage:
  python benchmarks/cli_latency.py [--repeats 3] [--out out/bench/cli_latency]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import machine_line  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
BIN = pathlib.Path(sys.executable).parent
BUDGETS = {"diagnose 1000-step log": 3.0, "diagnose 20-run folder": 20.0, "--help": 1.0,
           "fit --prefix 0.3": 10.0, "watch: first report": 5.0}


def simulated_run(path: pathlib.Path, n: int, seed: int) -> None:
    """A plain-JSONL GRPO log of ``n`` steps (keys both tools know)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    tau = rng.uniform(0.1, 0.4) * n
    m = rng.uniform(0.05, 0.3) + rng.uniform(0.3, 0.6) * (1 - np.exp(-t / tau))
    m = np.clip(m, 0.01, 0.99)
    reward = rng.binomial(256, m) / 256
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({
                "step": int(t[i]), "reward_mean": float(reward[i]), "reward_std": float(np.sqrt(m[i] * (1 - m[i]))),
                "entropy": float(0.6 * np.exp(-t[i] / (2 * n))), "kl": float(0.002 * t[i] / n),
                "grad_norm": float(0.3 * np.exp(0.15 * rng.standard_normal())),
                "response_length": float(300 + 50 * rng.standard_normal()),
            }) + "\n")


def timed(cmd: list[str], env: dict, *, until_file: pathlib.Path | None = None, limit: float = 600.0) -> float:
    """Wall seconds of ``cmd`` from start to exit (or until ``until_file`` exists and is non-empty, then the
    process is stopped). A command that fails raises with its last output."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if until_file is None:
        out, _ = proc.communicate(timeout=limit)
        dt = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {out[-1500:]}")
        return dt
    while time.perf_counter() - t0 < limit:
        if until_file.is_file() and until_file.stat().st_size > 0:
            dt = time.perf_counter() - t0
            proc.terminate()
            proc.communicate(timeout=30)
            return dt
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} before its first report: {out[-1500:]}")
        time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"{' '.join(cmd)}: no report within {limit} s")


def write_report(out, args, tasks, times, failures, load_before, *, final: bool) -> None:
    """Write the medians so far (after every repeat: an interrupted run still leaves its table)."""
    load_after = machine_line()
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [f"machine before: {load_before}", f"machine after:  {load_after}",
             f"medians of {len(next(iter(times.values()), []))} of {args.repeats} repeats (wall seconds; first call: empty JAX cache; second call: the cache the "
             "first filled)", "",
             "| command | budget | grpojax first | grpojax second | rldoctor first | rldoctor second |",
             "|---|---|---|---|---|---|"]

    def cell(task, tool, call):
        v = med.get((task, tool, call))
        if v is None:
            return "failed" if (task, tool) in failures else "n/a"
        return f"{v:.2f}"

    for task in tasks:
        lines.append(f"| {task} | <= {BUDGETS[task]:g} | {cell(task, 'grpojax', 'first')} | "
                     f"{cell(task, 'grpojax', 'second')} | {cell(task, 'rldoctor', 'first')} | "
                     f"{cell(task, 'rldoctor', 'second')} |")
    lines += [f"failed: {t} ({tool}): {msg}" for (t, tool), msg in failures.items()]
    if final:
        print("\n".join(lines))
    (out / "cli_latency.json").write_text(json.dumps(
        {"machine_before": load_before, "machine_after": load_after, "repeats": args.repeats,
         "budgets": BUDGETS, "failures": {"|".join(k): v for k, v in failures.items()}, "times": {"|".join(k): v for k, v in times.items()},
         "medians": {"|".join(k): v for k, v in med.items()}}, indent=1))
    (out / "cli_latency.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="repeats (>= 3), each a first and a second call")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "out" / "bench" / "cli_latency")
    ap.add_argument("--tasks", default=",".join(BUDGETS), help="comma-separated subset of: " + ", ".join(BUDGETS))
    ap.add_argument("--smoke", action="store_true", help="allow --repeats < 3 (a check that it runs, not a benchmark)")
    args = ap.parse_args(argv)
    if args.repeats < 3 and not args.smoke:
        ap.error(f"--repeats must be >= 3 (medians), got {args.repeats}")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = [t for t in tasks if t not in BUDGETS]
    if bad:
        ap.error(f"--tasks: unknown {bad}; known: {list(BUDGETS)}")
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    data = out / "data"
    folder = data / "runs20"
    folder.mkdir(parents=True)
    one = data / "run1000.jsonl"
    simulated_run(one, 1000, 0)
    for k in range(20):
        simulated_run(folder / f"run{k:02d}.jsonl", int(np.random.default_rng(100 + k).integers(150, 600)), 100 + k)
    grpojax, rldoctor = str(BIN / "grpojax"), shutil.which("rldoctor", path=str(BIN)) or shutil.which("rldoctor")
    load_before = machine_line()

    def cmds(work: pathlib.Path) -> dict[str, dict]:
        rl = {}
        if rldoctor:
            rl = {"diagnose 1000-step log": [[rldoctor, "diagnose", str(one), "-f", "json", "-o", str(work / "rl.json")]],
                  "diagnose 20-run folder": [[rldoctor, "diagnose", str(f), "-f", "json", "-o", str(work / f"rl-{f.stem}.json")]
                                             for f in sorted(folder.iterdir())],
                  "--help": [[rldoctor, "--help"]]}
        return {
            "diagnose 1000-step log": {"grpojax": [[grpojax, "diagnose", str(one), "--out", str(work / "d1")]],
                                        "rldoctor": rl.get("diagnose 1000-step log")},
            "diagnose 20-run folder": {"grpojax": [[grpojax, "diagnose", str(folder), "--out", str(work / "d20")]],
                                       "rldoctor": rl.get("diagnose 20-run folder")},
            "--help": {"grpojax": [[grpojax, "--help"]], "rldoctor": rl.get("--help")},
            "fit --prefix 0.3": {"grpojax": [[grpojax, "fit", str(one), "--prefix", "0.3", "--out", str(work / "fit")]],
                                 "rldoctor": None},
            "watch: first report": {"grpojax": "watch", "rldoctor": None},
        }

    times: dict[tuple[str, str, str], list[float]] = {}
    failures: dict[tuple[str, str], str] = {}
    for rep in range(args.repeats):
        cache = pathlib.Path(tempfile.mkdtemp(prefix="grpojax-jax-cache-"))
        env = {**os.environ, "GRPOJAX_JAX_CACHE": str(cache), "NO_COLOR": "1", "COLUMNS": "100"}
        for call in ("first", "second"):
            work = out / f"work{rep}-{call}"
            work.mkdir(parents=True)
            for task, by_tool in cmds(work).items():
                if task not in tasks:
                    continue
                for tool, cl in by_tool.items():
                    if cl is None:
                        continue
                    try:
                        if cl == "watch":
                            report = work / "watch.json"
                            dt = timed([grpojax, "watch", str(one), "--json", str(report), "--no-live",
                                        "--idle-timeout", "600"], env, until_file=report)
                        else:
                            dt = sum(timed(c, env) for c in cl)
                    except RuntimeError as e:  # reported, not timed
                        failures[(task, tool)] = str(e).splitlines()[-1][-300:]
                        print(f"repeat {rep + 1} {call:6s} {tool:8s} {task:24s} FAILED: {failures[(task, tool)]}")
                        continue
                    times.setdefault((task, tool, call), []).append(dt)
                    print(f"repeat {rep + 1} {call:6s} {tool:8s} {task:24s} {dt:7.2f} s", flush=True)
        shutil.rmtree(cache, ignore_errors=True)
        write_report(out, args, tasks, times, failures, load_before, final=rep + 1 == args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
