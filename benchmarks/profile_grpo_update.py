"""Where the time of one GRPO step goes: the update broken into its parts, with ``block_until_ready`` timing.

Builds the trainer of ``benchmarks/grpo_step.py`` (random-init tiny Qwen2, B = 8 prompts x G = 8
completions, 14 new tokens, beta = 0, K_ref = 1, AdamW), draws one real rollout batch, then times,
alternating the parts round-robin so that load drifts hit every part alike:

- ``rollout``: the trainer's whole ``rollout`` (sampling, decoding the texts, rewards, advantages, batch upload);
- ``generate``: the jitted sampler alone;
- ``forward``: the loss (teacher-forced log-probs + GRPO loss) alone, jitted;
- ``forward+backward``: ``value_and_grad`` of the loss, jitted;
- ``optimiser``: ``tx.update`` + ``apply_updates`` on fixed gradients, jitted;
- ``update (jit)``: the trainer's jitted update, waited for with ``block_until_ready``;
- ``update dispatch``: the same call, timed up to its return (Python + dispatch, nothing waited for);
- ``metrics to host``: what the trainer's loop does after the call (``device_get`` of the loss terms,
  ``float`` of the gradient norm, ``bool`` of the finite flag, the learning-rate schedule, the ``fresh``
  flag upload), on an already computed result;
- ``update as in trainer``: the trainer loop's whole update line, call and metric reads together;
- ``step as in trainer``: rollout, then the update as the trainer does it;
- ``update, prompt trimmed``: the jitted update on the same batch with the prompt's all-padding columns
  removed (prompts padded to the batch's longest prompt instead of ``data.max_prompt_len``);
- ``matmul reference``: one ``(tokens x hidden) @ (hidden x intermediate)`` product, the model's most
  common matrix shape, as an estimate of the floating-point rate this machine reaches on such shapes.

For the jitted parts, XLA's cost analysis gives the floating-point operations, hence GFLOP/s: a part running
near the matmul reference's rate is bound by arithmetic, not by overheads; the update's floating-point
operations at that rate give a floor for its time. Prints a table of medians (and minima) in milliseconds,
with each part's first call (compilation included) apart; ``--json`` writes the numbers too.
``--pretrained PATH`` profiles a Hugging Face model folder instead (e.g. ``models/smollm2-135m-instruct``).

Usage:
  python benchmarks/profile_grpo_update.py [--repeats 20] [--pretrained PATH] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _timing import machine_line  # noqa: E402

ARCH = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=40)
B, G, NEW = 8, 8, 14


def build_trainer(out_dir: str, *, pretrained: str | None, prompts: int, group: int, new: int):
    from grpojax.grpo import GRPOTrainer, apply_overrides, load_config

    base = "tiny-arith"
    over = ["steps=100", "warmstart.steps=0", "eval.n=0", "eval.every=0", "checkpoint.every=0",
            f"grpo.prompts_per_step={prompts}", f"grpo.group_size={group}", f"sampling.max_new_tokens={new}",
            "grpo.beta=0.0", "grpo.log_kl=false", "grpo.k_ref=1"]
    if pretrained:
        over += [f"model.pretrained={pretrained}", "tokenizer.kind=auto", "data.chat_template=false",
                 "data.max_prompt_len=32"]
    else:
        over += [f"model.{k}={v}" for k, v in ARCH.items()]
    cfg = apply_overrides(load_config(base), over)
    return GRPOTrainer(cfg, out_dir)


def parts(tr, compile_s: dict) -> tuple[dict, Callable[[], dict], int]:
    """``(parts, flops, cut)``: zero-argument callables, one per part, each returning what must be waited for;
    a function giving the floating-point operations of the jitted ones; the number of prompt columns the
    trimmed batch drops. ``compile_s`` receives the first call of the trainer's update, made here."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    from grpojax.grpo._loss import grpo_loss
    from grpojax.grpo._step import completion_logprobs

    g = tr.cfg.grpo
    graphdef, rest, batch = tr.graphdef, tr.rest, tr.batch
    fresh = jnp.asarray(True)

    def loss_fn(params, rest, batch, fresh):
        model = nnx.merge(graphdef, params, rest)
        logp, ent = completion_logprobs(model, batch.prompt, batch.prompt_mask, batch.completion)
        old = jnp.where(fresh, jax.lax.stop_gradient(logp), batch.old_logp)
        t = grpo_loss(logp, ent, old, None, batch.adv, batch.completion_mask, beta=g.beta, eps_low=g.eps_low,
                      eps_high=g.eps_high, aggregation=g.aggregation)
        return t.loss, t

    fwd = jax.jit(loss_fn)
    fwd_bwd = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    tx = tr.tx

    def opt(grads, opt_state, params):
        with jax.numpy_dtype_promotion("standard"):
            upd, new = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, upd), new

    opt_j = jax.jit(opt)
    grads = jax.tree.map(lambda x: jnp.full_like(x, 1e-3), tr.params)
    # the update donates params and opt state: keep private copies for the parts that do not
    params = jax.tree.map(jnp.copy, tr.params)
    opt_state = jax.tree.map(jnp.copy, tr.opt_state)
    state = {"params": jax.tree.map(jnp.copy, tr.params), "opt": jax.tree.map(jnp.copy, tr.opt_state)}
    t0 = time.perf_counter()
    _, _, m0 = tr.update(jax.tree.map(jnp.copy, params), jax.tree.map(jnp.copy, opt_state), rest, batch, fresh)
    jax.block_until_ready(m0)
    compile_s["update (jit)"] = time.perf_counter() - t0  # the trainer's update compiles here
    prompt, pmask = np.asarray(batch.prompt), np.asarray(batch.prompt_mask)

    def update_jit():
        state["params"], state["opt"], m = tr.update(state["params"], state["opt"], rest, batch, fresh)
        return m

    def update_dispatch():
        state["params"], state["opt"], m = tr.update(state["params"], state["opt"], rest, batch, fresh)
        return m  # timed up to here; waited for only after the clock stops (see profile)

    def metrics(m=m0, step=1, cycle=0):
        terms = jax.device_get(m.terms)
        finite = bool(m.finite)
        rec = {"loss": float(terms.loss), "entropy": float(terms.entropy), "grad_norm": float(m.grad_norm),
               "lr": float(tr.schedule(step - 1)), "is_ratio_mean": float(terms.is_ratio_mean),
               "is_ratio_max": float(terms.is_ratio_max), "clip_frac": float(terms.clip_frac), "finite": finite}
        jnp.asarray(cycle == 0)
        return rec

    def update_trainer():
        state["params"], state["opt"], m = tr.update(state["params"], state["opt"], rest, batch,
                                                     jnp.asarray(True))
        return metrics(m)

    def rollout():
        tr.rollout(0)
        return tr.batch

    def step():
        tr.rollout(0)
        return update_trainer()

    def generate():
        return tr._sample(tr.params, prompt, pmask, key=jax.random.key(0))

    cut = int(pmask.shape[1] - pmask.sum(1).max())  # leading columns that are padding in every row
    trimmed = batch._replace(prompt=batch.prompt[:, cut:], prompt_mask=batch.prompt_mask[:, cut:])
    state_t = {"params": jax.tree.map(jnp.copy, tr.params), "opt": jax.tree.map(jnp.copy, tr.opt_state)}

    def update_trimmed():
        state_t["params"], state_t["opt"], m = tr.update(state_t["params"], state_t["opt"], rest, trimmed, fresh)
        return m

    c = tr.model_config
    tokens = int(np.prod(batch.prompt.shape)) + int(np.prod(batch.completion.shape))
    x = jnp.ones((tokens, c.hidden_size), jnp.float32)
    w = jnp.ones((c.hidden_size, c.intermediate_size), jnp.float32)
    matmul = jax.jit(lambda x, w: x @ w)

    flops = lambda: {  # noqa: E731 - called after the timing, so that the first calls above time the compiles
        "forward": _flops(fwd, params, rest, batch, fresh),
        "forward+backward": _flops(fwd_bwd, params, rest, batch, fresh),
        "optimiser": _flops(opt_j, grads, opt_state, params),
        "update (jit)": _flops(tr.update, params, opt_state, rest, batch, fresh),
        "update, prompt trimmed": _flops(tr.update, params, opt_state, rest, trimmed, fresh),
        "matmul reference": _flops(matmul, x, w),
    }
    parts_ = {
        "rollout": rollout,
        "generate": generate,
        "forward": lambda: fwd(params, rest, batch, fresh),
        "forward+backward": lambda: fwd_bwd(params, rest, batch, fresh),
        "optimiser": lambda: opt_j(grads, opt_state, params),
        "update (jit)": update_jit,
        "update dispatch": update_dispatch,
        "metrics to host": lambda: metrics(m0),
        "update as in trainer": update_trainer,
        "step as in trainer": step,
        "update, prompt trimmed": update_trimmed,
        "matmul reference": lambda: matmul(x, w),
    }
    return parts_, flops, cut


