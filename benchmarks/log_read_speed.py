"""How long ``grpojax.logs.read_logs`` takes on 100,000-step logs of each format.

    .venv/bin/python benchmarks/log_read_speed.py [--steps 100000] [--repeats 3] [--formats ...]
    .venv/bin/python benchmarks/log_read_speed.py --originals FOLDER [--largest 6]   # real logs

For every format a synthetic log with ``--steps`` train steps (verl: the 60 metrics per line of a
real verl run; TRL: the ~25 of a modern GRPOTrainer row; eval every 50 steps) is written to a
temporary folder, then read ``--repeats`` times; the median wall time is reported next to a
same-run baseline: the bare parse of the same file with the standard library alone
(``json.load``, ``json.loads`` per line, ``csv.reader``, ``str.split``), i.e. the cost of
reading the bytes without building the table. Acceptance: < 5 s per 100,000-step log.
The verdict uses the CPU (process) time, which equals the wall time on an idle machine; on the
shared 2-core development machine the wall time is inflated by the other jobs (the load average
is printed), so both are reported.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import tempfile
import warnings

import numpy as np

from _timing import machine_line, time_calls


def _trl_row(s: int) -> dict:
    r = {
        "clip_ratio/high_max": 0.0, "clip_ratio/high_mean": 0.0, "clip_ratio/low_mean": 0.0,
        "clip_ratio/low_min": 0.0, "clip_ratio/region_mean": 0.001,
        "completions/clipped_ratio": 0.1, "completions/max_length": 512.0,
        "completions/mean_length": 200.0 + (s % 97), "completions/min_length": 20.0,
        "entropy": 1.0 / (1 + s / 1e4), "epoch": s / 1e5, "frac_reward_zero_std": 0.2,
        "grad_norm": 0.5 + 0.1 * math.sin(s), "kl": 1e-3 * s / 1e4, "learning_rate": 1e-6,
        "loss": 0.01, "num_tokens": 1000.0 * s, "reward": 1 - math.exp(-s / 2e4),
        "reward_std": 0.3, "rewards/acc/mean": 0.5, "rewards/acc/std": 0.4,
        "rewards/fmt/mean": 0.5, "rewards/fmt/std": 0.1, "step": s,
    }
    return r


def write_trl_state(path: str, n: int) -> None:
    hist = []
    for s in range(1, n + 1):
        hist.append(_trl_row(s))
        if s % 50 == 0:
            hist.append({"epoch": s / 1e5, "eval_reward": 0.5, "eval_loss": 0.1, "eval_runtime": 3.0, "step": s})
    with open(path, "w") as f:
        json.dump({"global_step": n, "log_history": hist}, f)


def write_trl_console(path: str, n: int) -> None:
    with open(path, "w") as f:
        for s in range(1, n + 1):
            r = _trl_row(s)
            r.pop("step")
            f.write(f"\r{s}/{n} [00:01<00:01, 1.0it/s]" + str({k: f"{v:.4g}" for k, v in r.items()}) + "\n")


def write_own_jsonl(path: str, n: int) -> None:
    names = ["reward_mean", "reward_std", "frac_zero_std", "entropy", "kl", "grad_norm", "lr",
             "is_ratio_mean", "is_ratio_max", "clip_frac", "response_length", "response_clip_frac"]
    with open(path, "w") as f:
        for s in range(1, n + 1):
            d = {"step": s, **{k: 0.5 + 1e-6 * s + i for i, k in enumerate(names)}}
            f.write(json.dumps(d) + "\n")
            if s % 50 == 0:
                f.write(json.dumps({"step": s, "eval_reward": 0.4}) + "\n")


_VERL_KEYS = (
    [f"global_seqlen/{k}" for k in ("min", "max", "minmax_diff", "balanced_min", "balanced_max", "mean")]
    + ["actor/entropy", "actor/kl_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/pg_loss", "actor/grad_norm",
       "perf/mfu/actor", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb",
       "actor/lr", "training/global_step", "training/epoch"]
    + [f"critic/{a}/{b}" for a in ("score", "rewards", "advantages", "returns") for b in ("mean", "max", "min")]
    + [f"{a}/{b}" for a in ("response_length", "prompt_length") for b in ("mean", "max", "min", "clip_ratio")]
    + [f"timing_s/{k}" for k in ("generate_sequences", "reshard", "gen", "reward", "old_log_prob", "adv",
                                  "update_actor", "step")]
    + [f"timing_per_token_ms/{k}" for k in ("update_actor", "gen", "adv")]
    + ["perf/total_num_tokens", "perf/time_per_step", "perf/throughput"]
    + [f"extra/metric_{i}" for i in range(5)]
)


def write_verl_console(path: str, n: int) -> None:
    with open(path, "w") as f:
        for s in range(1, n + 1):
            body = " - ".join(f"{k}:{(s % 1000) * 0.001 + i:.3f}" for i, k in enumerate(_VERL_KEYS))
            if s % 50 == 0:
                body += " - val-core/gsm8k/reward/mean@1:0.500 - val-core/math/reward/mean@1:0.400"
            f.write(f"(TaskRunner pid=1) step:{s} - {body}\n")


def write_verl_jsonl(path: str, n: int) -> None:
    with open(path, "w") as f:
        for s in range(1, n + 1):
            d = {k: (s % 1000) * 0.001 + i for i, k in enumerate(_VERL_KEYS)}
            f.write(json.dumps({"step": s, "data": d}) + "\n")


def write_wandb_csv(path: str, n: int, runs: int = 3) -> None:
    metrics = ["train/reward", "train/kl", "train/entropy"]
    header = ["Step"] + [f"run{r} - {m}{x}" for r in range(runs) for m in metrics for x in ("", "__MIN", "__MAX")]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for s in range(1, n + 1):
            v = f"{0.5 + 1e-6 * s:.6f}"
            w.writerow([s] + [v] * (len(header) - 1))


def write_tensorboard(path: str, n: int) -> None:
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    os.makedirs(path, exist_ok=True)
    tags = ["train/reward", "train/kl", "train/entropy", "train/grad_norm", "train/learning_rate"]
    with open(os.path.join(path, "events.out.tfevents.1.bench"), "wb") as fh:
        w = RecordWriter(fh)
        for s in range(1, n + 1):
            vals = [summary_pb2.Summary.Value(tag=t, simple_value=0.5 + 1e-6 * s) for t in tags]
            w.write(event_pb2.Event(wall_time=1.7e9 + s, step=s, summary=summary_pb2.Summary(value=vals)).SerializeToString())


def write_openrlhf_console(path: str, n: int) -> None:
    with open(path, "w") as f:
        for s in range(1, n + 1):
            post = ", ".join(f"{k}={0.5 + 1e-6 * s:.4g}" for k in (
                "policy_loss", "actor_lr", "reward", "return", "response_length", "total_length", "kl",
                "ppo_clip_ratio", "policy_entropy"))
            f.write(f"\rEpisode [1/1]: {s * 100 // n:3d}%|#  | {s}/{n} [00:01<00:01, 1.00s/it, {post}]")


def write_json_list(path: str, n: int) -> None:
    """A custom trainer's per-step history: one JSON list of dicts (``step_stat_history.json`` style)."""
    rows = [{"step": s, "reward": 1 - math.exp(-s / 2e4), "accuracy": 0.5, "loss": 0.01, "grad_norm": 0.5,
             "reward_std": 0.3, "kl_div": 1e-3, "lr": 1e-6, "mean_length": 200.0} for s in range(1, n + 1)]
    with open(path, "w") as f:
        json.dump(rows, f)


