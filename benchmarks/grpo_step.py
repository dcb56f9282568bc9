"""Seconds per GRPO step (rollout + update): grpojax vs TRL's GRPOTrainer, same tiny Qwen2, same run.

Both trainers get the same random-init Qwen2 config (the tiny-arith architecture: hidden 128,
2 layers, 4 heads / 2 KV heads, SwiGLU 256, tied embeddings, the word-level arithmetic tokenizer),
the same arithmetic prompts, B = 8 prompts x G = 8 completions, max_new_tokens = 14, temperature 1,
beta = 0, one optimiser step per rollout (K_ref = 1), AdamW. A random-init model almost never emits
EOS, so both generate the full 14 tokens (same work). grpojax's step time is the trainer's own
``timing_s/step`` (rollout + rewards + update, ``block_until_ready`` via host transfer); TRL's is the
wall time between ``on_step_begin`` and ``on_step_end`` callbacks (generation + reward + update).
Compile / first steps are excluded (``--warmup``) and reported separately; medians of ``--steps``.

``--model PATH`` runs both trainers on a Hugging Face model folder instead (e.g.
``models/smollm2-135m-instruct``: grpojax ``model.pretrained=PATH``, TRL ``from_pretrained(PATH)`` with the
folder's tokenizer), same prompts without a chat template, same B, G, max_new_tokens, temperature, K_ref and
AdamW. Neither trainer computes a reference model (beta = 0 and grpojax's ``grpo.log_kl=false``, since TRL with
beta = 0 keeps no reference). Each trainer's step is split into rollout (generation + reward; TRL's
``_generate_and_score_completions``) and update (the rest: loss, backward, optimiser); the compile / warm-up
cost is reported apart, as the first steps' excess over the median step. torch's thread count is set
explicitly (``--threads``, default the cores this process may run on, which is what XLA's CPU backend uses)
and reported.

Usage:
  python benchmarks/grpo_step.py [--steps 8] [--warmup 2] [--no-trl] [--write]
  python benchmarks/grpo_step.py --model models/smollm2-135m-instruct [--steps 4 --warmup 1]
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


def cores() -> int:
    """CPU cores this process may run on (XLA's CPU backend sizes its thread pool to these)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _compile_s(first: list[float], median: float) -> float:
    """Compile / warm-up cost: what the first steps took beyond as many median steps."""
    return max(sum(first) - len(first) * median, 0.0)


def bench_grpojax(steps: int, warmup: int, *, model: str = "tiny", prompts: int = B, group: int = G,
                  new: int = NEW) -> dict:
    from grpojax.grpo import GRPOTrainer, apply_overrides, load_config

    over = [
        f"steps={steps + warmup}", "warmstart.steps=0", "eval.n=0", "eval.every=0", "checkpoint.every=0",
        f"grpo.prompts_per_step={prompts}", f"grpo.group_size={group}", f"sampling.max_new_tokens={new}",
        "grpo.beta=0.0", "grpo.log_kl=false", "grpo.k_ref=1", "sampling.temperature=1.0",
    ]
    if model == "tiny":
        over += [f"model.{k}={v}" for k, v in ARCH.items()]
    else:
        over += [f"model.pretrained={model}", "tokenizer.kind=auto", "data.chat_template=false",
                 "data.max_prompt_len=32"]
    cfg = apply_overrides(load_config("tiny-arith"), over)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        tr = GRPOTrainer(cfg, d)
        build = time.perf_counter() - t0
        tr.train(show_progress=False, resume=False)
        recs = [json.loads(x) for x in (pathlib.Path(d) / "metrics.jsonl").read_text().splitlines()[1:]]
    recs = [r for r in recs if r["step"] >= 1]
    times = [r["timing_s/step"] for r in recs]
    roll = [r["timing_s/rollout"] + r.get("timing_s/reward", 0.0) for r in recs]
    upd = [r["timing_s/update"] for r in recs]
    step = timing_of(times[warmup:])
    return {
        "build_s": build, "first_steps_s": times[:warmup], "compile_s": _compile_s(times[:warmup], step.median_s),
        "median_step_s": step.median_s, "min_step_s": step.min_s,
        "median_rollout_s": timing_of(roll[warmup:]).median_s, "median_update_s": timing_of(upd[warmup:]).median_s,
        "response_length": statistics.mean(r["response_length"] for r in recs if "response_length" in r),
        "n": len(step.walls), "lr": cfg.optim.lr, "b1": cfg.optim.b1, "b2": cfg.optim.b2,
        "grad_clip": cfg.optim.grad_clip,
    }


def bench_trl(steps: int, warmup: int, *, model: str = "tiny", prompts: int = B, group: int = G, new: int = NEW,
              threads: int | None = None, optim: dict | None = None) -> dict:
    import torch
    from datasets import Dataset
    from transformers import (AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config,
                              Qwen2ForCausalLM, TrainerCallback)
    from trl import GRPOConfig, GRPOTrainer

    from grpojax.grpo import arith_problems, correctness_reward
    from grpojax.lm import word_tokenizer

    threads = threads or cores()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if model == "tiny":
        corpus = [p.question + "\n" + p.solution for d in range(1, 6) for p in arith_problems(300, difficulty=d)]
        tok = PreTrainedTokenizerFast(tokenizer_object=word_tokenizer(corpus), eos_token="<eos>", pad_token="<pad>",
                                      unk_token="<unk>")
        hf_cfg = Qwen2Config(vocab_size=len(tok), tie_word_embeddings=True, rope_theta=10000.0,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=None,
                             **ARCH)
        lm = Qwen2ForCausalLM(hf_cfg)
    else:
        tok = AutoTokenizer.from_pretrained(model)
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    tok.padding_side = "left"
    probs = arith_problems(400, difficulty=1, seed=0)
    ds = Dataset.from_list([{"prompt": p.question + "\n", "answer": p.answer} for p in probs])

    def reward(completions, answer, **_):
        return [float(x) for x in correctness_reward(list(completions), list(answer))]

    stamps: list[float] = []
    rollouts: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

    o = optim or {}
    with tempfile.TemporaryDirectory() as d:
        args = GRPOConfig(
            output_dir=d, per_device_train_batch_size=prompts * group, num_generations=group,
            max_completion_length=new, steps_per_generation=1, num_iterations=1, beta=0.0,
            learning_rate=o.get("lr", 3e-4), adam_beta1=o.get("b1", 0.9), adam_beta2=o.get("b2", 0.999),
            weight_decay=0.0, max_grad_norm=o.get("grad_clip", 1.0), lr_scheduler_type="constant",
            max_steps=steps + warmup, logging_steps=1, report_to=[], use_cpu=True,
            bf16=False, temperature=1.0, save_strategy="no", disable_dropout=True, dataloader_num_workers=0,
            loss_type="grpo", seed=0,
        )
        t0 = time.perf_counter()
        trainer = GRPOTrainer(model=lm, reward_funcs=[reward], args=args, train_dataset=ds,
                              processing_class=tok, callbacks=[Timer()])
        build = time.perf_counter() - t0
        inner = trainer._generate_and_score_completions

        def timed(*a, **k):  # the rollout: generation, rewards, advantages
            t = time.perf_counter()
            out = inner(*a, **k)
            rollouts.append(time.perf_counter() - t)
            return out

        trainer._generate_and_score_completions = timed
        trainer.train()
        lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    times = [stamps[i + 1] - stamps[i] for i in range(0, len(stamps) - 1, 2)]
    step = timing_of(times[warmup:])
    upd = [t - r for t, r in zip(times, rollouts)]
    return {"build_s": build, "first_steps_s": times[:warmup], "compile_s": _compile_s(times[:warmup], step.median_s),
            "median_step_s": step.median_s, "min_step_s": step.min_s,
            "median_rollout_s": timing_of(rollouts[warmup:]).median_s if len(rollouts) > warmup else None,
            "median_update_s": timing_of(upd[warmup:]).median_s if len(upd) > warmup else None,
            "response_length": statistics.mean(lengths) if lengths else None,
            "n": len(step.walls), "torch_threads": torch.get_num_threads()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--model", default="tiny",
                    help="tiny (the random-init Qwen2 above) or a Hugging Face model folder for both trainers")
    ap.add_argument("--prompts", type=int, default=B, help="prompts per step B")
    ap.add_argument("--group", type=int, default=G, help="completions per prompt G")
    ap.add_argument("--new", type=int, default=NEW, help="max_new_tokens")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: the cores this process may use, as XLA's CPU backend)")
    ap.add_argument("--no-trl", action="store_true")
    ap.add_argument("--write", action="store_true", help="append a section to benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    if args.model != "tiny" and not (pathlib.Path(args.model) / "config.json").is_file():
        ap.error(f"--model {args.model!r}: expected 'tiny' or a Hugging Face model folder with a config.json")
    if args.write and (args.model != "tiny" or (args.prompts, args.group, args.new) != (B, G, NEW)):
        ap.error("--write records the default tiny setup only; expected no --model / --prompts / --group / --new")
    sizes = dict(model=args.model, prompts=args.prompts, group=args.group, new=args.new)
    print(machine_line(), flush=True)
    print(f"setup: model={args.model} B={args.prompts} G={args.group} max_new_tokens={args.new} T=1 beta=0 "
          f"K_ref=1 AdamW; JAX CPU cores {cores()}", flush=True)
    res = {"grpojax": bench_grpojax(args.steps, args.warmup, **sizes)}
    print("grpojax", json.dumps(res["grpojax"]), flush=True)
    if not args.no_trl:
        g = res["grpojax"]
        res["trl"] = bench_trl(args.steps, args.warmup, threads=args.threads,
                               optim={k: g[k] for k in ("lr", "b1", "b2", "grad_clip")}, **sizes)
        print("trl", json.dumps(res["trl"]), flush=True)
        print(machine_line(), flush=True)  # now with torch's thread count
        t = res["trl"]
        print(f"{'':10}{'step s':>9}{'rollout s':>11}{'update s':>10}{'compile s':>11}")
        for name, r in res.items():
            cells = [r["median_step_s"], r["median_rollout_s"], r["median_update_s"], r["compile_s"]]
            print(f"{name:10}" + "".join(f"{'-' if c is None else f'{c:.3f}':>{w}}"
                                          for c, w in zip(cells, (9, 11, 10, 11))))
        print(f"TRL / grpojax median step time: {t['median_step_s'] / g['median_step_s']:.2f}x "
              f"(torch threads {t['torch_threads']})")
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
            f"max_new_tokens={NEW}, T=1, beta=0 (no reference model on either side), K_ref=1, AdamW. Medians over "
            f"{args.steps} steps after {args.warmup} warm-up (compile) steps.", "",
            "| trainer | median s/step | min s/step | first steps (s) | build (s) |", "|---|---|---|---|---|",
            f"| grpojax (jit, CPU) | {g['median_step_s']:.3f} | {g['min_step_s']:.3f} | "
            f"{', '.join(f'{x:.1f}' for x in g['first_steps_s'])} | {g['build_s']:.1f} |",
        ]
        if "trl" in res:
            t = res["trl"]
            lines.append(f"| TRL GRPOTrainer (torch CPU) | {t['median_step_s']:.3f} | {t['min_step_s']:.3f} | "
                         f"{', '.join(f'{x:.1f}' for x in t['first_steps_s'])} | {t['build_s']:.1f} |")
            lines += ["", f"grpojax / TRL median step time: {g['median_step_s'] / t['median_step_s']:.2f}x "
                          f"(grpojax rollout {g['median_rollout_s']:.3f} s + update {g['median_update_s']:.3f} s; "
                          f"TRL rollout {t['median_rollout_s']:.3f} s + update {t['median_update_s']:.3f} s, "
                          f"torch {t['torch_threads']} threads; compile / warm-up: grpojax {g['compile_s']:.1f} s, "
                          f"TRL {t['compile_s']:.1f} s)."]
        lines += ["", "GPU (Qwen2-0.5B-sized random-init model): not measured -- no GPU was lent to this task.", ""]
        with open(REPO / "benchmarks" / "RESULTS.md", "a") as f:
            f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
