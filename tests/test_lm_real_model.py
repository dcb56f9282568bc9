"""SmolLM2-135M-Instruct converted from its GGUF (``make real-model``): tokenizer, chat template, EOS, greedy
generation, and logits/greedy parity with transformers (which reads the GGUF itself; needs torch, ``make parity``).

Run with ``pytest -m real_model``; every test skips (with the reason) when the converted folder is absent.
"""

from __future__ import annotations

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

from grpojax.lm import generate, infer_tokenizer_kind, load_pretrained, load_tokenizer

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "smollm2-135m-instruct"
GGUF = ROOT / "build" / "real-model" / "SmolLM2-135M-Instruct.Q4_1.gguf"

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not (MODEL / "model.safetensors").is_file(),
                       reason=f"no converted model at {MODEL} (run `make real-model`)"),
]

QUESTIONS = ["What is 12 + 7?", "Name a colour."]


@pytest.fixture(scope="module")
def lm():
    return load_pretrained(MODEL), load_tokenizer(MODEL)


def _chat_ids(tok, q):
    return tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True)


def _greedy(model, tok, prompts, n=24):
    tokens, mask = tok.batch_encode(prompts)
    out = generate(model, jnp.asarray(tokens), jnp.asarray(mask), key=None, max_new_tokens=n, greedy=True,
                   eos_id=tok.eos_ids, pad_id=tok.pad_id)
    return np.asarray(out.completion), np.asarray(out.completion_mask)


def test_special_ids_and_template(lm):
    _, tok = lm
    assert (tok.eos_id, tok.eos_token, tok.bos_id, tok.pad_id) == (2, "<|im_end|>", 1, 2)
    assert infer_tokenizer_kind(MODEL) == "file"
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert text.startswith("<|im_start|>system\n")  # the template's default system turn
    assert len(tok.encode("2024", add_special_tokens=False)) == 4  # digits one by one (smollm pre-tokenizer)


def test_greedy_generation_respects_eos_and_padding(lm):
    model, tok = lm
    prompts = [_chat_ids(tok, q) for q in QUESTIONS]
    comp, cm = _greedy(model, tok, prompts, n=64)
    for i, p in enumerate(prompts):  # batched (left-padded) == alone
        alone, am = _greedy(model, tok, [p], n=64)
        np.testing.assert_array_equal(comp[i][cm[i]], alone[0][am[0]])
    for row, m in zip(comp, cm):
        ids = row[m].tolist()
        assert 2 in ids, f"no <|im_end|> within 64 tokens: {tok.decode(ids)!r}"
        assert ids.index(2) == len(ids) - 1  # the completion stops at its EOS
        assert "<|im_end|>" not in tok.decode(ids) and tok.decode(ids).strip()


@pytest.fixture(scope="module")
def reference():
    torch = pytest.importorskip("torch", reason="torch not installed (make parity)")
    transformers = pytest.importorskip("transformers")
    if GGUF.is_file():  # transformers dequantises and un-permutes the GGUF itself: independent of the converter
        hf = transformers.AutoModelForCausalLM.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name,
                                                               torch_dtype=torch.float32)
    else:
        hf = transformers.AutoModelForCausalLM.from_pretrained(str(MODEL), torch_dtype=torch.float32)
    return torch, hf.eval()


def test_logits_match_transformers(lm, reference):
    torch, hf = reference
    model, tok = lm
    ids = np.asarray([_chat_ids(tok, QUESTIONS[0])])
    pos = jnp.broadcast_to(jnp.arange(ids.shape[1], dtype=jnp.int32), ids.shape)
    got = np.asarray(model(jnp.asarray(ids, jnp.int32), pos)[0])
    with torch.no_grad():
        want = hf(torch.as_tensor(ids)).logits.numpy()
    assert np.abs(got - want).max() <= 2e-4


def test_greedy_matches_transformers(lm, reference):
    torch, hf = reference
    model, tok = lm
    prompt = _chat_ids(tok, QUESTIONS[0])
    comp, cm = _greedy(model, tok, [prompt], n=32)
    ours = comp[0][cm[0]].tolist()
    with torch.no_grad():
        out = hf.generate(torch.as_tensor([prompt]), max_new_tokens=32, do_sample=False, eos_token_id=2,
                          pad_token_id=2)
    assert ours == out[0, len(prompt):].tolist()