def write_generic_csv(path: str, n: int) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Iteration", "Avg Reward", "kl_div", "policy_entropy", "grad_norm", "learning_rate"])
        for s in range(1, n + 1):
            w.writerow([s, f"{1 - math.exp(-s / 2e4):.6f}", "0.001", "0.9", "0.5", "1e-06"])


def write_nested_jsonl(path: str, n: int) -> None:
    """A free-text title line, ``{"step": n, "logs": {...}}`` lines and one per-question row per step."""
    with open(path, "w") as f:
        f.write("training run (free text)\n")
        for s in range(1, n + 1):
            f.write(json.dumps({"step": s, "logs": {"mean_reward": 1 - math.exp(-s / 2e4), "kl_div": 1e-3,
                                                    "policy_entropy": 0.9, "grad_norm": 0.5}}) + "\n")
            f.write(json.dumps({"question": f"q{s}", "completion": "42", "reward": 1.0}) + "\n")


def write_text_kv(path: str, n: int) -> None:
    with open(path, "w") as f:
        for s in range(1, n + 1):
            f.write(f"Epoch:[1/1]({s}/{n}), Reward: {1 - math.exp(-s / 2e4):.4f}, KL_ref: 0.0010, Adv Std: 0.92, "
                    f"Actor Loss: 0.0001, Avg Response Len: 200.00, Learning Rate: 0.00000030\n")


