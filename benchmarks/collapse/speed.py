"""Time that events and the collapse finding add to ``diagnose`` of a 1,000-step log.

Usage: python benchmarks/collapse/speed.py [--repeats N] [--rldoctor PATH] [--cli-repeats N]

The log: 1,000 steps of the ten segmented series (reward, eval every 10 steps, entropy, KL, grad norm,
response length, two clip fractions, zero-std fraction, reward std, loss), a reward that rises and
collapses at step 800 with precursors before it. Times ``detect_events`` + ``detect_collapse`` (what
events and the collapse add; the other detectors only read their result) and the whole ``diagnose``
(``validity=False``), median and minimum of the repeats, in-process (imports excluded: both are NumPy
only and import nothing new). With ``--rldoctor PATH`` (rldoctor 0.2.0's executable, installed apart), the
same log is also written as plain JSONL and both command lines diagnose it in the same run --
``rldoctor diagnose LOG -f json`` and ``grpojax diagnose LOG --no-plot --json`` -- timed as processes
(``cli_latency.timed``: wall and CPU seconds, imports included), median of ``--cli-repeats``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from _timing import machine_line, time_calls  # noqa: E402


def log_1000():
    from grpojax.logs import RunLog

    rng = np.random.default_rng(0)
    n = 1000
    t = np.arange(n, dtype=float)
    r = 0.1 + 0.6 * (1 - np.exp(-t / 150))
    r[800:] = 0.05
    ev = np.full(n, np.nan)
    ev[::10] = r[::10] + 0.01 * rng.standard_normal(100)
    cols = {"reward_mean": r + 0.03 * rng.standard_normal(n), "eval_reward": ev,
            "entropy": np.where(t < 740, 0.6, 0.3) + 0.01 * rng.standard_normal(n),
            "kl": 0.001 * t + 0.002 * rng.standard_normal(n),
            "grad_norm": 0.3 * np.exp(0.2 * rng.standard_normal(n)) * np.where(t < 780, 1, 10),
            "response_length": np.where(t < 770, 300, 120) + 5 * rng.standard_normal(n),
            "clip_frac": 0.05 + 0.01 * rng.random(n), "response_clip_frac": 0.02 * rng.random(n),
            "frac_zero_std": np.clip(0.2 + 0.05 * rng.standard_normal(n), 0, 1),
            "reward_std": 0.3 + 0.01 * rng.standard_normal(n), "loss": 0.01 * rng.standard_normal(n)}
    return RunLog.from_columns(cols, name="speed-1000")


def write_jsonl(run, path: pathlib.Path) -> None:
    """The log as plain JSONL, one object per step with the finite values (keys both tools know)."""
    with open(path, "w") as fh:
        for i, st in enumerate(run.steps):
            row = {"step": int(st)}
            row.update({k: float(v[i]) for k, v in run.columns.items() if np.isfinite(v[i])})
            fh.write(json.dumps(row) + "\n")


def cli_times(run, rldoctor: str, repeats: int) -> dict[str, tuple[float, float]]:
    """``{tool: (median wall s, median CPU s)}`` of both command lines diagnosing the log (as processes)."""
    from cli_latency import timed  # noqa: PLC0415 (benchmarks/ is on the path: see _timing above)

    grpojax = shutil.which("grpojax", path=str(pathlib.Path(sys.executable).parent)) or "grpojax"
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        log = pathlib.Path(tmp) / "speed-1000.jsonl"
        write_jsonl(run, log)
        cmds = {"rldoctor": [rldoctor, "diagnose", str(log), "-f", "json", "-o", str(pathlib.Path(tmp) / "rl.json")],
                "grpojax": [grpojax, "diagnose", str(log), "--no-plot", "--json", str(pathlib.Path(tmp) / "g.json")]}
        for tool, cmd in cmds.items():
            runs = [timed(cmd, dict(os.environ)) for _ in range(repeats)]
            out[tool] = (statistics.median(r[0] for r in runs), statistics.median(r[2] for r in runs))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--rldoctor", default=None, help="rldoctor's executable: also time both command lines on the log")
    ap.add_argument("--cli-repeats", type=int, default=5, help="repeats of each command line (default 5)")
    args = ap.parse_args(argv)
    from grpojax.diagnose import DEFAULT_CONFIG, diagnose
    from grpojax.diagnose._collapse import detect_collapse
    from grpojax.diagnose._events import detect_events

    run = log_1000()

    def added():
        return detect_collapse(run, DEFAULT_CONFIG, detect_events(run, DEFAULT_CONFIG))

    a = time_calls(added, args.repeats)
    whole = time_calls(lambda: diagnose(run, validity=False), args.repeats)
    res = a.result
    print(machine_line())
    print(f"events + collapse, 1,000 steps x {len(detect_events(run, DEFAULT_CONFIG))} series: "
          f"median {a.median_s * 1e3:.1f} ms, min {a.min_s * 1e3:.1f} ms ({args.repeats} repeats)")
    print(f"whole diagnose (validity=False): median {whole.median_s * 1e3:.1f} ms, min {whole.min_s * 1e3:.1f} ms")
    print(f"collapse: {res.verdict}; {res.reason}")
    if args.rldoctor:
        t = cli_times(run, args.rldoctor, args.cli_repeats)
        for tool, (wall, cpu) in t.items():
            print(f"{tool} diagnose of the same log as plain JSONL (command line, imports included): median "
                  f"{wall:.2f} s wall, {cpu:.2f} s CPU ({args.cli_repeats} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
