"""Flax NNX causal LM (Qwen2/Llama), Hugging Face weights, tokenizer and sampler (issue 7);
GRPO trainer (issue 8)."""

from ._cache import KVCache, init_cache
from ._config import ModelConfig
from ._mesh import MESH_AXES, fit_spec, make_mesh, param_shardings, shard_model
from ._model import CausalLM, init_model, left_pad_positions
from ._sampler import SampleOutput, bucket_length, filter_logits, generate, sample_logits, sequence_logprobs
from ._tokenizer import Tokenizer, load_tokenizer
from ._weights import WeightLoadError, hf_key_map, load_pretrained, save_pretrained

__all__ = [
    "CausalLM",
    "MESH_AXES",
    "SampleOutput",
    "Tokenizer",
    "WeightLoadError",
    "KVCache",
    "ModelConfig",
    "bucket_length",
    "filter_logits",
    "fit_spec",
    "generate",
    "hf_key_map",
    "init_cache",
    "init_model",
    "left_pad_positions",
    "load_pretrained",
    "load_tokenizer",
    "make_mesh",
    "param_shardings",
    "sample_logits",
    "save_pretrained",
    "sequence_logprobs",
    "shard_model",
]
