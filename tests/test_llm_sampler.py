"""Sampler: KV-cache greedy == full recomputation == transformers; log-probs == teacher forcing."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grpojax.llm import (
    bucket_length,
    filter_logits,
    generate,
    left_pad_positions,
    load_pretrained,
    sequence_logprobs,
)

FIX = pathlib.Path(__file__).parent / "fixtures" / "llm"
N_NEW = 8


@pytest.fixture(scope="session", params=["qwen2", "llama"])
def fixture_model(request):
    d = FIX / request.param
    model = load_pretrained(d)
    ref = dict(np.load(d / "reference.npz"))
    return request.param, model, ref


@jax.jit
def _forward_jit(graphdef_state, tokens, mask):
    graphdef, state = graphdef_state
    return nnx.merge(graphdef, state)(tokens, left_pad_positions(mask), attention_mask=mask)[0]


def _greedy_by_recomputation(model, tokens, mask, n_new, eos_ids):
    """Greedy decoding without a cache: a full forward over a fixed (B, P + N) buffer at every step."""
    B, P = tokens.shape
    buf = np.concatenate([tokens, np.zeros((B, n_new), np.int32)], axis=1)
    m = np.concatenate([mask, np.zeros((B, n_new), bool)], axis=1)
    done = np.zeros(B, bool)
    state = nnx.split(model)
    for i in range(n_new):
        logits = np.asarray(_forward_jit(state, jnp.asarray(buf), jnp.asarray(m)))
        nxt = logits[:, P + i - 1].argmax(-1)
        buf[:, P + i] = np.where(done, 0, nxt)
        m[:, P + i] = ~done
        done |= np.isin(nxt, eos_ids)
    return buf[:, P:], m[:, P:]


def test_greedy_cache_equals_recomputation_and_transformers(fixture_model):
    name, model, ref = fixture_model
    eos = model.config.eos_token_id
    out = generate(model, ref["tokens"], ref["mask"], key=None, max_new_tokens=N_NEW, greedy=True, eos_id=eos,
                   pad_id=model.config.pad_token_id)
    rec, rec_mask = _greedy_by_recomputation(model, ref["tokens"], ref["mask"], N_NEW, eos)
    comp = np.asarray(out.completion)
    cmask = np.asarray(out.completion_mask)
    np.testing.assert_array_equal(cmask, rec_mask)
    np.testing.assert_array_equal(np.where(cmask, comp, -1), np.where(rec_mask, rec, -1))
    # transformers' greedy generate on the same padded batch (reference.npz, made by make_fixtures.py)
    np.testing.assert_array_equal(np.where(cmask, comp, -1), np.where(cmask, ref["greedy"], -1))
    assert out.tokens.shape == (3, ref["tokens"].shape[1] + N_NEW)
    np.testing.assert_array_equal(np.asarray(out.tokens[:, : ref["tokens"].shape[1]]), ref["tokens"])
    np.testing.assert_array_equal(np.asarray(out.lengths), cmask.sum(1))


def test_logprobs_equal_teacher_forcing(fixture_model):
    name, model, ref = fixture_model
    P = ref["tokens"].shape[1]
    out = generate(model, ref["tokens"], ref["mask"], key=jax.random.key(3), max_new_tokens=N_NEW,
                   temperature=0.7, top_p=0.9, top_k=50, eos_id=model.config.eos_token_id,
                   pad_id=model.config.pad_token_id)
    tf = jax.jit(lambda s, t, m: sequence_logprobs(nnx.merge(*s), t, m))(nnx.split(model), out.tokens, out.mask)
    lp = np.asarray(out.logprobs)
    np.testing.assert_allclose(np.asarray(tf)[:, P:], lp, atol=1e-4)
    assert np.all(lp[np.asarray(out.completion_mask)] < 0)
    assert np.all(lp[~np.asarray(out.completion_mask)] == 0)
