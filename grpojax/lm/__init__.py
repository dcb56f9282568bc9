"""A Flax NNX causal language model (Qwen2/Llama): configuration, layers, KV cache, device mesh and
sharding, Hugging Face weights (load/save, with the tokenizer files), GGUF conversion (:func:`from_gguf`),
tokenizers (Hugging Face chat template and special ids, character and word level with :class:`TextCodec`,
kind inference and the vocabulary check) and the sampler.

This package is self-contained: it imports no other ``grpojax`` package.
"""

from ._batch_sharding import batch_sharding, place_batch
from ._cache import KVCache, init_cache
from ._char_tokenizer import TextCodec, char_tokenizer, codec_from_tokenizer, word_tokenizer
from ._config import ModelConfig
from ._gguf import GGUF_PRE_TOKENIZERS, from_gguf, gguf_config, gguf_metadata, gguf_tensors, gguf_tokenizer
from ._mesh import MESH_AXES, fit_spec, make_mesh, param_shardings, shard_model
from ._model import CausalLM, init_model, left_pad_positions
from ._sampler import SampleOutput, bucket_length, filter_logits, generate, sample_logits, sequence_logprobs
from ._tokenizer import TOKENIZER_KINDS, Tokenizer, check_vocab_fits, infer_tokenizer_kind, load_tokenizer
from ._weights import WeightLoadError, hf_key_map, load_pretrained, save_pretrained

__all__ = [
    "CausalLM",
    "GGUF_PRE_TOKENIZERS",
    "KVCache",
    "MESH_AXES",
    "ModelConfig",
    "SampleOutput",
    "TOKENIZER_KINDS",
    "TextCodec",
    "Tokenizer",
    "WeightLoadError",
    "batch_sharding",
    "bucket_length",
    "char_tokenizer",
    "check_vocab_fits",
    "codec_from_tokenizer",
    "filter_logits",
    "fit_spec",
    "from_gguf",
    "generate",
    "gguf_config",
    "gguf_metadata",
    "gguf_tensors",
    "gguf_tokenizer",
    "hf_key_map",
    "infer_tokenizer_kind",
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
