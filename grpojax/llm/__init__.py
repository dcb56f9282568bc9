"""Flax NNX causal LM (Qwen2/Llama), Hugging Face weights, tokenizer and sampler (issue 7);
GRPO trainer (issue 8)."""

from ._cache import KVCache, init_cache
from ._config import ModelConfig
from ._mesh import MESH_AXES, fit_spec, make_mesh, param_shardings, shard_model
from ._model import CausalLM, left_pad_positions
from ._sampler import SampleOutput, bucket_length, filter_logits, generate, sequence_logprobs
from ._weights import WeightLoadError, hf_key_map, load_pretrained, save_pretrained

__all__ = [
    "CausalLM",
    "MESH_AXES",
    "SampleOutput",
    "WeightLoadError",
    "KVCache",
    "ModelConfig",
    "bucket_length",
    "filter_logits",
    "fit_spec",
    "generate",
    "hf_key_map",
    "init_cache",
    "left_pad_positions",
    "load_pretrained",
    "make_mesh",
    "param_shardings",
    "save_pretrained",
    "sequence_logprobs",
    "shard_model",
]
