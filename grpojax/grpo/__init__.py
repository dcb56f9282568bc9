"""The GRPO trainer on :mod:`grpojax.lm` models.

- :func:`train` / :class:`GRPOTrainer`: run a training configuration into a run folder (locked, resumable,
  verified checkpoints in a :class:`CheckpointStore`, a JSONL run log, optional step hooks);
  :class:`NonFiniteLossError` when the loss stops being finite.
- :class:`TrainConfig`: the YAML training configuration; :func:`load_config` (a shipped config, see
  :func:`shipped_configs`, or a path), :func:`apply_overrides` (dotted ``key=value`` overrides),
  :func:`save_config`.
- :func:`train_population`: several :class:`Member` s (per-member learning rate, momentum, K_ref, ...)
  trained as one vmapped program.
- :func:`measure_curvature`: K_0, K_d (Lanczos on Jacobian-vector products), gradient noise and pass rate of a
  GRPO update on a checkpoint, prompts and reward, with intervals (:class:`Curvature`; ``grpojax curvature``);
  :func:`config_task` gives it a training configuration's prompts, reward and sampling.
- The pieces: :func:`group_advantages`, :func:`grpo_loss` (the clipped surrogate with a KL penalty) and
  :func:`score_completions` with the reward functions of :data:`REWARD_FUNCTIONS`.
"""

from ._advantages import group_advantages
from ._checkpoint import CheckpointStore
from ._curvature import Curvature, config_task, load_reward, measure_curvature
from ._loss import grpo_loss
from ._population import Member, train_population
from ._rewards import REWARD_FUNCTIONS, score_completions
from ._train_config import TrainConfig, apply_overrides, load_config, save_config, shipped_configs
from ._trainer import GRPOTrainer, NonFiniteLossError, train

# Importable for the packages after this one, the command line and the experiments, but not part
# of the public API (not in __all__, not in the API reference).
from ._arith import arith_problems
from ._data import chat_prompt_ids, format_prompt, load_jsonl, sample_batch, split_heldout
from ._logging import read_jsonl_metrics
from ._loss import AGGREGATIONS
from ._optim import build_optimizer
from ._population_spec import train_population_file
from ._rewards import correctness_reward
from ._rollout import make_batch
from ._run_folder import RunLock, check_run_folder, plan_run, run_markers
from ._step import completion_logprobs, make_grpo_update
from ._stiffness import stiffness
from ._train_config import config_to_dict, read_config_dict, resolve_config_path
from ._update import rollout_due

__all__ = [
    "Curvature",
    "GRPOTrainer",
    "Member",
    "NonFiniteLossError",
    "REWARD_FUNCTIONS",
    "TrainConfig",
    "apply_overrides",
    "group_advantages",
    "grpo_loss",
    "load_config",
    "measure_curvature",
    "score_completions",
    "shipped_configs",
    "train",
    "train_population",
]