def _flops(fn, *args) -> float | None:
    """Floating-point operations of one call of the jitted ``fn`` (XLA's cost analysis), if it reports them."""
    try:
        cost = fn.lower(*args).compile().cost_analysis()
    except Exception:  # noqa: BLE001 - a backend without cost analysis: no rate column
        return None
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return float(cost["flops"]) if cost and "flops" in cost else None


NO_WAIT = ("update dispatch",)
"""Parts timed up to the return of the call only (their result is waited for after the clock stops)."""


def profile(fns: dict, repeats: int) -> dict:
    import jax

    first = {}
    for name, fn in fns.items():  # compile / first call, timed apart
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        first[name] = time.perf_counter() - t0
    walls: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            jax.block_until_ready(jax.numpy.zeros(()))  # nothing pending from the previous part
            t0 = time.perf_counter()
            out = fn()
            if name not in NO_WAIT:
                jax.block_until_ready(out)
            walls[name].append(time.perf_counter() - t0)
            jax.block_until_ready(out)
    return {k: {"median_ms": 1e3 * statistics.median(v), "min_ms": 1e3 * min(v), "first_ms": 1e3 * first[k]}
            for k, v in walls.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--pretrained", default=None, help="Hugging Face model folder (default: the tiny random Qwen2)")
    ap.add_argument("--prompts", type=int, default=B)
    ap.add_argument("--group", type=int, default=G)
    ap.add_argument("--new", type=int, default=NEW)
    ap.add_argument("--json", default=None, help="also write the table as JSON to this path")
    args = ap.parse_args(argv)
    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory() as d:
        tr = build_trainer(d, pretrained=args.pretrained, prompts=args.prompts, group=args.group, new=args.new)
        tr.rollout(0)
        first: dict = {}
        fns, flops_of, cut = parts(tr, first)
        res = profile(fns, args.repeats)
        for k, v in first.items():
            res[k]["first_ms"] = 1e3 * v
        flops = flops_of()
    for k, v in res.items():
        v["gflop"] = None if flops.get(k) is None else flops[k] / 1e9
        v["gflop_per_s"] = None if flops.get(k) is None else flops[k] / (v["min_ms"] / 1e3) / 1e9
    S = args.prompts * args.group
    print(f"S={S} sequences, prompt {tr.batch.prompt.shape[1]} + completion {tr.batch.completion.shape[1]} "
          f"tokens (trimmed prompt: {tr.batch.prompt.shape[1] - cut}), vocabulary {tr.model_config.vocab_size}; "
          f"{args.repeats} repeats, parts interleaved")
    print(f"{'part':<24}{'median ms':>11}{'min ms':>9}{'first ms':>10}{'GFLOP':>8}{'GFLOP/s (at min)':>18}")
    for k, v in res.items():
        fl = "" if v["gflop"] is None else f"{v['gflop']:>8.2f}{v['gflop_per_s']:>18.1f}"
        print(f"{k:<24}{v['median_ms']:>11.2f}{v['min_ms']:>9.2f}{v['first_ms']:>10.0f}{fl}")
    u, fb, o = (res[k]["median_ms"] for k in ("update (jit)", "forward+backward", "optimiser"))
    print(f"update (jit) - forward+backward - optimiser = {u - fb - o:.2f} ms (clipping, finiteness guard, "
          f"fusion differences); update as in trainer - update (jit) = "
          f"{res['update as in trainer']['median_ms'] - u:.2f} ms (host reads of the metrics)")
    ref = res["matmul reference"]["gflop_per_s"]
    if ref and res["update (jit)"]["gflop"]:
        f, fb_ = res["forward"]["gflop_per_s"], res["forward+backward"]["gflop_per_s"]
        print(f"rates at min: forward {f:.0f}, forward+backward {fb_:.0f}, matmul reference {ref:.0f} GFLOP/s; "
              f"the update's {res['update (jit)']['gflop']:.2f} GFLOP at the reference rate take "
              f"{res['update (jit)']['gflop'] / ref * 1e3:.1f} ms (its floor on this machine), "
              f"{res['update, prompt trimmed']['gflop'] / ref * 1e3:.1f} ms with the prompt trimmed")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
