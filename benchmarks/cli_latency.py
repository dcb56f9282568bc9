"""Command-line latency: grpojax beside rldoctor 0.2.0 on the same files, in the same run.

What a user waits for, each command a fresh process timed wall-clock from start to exit (or, for
``watch``, to its first report), with its peak resident memory (``os.wait4``: the largest process of the
command, a worker it forked included):

- ``diagnose`` of one 1,000-step log (grpojax: report, diagnosis.json and the SVG dashboard, the
  defaults; rldoctor: its JSON report);
- ``diagnose`` of a real TRL ``trainer_state.json`` of 1,000 training steps (200 logged rows), when
  ``--real-trl`` names one;
- ``diagnose`` of a folder of 20 runs (grpojax: one call on the folder; rldoctor reads one run per call,
  so 20 calls, summed);
- ``--help``;
- ``grpojax fit LOG --prefix 0.3`` (forecast from the first 30 %; rldoctor has no equivalent);
- ``grpojax watch LOG``: seconds until its first report is written (``--json``);
- ``diagnose`` of a verl console log of 10^6 lines: one metric line per step (the 58 metrics of a real
  verl run) among twelve lines of Ray, vLLM and progress output, as a real verl console interleaves them
  (about 77,000 steps, 0.2 GB); rldoctor does not read verl console logs, and is given the same steps as
  verl's JSONL file logger writes them.

grpojax's modules are byte-compiled first (``compileall``), as an installed package's are. First and second
calls apart: each repeat starts with an empty JAX compilation cache
(``GRPOJAX_JAX_CACHE`` set to a new folder), runs the command once (first call) and again with the
cache the first call filled (second call). Medians over ``--repeats`` (>= 3) repeats. The logs are
simulated (a saturating 0/1-reward curve with binomial noise, entropy, KL, grad norm, completion
length) and written as plain JSONL, which both tools read; the verl log is generated in a temporary
folder and removed afterwards.

Targets (on 2 idle cores): diagnose of a 1,000-step log <= 1 s with its dashboard and <= 2x rldoctor, a
20-run folder <= 5 s, fit --prefix <= 2 s, watch's first report <= 0.5 s, --help <= 0.3 s, the 10^6-line
verl log <= 10 s and <= 1 GB. Run it alone: ``flock /tmp/grpojax-heavy.lock python
benchmarks/cli_latency.py``; each command is printed as it runs, and the machine line (cores, load
average before and after, thread settings) is printed with the table, since a loaded machine stretches
every number.

Usage:
  python benchmarks/cli_latency.py [--repeats 3] [--out out/bench/cli_latency] [--rldoctor PATH]
                                   [--real-trl TRAINER_STATE.json] [--tasks ...]
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
BUDGETS = {"diagnose 1000-step log": 1.0, "diagnose real TRL log": 1.0, "diagnose 20-run folder": 5.0,
           "--help": 0.3, "fit --prefix 0.3": 2.0, "watch: first report": 0.5, "diagnose 10^6-line verl log": 10.0}
MEMORY_BUDGETS_MB = {"diagnose 10^6-line verl log": 1024.0}
VERL_LINES = 10**6
VERL_NOISE = (  # what a verl console prints between two metric lines (Ray, vLLM, progress), one step's worth
    "(WorkerDict pid=4242) INFO 07-06 22:31:05 [block_pool.py:321] Successfully reset prefix cache",
    "(WorkerDict pid=4242) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 500, 'detokenize': False}",
    "\x1b[36m(TaskRunner pid=9323)\x1b[0m validation generation end",
    "Training Progress:  12%|█▏        | 1200/10000 [3:02:11<22:14:05,  9.10s/it]",
    "(WorkerDict pid=4243) /usr/lib/python3/site-packages/torch/distributed/fsdp/_state_dict_utils.py:773: "
    "UserWarning: When using ``NO_SHARD`` for ``ShardingStrategy``, full_state_dict will be returned.",
    "  warnings.warn(",
    "(TaskRunner pid=9323) list(reward_extra_infos_dict.keys())=['acc', 'format']",
    "(WorkerDict pid=4242) [2026-07-06 22:31:07] actor update, micro batch 4/4",
    "2026-07-06 22:31:07,552\tWARNING utils.py:458 -- Detecting docker specified CPUs.",
    "(WorkerDict pid=4243) INFO 07-06 22:31:07 [executor_base.py:203] It took 0.41 seconds to wake up tags",
    "(TaskRunner pid=9323) ('Final validation metrics: skipped',)",
    "",
)


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


def write_verl_console(path: pathlib.Path, n_lines: int, seed: int = 0) -> int:
    """A verl console log of ``n_lines`` lines: per step one ``step:N - key:value - ...`` line (the 58 metrics
    of a real verl run, a saturating reward) and the twelve lines of :data:`VERL_NOISE`. Returns the steps."""
    from log_read_speed import _VERL_KEYS  # noqa: PLC0415  (the metric names of a real verl run)

    rng = np.random.default_rng(seed)
    per_step = 1 + len(VERL_NOISE)
    n = n_lines // per_step
    t = np.arange(1, n + 1)
    score = np.clip(0.2 + 0.5 * (1 - np.exp(-t / (0.2 * n))) + 0.03 * rng.standard_normal(n), 0, 1)
    base = rng.uniform(0.5, 2.0, len(_VERL_KEYS))
    noise = "\n".join(VERL_NOISE) + "\n"
    with open(path, "w") as fh:
        for i in range(n):
            vals = {k: base[j] * (1 + 0.05 * np.sin(i / 50 + j)) for j, k in enumerate(_VERL_KEYS)}
            vals.update({"critic/score/mean": score[i], "critic/rewards/mean": score[i],
                         "actor/entropy": 0.8 * np.exp(-i / n), "training/global_step": i + 1})
            body = " - ".join(f"{k}:{v:.4f}" for k, v in vals.items())
            fh.write(f"(TaskRunner pid=9323) step:{i + 1} - {body}\n" + noise)
        fh.write("\n" * (n_lines - n * per_step))
    return n


def write_verl_jsonl_from(console: pathlib.Path, path: pathlib.Path) -> None:
    """The steps of a generated verl console log as verl's JSONL file logger writes them (for rldoctor)."""
    with open(console) as src, open(path, "w") as dst:
        for line in src:
            if " step:" not in line:
                continue
            parts = line.split(" - ")
            step = int(parts[0].rsplit("step:", 1)[1])
            data = {k: float(v) for k, v in (p.rsplit(":", 1) for p in parts[1:])}
            dst.write(json.dumps({"step": step, "data": data}) + "\n")


