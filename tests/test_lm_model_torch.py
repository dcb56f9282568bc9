"""Live parity with transformers + torch (``pytest -m torch``; skipped when torch is not installed).

Fresh random Qwen2/Llama models are built with transformers (seed differs from the committed fixtures),
saved, loaded here and compared live; our own saved checkpoints are loaded back by transformers.
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import numpy as np
import pytest
from flax import nnx

from grpojax.lm import generate, load_pretrained, save_pretrained

pytestmark = pytest.mark.torch
FIX = pathlib.Path(__file__).parent / "fixtures" / "lm"
PROMPTS = ["What is 41 + 1? The answer", "x", "The quick brown fox jumps over the lazy dog. Compute 3 times 4."]


def _make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def live(request, tmp_path_factory):
    pytest.importorskip("torch")
    mf = _make_fixtures()
    name = request.param
    d = tmp_path_factory.mktemp(name)
    mf.build_tokenizer(name, d)
    ids = mf.special_ids(d, name)
    hf = mf.build_hf_model(name, ids, seed=123)
    hf.save_pretrained(d, max_shard_size=mf.SPECS[name]["shard"] or "50GB")
    return name, mf, hf, d, ids


def _logits(model, tokens, mask, positions):
    fwd = jax.jit(lambda gs, t, p, m: nnx.merge(*gs)(t, p, attention_mask=m)[0])
    return np.asarray(fwd(nnx.split(model), tokens, positions, mask))


def test_live_logits_and_greedy_parity(live):
    name, mf, hf, d, ids = live
    model = load_pretrained(d)
    tokens, mask, positions = mf.padded_batch(d, PROMPTS)
    ref = mf.hf_logits(hf, tokens, mask, positions)
    got = _logits(model, tokens, mask, positions)
    assert np.abs(got - ref)[mask].max() < 1e-4
    greedy = mf.hf_greedy(hf, tokens, mask, eos_id=ids["eos_token_id"], pad_id=ids["pad_token_id"],
                          max_new_tokens=10)
    out = generate(model, tokens, mask, key=None, max_new_tokens=10, greedy=True, eos_id=ids["eos_token_id"],
                   pad_id=ids["pad_token_id"])
    cm = np.asarray(out.completion_mask)
    np.testing.assert_array_equal(np.where(cm, np.asarray(out.completion), -1), np.where(cm, greedy, -1))


def test_transformers_reads_our_checkpoint(live, tmp_path):
    import torch
    import transformers

    name, mf, hf, d, ids = live
    model = load_pretrained(d)
    save_pretrained(model, tmp_path)
    back = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), attn_implementation="eager",
                                                             dtype=torch.float32).eval()
    assert type(back) is type(hf)
    tokens, mask, positions = mf.padded_batch(d, PROMPTS)
    np.testing.assert_allclose(mf.hf_logits(back, tokens, mask, positions)[mask],
                               mf.hf_logits(hf, tokens, mask, positions)[mask], atol=1e-6)
