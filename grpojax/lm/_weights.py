"""Hugging Face safetensors checkpoints <-> :class:`CausalLM` parameters.

Key-mapping table (``{i}`` = layer index; "T" = the tensor is transposed, torch ``Linear.weight`` is
``(out, in)`` while our ``kernel`` is ``(in, out)``):

====================================================  ===========================================  ==
Hugging Face key                                      NNX parameter path                           T
====================================================  ===========================================  ==
``model.embed_tokens.weight``                         ``embed_tokens.embedding``
``model.layers.{i}.input_layernorm.weight``           ``layers.{i}.input_layernorm.weight``
``model.layers.{i}.self_attn.{q,k,v}_proj.weight``    ``layers.{i}.self_attn.{q,k,v}_proj.kernel``  T
``model.layers.{i}.self_attn.{q,k,v}_proj.bias``      ``layers.{i}.self_attn.{q,k,v}_proj.bias``
``model.layers.{i}.self_attn.o_proj.weight``          ``layers.{i}.self_attn.o_proj.kernel``        T
``model.layers.{i}.post_attention_layernorm.weight``  ``layers.{i}.post_attention_layernorm.weight``
``model.layers.{i}.mlp.{gate,up,down}_proj.weight``   ``layers.{i}.mlp.{gate,up,down}_proj.kernel``  T
``model.norm.weight``                                 ``norm.weight``
``lm_head.weight`` (untied only)                      ``lm_head.kernel``                           T
====================================================  ===========================================  ==

Loading builds the model abstractly (``nnx.eval_shape``: no memory, no random init), reads each tensor
from its (possibly sharded) file on the host and places it directly with its ``NamedSharding`` on the
mesh (or on the default device). Any checkpoint key the table does not map, any parameter the checkpoint
lacks and any shape mismatch is collected and reported together in one :class:`WeightLoadError`.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh
from safetensors import safe_open
from safetensors.numpy import save_file

from grpojax._errors import DataError

from ._config import ModelConfig
from ._mesh import param_shardings
from ._char_tokenizer import TextCodec
from ._model import CausalLM
from ._tokenizer import Tokenizer, check_vocab_fits

__all__ = ["load_pretrained", "save_pretrained", "hf_key_map", "WeightLoadError"]

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"
# Buffers some checkpoints carry that are recomputed here.
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
# Leaf name -> (HF leaf name, transpose?)
_LEAF = {"kernel": ("weight", True), "embedding": ("weight", False), "weight": ("weight", False),
         "bias": ("bias", False)}


class WeightLoadError(DataError):
    """A checkpoint does not fit the model: lists every unmapped key, missing key and shape mismatch."""


def _hf_key(path: tuple) -> tuple[str, bool]:
    *mods, leaf = (str(p) for p in path)
    name, transpose = _LEAF[leaf]
    prefix = [] if mods[0] == "lm_head" else ["model"]
    return ".".join(prefix + mods + [name]), transpose


def hf_key_map(model_or_state: nnx.Module | nnx.State) -> dict[str, tuple[tuple, bool]]:
    """``{hf_key: (nnx_path, transpose)}`` for every parameter of a (possibly abstract) model."""
    state = model_or_state if isinstance(model_or_state, nnx.State) else nnx.state(model_or_state, nnx.Param)
    return {(k := _hf_key(path))[0]: (path, k[1]) for path, _ in nnx.to_flat_state(state)}


def _checkpoint_files(path: pathlib.Path) -> dict[str, pathlib.Path]:
    """``{tensor key: file}`` from the index file, a single model.safetensors, or all ``*.safetensors``."""
    index = path / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        files = {k: path / f for k, f in weight_map.items()}
        absent = sorted({str(f) for f in files.values() if not f.is_file()})
        if absent:
            raise FileNotFoundError(f"{index} names shard file(s) that do not exist: {absent}")
        return files
    shards = [path / SINGLE_FILE] if (path / SINGLE_FILE).is_file() else sorted(path.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"no *.safetensors (nor {INDEX_FILE}) in {path}")
    files = {}
    for f in shards:
        with safe_open(str(f), framework="np") as fh:
            for k in fh.keys():
                files[k] = f
    return files


def _abstract_model(config: ModelConfig, dtype, param_dtype) -> CausalLM:
    return nnx.eval_shape(lambda: CausalLM(config, rngs=nnx.Rngs(0), dtype=dtype, param_dtype=param_dtype))


def load_pretrained(
    path: str | pathlib.Path,
    *,
    dtype=jnp.float32,
    param_dtype=None,
    mesh: Mesh | None = None,
    config: ModelConfig | None = None,
) -> CausalLM:
    """Load a Hugging Face Qwen2/Llama checkpoint directory into a :class:`CausalLM`.

    Args:
        path: directory with ``config.json`` and ``model.safetensors`` or shards + ``model.safetensors.index.json``.
        dtype: compute dtype of the model.
        param_dtype: storage dtype of the parameters (default: ``dtype``); tensors are cast on the host.
        mesh: optional ``('data', 'model')`` mesh; each parameter is placed with its annotated sharding.
        config: override the directory's ``config.json``.

    Raises:
        WeightLoadError: listing every unmapped checkpoint key, missing parameter and shape mismatch.
        FileNotFoundError: no config / safetensors files.
    """
    path = pathlib.Path(path)
    config = ModelConfig.from_hf(path) if config is None else config
    param_dtype = dtype if param_dtype is None else param_dtype
    abstract = _abstract_model(config, dtype, param_dtype)
    graphdef, state = nnx.split(abstract)
    params = nnx.to_flat_state(state)
    files = _checkpoint_files(path)
    kmap = hf_key_map(nnx.state(abstract, nnx.Param))
    unmapped = sorted(
        k for k in files
        if k not in kmap and not k.endswith(_IGNORED_SUFFIXES) and not (k == "lm_head.weight" and config.tie_word_embeddings)
    )
    missing = sorted(k for k in kmap if k not in files)
    shardings = {}
    if mesh is not None:
        shardings = dict(nnx.to_flat_state(param_shardings(nnx.state(abstract, nnx.Param), mesh)))
    shapes = dict(params)
    mismatched = []
    loaded: dict[tuple, Any] = {}
    handles: dict[pathlib.Path, Any] = {}
    try:
        for key, (npath, transpose) in kmap.items():
            if key not in files:
                continue
            f = files[key]
            if f not in handles:
                handles[f] = safe_open(str(f), framework="np")
            fh = handles[f]
            want = tuple(shapes[npath].shape)
            got = tuple(fh.get_slice(key).get_shape())
            if transpose and len(got) == 2:
                got = got[::-1]
            if got != want:
                mismatched.append(f"{key}: checkpoint {got if not transpose else got[::-1]} vs expected "
                                  f"{want[::-1] if transpose else want}")
                continue
            if unmapped or missing or mismatched:
                continue  # keep scanning shapes, but do not spend time loading
            arr = fh.get_tensor(key)
            if transpose:
                arr = arr.T
            arr = np.ascontiguousarray(arr).astype(np.dtype(param_dtype), copy=False)
            sh = shardings.get(npath)
            if sh is None:
                loaded[npath] = jnp.asarray(arr)
            else:  # each device receives only its own shard (also correct on multi-host meshes)
                loaded[npath] = jax.make_array_from_callback(arr.shape, sh, lambda idx, a=arr: a[idx])
    finally:
        for fh in handles.values():
            close = getattr(fh, "__exit__", None)
            if close is not None:
                close(None, None, None)
    problems = []
    if unmapped:
        problems.append(f"{len(unmapped)} checkpoint key(s) with no model parameter: {unmapped}")
    if missing:
        problems.append(f"{len(missing)} model parameter(s) missing from the checkpoint: {missing}")
    if mismatched:
        problems.append(f"{len(mismatched)} shape mismatch(es): {mismatched}")
    if problems:
        raise WeightLoadError(f"checkpoint {path} does not fit {config.model_type} model: " + "; ".join(problems))
    for npath, var in params:
        var.set_value(loaded[npath])
    return nnx.merge(graphdef, state)


def save_pretrained(
    model: CausalLM,
    path: str | pathlib.Path,
    *,
    tokenizer: Tokenizer | TextCodec | None = None,
    max_shard_bytes: int | None = None,
) -> None:
    """Write ``config.json`` and safetensors with Hugging Face key names and layouts (and the tokenizer).

    With a ``tokenizer`` the folder is complete: ``tokenizer.json``, ``tokenizer_config.json`` (special
    tokens, chat template) and ``generation_config.json`` (bos, eos ids, pad) are written too, and
    ``config.json`` takes the tokenizer's special ids, so the folder loads back with
    :func:`load_pretrained` + :func:`load_tokenizer` and with transformers.

    Args:
        model: the model to save (parameters are gathered to the host; dtypes kept).
        path: output directory (created).
        tokenizer: a :class:`Tokenizer` or the trainer's :class:`TextCodec` (checked against the model's
            ``vocab_size`` with :func:`check_vocab_fits`).
        max_shard_bytes: if given, split into ``model-0000k-of-0000n.safetensors`` shards of at most this many
            bytes (a tensor is never split) plus ``model.safetensors.index.json``; else one ``model.safetensors``.

    Raises:
        ValueError: the tokenizer's ids do not fit the model's vocabulary.
    """
    config = model.config
    tok = None
    if tokenizer is not None:
        tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.from_codec(tokenizer)
        check_vocab_fits(tok, config.vocab_size)
        bos = tok.bos_id if tok.bos_id is not None else config.bos_token_id
        config = config.replace(eos_token_id=tok.eos_ids, pad_token_id=tok.pad_id, bos_token_id=bos)
    path = pathlib.Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = nnx.state(model, nnx.Param)
    flat = dict(nnx.to_flat_state(state))
    tensors: dict[str, np.ndarray] = {}
    for key, (npath, transpose) in hf_key_map(state).items():
        arr = np.asarray(jax.device_get(flat[npath].get_value()))
        tensors[key] = np.ascontiguousarray(arr.T if transpose else arr)
    cfg = config.to_hf()
    cfg["torch_dtype"] = str(np.dtype(model.param_dtype).name)
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    if tok is not None:
        tok.save_pretrained(path)
        eos = list(tok.eos_ids)
        gen = {"bos_token_id": config.bos_token_id, "eos_token_id": eos[0] if len(eos) == 1 else eos,
               "pad_token_id": tok.pad_id}
        (path / "generation_config.json").write_text(
            json.dumps({k: v for k, v in gen.items() if v is not None}, indent=2))
    meta = {"format": "pt"}
    if max_shard_bytes is None:
        save_file(tensors, str(path / SINGLE_FILE), metadata=meta)
        return
    groups: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for k in sorted(tensors):
        n = tensors[k].nbytes
        if groups[-1] and size + n > max_shard_bytes:
            groups.append({})
            size = 0
        groups[-1][k] = tensors[k]
        size += n
    weight_map = {}
    for i, g in enumerate(groups):
        name = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file(g, str(path / name), metadata=meta)
        weight_map.update({k: name for k in g})
    index = {"metadata": {"total_size": int(sum(t.nbytes for t in tensors.values()))}, "weight_map": weight_map}
    (path / INDEX_FILE).write_text(json.dumps(index, indent=2))
