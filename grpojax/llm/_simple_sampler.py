"""Stand-in sampler used only while ``grpojax.llm.generate`` (issue 7) is unavailable.

Prefill + ``lax.fori_loop`` decode with the model's KV cache; temperature or greedy only.
Returns the same fields the trainer reads from ``generate``'s ``SampleOutput``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from grpojax.llm._cache import init_cache

__all__ = ["simple_generate"]


class _Out(NamedTuple):
    completion: jax.Array
    logprobs: jax.Array
    completion_mask: jax.Array


@partial(jax.jit, static_argnames=("graphdef", "max_new_tokens", "greedy", "eos_id"))
def _gen(graphdef, params, rest, prompt, mask, key, temperature, *, max_new_tokens, greedy, eos_id):
    model = nnx.merge(graphdef, params, rest)
    B, P = prompt.shape
    cache = init_cache(model.config, B, P + max_new_tokens, dtype=model.dtype)
    pos = jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), 1) - 1, 0).astype(jnp.int32)
    logits, cache = model(prompt, pos, attention_mask=mask, cache=cache)
    last = logits[:, -1]
    next_pos = pos[:, -1] + 1

    def body(i, carry):
        last, cache, next_pos, done, toks, lps, cmask, key = carry
        key, sub = jax.random.split(key)
        logz = jax.nn.log_softmax(last, -1)
        tok = jnp.argmax(last, -1) if greedy else jax.random.categorical(sub, last / temperature, -1)
        tok = tok.astype(jnp.int32)
        lp = jnp.take_along_axis(logz, tok[:, None], -1)[:, 0]
        live = ~done
        toks = toks.at[:, i].set(jnp.where(live, tok, eos_id))
        lps = lps.at[:, i].set(jnp.where(live, lp, 0.0))
        cmask = cmask.at[:, i].set(live)
        done = done | (tok == eos_id)
        logits, cache = model(toks[:, i : i + 1] if False else tok[:, None], next_pos[:, None],
                              attention_mask=jnp.ones((B, 1), jnp.bool_), cache=cache)
        return logits[:, -1], cache, next_pos + 1, done, toks, lps, cmask, key

    N = max_new_tokens
    init = (last, cache, next_pos, jnp.zeros(B, bool), jnp.zeros((B, N), jnp.int32),
            jnp.zeros((B, N), jnp.float32), jnp.zeros((B, N), bool), key)
    _, _, _, _, toks, lps, cmask, _ = jax.lax.fori_loop(0, N, body, init)
    return toks, lps, cmask


def simple_generate(model, prompt, prompt_mask, *, key, max_new_tokens, temperature=1.0, top_p=1.0, top_k=0,
                    greedy=False, eos_id=None):
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    toks, lps, cmask = _gen(graphdef, params, rest, prompt, prompt_mask, key, jnp.float32(temperature),
                            max_new_tokens=max_new_tokens, greedy=greedy, eos_id=int(eos_id))
    return _Out(toks, lps, cmask)
