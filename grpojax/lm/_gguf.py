"""GGUF (llama.cpp) checkpoints -> a Hugging Face folder that :func:`load_pretrained` and transformers read.

The file is read with the ``gguf`` package (the format's reference reader; numpy only): metadata
through :class:`gguf.GGUFReader`, tensors dequantised to float32 with :func:`gguf.quants.dequantize`
(F32, F16, BF16, Q4_0/Q4_1/Q5_x/Q8_0 and the K-quants). What is written:

* ``config.json``: from the ``<arch>.*`` metadata (``llama`` or ``qwen2``); the embeddings are tied when
  the file has no ``output.weight``.
* ``model.safetensors``: Hugging Face key names. For ``llama`` the converter to GGUF interleaves the rows
  of the query and key projections per head (``reshape(H, 2, d/2, D).swapaxes(1, 2)``, llama.cpp's
  rotary layout); that permutation is undone here (``reshape(H, d/2, 2, D).swapaxes(1, 2)``, with ``K``
  heads for the keys). ``qwen2`` tensors are stored unpermuted.
* ``tokenizer.json``: a byte-level BPE :class:`tokenizers.Tokenizer` built from ``tokenizer.ggml.tokens``
  and ``tokenizer.ggml.merges``, with the pre-tokenizer that ``tokenizer.ggml.pre`` names (e.g.
  ``smollm``: digits split one by one, then GPT-2's byte-level rules), control tokens added as special
  tokens, a byte-level decoder, and a BOS post-processor when ``tokenizer.ggml.add_bos_token`` is set.
* ``tokenizer_config.json``: the chat template (``tokenizer.chat_template``) and the bos/eos/pad/unk
  token strings; ``generation_config.json``: the bos, eos (plus ``eot``/``eom`` when present) and pad ids.

Only byte-level BPE vocabularies (``tokenizer.ggml.model == "gpt2"``) are supported.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np

from ._config import ModelConfig

from grpojax._errors import DataError

__all__ = ["GGUF_PRE_TOKENIZERS", "from_gguf", "gguf_config", "gguf_metadata", "gguf_tensors", "gguf_tokenizer"]

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: ``tokenizer.ggml.pre`` -> pre-tokenizer family (the regular expressions of llama.cpp's ``llama-vocab.cpp``):
#: ``gpt2`` (GPT-2's byte-level split), ``digits+gpt2`` (each digit alone first, then GPT-2's split),
#: ``llama3`` and ``qwen2`` (their own split expressions).
GGUF_PRE_TOKENIZERS = {
    **dict.fromkeys(("default", "gpt-2", "gpt2", "mpt", "olmo", "jais", "trillion"), "gpt2"),
    **dict.fromkeys(("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"),
                    "digits+gpt2"),
    **dict.fromkeys(("llama3", "llama-v3", "llama-bpe", "falcon3", "smaug-bpe", "dbrx", "pixtral"), "llama3"),
    **dict.fromkeys(("qwen2", "deepseek-r1-qwen", "megrez"), "qwen2"),
}

_SUPPORTED_ARCHS = ("llama", "qwen2")
_CONTROL, _USER_DEFINED = 3, 4

# GGUF tensor name (after "blk.{i}.") -> Hugging Face name (after "model.layers.{i}.")
_BLOCK = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def _reader(path: str | pathlib.Path):
    import gguf

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {path} does not exist")
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError) as exc:
        raise DataError(f"{path} is not a readable GGUF file ({exc})") from None


def gguf_metadata(path_or_reader: Any) -> dict[str, Any]:
    """Every metadata key of a GGUF file as plain Python values (strings, numbers, lists)."""
    reader = path_or_reader if hasattr(path_or_reader, "fields") else _reader(path_or_reader)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def _meta_int(meta: dict, key: str, default: Any = None) -> Any:
    v = meta.get(key, default)
    if isinstance(v, list):
        if len(set(v)) != 1:
            raise DataError(f"{key}={v} varies per layer; expected one value for every layer")
        v = v[0]
    return v


def gguf_config(meta: dict[str, Any], tensor_names: set[str] | None = None) -> ModelConfig:
    """The :class:`ModelConfig` a GGUF file's metadata describes.

    Args:
        meta: :func:`gguf_metadata` of the file.
        tensor_names: the file's tensor names (decides tied embeddings and attention biases).

    Raises:
        ValueError: an architecture other than ``llama``/``qwen2``, or a required key missing.
    """
    names = set(tensor_names or ())
    arch = meta.get("general.architecture")
    if arch not in _SUPPORTED_ARCHS:
        raise DataError(f"general.architecture={arch!r} is not supported; expected one of {_SUPPORTED_ARCHS}")
    if "rope_freqs.weight" in names:
        raise DataError("rope_freqs.weight (Llama-3.1 style rope scaling) is not supported")
    required = ("embedding_length", "block_count", "feed_forward_length", "attention.head_count")
    missing = [f"{arch}.{k}" for k in required if f"{arch}.{k}" not in meta]
    if missing:
        raise DataError(f"GGUF metadata lacks required key(s) {missing}")
    hidden = int(meta[f"{arch}.embedding_length"])
    heads = int(_meta_int(meta, f"{arch}.attention.head_count"))
    kv = int(_meta_int(meta, f"{arch}.attention.head_count_kv", heads))
    head_dim = meta.get(f"{arch}.attention.key_length") or meta.get(f"{arch}.rope.dimension_count") or hidden // heads
    vocab = meta.get(f"{arch}.vocab_size") or len(meta.get("tokenizer.ggml.tokens") or ())
    if not vocab:
        raise DataError(f"GGUF metadata has neither {arch}.vocab_size nor tokenizer.ggml.tokens")
    scaling = None
    stype = meta.get(f"{arch}.rope.scaling.type")
    if stype not in (None, "none"):
        if stype != "linear":
            raise DataError(f"{arch}.rope.scaling.type={stype!r} is not supported; expected 'linear' or none")
        scaling = {"rope_type": "linear", "factor": _f32(meta[f"{arch}.rope.scaling.factor"])}
    eos = _eos_ids(meta)
    return ModelConfig(
        vocab_size=int(vocab),
        hidden_size=hidden,
        intermediate_size=int(_meta_int(meta, f"{arch}.feed_forward_length")),
        num_hidden_layers=int(meta[f"{arch}.block_count"]),
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=int(head_dim),
        rope_theta=_f32(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        rope_scaling=scaling,
        rms_norm_eps=_f32(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-6)),
        tie_word_embeddings=bool(names) and "output.weight" not in names,
        attention_bias=True if arch == "qwen2" else "blk.0.attn_q.bias" in names,
        max_position_embeddings=int(meta.get(f"{arch}.context_length", 4096)),
        bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
        eos_token_id=eos[:1],
        pad_token_id=meta.get("tokenizer.ggml.padding_token_id"),
        model_type=arch,
    )


def _f32(x: Any) -> float:
    """The shortest decimal of a float32 metadata value (``9.99999975e-06`` -> ``1e-05``)."""
    return float(str(np.float32(x)))


def _eos_ids(meta: dict) -> tuple[int, ...]:
    """EOS first, then the end-of-turn / end-of-message ids llama.cpp also stops on."""
    ids = [meta.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")]
    return tuple(dict.fromkeys(int(i) for i in ids if i is not None))


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's per-head row interleaving of a Llama query/key projection (weight or bias)."""
    d2 = w.shape[0] // n_head // 2
    return w.reshape(n_head, d2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _hf_name(name: str) -> str | None:
    stem, _, leaf = name.rpartition(".")
    if stem in _TOP:
        return f"{_TOP[stem]}.{leaf}"
    parts = stem.split(".")
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _BLOCK:
        return f"model.layers.{parts[1]}.{_BLOCK[parts[2]]}.{leaf}"
    return None


def gguf_tensors(reader: Any, config: ModelConfig) -> dict[str, np.ndarray]:
    """All tensors of a GGUF file, dequantised to float32, under Hugging Face names and layouts.

    Raises:
        ValueError: a tensor with no Hugging Face counterpart (all such names listed) or a quantisation
            type the ``gguf`` package cannot dequantise.
    """
    from gguf.quants import dequantize

    out: dict[str, np.ndarray] = {}
    unknown = []
    for t in reader.tensors:
        key = _hf_name(t.name)
        if key is None:
            unknown.append(t.name)
            continue
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))  # ggml lists the fastest axis first
        try:
            arr = np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(shape)
        except NotImplementedError:
            raise DataError(f"tensor {t.name}: quantisation type {t.tensor_type.name} cannot be dequantised "
                             "by the installed gguf package") from None
        if config.model_type == "llama" and ".self_attn.q_proj." in key:
            arr = _unpermute(arr, config.num_attention_heads)
        elif config.model_type == "llama" and ".self_attn.k_proj." in key:
            arr = _unpermute(arr, config.num_key_value_heads)
        out[key] = np.ascontiguousarray(arr)
    if unknown:
        raise DataError(f"{len(unknown)} GGUF tensor(s) with no Hugging Face counterpart: {unknown}")
    return out


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def gguf_tokenizer(meta: dict[str, Any]):
    """The :class:`tokenizers.Tokenizer` a GGUF file's ``tokenizer.ggml.*`` metadata describes.

    Raises:
        ValueError: a vocabulary other than byte-level BPE, no merges, or an unknown ``tokenizer.ggml.pre``.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise DataError(f"tokenizer.ggml.model={kind!r} is not supported; expected 'gpt2' (byte-level BPE)")
    tokens = list(meta.get("tokenizer.ggml.tokens") or ())
    merges = list(meta.get("tokenizer.ggml.merges") or ())
    if not tokens or not merges:
        raise DataError(f"GGUF tokenizer has {len(tokens)} tokens and {len(merges)} merges; expected both")
    pre = meta.get("tokenizer.ggml.pre", "default")
    family = GGUF_PRE_TOKENIZERS.get(pre)
    if family is None:
        raise DataError(f"tokenizer.ggml.pre={pre!r} is not supported; expected one of {sorted(GGUF_PRE_TOKENIZERS)}")
    types = list(meta.get("tokenizer.ggml.token_type") or [1] * len(tokens))
    alphabet = _bytes_to_unicode()
    letters = set(alphabet.values())
    vocab = {}
    for i, (tok, typ) in enumerate(zip(tokens, types)):
        if typ not in (_CONTROL, _USER_DEFINED) and not set(tok) <= letters:
            tok = "".join(alphabet[b] for b in tok.encode("utf-8"))  # respell in the byte alphabet
        vocab.setdefault(tok, i)
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    bpe = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False,
                     ignore_merges=family == "llama3")
    tok = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if family == "gpt2":
        tok.pre_tokenizer = byte_level
    elif family == "digits+gpt2":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    else:
        split = _LLAMA3_SPLIT if family == "llama3" else _QWEN2_SPLIT
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ])
        if family == "qwen2":
            tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    post = [processors.ByteLevel(trim_offsets=False)]
    bos = meta.get("tokenizer.ggml.bos_token_id")
    if meta.get("tokenizer.ggml.add_bos_token") and bos is not None:
        b = tokens[int(bos)]
        post.append(processors.TemplateProcessing(single=f"{b} $A", pair=f"{b} $A {b} $B", special_tokens=[(b, int(bos))]))
    tok.post_processor = post[0] if len(post) == 1 else processors.Sequence(post)
    control = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == _CONTROL]
    user = [AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == _USER_DEFINED]
    if control:
        tok.add_special_tokens(control)
    if user:
        tok.add_tokens(user)
    return tok


def _special(meta: dict, name: str) -> str | None:
    i = meta.get(f"tokenizer.ggml.{name}_token_id")
    tokens = meta.get("tokenizer.ggml.tokens") or ()
    return tokens[int(i)] if i is not None and 0 <= int(i) < len(tokens) else None


def from_gguf(path: str | pathlib.Path, out_dir: str | pathlib.Path, *, dtype: str = "float32") -> pathlib.Path:
    """Convert a GGUF checkpoint into a Hugging Face folder (see the module docstring for what is written).

    Args:
        path: the ``.gguf`` file.
        out_dir: output folder (created; existing files of the same names are replaced).
        dtype: ``"float32"`` (default; dequantised values exactly) or ``"float16"`` for the safetensors.

    Returns:
        ``out_dir`` as a path.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not GGUF, or its architecture, tokenizer or a tensor is not supported.
    """
    from safetensors.numpy import save_file

    if dtype not in ("float32", "float16"):
        raise DataError(f"dtype={dtype!r}; expected 'float32' or 'float16'")
    reader = _reader(path)
    meta = gguf_metadata(reader)
    config = gguf_config(meta, {t.name for t in reader.tensors})
    tokenizer = gguf_tokenizer(meta)  # before the tensors: a bad tokenizer fails fast
    n_tok = tokenizer.get_vocab_size(with_added_tokens=True)
    if n_tok > config.vocab_size:
        raise DataError(f"GGUF tokenizer has {n_tok} tokens but the model's vocab_size={config.vocab_size}; "
                         f"expected vocab_size >= {n_tok}")
    tensors = gguf_tensors(reader, config)
    emb = tensors.get("model.embed_tokens.weight")
    if emb is None or emb.shape[0] != config.vocab_size:
        got = None if emb is None else emb.shape
        raise DataError(f"token_embd.weight has shape {got}; expected ({config.vocab_size}, {config.hidden_size})")
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    np_dtype = np.dtype(dtype)
    save_file({k: v.astype(np_dtype, copy=False) for k, v in tensors.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    cfg = config.to_hf()
    cfg["torch_dtype"] = dtype
    (out / "config.json").write_text(json.dumps(cfg, indent=2))
    tokenizer.save(str(out / "tokenizer.json"))
    tcfg: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": _special(meta, "bos"),
        "eos_token": _special(meta, "eos"),
        "pad_token": _special(meta, "padding"),
        "unk_token": _special(meta, "unknown"),
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "clean_up_tokenization_spaces": False,
        "model_max_length": config.max_position_embeddings,
    }
    if meta.get("tokenizer.chat_template"):
        tcfg["chat_template"] = meta["tokenizer.chat_template"]
    (out / "tokenizer_config.json").write_text(json.dumps(tcfg, indent=2, ensure_ascii=False))
    eos = _eos_ids(meta)
    gen = {"bos_token_id": config.bos_token_id, "eos_token_id": eos[0] if len(eos) == 1 else list(eos) or None,
           "pad_token_id": config.pad_token_id}
    (out / "generation_config.json").write_text(json.dumps({k: v for k, v in gen.items() if v is not None}, indent=2))
    return out
