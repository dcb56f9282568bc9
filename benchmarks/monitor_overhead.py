"""Overhead of the monitor hook per training step vs a tiny grpojax GRPO step, measured in the same run.

1. Baseline: the grpojax ``tiny-arith`` config (as in ``grpo_step.py``: B = 8 prompts x G = 8, 14 new
   tokens, K_ref = 1, AdamW, no eval) trains ``--steps`` steps after ``--warmup`` compile steps; the median
   of its logged ``timing_s/step`` is the step time.
2. The hook (:class:`grpojax.monitor.MonitorHook`, creep forecast, detectors) is timed on the metrics of
   that run extended to ``--points`` points (the tiny run is short; the refresh cost grows with the
   points): the per-call cost of a call that only appends (median of all such calls), and the cost of a
   refresh (median of ``--repeats`` warm refreshes at each log length; the first refresh at a length
   compiles and is reported apart).
3. Overhead per step = append + refresh / every, as a fraction of the median step time, for a few
   ``every``. The hook's budget (``max_overhead``, default 5%) caps it in a live run whatever the costs:
   the hook as shipped (every = 10, budget 5%) is run over the extended run with each step taking the
   measured step time (added to the hook's clock), and its realised overhead is reported.

Command: ``.venv/bin/python benchmarks/monitor_overhead.py --steps 20 --warmup 2 --repeats 3``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from _timing import machine_line  # noqa: E402

ARCH = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=40)


def tiny_run(steps: int, warmup: int) -> list[dict]:
    from grpojax.grpo import GRPOTrainer, apply_overrides, load_config

    cfg = apply_overrides(load_config("tiny-arith"), [
        f"steps={steps + warmup}", "warmstart.steps=0", "eval.n=0", "eval.every=0", "checkpoint.every=0",
        "grpo.prompts_per_step=8", "grpo.group_size=8", "sampling.max_new_tokens=14", "grpo.beta=0.0", "grpo.k_ref=1",
    ] + [f"model.{k}={v}" for k, v in ARCH.items()])
    with tempfile.TemporaryDirectory() as d:
        GRPOTrainer(cfg, d).train(show_progress=False, resume=False)
        return [json.loads(x) for x in (pathlib.Path(d) / "metrics.jsonl").read_text().splitlines()[1:]]


def extended(records: list[dict], points: int) -> list[dict]:
    """The run's metric rows, cycled to ``points`` steps, with a rising reward so the forecast has a curve."""
    import numpy as np

    rows = [r for r in records if r.get("step", 0) >= 1]
    rng = np.random.default_rng(0)
    out = []
    for i in range(points):
        r = dict(rows[i % len(rows)])
        r["reward_mean"] = 0.8 - 0.6 * np.exp(-(i + 1) / 60) + 0.03 * rng.standard_normal()
        out.append(r)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--points", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from grpojax.monitor import MonitorConfig, MonitorHook, init_state, update

    recs = tiny_run(args.steps, args.warmup)
    step_times = [r["timing_s/step"] for r in recs if r.get("step", 0) >= 1][args.warmup:]
    step_s = statistics.median(step_times)
    rows = extended(recs, args.points)

    # appends: a hook that never refreshes
    hook = MonitorHook(config=MonitorConfig(every=10**9))
    append = []
    for i, r in enumerate(rows):
        t0 = time.perf_counter()
        hook(i + 1, r)
        append.append(time.perf_counter() - t0)
    append_s = statistics.median(append)
    # refreshes at several log lengths: first call (compile) apart, then warm repeats
    run_full = hook.run_log()
    import dataclasses

    refresh, first = {}, {}
    for n in (100, 200, args.points):
        sub = dataclasses.replace(run_full, steps=run_full.steps[:n],
                                  columns={k: v[:n] for k, v in run_full.columns.items()})
        t0 = time.perf_counter()
        update(init_state(), sub, MonitorConfig())
        first[n] = time.perf_counter() - t0
        ts = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            update(init_state(), sub, MonitorConfig())
            ts.append(time.perf_counter() - t0)
        refresh[n] = statistics.median(ts)
    refresh_s = max(refresh.values())
    rows_out = []
    for every in (10, 25, 50, 100):
        per_step = append_s + refresh_s / every
        rows_out.append(dict(every=every, per_step_s=per_step, overhead=per_step / step_s))
    # the hook as shipped (every=10, budget 5%) over the extended run, each step taking the measured step
    # time (added to the hook's clock instead of slept): the realised overhead and the refreshes it ran
    sim = [0.0]

    def clock():
        return time.perf_counter() + sim[0]

    budget = MonitorHook(config=MonitorConfig(every=10), clock=clock)
    for i, r in enumerate(rows):
        budget(i + 1, r)
        sim[0] += step_s
    budgeted = dict(every=10, max_overhead=budget.max_overhead, overhead=budget.overhead, refreshes=budget.refreshes,
                    postponed=budget.postponed, steps=len(rows))
    result = dict(machine=machine_line(), step_s=step_s, step_times=step_times, append_s=append_s,
                  refresh_s=refresh, refresh_first_s=first, rows=rows_out, budgeted=budgeted)
    print(f"machine: {result['machine']}")
    print(f"tiny grpojax step: median {step_s:.3f} s over {len(step_times)} steps")
    print(f"hook append: median {append_s * 1e6:.0f} µs per call")
    for n in refresh:
        print(f"refresh at {n} points: warm median {refresh[n]:.3f} s (first call {first[n]:.1f} s, compiles)")
    print("| every | hook s/step (amortised) | overhead vs step |")
    print("|---:|---:|---:|")
    for r in rows_out:
        print(f"| {r['every']} | {r['per_step_s']:.4f} | {r['overhead']:.1%} |")
    print(f"hook as shipped (every=10, budget {budgeted['max_overhead']:.0%}) over {budgeted['steps']} steps of "
          f"{step_s:.3f} s: overhead {budgeted['overhead']:.1%}, {budgeted['refreshes']} refreshes, "
          f"{budgeted['postponed']} postponed")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
