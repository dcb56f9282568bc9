"""GGUF -> Hugging Face folder: a tiny GGUF written here with the ``gguf`` package's own writer (F32, F16, Q8_0
and Q4_1 tensors, byte-level BPE with merges, chat template), converted with :func:`grpojax.lm.from_gguf`,
loaded back, and compared with a model built directly from the dequantised weights; the tokenizer against
hand-computed ids; transformers (when torch is installed) as a second reference."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from grpojax.cli import main
from grpojax.lm import (
    ModelConfig,
    from_gguf,
    generate,
    infer_tokenizer_kind,
    load_pretrained,
    load_tokenizer,
)
from grpojax.lm._gguf import _bytes_to_unicode

import gguf  # noqa: E402  (a dependency: an import error must fail, not skip)
Q = gguf.GGMLQuantizationType

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BYTES = [_bytes_to_unicode()[b] for b in range(256)]
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "1 2"]
TOKENS = SPECIALS + BYTES + [m.replace(" ", "") for m in MERGES]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
D, I, H, K, L = 64, 128, 4, 2, 2
HD = D // H
V = len(TOKENS)
# per tensor kind: the GGUF storage type (the embedding Q8_0, the attention Q4_1, an F16, the rest F32)
QTYPE = {"token_embd": Q.Q8_0, "attn_q": Q.Q4_1, "attn_k": Q.Q4_1, "attn_v": Q.Q8_0, "attn_output": Q.F16,
         "ffn_gate": Q.Q4_1, "ffn_up": Q.F32, "ffn_down": Q.Q8_0}
HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
      "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
      "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def _permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf permutation of the q/k rows (what a GGUF file stores)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _roundtrip(w, qtype):
    """The float32 values a reader gets back after the writer stored ``w`` as ``qtype``."""
    return gguf.quants.dequantize(gguf.quants.quantize(w, qtype), qtype).reshape(w.shape).astype(np.float32)


def write_tiny_gguf(path, *, pre="smollm", tied=True, eos=2, eot=None, seed=0):
    """Write a tiny Llama GGUF; return the Hugging Face tensors (dequantised, unpermuted) it holds."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(L)
    w.add_context_length(64)
    w.add_embedding_length(D)
    w.add_feed_forward_length(I)
    w.add_head_count(H)
    w.add_head_count_kv(K)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(50000.0)
    w.add_rope_dimension_count(HD)
    w.add_vocab_size(V)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(TOKENS)
    w.add_token_types([3] * len(SPECIALS) + [1] * (V - len(SPECIALS)))
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(eos)
    if eot is not None:
        w.add_eot_token_id(eot)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    ref = {}

    def add(name, hf_name, arr, qtype, n_head=None):
        arr = arr.astype(np.float32)
        ref[hf_name] = _roundtrip(arr, qtype) if qtype not in (Q.F32,) else arr
        stored = _permute(arr, n_head) if n_head else arr
        data = gguf.quants.quantize(stored, qtype)
        w.add_tensor(name, data, raw_dtype=qtype if qtype not in (Q.F32, Q.F16) else None)

    add("token_embd.weight", "model.embed_tokens.weight", rng.normal(0, 0.5, (V, D)), QTYPE["token_embd"])
    for i in range(L):
        shapes = {"attn_q": (H * HD, D), "attn_k": (K * HD, D), "attn_v": (K * HD, D), "attn_output": (D, H * HD),
                  "ffn_gate": (I, D), "ffn_up": (I, D), "ffn_down": (D, I)}
        for kind, shape in shapes.items():
            heads = {"attn_q": H, "attn_k": K}.get(kind)
            add(f"blk.{i}.{kind}.weight", f"model.layers.{i}.{HF[kind]}.weight",
                rng.normal(0, 0.3, shape), QTYPE[kind], heads)
        for kind in ("attn_norm", "ffn_norm"):
            add(f"blk.{i}.{kind}.weight", f"model.layers.{i}.{HF[kind]}.weight",
                1 + 0.1 * rng.normal(size=D), Q.F32)
    add("output_norm.weight", "model.norm.weight", 1 + 0.1 * rng.normal(size=D), Q.F32)
    if not tied:
        add("output.weight", "lm_head.weight", rng.normal(0, 0.3, (V, D)), Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ref


def logits(model, tokens):
    tokens = jnp.asarray(tokens, jnp.int32)
    pos = jnp.broadcast_to(jnp.arange(tokens.shape[1], dtype=jnp.int32), tokens.shape)
    return np.asarray(model(tokens, pos)[0])


def reference_config(tied=True):
    return ModelConfig(vocab_size=V, hidden_size=D, intermediate_size=I, num_hidden_layers=L, num_attention_heads=H,
                       num_key_value_heads=K, head_dim=HD, rope_theta=50000.0, rms_norm_eps=1e-5,
                       tie_word_embeddings=tied, max_position_embeddings=64, model_type="llama")


@pytest.fixture(scope="module", params=[True, False], ids=["tied", "untied"])
def converted(request, tmp_path_factory):
    tied = request.param
    d = tmp_path_factory.mktemp("gguf")
    ref = write_tiny_gguf(d / "tiny.gguf", tied=tied)
    out = from_gguf(d / "tiny.gguf", d / "hf")
    # the independent reference: the dequantised tensors with a hand-written config
    (d / "ref").mkdir()
    save_file(ref, str(d / "ref" / "model.safetensors"))
    (d / "ref" / "config.json").write_text(json.dumps(reference_config(tied).to_hf()))
    return d, out, ref, tied


def test_tensors_are_the_dequantised_unpermuted_weights(converted):
    _, out, ref, _ = converted
    got = load_file(str(out / "model.safetensors"))
    assert sorted(got) == sorted(ref)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def test_config_matches_the_metadata(converted):
    _, out, _, tied = converted
    cfg = ModelConfig.from_hf(out)
    assert cfg.replace(bos_token_id=None, eos_token_id=(), pad_token_id=None) == reference_config(tied)
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (1, (2,), 2)


def test_logits_equal_the_reference_model(converted):
    d, out, _, _ = converted
    model, ref_model = load_pretrained(out), load_pretrained(d / "ref")
    tokens = jnp.asarray(np.random.default_rng(1).integers(0, V, (2, 9)), jnp.int32)
    a, b = logits(model, tokens), logits(ref_model, tokens)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a).max() > 0.1  # not a degenerate comparison


