"""Weights: HF key mapping, exact save -> load round trip, sharded checkpoints, error messages."""

from __future__ import annotations

import json
import pathlib
import shutil

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from grpojax.lm import WeightLoadError, load_pretrained, save_pretrained
from grpojax.lm._weights import hf_key_map

FIX = pathlib.Path(__file__).parent / "fixtures" / "lm"


def _hf_tensors(d: pathlib.Path) -> dict[str, np.ndarray]:
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def _params(model) -> dict:
    return {k: np.asarray(v.get_value()) for k, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}


@pytest.mark.parametrize("name", ["qwen2", "llama"])
def test_load_maps_every_tensor_with_transposes(name):
    d = FIX / name
    model = load_pretrained(d)
    hf = _hf_tensors(d)
    kmap = hf_key_map(model)
    params = _params(model)
    assert set(kmap) == set(hf)  # the fixture's key set is exactly the mapped set (tied qwen2 has no lm_head)
    for key, (path, transpose) in kmap.items():
        np.testing.assert_array_equal(params[path], hf[key].T if transpose else hf[key])
    if name == "llama":
        assert (d / "model.safetensors.index.json").is_file() and len(list(d.glob("*.safetensors"))) > 1
        assert "lm_head.weight" in kmap
    else:
        assert model.lm_head is None and "model.layers.0.self_attn.q_proj.bias" in kmap


@pytest.mark.parametrize("name,shard", [("qwen2", None), ("llama", 100_000)])
def test_save_load_round_trip_exact(tmp_path, name, shard):
    model = load_pretrained(FIX / name)
    save_pretrained(model, tmp_path, max_shard_bytes=shard)
    if shard:
        index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
        assert len(set(index["weight_map"].values())) > 1
    # byte-exact tensors vs the transformers-written original, same HF key names and layouts
    ref, got = _hf_tensors(FIX / name), _hf_tensors(tmp_path)
    assert set(ref) == set(got)
    for k in ref:
        assert ref[k].dtype == got[k].dtype and ref[k].shape == got[k].shape
        np.testing.assert_array_equal(ref[k], got[k])
    again = load_pretrained(tmp_path)
    assert again.config == model.config
    a, b = _params(model), _params(again)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_bf16_load_and_save(tmp_path):
    model = load_pretrained(FIX / "qwen2", dtype=jnp.bfloat16)
    save_pretrained(model, tmp_path)
    t = load_file(str(tmp_path / "model.safetensors"))
    assert str(t["model.embed_tokens.weight"].dtype) == "bfloat16"
    again = load_pretrained(tmp_path, dtype=jnp.bfloat16)
    a, b = _params(model), _params(again)
    for k in a:
        assert a[k].dtype == jnp.bfloat16
        np.testing.assert_array_equal(a[k].view(np.uint16), b[k].view(np.uint16))


def _copy_with(tmp: pathlib.Path, edit) -> pathlib.Path:
    d = tmp / "ckpt"
    shutil.copytree(FIX / "qwen2", d)
    tensors = load_file(str(d / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(d / "model.safetensors"))
    return d


def test_missing_tensor_is_named(tmp_path):
    d = _copy_with(tmp_path, lambda t: t.pop("model.layers.1.self_attn.k_proj.bias"))
    with pytest.raises(WeightLoadError, match=r"missing.*model\.layers\.1\.self_attn\.k_proj\.bias"):
        load_pretrained(d)


def test_misnamed_and_misshaped_tensors_are_all_named(tmp_path):
    def edit(t):
        t["model.layers.0.mlp.gate_proj.weights"] = t.pop("model.layers.0.mlp.gate_proj.weight")
        t["model.norm.weight"] = t["model.norm.weight"][:10]

    d = _copy_with(tmp_path, edit)
    with pytest.raises(WeightLoadError) as err:
        load_pretrained(d)
    msg = str(err.value)
    assert "model.layers.0.mlp.gate_proj.weights" in msg  # unmapped key
    assert "model.layers.0.mlp.gate_proj.weight'" in msg  # the parameter it should have been
    assert "model.norm.weight: checkpoint (10,) vs expected (64,)" in msg


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(tmp_path)
    d = tmp_path / "x"
    shutil.copytree(FIX / "llama", d)
    (d / "model-00002-of-00004.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model-00002-of-00004"):
        load_pretrained(d)
