"""Complete Hugging Face folders: ``save_pretrained(..., tokenizer=)`` round trips (weights, tokenizer, chat
template, EOS/pad ids), and ``grpojax export`` of a trainer run folder reproduces the run's greedy output."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from test_lm_gguf import logits, write_tiny_gguf

from grpojax.cli import main
from grpojax.cli._export import export_run
from grpojax.grpo import GRPOTrainer, apply_overrides, TrainConfig
from grpojax.lm import from_gguf, generate, load_pretrained, load_tokenizer, save_pretrained

TINY = [
    "steps=2", "tokenizer.kind=word", "data.difficulty=1", "data.n_train=300", "data.max_prompt_len=24",
    "sampling.max_new_tokens=8", "model.max_position_embeddings=32", "model.hidden_size=16",
    "model.intermediate_size=32", "model.num_hidden_layers=1", "model.num_attention_heads=2",
    "model.num_key_value_heads=1", "grpo.prompts_per_step=2", "grpo.group_size=4", "grpo.k_ref=1",
    "warmstart.steps=3", "warmstart.batch_size=4", "eval.n=4", "eval.every=0", "checkpoint.every=1",
    "optim.lr=0.05", "log.tensorboard=false",
]


def test_save_pretrained_with_tokenizer_round_trips(tmp_path):
    write_tiny_gguf(tmp_path / "t.gguf", eot=0)
    src = from_gguf(tmp_path / "t.gguf", tmp_path / "src")
    model, tok = load_pretrained(src), load_tokenizer(src)
    save_pretrained(model, tmp_path / "out", tokenizer=tok)
    back, tok2 = load_pretrained(tmp_path / "out"), load_tokenizer(tmp_path / "out")
    tokens = np.random.default_rng(0).integers(0, 200, (2, 6))
    np.testing.assert_array_equal(logits(back, tokens), logits(model, tokens))
    assert (tok2.eos_id, tok2.eos_ids, tok2.pad_id, tok2.bos_id) == (2, (2, 0), 2, 1)
    assert tok2.chat_template == tok.chat_template
    msgs = [{"role": "user", "content": "12 in the"}]
    assert tok2.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True) == \
        tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    assert json.loads((tmp_path / "out" / "generation_config.json").read_text()) == \
        {"bos_token_id": 1, "eos_token_id": [2, 0], "pad_token_id": 2}
    cfg = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (cfg["eos_token_id"], cfg["pad_token_id"], cfg["bos_token_id"]) == ([2, 0], 2, 1)


def test_save_pretrained_refuses_a_tokenizer_larger_than_the_vocabulary(tmp_path):
    from grpojax.lm import CausalLM, ModelConfig, char_tokenizer, codec_from_tokenizer

    codec = codec_from_tokenizer(char_tokenizer())
    cfg = ModelConfig(vocab_size=10, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=4)
    model = CausalLM(cfg, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=rf"{codec.vocab_size} tokens.*vocab_size=10"):
        save_pretrained(model, tmp_path / "x", tokenizer=codec)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished 2-step run of the tiny word-level task, with the trainer that ran it."""
    d = tmp_path_factory.mktemp("run")
    trainer = GRPOTrainer(apply_overrides(TrainConfig(), TINY), d / "run")
    trainer.train(show_progress=False)
    return d, trainer


def _greedy(model, prompts, eos, pad):
    P = max(len(p) for p in prompts)
    toks = np.full((len(prompts), P), pad, np.int32)
    mask = np.zeros((len(prompts), P), bool)
    for i, p in enumerate(prompts):
        toks[i, P - len(p):], mask[i, P - len(p):] = p, True
    out = generate(model, jnp.asarray(toks), jnp.asarray(mask), key=None, max_new_tokens=8, greedy=True,
                   eos_id=eos, pad_id=pad)
    return np.asarray(out.completion), np.asarray(out.completion_mask)


def test_export_reproduces_the_runs_greedy_output(run):
    d, trainer = run
    info = export_run(d / "run", d / "hf")
    assert info["step"] == 2
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        assert (d / "hf" / f).is_file(), f
    model, tok = load_pretrained(d / "hf"), load_tokenizer(d / "hf")
    codec = trainer.codec
    assert (tok.eos_id, tok.pad_id, tok.vocab_size) == (codec.eos_id, codec.pad_id, codec.vocab_size)
    questions = [p.question + "\n" for p in trainer.eval_set[:4]]
    prompts = [codec.encode(q) for q in questions]
    assert [tok.encode(q, add_special_tokens=False) for q in questions] == prompts
    ref_model = nnx.merge(trainer.graphdef, trainer.params, trainer.rest)
    want = _greedy(ref_model, prompts, codec.eos_id, codec.pad_id)
    got = _greedy(model, prompts, tok.eos_id, tok.pad_id)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    texts = [tok.decode(r[m]) for r, m in zip(*got)]
    assert texts == [codec.decode(r[m]) for r, m in zip(*want)]


def test_exported_tokenizer_loads_in_transformers(run):
    import transformers  # a dependency: an import error must fail, not skip
    d, trainer = run
    out = d / "hf_tf"
    export_run(d / "run", out)
    # transformers 5's AutoTokenizer swaps in its own Qwen2 BPE class for any qwen2 folder; the generic
    # fast-tokenizer class reads tokenizer.json as written
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(out))
    text = trainer.eval_set[0].question
    assert list(hf.encode(text)) == trainer.codec.encode(text)
    assert hf.eos_token_id == trainer.codec.eos_id and hf.pad_token_id == trainer.codec.pad_id


def test_cli_export_and_its_errors(run, tmp_path, capsys):
    d, _ = run
    assert main(["export", str(d / "run"), str(tmp_path / "a"), "--step", "1"]) == 0
    assert (tmp_path / "a" / "model.safetensors").is_file()
    capsys.readouterr()
    for argv, needle in (
        (["export", str(tmp_path / "nope"), str(tmp_path / "b")], "config.yaml"),
        (["export", str(d / "run"), str(tmp_path / "c"), "--step", "7"], "--step 7"),
        (["export", str(d / "run"), str(tmp_path / "a")], "exists"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err
