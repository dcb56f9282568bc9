"""The GRPO trainer on :mod:`grpojax.lm` models: group advantages, the clipped-surrogate loss with a
KL penalty, jitted update steps, optimisers, the YAML training configuration (shipped configs in
``configs/``), rewards, datasets and the arithmetic task, verified checkpoints, locked run folders, the
run log and the trainer.
"""

from ._advantages import ADVANTAGE_MODES, group_advantages
from ._arith import ARITH_DIFFICULTY, arith_problems
from ._checkpoint import CheckpointError, CheckpointStore
from ._data import Problem, chat_messages, chat_prompt_ids, format_prompt, load_jsonl, sample_batch, split_heldout
from ._logging import read_jsonl_metrics
from ._loss import AGGREGATIONS, LossTerms, aggregate, clipped_surrogate, grpo_loss, k3_kl, token_logprobs
from ._optim import build_optimizer, build_schedule
from ._population import Member, PopulationResult, train_population
from ._population_spec import train_population_file
from ._rollout import make_batch, sample_completions
from ._rewards import (
    ANSWER_FORMATS,
    REWARD_FUNCTIONS,
    ParseOptions,
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
from ._run_folder import RunFolderError, RunLock, check_run_folder, plan_run, run_markers
from ._stiffness import EigenEstimate, Stiffness, jacobian_products, leading_eigen, stiffness
from ._step import RolloutBatch, completion_logprobs, make_grpo_update, make_logprob_fn, make_sft_update
from ._train_config import (
    TrainConfig,
    apply_overrides,
    config_to_dict,
    load_config,
    read_config_dict,
    resolve_config_path,
    save_config,
    shipped_configs,
)
from ._trainer import GRPOTrainer, NonFiniteLossError, StepHook, train
from ._update import LossSettings, grpo_step, rollout_due

__all__ = [
    "EigenEstimate",
    "Stiffness",
    "jacobian_products",
    "leading_eigen",
    "stiffness",
    "ADVANTAGE_MODES",
    "ANSWER_FORMATS",
    "AGGREGATIONS",
    "ARITH_DIFFICULTY",
    "REWARD_FUNCTIONS",
    "CheckpointError",
    "CheckpointStore",
    "GRPOTrainer",
    "LossSettings",
    "LossTerms",
    "Member",
    "NonFiniteLossError",
    "ParseOptions",
    "PopulationResult",
    "Problem",
    "RolloutBatch",
    "RunFolderError",
    "RunLock",
    "Scored",
    "StepHook",
    "TrainConfig",
    "aggregate",
    "answers_equal",
    "apply_overrides",
    "arith_problems",
    "build_optimizer",
    "build_schedule",
    "chat_messages",
    "chat_prompt_ids",
    "check_run_folder",
    "clipped_surrogate",
    "combine_rewards",
    "completion_logprobs",
    "config_to_dict",
    "correctness_reward",
    "extract_answer",
    "extract_boxed",
    "format_prompt",
    "format_reward",
    "group_advantages",
    "grpo_loss",
    "grpo_step",
    "k3_kl",
    "load_config",
    "load_jsonl",
    "make_batch",
    "make_grpo_update",
    "make_logprob_fn",
    "make_sft_update",
    "parse_number",
    "plan_run",
    "read_config_dict",
    "read_jsonl_metrics",
    "resolve_config_path",
    "rollout_due",
    "run_markers",
    "sample_batch",
    "sample_completions",
    "save_config",
    "score_completions",
    "shipped_configs",
    "split_heldout",
    "token_logprobs",
    "train",
    "train_population",
    "train_population_file",
]
