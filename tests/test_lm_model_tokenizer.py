"""Tokenizer wrapper vs transformers' own tokenizer on the fixture directories (no torch needed)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from grpojax.lm import load_tokenizer

FIX = pathlib.Path(__file__).parent / "fixtures" / "lm"
TEXTS = ["What is 12 + 7? The answer is 19.", "hi", "Solve for x:\n\n  x - 3 = 4.  Done!"]
MESSAGES = [
    {"role": "system", "content": "Be brief. "},
    {"role": "user", "content": "What is 2 + 3?"},
    {"role": "assistant", "content": "5"},
]


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def pair(request):
    import transformers  # a dependency: an import error must fail, not skip
    d = FIX / request.param
    return request.param, load_tokenizer(d), transformers.AutoTokenizer.from_pretrained(str(d))


def test_special_ids_and_encode_decode_match_transformers(pair):
    name, tok, hf = pair
    assert (tok.eos_id, tok.pad_id, tok.bos_id) == (hf.eos_token_id, hf.pad_token_id, hf.bos_token_id)
    for t in TEXTS:
        ids = tok.encode(t)
        assert ids == list(hf.encode(t))
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=True)
        assert tok.decode(ids) == t
    assert (tok.bos_id is not None) == (name == "llama")
    if name == "llama":
        assert tok.encode("hi")[0] == tok.bos_id


def test_batch_encode_left_pads_like_transformers(pair):
    _, tok, hf = pair
    tokens, mask = tok.batch_encode(TEXTS)
    enc = hf(TEXTS, padding=True, padding_side="left")
    np.testing.assert_array_equal(tokens, np.asarray(enc["input_ids"]))
    np.testing.assert_array_equal(mask, np.asarray(enc["attention_mask"], bool))
    assert tokens.dtype == np.int32 and (tokens[~mask] == tok.pad_id).all()
    assert tok.batch_decode(tokens, mask=mask) == TEXTS
    t2, m2 = tok.batch_encode(TEXTS, max_length=5, pad_to_multiple_of=8)
    assert t2.shape == (3, 8) and m2.sum(1).max() == 5
    np.testing.assert_array_equal(t2[0, 3:], tokens[0, -5:])


@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_chat_template_matches_transformers(pair, add_generation_prompt):
    _, tok, hf = pair
    for msgs in (MESSAGES[:2], MESSAGES):
        text = tok.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt)
        assert text == hf.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt, tokenize=False)
        ids = tok.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt, tokenize=True)
        want = hf.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt, tokenize=True,
                                      return_dict=False)
        assert ids == list(want)


def test_no_template_and_no_tokenizer(tmp_path):
    import shutil

    d = tmp_path / "t"
    shutil.copytree(FIX / "qwen2", d)
    cfg = (d / "tokenizer_config.json").read_text()
    import json

    c = json.loads(cfg)
    del c["chat_template"]
    (d / "tokenizer_config.json").write_text(json.dumps(c))
    with pytest.raises(ValueError, match="chat_template"):
        load_tokenizer(d).apply_chat_template(MESSAGES)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_tokenizer(tmp_path)
