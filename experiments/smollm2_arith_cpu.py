"""smollm2_arith_cpu: the shipped ``smollm2-arith`` config trained by ``grpojax train`` on a CPU, and what it learned.

Trains SmolLM2-135M-Instruct (``make real-model``) with the config as shipped (AdamW 1e-5, 8 prompts x 8
completions, 8 new tokens, sampling temperature 0.5) for ``--steps`` GRPO steps through the trainer itself, then
compares the greedy accuracy on the config's 200 held-out problems at step 0 and at the last evaluation: each with
its binomial standard error, and the difference with the standard error of two independent proportions
``sqrt(p0 (1 - p0) / n + p1 (1 - p1) / n)``. The same problems are scored both times, so the paired standard
error would be smaller; the independent one is the conservative choice (the trainer logs accuracies, not
per-problem results). A run folder that already holds the run is resumed, not retrained; ``--log-only`` reads
the folder's log as it is (e.g. a run stopped before its last step) and trains nothing.

Usage:
  python experiments/smollm2_arith_cpu.py --out out/smollm2-arith-cpu --steps 40 --results experiments/results
  python experiments/smollm2_arith_cpu.py --out out/smollm2-arith-cpu --steps 40 --log-only --results experiments/results
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys

os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAME = "smollm2_arith_cpu"


def two_proportions(p0: float, p1: float, n: int) -> dict:
    """Difference of two accuracies on ``n`` problems each, with the independent-samples standard error."""
    se0, se1 = math.sqrt(p0 * (1 - p0) / n), math.sqrt(p1 * (1 - p1) / n)
    se = math.hypot(se0, se1)
    z = (p1 - p0) / se if se > 0 else math.nan
    return {"n": n, "before": p0, "after": p1, "se_before": se0, "se_after": se1, "diff": p1 - p0, "se_diff": se,
            "z": z, "significant": bool(abs(z) > 1.96)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("out/smollm2-arith-cpu"), help="run folder")
    ap.add_argument("--steps", type=int, default=40, help="GRPO steps (default 40)")
    ap.add_argument("--results", type=pathlib.Path, default=None, help="write smollm2_arith_cpu.{md,json,png} here")
    ap.add_argument("--log-only", action="store_true", help="summarise the run folder's log; train nothing")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error(f"--steps={args.steps}; expected >= 1")
    sys.path.insert(0, str(ROOT))
    from grpojax._io import save_figure, write_json, write_text_atomic
    from grpojax.grpo import apply_overrides, load_config, read_jsonl_metrics, train

    cfg = apply_overrides(load_config("smollm2-arith"), [f"steps={args.steps}"])
    if not (ROOT / cfg.model.pretrained).is_dir() and not pathlib.Path(cfg.model.pretrained).is_dir():
        print(f"{NAME}: model folder {cfg.model.pretrained} is missing; run `make real-model` first", file=sys.stderr)
        return 2
    if not args.log_only:
        train(cfg, args.out, resume=True)
    elif not (args.out / "metrics.jsonl").is_file():
        print(f"{NAME}: --log-only: {args.out} holds no metrics.jsonl; expected a run folder of `grpojax train`",
              file=sys.stderr)
        return 2
    recs = read_jsonl_metrics(args.out / "metrics.jsonl")
    last_step = max(int(r["step"]) for r in recs)
    evals = [(int(r["step"]), r["eval_accuracy_greedy"]) for r in recs if "eval_accuracy_greedy" in r]
    if len(evals) < 2:
        print(f"{NAME}: the run logged {len(evals)} greedy evaluation(s); expected one at step 0 and a later one",
              file=sys.stderr)
        return 2
    n = cfg.eval.n
    res = two_proportions(evals[0][1], evals[-1][1], n)
    steps = [int(r["step"]) for r in recs if "reward_mean" in r]
    reward = [r["reward_mean"] for r in recs if "reward_mean" in r]
    step_s = sorted(r["timing_s/step"] for r in recs if "timing_s/step" in r and r["step"] > 1)
    out = {"config": "smollm2-arith", "steps": args.steps, "last_step": last_step, "evals": evals,
           "greedy": res, "median_step_s": step_s[len(step_s) // 2] if step_s else None,
           "command": f"python experiments/{NAME}.py --out {args.out} --steps {args.steps}"
                      + (" --log-only" if args.log_only else "") + " --results RESULTS"}
    verdict = "significant" if res["significant"] else "not significant"
    print(f"greedy accuracy on {n} held-out problems: {res['before']:.3f} (step {evals[0][0]}) -> {res['after']:.3f} "
          f"(step {evals[-1][0]}), difference {res['diff']:+.3f} +- {res['se_diff']:.3f}, z = {res['z']:.2f} ({verdict})")
    if args.results is None:
        return 0
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.plot(steps, reward, ".-", lw=0.8, label="sampled reward (T = 0.5, 8 x 8 per step)")
    es, ev = zip(*evals)
    ax.errorbar(es, ev, yerr=[math.sqrt(p * (1 - p) / n) for p in ev], fmt="o", capsize=3,
                label=f"greedy accuracy, {n} held-out problems (± SE)")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("accuracy / reward")
    ax.set_title("SmolLM2-135M-Instruct, smollm2-arith, grpojax train on CPU", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, args.results / f"{NAME}.png", dpi=110)
    plt.close(fig)
    write_json(args.results, f"{NAME}.json", out)
    stopped = "" if last_step >= args.steps else (
        f"The run stopped at step {last_step} of {args.steps} (with `--log-only` this summarises the log as it is: "
        f"the training command was `grpojax train --config smollm2-arith --out {args.out} --steps {args.steps}`, "
        "ended early, and the config saves no checkpoint before the last step).\n")
    rows = "\n".join(f"| {s} | {p:.3f} | {math.sqrt(p * (1 - p) / n):.3f} |" for s, p in evals)
    md = f"""# smollm2-arith trained by `grpojax train` on a CPU

Command: `{out['command']}` (the shipped config as it is: AdamW lr 1e-5, 8 prompts x 8 completions, 8 new
tokens, sampling temperature 0.5, K_ref = 1; {args.steps} steps planned, {last_step} logged; 2-core CPU, median step
{out['median_step_s']:.1f} s; evaluation every {cfg.eval.every} steps). Greedy accuracy on the config's {n} held-out
problems:

| step | greedy accuracy | SE |
|---|---|---|
{rows}

Difference (last - step 0): **{res['diff']:+.3f} ± {res['se_diff']:.3f}** (independent-proportions SE, conservative:
the same problems are scored both times), z = {res['z']:.2f}: {verdict} at the two-sided 5% level.

{stopped}
![reward and accuracy](smollm2_arith_cpu.png)
"""
    write_text_atomic(args.results / f"{NAME}.md", md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
