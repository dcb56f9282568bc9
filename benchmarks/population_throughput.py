"""Population throughput: N GRPO runs in one vmapped program vs the same N runs one after another.

For each population size N, a child process (so that its peak memory is its own) builds one shared warm
start, then trains the N members twice with :func:`grpojax.grpo.train_population`:

- ``population``: one compiled program over all N members (``batched=True``, vmapped, sharded over the
  process's devices);
- ``sequential``: the same member program, compiled once, run for member 0, then member 1, ... in the same
  process (``batched=False``).

Both do the same work (rollouts, rewards, advantages, updates; no evaluation). The rate is run-steps per
second, ``N * steps / time``, over the compiled calls after the first (which includes compilation; the
compilation time is reported on its own). Memory: the bytes of one member's training state (parameters,
optimiser state, rollout batch) and the child's peak resident set size.

Usage::

    flock /tmp/grpojax-heavy.lock python benchmarks/population_throughput.py --n 8 64 256
    python benchmarks/population_throughput.py --quick        # N = 4, 16: a check that it runs
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
OVERRIDES = ["warmstart.steps=40", "eval.n=0", "grpo.prompts_per_step=4", "grpo.group_size=4",
             "rewards.weights={correctness: 1.0, format: 0.5}", "sampling.max_new_tokens=12",
             "model.hidden_size=32", "model.intermediate_size=64", "model.num_hidden_layers=1",
             "model.num_attention_heads=2", "model.num_key_value_heads=1"]


def _members(n: int):
    from grpojax.grpo import Member

    lrs = (0.01, 0.03, 0.1, 0.3)
    k_refs = (1, 2, 4, 8)
    mus = (0.0, 0.9)
    return [Member(lr=lrs[i % 4], k_ref=k_refs[(i // 4) % 4], momentum=mus[(i // 16) % 2], seed=i) for i in range(n)]


def child(n: int, steps: int, chunk: int, modes: list[str]) -> dict:
    """One population size in this process: both modes, their timings and the peak memory."""
    import jax

    from grpojax.grpo import apply_overrides, load_config, train_population

    cfg = apply_overrides(load_config("tiny-arith"), OVERRIDES + [f"steps={steps}"])
    members = _members(n)
    out: dict = {"n": n, "steps": steps, "chunk": chunk, "devices": jax.device_count()}
    warm = None
    for mode in modes:
        t0 = time.perf_counter()
        res = train_population(cfg, members, None, chunk=chunk, batched=(mode == "population"), show_progress=False,
                               warm=warm)
        total = time.perf_counter() - t0 - (res.warmstart_s if warm is None else 0.0)
        warm = res.warm
        calls = res.chunk_s
        per_run = len(calls) // (1 if mode == "population" else n)
        # the first call compiles; the steady rate is over the other calls (the population's first call covers
        # chunk steps of all n members, the sequential one chunk steps of member 0)
        steady, steady_cpu = sum(calls[1:]), sum(res.chunk_cpu_s[1:])
        steady_run_steps = n * steps - (n if mode == "population" else 1) * chunk
        out[mode] = {"wall_s": total, "first_call_s": calls[0], "steady_s": steady, "steady_cpu_s": steady_cpu,
                     "run_steps_per_s": steady_run_steps / steady,
                     "run_steps_per_cpu_s": steady_run_steps / steady_cpu, "calls": len(calls),
                     "calls_per_run": per_run, "median_call_s": float(sorted(calls[1:])[len(calls[1:]) // 2]),
                     "diverged": int(res.diverged.sum())}
        out["member_state_bytes"] = res.member_state_bytes
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[8, 64, 256])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=4)
    ap.add_argument("--modes", nargs="+", default=["population", "sequential"], choices=["population", "sequential"])
    ap.add_argument("--quick", action="store_true", help="N = 4, 16 and 8 steps")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "population_throughput.json"))
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child is not None:
        print("RESULT " + json.dumps(child(a.child, a.steps, a.chunk, a.modes)), flush=True)
        return 0
    ns, steps = ([4, 16], 8) if a.quick else (a.n, a.steps)
    rows = []
    for n in ns:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, "--child", str(n), "--steps", str(steps), "--chunk",
                               str(a.chunk), "--modes", *a.modes], capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
            return 1
        row = json.loads(next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))[7:])
        row["child_wall_s"] = time.perf_counter() - t0
        rows.append(row)
        p, s = row.get("population"), row.get("sequential")
        ratio = p["run_steps_per_s"] / s["run_steps_per_s"] if p and s else float("nan")
        print(f"N={n:5d}  population {p['run_steps_per_s'] if p else float('nan'):9.1f} run-steps/s   "
              f"sequential {s['run_steps_per_s'] if s else float('nan'):9.1f} run-steps/s   ratio {ratio:6.1f}x   "
              f"state {row['member_state_bytes'] / 1024:.0f} KiB/member   peak RSS {row['peak_rss_mb']:.0f} MB",
              flush=True)
    meta = {"command": " ".join([pathlib.Path(sys.executable).name, *sys.argv]), "load": os.getloadavg(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "overrides": OVERRIDES,
            "threads": os.environ.get("XLA_FLAGS", "default XLA CPU threading")}
    path = pathlib.Path(a.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
