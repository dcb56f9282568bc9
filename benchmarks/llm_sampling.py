"""Sampling throughput of grpojax.lm vs transformers ``generate`` on the same tiny checkpoints.

For each tiny fixture checkpoint (tests/fixtures/lm/{qwen2,llama}; fp32, CPU) and a left-padded batch of
random prompts:

* compile time of ``generate`` (AOT ``lower().compile()``, reported separately);
* prefill tokens/s: one forward over the ``B x P`` prompt tokens writing the KV cache;
* decode tokens/s: ``B x (N - 1) / (t_generate - t_prefill)`` with EOS disabled so every row runs ``N`` steps;
* the same two numbers for transformers (torch, eager CPU): a forward over the prompt, and greedy
  ``generate(max_new_tokens=N, min_new_tokens=N)`` with its KV cache.

Times are medians (and minima) over ``--repeats`` runs after one warm-up, with ``block_until_ready``.

``--models`` also takes Hugging Face model folders (e.g. ``models/smollm2-135m-instruct``): both libraries load
the same weights. torch's thread count is set explicitly (``--threads``, default the cores this process may run
on, which XLA's CPU backend uses too) and reported with the results.

``--gpu``: additionally (on an accelerator) a Qwen2-0.5B-sized random model in bf16: tokens/s and peak
device memory. Not run on the CPU-only project machines.

Usage::

    .venv/bin/python benchmarks/llm_sampling.py [--batch 8 --prompt 32 --new 64 --repeats 5] [--markdown]
    .venv/bin/python benchmarks/llm_sampling.py --models models/smollm2-135m-instruct --new 32
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grpojax.lm import ModelConfig, generate, init_cache, init_model, left_pad_positions, load_pretrained
from grpojax.lm._sampler import _generate_jit, bucket_length

from _timing import machine_line, time_calls

REPO = pathlib.Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "lm"

QWEN2_0_5B = dict(
    model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
    num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1000000.0,
    rms_norm_eps=1e-6, tie_word_embeddings=True, eos_token_id=151645, pad_token_id=151643,
)


def _batch(vocab: int, B: int, P: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(P // 2, P + 1, size=B)
    lengths[0] = P
    tokens = np.zeros((B, P), np.int32)
    mask = np.zeros((B, P), bool)
    for b, n in enumerate(lengths):
        tokens[b, P - n:] = rng.integers(3, vocab, size=n)
        mask[b, P - n:] = True
    return tokens, mask


def _decode_rate(B: int, N: int, t_gen: float, t_pre: float) -> float:
    """Decode tokens/s ``B (N - 1) / (t_generate - t_prefill)``; NaN when noise makes the difference <= 0."""
    return B * (N - 1) / (t_gen - t_pre) if t_gen > t_pre else float("nan")


def bench_jax(model, tokens, mask, N: int, repeats: int) -> dict:
    B, P = tokens.shape
    no_eos = [model.config.vocab_size + 7]  # never sampled: every row decodes N tokens
    Pb = bucket_length(P)
    tb = jnp.pad(jnp.asarray(tokens), ((0, 0), (Pb - P, 0)))
    mb = jnp.pad(jnp.asarray(mask), ((0, 0), (Pb - P, 0)))
    graphdef, state = nnx.split(model)
    args = (graphdef, state, tb, mb, jax.random.key(0), jnp.float32(1), jnp.int32(0), jnp.float32(1),
            jnp.bool_(True), jnp.asarray(no_eos, jnp.int32), jnp.int32(0))
    t0, c0 = time.perf_counter(), time.process_time()
    _generate_jit.lower(*args, max_new_tokens=N, use_filter=False).compile()
    compile_s, compile_cpu_s = time.perf_counter() - t0, time.process_time() - c0

    @jax.jit
    def prefill(state, tokens, mask):
        m = nnx.merge(graphdef, state)
        cache = init_cache(m.config, tokens.shape[0], tokens.shape[1] + N, dtype=m.dtype)
        logits, cache = m(tokens, left_pad_positions(mask), attention_mask=mask, cache=cache)
        return logits[:, -1], cache

    def run_gen():
        out = generate(model, tokens, mask, key=None, greedy=True, max_new_tokens=N, eos_id=no_eos, pad_id=0)
        jax.block_until_ready(out)
        assert int(out.lengths.min()) == N

    t_pre = time_calls(lambda: prefill(state, tb, mb), repeats).median_s
    gen = time_calls(run_gen, repeats)
    t_gen, t_gen_min = gen.median_s, gen.min_s
    return dict(compile_s=compile_s, compile_cpu_s=compile_cpu_s, prefill_s=t_pre, generate_s=t_gen, generate_min_s=t_gen_min,
                prefill_tok_s=B * P / t_pre, decode_tok_s=_decode_rate(B, N, t_gen, t_pre),
                total_tok_s=B * N / t_gen)


def cores() -> int:
    """CPU cores this process may run on (XLA's CPU backend sizes its thread pool to these)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def model_path(name: str) -> pathlib.Path:
    """A fixture name (``qwen2``, ``llama``) or a Hugging Face model folder."""
    path = FIX / name if (FIX / name / "config.json").is_file() else pathlib.Path(name)
    if not (path / "config.json").is_file():
        fixtures = sorted(p.name for p in FIX.iterdir() if (p / "config.json").is_file())
        raise ValueError(f"--models entry {name!r}: expected one of {fixtures} or a Hugging Face model folder")
    return path


def bench_torch(path: pathlib.Path, tokens, mask, N: int, repeats: int, threads: int | None = None) -> dict | None:
    try:
        import torch
        import transformers
    except ImportError:
        return None
    torch.set_num_threads(threads or cores())
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    B, P = tokens.shape
    ids = torch.as_tensor(tokens, dtype=torch.long)
    am = torch.as_tensor(mask, dtype=torch.long)
    pos = torch.as_tensor(np.maximum(np.cumsum(mask, 1) - 1, 0), dtype=torch.long)

    def prefill():
        with torch.no_grad():
            model(input_ids=ids, attention_mask=am, position_ids=pos, use_cache=True)

    def gen():
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=am, max_new_tokens=N, min_new_tokens=N,
                                 do_sample=False, pad_token_id=0)
        assert out.shape[1] == P + N

    t_pre = time_calls(prefill, repeats).median_s
    timing = time_calls(gen, repeats)
    t_gen, t_gen_min = timing.median_s, timing.min_s
    return dict(prefill_s=t_pre, generate_s=t_gen, generate_min_s=t_gen_min, prefill_tok_s=B * P / t_pre,
                decode_tok_s=_decode_rate(B, N, t_gen, t_pre), total_tok_s=B * N / t_gen,
                attn=model.config._attn_implementation, torch=torch.__version__, threads=torch.get_num_threads())