def test_tokenizer_ids_template_and_special_ids(converted):
    _, out, _, _ = converted
    tok = load_tokenizer(out)
    vid = {t: i for i, t in enumerate(TOKENS)}
    assert (tok.eos_id, tok.pad_id, tok.bos_id) == (2, 2, 1)
    assert tok.eos_token == "<|im_end|>"
    # "smollm" splits digits one by one, so the merge "1 2" never applies; " the" merges fully
    assert tok.encode("12") == [vid["1"], vid["2"]]
    assert tok.encode(" the") == [vid["Ġthe"]]
    assert tok.encode("in he") == [vid["in"], vid["Ġ"], vid["he"]]
    text = "Grüße, 12 in the end! 😀\n"
    assert tok.decode(tok.encode(text)) == text
    msgs = [{"role": "user", "content": "hi"}]
    rendered = tok.apply_chat_template(msgs, add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
    nl = vid["Ċ"]
    assert ids == [1, *[vid[c] for c in "user"], nl, vid["h"], vid["i"], 2, nl, 1,
                   *[vid[c] for c in "assistant"], nl]
    assert infer_tokenizer_kind(out) == "file"
    gen = json.loads((out / "generation_config.json").read_text())
    assert gen == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}


def test_gpt2_pre_tokenizer_merges_digits_and_eot_is_a_stop_id(tmp_path):
    write_tiny_gguf(tmp_path / "t.gguf", pre="gpt-2", eot=0)
    out = from_gguf(tmp_path / "t.gguf", tmp_path / "hf")
    tok = load_tokenizer(out)
    assert tok.encode("12") == [TOKENS.index("12")]
    assert tok.eos_id == 2 and tok.eos_ids == (2, 0)
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == [2, 0]


def test_transformers_reads_the_tokenizer(converted):
    import transformers  # a dependency: an import error must fail, not skip
    _, out, _, _ = converted
    hf = transformers.AutoTokenizer.from_pretrained(str(out))
    tok = load_tokenizer(out)
    for text in ("12 in the end", " the he", "Grüße 😀"):
        assert list(hf.encode(text)) == tok.encode(text)
    assert (hf.eos_token_id, hf.bos_token_id, hf.pad_token_id) == (2, 1, 2)
    msgs = [{"role": "user", "content": "hi"}]
    assert hf.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False) == \
        tok.apply_chat_template(msgs, add_generation_prompt=True)


def test_greedy_generation_stops_at_eos(converted):
    _, out, _, _ = converted
    model, tok = load_pretrained(out), load_tokenizer(out)
    prompt, mask = tok.batch_encode([tok.apply_chat_template([{"role": "user", "content": "the"}],
                                                             add_generation_prompt=True, tokenize=True)])
    res = generate(model, jnp.asarray(prompt), jnp.asarray(mask), key=None, max_new_tokens=12, greedy=True,
                   eos_id=tok.eos_ids)
    comp, cm = np.asarray(res.completion)[0], np.asarray(res.completion_mask)[0]
    hits = np.flatnonzero(comp[cm] == tok.eos_id)
    assert hits.size == 0 or hits[0] == cm.sum() - 1  # nothing after the first EOS


@pytest.mark.parametrize("case, needle", [
    ("not_gguf", "GGUF"),
    ("missing", "missing.gguf"),
])
def test_bad_input(tmp_path, case, needle):
    f = tmp_path / ("missing.gguf" if case == "missing" else "x.gguf")
    if case == "not_gguf":
        f.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises((ValueError, FileNotFoundError), match=needle):
        from_gguf(f, tmp_path / "out")


def test_unsupported_pre_tokenizer_is_named(tmp_path):
    write_tiny_gguf(tmp_path / "t.gguf", pre="klingon")
    with pytest.raises(ValueError, match="klingon"):
        from_gguf(tmp_path / "t.gguf", tmp_path / "out")


def test_cli_convert(tmp_path, capsys):
    write_tiny_gguf(tmp_path / "t.gguf")
    assert main(["convert-gguf", str(tmp_path / "t.gguf"), str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "tokenizer.json").is_file()
    # an existing, non-empty output folder is refused (one line), unless --force
    assert main(["convert-gguf", str(tmp_path / "t.gguf"), str(tmp_path / "hf")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["convert-gguf", str(tmp_path / "t.gguf"), str(tmp_path / "hf"), "--force"]) == 0


@pytest.mark.torch
def test_logits_match_transformers(converted):
    torch = pytest.importorskip("torch")
    import transformers  # a dependency: an import error must fail, not skip
    d, out, _, _ = converted
    tokens = np.random.default_rng(2).integers(0, V, (2, 7))
    got = logits(load_pretrained(out), tokens)
    for kwargs in ({"pretrained_model_name_or_path": str(out)},
                   {"pretrained_model_name_or_path": str(d), "gguf_file": "tiny.gguf"}):
        hf = transformers.LlamaForCausalLM.from_pretrained(**kwargs, torch_dtype=torch.float32).eval()
        with torch.no_grad():
            want = hf(torch.as_tensor(tokens)).logits.numpy()
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=0)
