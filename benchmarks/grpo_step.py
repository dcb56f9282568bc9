"""Seconds per GRPO step (rollout + update): grpojax vs TRL's GRPOTrainer, same tiny Qwen2, same run.

Both trainers get the same random-init Qwen2 config (the tiny-arith architecture: hidden 128,
2 layers, 4 heads / 2 KV heads, SwiGLU 256, tied embeddings, the word-level arithmetic tokenizer),
the same arithmetic prompts, B = 8 prompts x G = 8 completions, max_new_tokens = 14, temperature 1,
beta = 0, one optimiser step per rollout (K_ref = 1), AdamW. A random-init model almost never emits
EOS, so both generate the full 14 tokens (same work). grpojax's step time is the trainer's own
``timing_s/step`` (rollout + rewards + update, ``block_until_ready`` via host transfer); TRL's is the
wall time between ``on_step_begin`` and ``on_step_end`` callbacks (generation + reward + update).
Compile / first steps are excluded (``--warmup``) and reported separately; medians of ``--steps``.

Usage:
  python benchmarks/grpo_step.py [--steps 8] [--warmup 2] [--no-trl] [--write]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _timing import machine_line, timing_of  # noqa: E402

ARCH = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=40)
B, G, NEW = 8, 8, 14


def bench_grpojax(steps: int, warmup: int) -> dict:
    from grpojax.grpo import GRPOTrainer, apply_overrides, load_config

    cfg = apply_overrides(load_config("tiny-arith"), [
        f"steps={steps + warmup}", "warmstart.steps=0", "eval.n=0", "eval.every=0", "checkpoint.every=0",
        f"grpo.prompts_per_step={B}", f"grpo.group_size={G}", f"sampling.max_new_tokens={NEW}", "grpo.beta=0.0",
        "grpo.k_ref=1",
    ] + [f"model.{k}={v}" for k, v in ARCH.items()])
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        tr = GRPOTrainer(cfg, d)
        build = time.perf_counter() - t0
        tr.train(show_progress=False, resume=False)
        recs = [json.loads(x) for x in (pathlib.Path(d) / "metrics.jsonl").read_text().splitlines()[1:]]
    times = [r["timing_s/step"] for r in recs if r["step"] >= 1]
    roll = [r["timing_s/rollout"] for r in recs if r["step"] >= 1]
    upd = [r["timing_s/update"] for r in recs if r["step"] >= 1]
    step = timing_of(times[warmup:])
    return {
        "build_s": build, "first_steps_s": times[:warmup],
        "median_step_s": step.median_s, "min_step_s": step.min_s,
        "median_rollout_s": timing_of(roll[warmup:]).median_s, "median_update_s": timing_of(upd[warmup:]).median_s,
        "response_length": statistics.mean(r["response_length"] for r in recs if "response_length" in r),
        "n": len(step.walls),
    }


def bench_trl(steps: int, warmup: int) -> dict:
    import torch
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpojax.grpo import arith_problems
    from grpojax.lm import word_tokenizer

    torch.set_num_threads(os.cpu_count() or 2)
    torch.manual_seed(0)
    corpus = [p.question + "\n" + p.solution for d in range(1, 6) for p in arith_problems(300, difficulty=d)]
    tok = PreTrainedTokenizerFast(tokenizer_object=word_tokenizer(corpus), eos_token="<eos>", pad_token="<pad>",
                                  unk_token="<unk>")
    tok.padding_side = "left"
    hf_cfg = Qwen2Config(vocab_size=len(tok), tie_word_embeddings=True, rope_theta=10000.0,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
                         **ARCH)
    model = Qwen2ForCausalLM(hf_cfg)
    probs = arith_problems(400, difficulty=1, seed=0)
    ds = Dataset.from_list([{"prompt": p.question + "\n", "answer": p.answer} for p in probs])

    from grpojax.grpo import correctness_reward

    def reward(completions, answer, **_):
        return [float(x) for x in correctness_reward(list(completions), list(answer))]

    stamps: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as d:
        args = GRPOConfig(
            output_dir=d, per_device_train_batch_size=B * G, num_generations=G, max_completion_length=NEW,
            steps_per_generation=1, num_iterations=1, beta=0.0,
            learning_rate=3e-4, max_steps=steps + warmup, logging_steps=1, report_to=[], use_cpu=True,
            bf16=False, temperature=1.0, save_strategy="no", disable_dropout=True, dataloader_num_workers=0,
            loss_type="grpo", seed=0,
        )
        t0 = time.perf_counter()
        trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=ds,
                              processing_class=tok, callbacks=[Timer()])
        build = time.perf_counter() - t0
        trainer.train()
    times = [stamps[i + 1] - stamps[i] for i in range(0, len(stamps) - 1, 2)]
    step = timing_of(times[warmup:])
    return {"build_s": build, "first_steps_s": times[:warmup], "median_step_s": step.median_s,
            "min_step_s": step.min_s, "n": len(step.walls)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-trl", action="store_true")
    ap.add_argument("--write", action="store_true", help="append a section to benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    print(machine_line(), flush=True)
    res = {"grpojax": bench_grpojax(args.steps, args.warmup)}
    print("grpojax", json.dumps(res["grpojax"]), flush=True)
    if not args.no_trl:
        res["trl"] = bench_trl(args.steps, args.warmup)
        print("trl", json.dumps(res["trl"]), flush=True)
        print(machine_line(), flush=True)  # now with torch's thread count
    if args.write:
        import jax
        import trl

        g = res["grpojax"]
        lines = [
            "", "## grpo_step: seconds per GRPO step, grpojax vs TRL GRPOTrainer", "",
            f"Command: `python benchmarks/grpo_step.py --steps {args.steps} --warmup {args.warmup} --write` "
            f"({datetime.date.today()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores, "
            f"jax {jax.__version__}, trl {trl.__version__}; the machine was shared with other jobs, "
            "so absolute times are noisy -- both trainers ran in the same process run, one after the other).",
            "",
            f"Setup: random-init Qwen2 (hidden {ARCH['hidden_size']}, {ARCH['num_hidden_layers']} layers, "
            f"4/2 heads, SwiGLU {ARCH['intermediate_size']}, tied, word tokenizer), B={B} prompts x G={G}, "
            f"max_new_tokens={NEW}, T=1, beta=0, K_ref=1, AdamW. Medians over {args.steps} steps after "
            f"{args.warmup} warm-up (compile) steps.", "",
            "| trainer | median s/step | min s/step | first steps (s) | build (s) |", "|---|---|---|---|---|",
            f"| grpojax (jit, CPU) | {g['median_step_s']:.3f} | {g['min_step_s']:.3f} | "
            f"{', '.join(f'{x:.1f}' for x in g['first_steps_s'])} | {g['build_s']:.1f} |",
        ]
        if "trl" in res:
            t = res["trl"]
            lines.append(f"| TRL GRPOTrainer (torch CPU) | {t['median_step_s']:.3f} | {t['min_step_s']:.3f} | "
                         f"{', '.join(f'{x:.1f}' for x in t['first_steps_s'])} | {t['build_s']:.1f} |")
            lines += ["", f"grpojax / TRL median step time: {g['median_step_s'] / t['median_step_s']:.2f}x "
                          f"(grpojax rollout {g['median_rollout_s']:.3f} s + update {g['median_update_s']:.3f} s)."]
        lines += ["", "GPU (Qwen2-0.5B-sized random-init model): not measured -- no GPU was lent to this task.", ""]
        with open(REPO / "benchmarks" / "RESULTS.md", "a") as f:
            f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