def bench_gpu(B: int, P: int, N: int, repeats: int) -> dict:
    cfg = ModelConfig.from_hf(QWEN2_0_5B)
    model = init_model(cfg, key=jax.random.key(0), dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    tokens, mask = _batch(cfg.vocab_size, B, P)
    res = bench_jax(model, tokens, mask, N, repeats)
    stats = jax.devices()[0].memory_stats() or {}
    res["peak_bytes_in_use"] = stats.get("peak_bytes_in_use")
    res["device"] = str(jax.devices()[0])
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--models", default="qwen2,llama",
                    help="comma-separated fixture names (qwen2, llama) or Hugging Face model folders")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads (default: the cores this process may use, as XLA's CPU backend)")
    ap.add_argument("--gpu", action="store_true", help="also the Qwen2-0.5B-sized bf16 model (accelerator only)")
    ap.add_argument("--markdown", action="store_true", help="print a RESULTS.md section")
    ap.add_argument("--json", type=pathlib.Path, default=None)
    args = ap.parse_args(argv)
    B, P, N = args.batch, args.prompt, args.new
    print(machine_line())
    print(f"JAX CPU cores {cores()}; torch threads {args.threads or cores()}")
    results: dict = {"batch": B, "prompt": P, "new_tokens": N, "repeats": args.repeats,
                     "jax": jax.__version__, "backend": jax.default_backend(), "machine": platform.processor(),
                     "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}
    names = [n for n in args.models.split(",") if n]
    try:
        paths = [model_path(n) for n in names]
    except ValueError as exc:
        ap.error(str(exc))
    results["models"] = names
    results["jax_cpu_cores"] = cores()
    for name, path in zip(names, paths):
        model = load_pretrained(path)
        tokens, mask = _batch(model.config.vocab_size, B, P)
        r = {"grpojax": bench_jax(model, tokens, mask, N, args.repeats),
             "transformers": bench_torch(path, tokens, mask, N, args.repeats, args.threads)}
        results[name] = r
        print(name, json.dumps(r, indent=1))
    if args.gpu:
        results["qwen2_0.5b_bf16"] = bench_gpu(B, 128, 128, args.repeats)
        print(json.dumps(results["qwen2_0.5b_bf16"], indent=1))
    results["loadavg_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.markdown:
        print(markdown(results, argv))
    return results


def markdown(res: dict, argv) -> str:
    lines = [
        "| model | impl | compile s wall (CPU) | prefill tok/s | decode tok/s | generate s (median / min) |",
        "|---|---|---|---|---|---|",
    ]
    for name in res.get("models", ("qwen2", "llama")):
        if name not in res:
            continue
        label = f"tiny {name}" if (FIX / name).is_dir() else pathlib.Path(name).name
        for impl in ("grpojax", "transformers"):
            r = res[name][impl]
            if r is None:
                continue
            comp = f"{r['compile_s']:.1f} ({r['compile_cpu_s']:.1f})" if "compile_s" in r else "-"
            lines.append(f"| {label} | {impl} | {comp} | {r['prefill_tok_s']:.0f} | {r['decode_tok_s']:.0f} | "
                         f"{r['generate_s']:.3f} / {r['generate_min_s']:.3f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
