"""A Flax NNX causal language model (Qwen2/Llama): configuration, layers, KV cache, device mesh and
sharding, Hugging Face weights (load/save), tokenizers (Hugging Face chat template, character and
word level with :class:`TextCodec`) and the sampler.

This package is self-contained: it imports no other ``grpojax`` package.
"""

from ._batch_sharding import batch_sharding, place_batch
from ._cache import KVCache, init_cache
from ._char_tokenizer import TextCodec, char_tokenizer, codec_from_tokenizer, word_tokenizer
from ._config import ModelConfig
from ._mesh import MESH_AXES, fit_spec, make_mesh, param_shardings, shard_model
from ._model import CausalLM, init_model, left_pad_positions
from ._sampler import SampleOutput, bucket_length, filter_logits, generate, sample_logits, sequence_logprobs
from ._tokenizer import Tokenizer, load_tokenizer
from ._weights import WeightLoadError, hf_key_map, load_pretrained, save_pretrained

__all__ = [
    "MESH_AXES",
    "CausalLM",
    "KVCache",
    "ModelConfig",
    "SampleOutput",
    "TextCodec",
    "Tokenizer",
    "WeightLoadError",
    "batch_sharding",
    "bucket_length",
    "char_tokenizer",
    "codec_from_tokenizer",
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
    "place_batch",
    "sample_logits",
    "save_pretrained",
    "sequence_logprobs",
    "shard_model",
    "word_tokenizer",
]