def _bare(fmt: str, path: str) -> None:
    if fmt in ("trl_state", "json"):
        with open(path) as f:
            json.load(f)
    elif fmt in ("jsonl", "verl_jsonl"):
        with open(path) as f:
            for line in f:
                json.loads(line)
    elif fmt == "jsonl_nested":
        with open(path) as f:
            next(f)
            for line in f:
                json.loads(line)
    elif fmt in ("wandb_csv", "csv"):
        with open(path, newline="") as f:
            list(csv.reader(f))
    elif fmt == "openrlhf_console":
        with open(path) as f:
            f.read().split("\r")
    elif fmt in ("verl_console", "trl_console", "text_kv"):
        with open(path) as f:
            for line in f:
                line.split(" - " if fmt == "verl_console" else ", ")
    elif fmt == "tensorboard":
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

        for fn in os.listdir(path):
            for _ in EventFileLoader(os.path.join(path, fn)).Load():
                pass


WRITERS = {
    "jsonl": ("own.jsonl", write_own_jsonl),
    "trl_state": ("trainer_state.json", write_trl_state),
    "trl_console": ("trl_console.log", write_trl_console),
    "verl_console": ("verl.log", write_verl_console),
    "verl_jsonl": ("verl.jsonl", write_verl_jsonl),
    "wandb_csv": ("wandb.csv", write_wandb_csv),
    "openrlhf_console": ("openrlhf.log", write_openrlhf_console),
    "tensorboard": ("tb", write_tensorboard),
    "json": ("step_stat_history.json", write_json_list),
    "csv": ("reward_log.csv", write_generic_csv),
    "jsonl_nested": ("train_output.txt", write_nested_jsonl),
    "text_kv": ("grpo.log", write_text_kv),
}


def time_originals(folders: list[str], largest: int, repeats: int) -> None:
    """Read time of the ``largest`` original files under ``folders`` (``run.jsonl`` conversions left out)."""
    from grpojax.logs import read_logs

    files = []
    for top in folders:
        for d, _, names in os.walk(top):
            files += [os.path.join(d, f) for f in names if f != "run.jsonl" and not f.endswith((".tsv", ".md"))]
    files = sorted(files, key=os.path.getsize)[-largest:]
    print(f"{'original file':<48}{'MB':>7}{'read wall s':>12}{'read CPU s':>11}{'steps':>8}  format")
    for p in files:
        out = []

        def go():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out[:] = read_logs(p)

        t = time_calls(go, repeats, first=False)
        r = max(out, key=len)
        print(f"{os.path.basename(p)[:47]:<48}{os.path.getsize(p) / 1e6:7.2f}{t.median_s:12.3f}{t.cpu_median_s:11.3f}"
              f"{len(r):8d}  {r.format}", flush=True)


def main(argv=None) -> int:
    from grpojax.logs import read_logs

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--formats", nargs="*", default=list(WRITERS))
    ap.add_argument("--originals", nargs="*", default=None, metavar="FOLDER",
                    help="instead: time the largest original logs under these folders")
    ap.add_argument("--largest", type=int, default=6, help="how many of the largest originals (default 6)")
    args = ap.parse_args(argv)
    if args.originals:
        print(f"# largest originals, median of {args.repeats}; {machine_line()}")
        time_originals(args.originals, args.largest, args.repeats)
        print(f"load average now {os.getloadavg()[0]:.1f}")
        return 0
    print(f"# {args.steps} steps, median of {args.repeats}; {machine_line()}")
    print(
        f"{'format':<16}{'MB':>7}{'read wall s':>12}{'read CPU s':>11}{'bare wall s':>12}{'bare CPU s':>11}"
        f"{'steps':>8}{'cols':>6}  CPU < 5 s?"
    )
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in args.formats:
            name, writer = WRITERS[fmt]
            p = os.path.join(tmp, name)
            writer(p, args.steps)
            size = (
                sum(os.path.getsize(os.path.join(p, x)) for x in os.listdir(p)) if os.path.isdir(p) else os.path.getsize(p)
            ) / 1e6
            runs = None

            def go():
                nonlocal runs
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    runs = read_logs(p)

            read = time_calls(go, args.repeats, first=False)
            bare = time_calls(lambda: _bare(fmt, p), args.repeats, first=False)
            t, tc, b, bc = read.median_s, read.cpu_median_s, bare.median_s, bare.cpu_median_s
            r = runs[0]
            assert np.count_nonzero(~np.isnan(r.columns["reward_mean"])) == args.steps
            worst = max(worst, tc)
            print(
                f"{fmt:<16}{size:7.1f}{t:12.2f}{tc:11.2f}{b:12.2f}{bc:11.2f}{r.steps.size:8d}{len(r.columns):6d}"
                f"  {'yes' if tc < 5 else 'NO'}",
                flush=True,
            )
    print(f"worst CPU time: {worst:.2f} s; load average now {os.getloadavg()[0]:.1f}")
    return 0 if worst < 5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
