"""Flax NNX causal LM (Qwen2/Llama), Hugging Face weights, tokenizer and sampler (issue 7);
GRPO trainer (issue 8)."""

from ._cache import KVCache, init_cache
from ._config import ModelConfig
from ._mesh import MESH_AXES, fit_spec, make_mesh, param_shardings, shard_model
from ._model import CausalLM, init_model, left_pad_positions
from ._sampler import SampleOutput, bucket_length, filter_logits, generate, sample_logits, sequence_logprobs
from ._tokenizer import Tokenizer, load_tokenizer
from ._weights import WeightLoadError, hf_key_map, load_pretrained, save_pretrained

# --- GRPO trainer (issue 8) ---
from ._advantages import ADVANTAGE_MODES, group_advantages
from ._arith import ARITH_DIFFICULTY, arith_problems
from ._char_tokenizer import TextCodec, char_tokenizer, codec_from_tokenizer, word_tokenizer
from ._checkpoint import CheckpointStore
from ._data import Problem, format_prompt, load_jsonl, sample_batch, split_heldout
from ._logging import RunLogger, read_jsonl_metrics, truncate_log
from ._loss import AGGREGATIONS, LossTerms, aggregate, clipped_surrogate, grpo_loss, k3_kl, token_logprobs
from ._optim import build_optimizer, build_schedule
from ._rewards import (
    REWARD_FUNCTIONS,
    Scored,
    answers_equal,
    combine_rewards,
    correctness_reward,
    extract_answer,
    extract_boxed,
    format_reward,
    parse_number,
    score_completions,
)
from ._step import RolloutBatch, completion_logprobs, make_grpo_update, make_logprob_fn, make_sft_update
from ._train_config import TrainConfig, apply_overrides, load_config, save_config, shipped_configs
from ._trainer import GRPOTrainer, NonFiniteLossError, train

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
    # GRPO trainer (issue 8)
    "ADVANTAGE_MODES",
    "group_advantages",
    "ARITH_DIFFICULTY",
    "arith_problems",
    "TextCodec",
    "char_tokenizer",
    "codec_from_tokenizer",
    "word_tokenizer",
    "CheckpointStore",
    "Problem",
    "format_prompt",
    "load_jsonl",
    "sample_batch",
    "split_heldout",
    "RunLogger",
    "read_jsonl_metrics",
    "truncate_log",
    "AGGREGATIONS",
    "LossTerms",
    "aggregate",
    "clipped_surrogate",
    "grpo_loss",
    "k3_kl",
    "token_logprobs",
    "build_optimizer",
    "build_schedule",
    "REWARD_FUNCTIONS",
    "Scored",
    "answers_equal",
    "combine_rewards",
    "correctness_reward",
    "extract_answer",
    "extract_boxed",
    "format_reward",
    "parse_number",
    "score_completions",
    "RolloutBatch",
    "completion_logprobs",
    "make_grpo_update",
    "make_logprob_fn",
    "make_sft_update",
    "TrainConfig",
    "apply_overrides",
    "load_config",
    "save_config",
    "shipped_configs",
    "GRPOTrainer",
    "NonFiniteLossError",
    "train",
]