MEMORY_CAP_GB = 6.0  # rldoctor's address-space cap: on the 77k-step verl JSONL it grew past 18 GB and met the OOM killer;
# capped, it fails and is reported as failed instead of taking the machine down


def _cap_memory() -> None:
    import resource  # noqa: PLC0415
    cap = int(MEMORY_CAP_GB * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def timed(cmd: list[str], env: dict, *, until_file: pathlib.Path | None = None,
          limit: float = 600.0) -> tuple[float, float, float]:
    """``(wall seconds, peak RSS MB, CPU seconds)`` of ``cmd`` from start to exit (or until ``until_file`` exists and is
    non-empty, then the process is stopped). The RSS is ``os.wait4``'s: the largest of the process and the
    children it waited for; the CPU seconds (user + system) include those children. A command that fails raises
    with its last output."""
    print("  $ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=_cap_memory if "rldoctor" in pathlib.Path(cmd[0]).name else None)

        def reap():
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage

        def tail() -> str:
            log.seek(0)
            return log.read()[-1500:]

        if until_file is None:
            while time.perf_counter() - t0 < limit:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    dt = time.perf_counter() - t0
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    if proc.returncode != 0:
                        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {tail()}")
                    return dt, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime
                time.sleep(0.005)
            proc.kill()
            reap()
            raise RuntimeError(f"{' '.join(cmd)}: still running after {limit} s")
        while time.perf_counter() - t0 < limit:
            if until_file.is_file() and until_file.stat().st_size > 0:
                dt = time.perf_counter() - t0
                proc.terminate()
                usage = reap()
                return dt, usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime
            pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                raise RuntimeError(f"{' '.join(cmd)} exited {os.waitstatus_to_exitcode(status)} before its first "
                                   f"report: {tail()}")
            time.sleep(0.005)
        proc.kill()
        reap()
        raise RuntimeError(f"{' '.join(cmd)}: no report within {limit} s")


def write_report(out, args, tasks, times, rss, cpu, failures, load_before, commands, *, final: bool) -> None:
    """Write the medians so far (after every repeat: an interrupted run still leaves its table)."""
    load_after = machine_line()
    med = {k: statistics.median(v) for k, v in times.items()}
    med_rss = {k: statistics.median(v) for k, v in rss.items()}
    n_done = len(next(iter(times.values()), []))
    lines = [f"machine before: {load_before}", f"machine after:  {load_after}",
             f"medians of {n_done} of {args.repeats} repeats (wall seconds; first call: empty JAX cache; second call: "
             "the cache the first filled); CPU: user + system seconds of the second call, the command's processes "
             "together; peak RSS in MB (median over the calls, largest process of the command)",
             "",
             "| command | target | grpojax first | grpojax second | grpojax CPU | grpojax peak RSS MB | rldoctor first | "
             "rldoctor second | rldoctor CPU | rldoctor peak RSS MB | met |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def cell(task, tool, call):
        v = med.get((task, tool, call))
        if v is None:
            return "failed" if (task, tool) in failures else "n/a"
        return f"{v:.2f}"

    def cpu_cell(task, tool):
        v = cpu.get((task, tool, "second"))
        return f"{statistics.median(v):.2f}" if v else "n/a"

    def mem(task, tool):
        v = [x for (t, tl, _), xs in rss.items() if t == task and tl == tool for x in xs]
        return f"{statistics.median(v):.0f}" if v else "n/a"

    def met(task):
        g = [med.get((task, "grpojax", c)) for c in ("first", "second")]
        if None in g:
            return "n/a"
        ok = max(g) <= BUDGETS[task]
        r = [med.get((task, "rldoctor", c)) for c in ("first", "second")]
        if task.startswith("diagnose 1000") and None not in r:
            ok = ok and max(g) <= 2 * max(r)
        if task in MEMORY_BUDGETS_MB:
            m = [x for (t, tl, _), xs in rss.items() if t == task and tl == "grpojax" for x in xs]
            ok = ok and bool(m) and max(m) <= MEMORY_BUDGETS_MB[task]
        return "yes" if ok else "no"

    for task in tasks:
        target = f"<= {BUDGETS[task]:g} s"
        if task.startswith("diagnose 1000"):
            target += ", <= 2x rldoctor"
        if task in MEMORY_BUDGETS_MB:
            target += f", <= {MEMORY_BUDGETS_MB[task]:g} MB"
        lines.append(f"| {task} | {target} | {cell(task, 'grpojax', 'first')} | {cell(task, 'grpojax', 'second')} | "
                     f"{cpu_cell(task, 'grpojax')} | {mem(task, 'grpojax')} | {cell(task, 'rldoctor', 'first')} | "
                     f"{cell(task, 'rldoctor', 'second')} | {cpu_cell(task, 'rldoctor')} | {mem(task, 'rldoctor')} | "
                     f"{met(task)} |")
    lines += [f"failed: {t} ({tool}): {msg}" for (t, tool), msg in failures.items()]
    lines += ["", "commands (paths shortened):"] + [f"- {t} ({tool}): `{c}`" for (t, tool), c in commands.items()]
    if final:
        print("\n".join(lines))
    (out / "cli_latency.json").write_text(json.dumps(
        {"machine_before": load_before, "machine_after": load_after, "repeats": args.repeats,
         "budgets": BUDGETS, "memory_budgets_mb": MEMORY_BUDGETS_MB,
         "failures": {"|".join(k): v for k, v in failures.items()},
         "times": {"|".join(k): v for k, v in times.items()}, "peak_rss_mb": {"|".join(k): v for k, v in rss.items()},
         "cpu_s": {"|".join(k): v for k, v in cpu.items()},
         "medians": {"|".join(k): v for k, v in med.items()},
         "median_peak_rss_mb": {"|".join(k): v for k, v in med_rss.items()},
         "commands": {"|".join(k): v for k, v in commands.items()}}, indent=1))
    (out / "cli_latency.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3, help="repeats (>= 3), each a first and a second call")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "out" / "bench" / "cli_latency")
    ap.add_argument("--tasks", default=",".join(BUDGETS), help="comma-separated subset of: " + ", ".join(BUDGETS))
    ap.add_argument("--rldoctor", default=None,
                    help="the rldoctor executable (default: next to this Python, else on PATH); "
                         "install rldoctor==0.2.0 in a separate virtual environment and name it here")
    ap.add_argument("--real-trl", type=pathlib.Path, default=None,
                    help="a real TRL trainer_state.json for the 'diagnose real TRL log' task")
    ap.add_argument("--verl-lines", type=int, default=VERL_LINES, help="lines of the generated verl log (10^6)")
    ap.add_argument("--smoke", action="store_true", help="allow --repeats < 3 (a check that it runs, not a benchmark)")
    args = ap.parse_args(argv)
    if args.repeats < 3 and not args.smoke:
        ap.error(f"--repeats must be >= 3 (medians), got {args.repeats}")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = [t for t in tasks if t not in BUDGETS]
    if bad:
        ap.error(f"--tasks: unknown {bad}; known: {list(BUDGETS)}")
    if args.real_trl is None and "diagnose real TRL log" in tasks:
        tasks.remove("diagnose real TRL log")
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    data = out / "data"
    folder = data / "runs20"
    folder.mkdir(parents=True)
    one = data / "run1000.jsonl"
    simulated_run(one, 1000, 0)
    for k in range(20):
        simulated_run(folder / f"run{k:02d}.jsonl", int(np.random.default_rng(100 + k).integers(150, 600)), 100 + k)
    big_dir = pathlib.Path(tempfile.mkdtemp(prefix="grpojax-verl-"))  # 0.2 GB: never under out/ or the repository
    verl, verl_jsonl = big_dir / "verl_console.log", big_dir / "verl_metrics.jsonl"
    if "diagnose 10^6-line verl log" in tasks:
        n_steps = write_verl_console(verl, args.verl_lines)
        write_verl_jsonl_from(verl, verl_jsonl)
        print(f"verl log: {args.verl_lines} lines, {n_steps} steps, {verl.stat().st_size / 1e6:.0f} MB", flush=True)
    # byte-compiled modules, as pip leaves an installed package (rldoctor's were compiled by its install): a
    # source checkout run with PYTHONDONTWRITEBYTECODE=1 would compile every grpojax module it imports on every
    # call, about a tenth of a second of each command
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "grpojax")], check=True)
    grpojax = str(BIN / "grpojax")
    rldoctor = args.rldoctor or shutil.which("rldoctor", path=str(BIN)) or shutil.which("rldoctor")
    load_before = machine_line()

    def cmds(work: pathlib.Path) -> dict[str, dict]:
        rl = {}
        if rldoctor:
            rl = {"diagnose 1000-step log": [[rldoctor, "diagnose", str(one), "-f", "json", "-o", str(work / "rl.json")]],
                  "diagnose real TRL log": [[rldoctor, "diagnose", str(args.real_trl), "-f", "json", "-o",
                                             str(work / "rl-real.json")]],
                  "diagnose 20-run folder": [[rldoctor, "diagnose", str(f), "-f", "json", "-o", str(work / f"rl-{f.stem}.json")]
                                             for f in sorted(folder.iterdir())],
                  "--help": [[rldoctor, "--help"]],
                  "diagnose 10^6-line verl log": [[rldoctor, "diagnose", str(verl_jsonl), "-f", "json", "-o",
                                                   str(work / "rl-verl.json")]]}
        return {
            "diagnose 1000-step log": {"grpojax": [[grpojax, "diagnose", str(one), "--out", str(work / "d1")]],
                                        "rldoctor": rl.get("diagnose 1000-step log")},
            "diagnose real TRL log": {"grpojax": [[grpojax, "diagnose", str(args.real_trl), "--out", str(work / "dr")]],
                                      "rldoctor": rl.get("diagnose real TRL log")},
            "diagnose 20-run folder": {"grpojax": [[grpojax, "diagnose", str(folder), "--out", str(work / "d20")]],
                                       "rldoctor": rl.get("diagnose 20-run folder")},
            "--help": {"grpojax": [[grpojax, "--help"]], "rldoctor": rl.get("--help")},
            "fit --prefix 0.3": {"grpojax": [[grpojax, "fit", str(one), "--prefix", "0.3", "--out", str(work / "fit")]],
                                 "rldoctor": None},
            "watch: first report": {"grpojax": "watch", "rldoctor": None},
            "diagnose 10^6-line verl log": {"grpojax": [[grpojax, "diagnose", str(verl), "--out", str(work / "dv")]],
                                            "rldoctor": rl.get("diagnose 10^6-line verl log")},
        }

    times: dict[tuple[str, str, str], list[float]] = {}
    rss: dict[tuple[str, str, str], list[float]] = {}
    cpu: dict[tuple[str, str, str], list[float]] = {}
    failures: dict[tuple[str, str], str] = {}
    commands: dict[tuple[str, str], str] = {}
    try:
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
                        if cl == "watch":
                            report = work / "watch.json"
                            cl = [[grpojax, "watch", str(one), "--json", str(report), "--no-live", "--idle-timeout", "600"]]
                        shown = " ".join(cl[0]).replace(str(out), "OUT").replace(str(big_dir), "TMP")
                        commands[(task, tool)] = shown + (f" (and {len(cl) - 1} more, one per run)" if len(cl) > 1 else "")
                        try:
                            if task.startswith("watch"):
                                got = [timed(cl[0], env, until_file=report)]
                            else:
                                got = [timed(c, env) for c in cl]
                        except RuntimeError as e:  # reported, not timed
                            failures[(task, tool)] = str(e).splitlines()[-1][-300:]
                            print(f"repeat {rep + 1} {call:6s} {tool:8s} {task:28s} FAILED: {failures[(task, tool)]}")
                            continue
                        dt, cpu_s = sum(g[0] for g in got), sum(g[2] for g in got)
                        times.setdefault((task, tool, call), []).append(dt)
                        rss.setdefault((task, tool, call), []).append(max(g[1] for g in got))
                        cpu.setdefault((task, tool, call), []).append(cpu_s)
                        print(f"repeat {rep + 1} {call:6s} {tool:8s} {task:28s} {dt:7.2f} s wall {cpu_s:7.2f} s CPU "
                              f"{max(g[1] for g in got):6.0f} MB", flush=True)
            shutil.rmtree(cache, ignore_errors=True)
            write_report(out, args, tasks, times, rss, cpu, failures, load_before, commands,
                         final=rep + 1 == args.repeats)
    finally:
        shutil.rmtree(big_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
