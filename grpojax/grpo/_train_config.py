"""Run configuration for the GRPO trainer: validated sections, YAML in and out, dotted overrides.

A config file is YAML whose top-level keys are the sections below (any omitted key keeps its
default). ``load_config("tiny-arith")`` loads a shipped config from ``grpojax/grpo/configs/``;
anything else is read as a path. ``apply_overrides(cfg, ["grpo.k_ref=2", "optim.lr=1e-3"])``
returns a validated copy with single values changed (parsed as YAML scalars).

Each section is a :class:`grpojax._config.Config` (a frozen pydantic model): booleans must be YAML
booleans (``true``/``false``, unquoted), numbers must be finite, strings must be strings, choices
are the names the trainer implements; then the cross-field checks run (e.g. ``model.hidden_size``
divisible by ``model.num_attention_heads``). Every error is a one-line :class:`grpojax.ConfigError`
naming the key, the bad value and what was expected.
"""

from __future__ import annotations

import pathlib
from typing import Any, Literal

import yaml
from pydantic import Field, field_validator, model_validator

from grpojax._config import Bool, Config, Finite, Int, yaml_error
from grpojax._config import apply_overrides as _apply_overrides
from grpojax._errors import ConfigError
from grpojax.grpo._advantages import ADVANTAGE_MODES
from grpojax.grpo._loss import AGGREGATIONS
from grpojax.grpo._optim import OPTIMIZERS, SCHEDULES
from grpojax.grpo._rewards import ParseOptions

__all__ = [
    "CONFIG_DIR",
    "TrainConfig",
    "apply_overrides",
    "config_to_dict",
    "load_config",
    "read_config_dict",
    "resolve_config_path",
    "save_config",
    "shipped_configs",
]

CONFIG_DIR = pathlib.Path(__file__).parent / "configs"
DTYPES = ("float32", "bfloat16", "float16")
TOKENIZER_KINDS = ("auto", "char", "word", "file")
DATA_SOURCES = ("arith", "jsonl")


class ModelSection(Config):
    """The policy network: a random-init Qwen2-style decoder or a Hugging Face directory."""

    pretrained: str | None = None  # local HF directory; None = random init from the fields below
    hidden_size: Int = Field(64, ge=1)
    intermediate_size: Int = Field(128, ge=1)
    num_hidden_layers: Int = Field(2, ge=1)
    num_attention_heads: Int = Field(4, ge=1)
    num_key_value_heads: Int = Field(2, ge=1)
    max_position_embeddings: Int = Field(160, ge=1)
    rope_theta: Finite = Field(10000.0, gt=0)
    tie_word_embeddings: Bool = True
    dtype: Literal[DTYPES] = "float32"
    param_dtype: Literal[DTYPES] = "float32"
    # end-of-sequence / padding token (string or id); None: what the checkpoint's tokenizer files say
    # (tokenizer_config.json, generation_config.json, config.json), see ``grpojax.lm.load_tokenizer``
    eos: str | Int | None = None
    pad: str | Int | None = None

    @field_validator("eos", "pad")
    @classmethod
    def _token(cls, v):
        if isinstance(v, int) and v < 0 or isinstance(v, str) and not v:
            raise ValueError("expected a token string or a non-negative id")
        return v

    @model_validator(mode="after")
    def _shapes(self):
        if self.pretrained is None:
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(f"model.hidden_size={self.hidden_size} is not divisible by "
                                 f"model.num_attention_heads={self.num_attention_heads}")
            if self.num_attention_heads % self.num_key_value_heads:
                raise ValueError(f"model.num_attention_heads={self.num_attention_heads} is not divisible by "
                                 f"model.num_key_value_heads={self.num_key_value_heads}")
            if (self.hidden_size // self.num_attention_heads) % 2:
                raise ValueError(f"model.hidden_size / model.num_attention_heads = "
                                 f"{self.hidden_size // self.num_attention_heads}; expected an even head size "
                                 f"(rotary)")
        return self


class TokenizerSection(Config):
    """``auto``: the tokenizer of ``path`` or of the ``pretrained`` checkpoint when either is set, else
    ``char``; ``char``: built-in character-level tokenizer; ``word``: word-level tokenizer built from the
    training data (digits stay single tokens); ``file``: load ``path`` (a ``tokenizer.json`` or a
    Hugging Face folder; default: the ``pretrained`` folder). A character- or word-level tokenizer is
    refused for a pretrained checkpoint, and any tokenizer whose ids do not fit the model's vocabulary."""

    kind: Literal[TOKENIZER_KINDS] = "auto"
    path: str | None = None


class DataSection(Config):
    """``source: arith`` uses the offline generator; ``source: jsonl`` reads GSM8K/MATH JSONL (``path``: a file,
    or the name of one shipped in ``grpojax/grpo/data``, e.g. ``gsm8k-train-200.jsonl``)."""

    source: Literal[DATA_SOURCES] = "arith"
    path: str | None = None
    eval_path: str | None = None  # None: hold out ``heldout_frac`` of ``path`` by question hash
    heldout_frac: Finite = Field(0.1, gt=0, lt=1)
    difficulty: Int = Field(2, ge=1, le=5)
    n_train: Int = Field(20000, ge=1)
    prompt_template: str = "{question}\n"  # the prompt text, or the user turn with the chat template
    max_prompt_len: Int = Field(96, ge=1)  # prompts are left-padded to this; longer ones are rejected
    # render prompts with the tokenizer's chat template (system turn, user turn, assistant turn opened);
    # None: when the tokenizer has one
    chat_template: Bool | None = None
    system_prompt: str | None = None  # the chat's system turn (None: none, the template may add its own)

    @field_validator("prompt_template")
    @classmethod
    def _template(cls, v):
        if "{question}" not in v:
            raise ValueError("expected a template with a {question} field")
        return v

    @model_validator(mode="after")
    def _jsonl_path(self):
        if self.source == "jsonl" and not self.path:
            raise ValueError("data.source=jsonl needs data.path")
        return self


class RewardSection(Config):
    """Weights of the named reward functions (``grpojax.grpo.REWARD_FUNCTIONS``) and how answers are parsed:
    ``parse`` is a :class:`grpojax.grpo.ParseOptions` (``formats``: a list of ``ANSWER_FORMATS`` names tried
    in order, ``fallback_last_number``: take the last number when none matches); empty: the defaults."""

    weights: dict[str, Finite] = Field(default_factory=lambda: {"correctness": 1.0})
    parse: ParseOptions = Field(default_factory=ParseOptions)

    @model_validator(mode="after")
    def _check(self):
        if not self.weights:
            raise ValueError("rewards.weights is empty; expected at least one reward, e.g. {correctness: 1.0}")
        return self

    def parse_options(self) -> ParseOptions:
        """The :class:`grpojax.grpo.ParseOptions` of ``parse``."""
        return self.parse


class SamplingSection(Config):
    max_new_tokens: Int = Field(24, ge=1)
    temperature: Finite = Field(1.0, gt=0)
    top_p: Finite = Field(1.0, gt=0, le=1)
    top_k: Int = Field(0, ge=0)  # 0: no top-k


class GRPOSection(Config):
    prompts_per_step: Int = Field(8, ge=1)  # B
    group_size: Int = Field(8, ge=2)  # G
    advantage: Literal[ADVANTAGE_MODES] = "grpo"
    adv_eps: Finite = Field(1e-4, gt=0)
    k_ref: Int = Field(1, ge=1)  # optimisation steps per rollout batch (behaviour-policy refresh interval)
    beta: Finite = Field(0.0, ge=0)  # k3 KL coefficient to the frozen reference (the warm-started model)
    log_kl: Bool = True  # keep the reference and log its k3 KL even when beta == 0 (one extra forward)
    eps_low: Finite = Field(0.2, gt=0)
    eps_high: Finite = Field(0.2, gt=0)
    aggregation: Literal[AGGREGATIONS] = "seq_mean_token_mean"


class OptimSection(Config):
    name: Literal[OPTIMIZERS] = "adamw"  # adamw | sgd (heavy-ball momentum)
    lr: Finite = Field(1e-3, gt=0)
    momentum: Finite = Field(0.9, ge=0, lt=1)  # mu for sgd
    b1: Finite = Field(0.9, ge=0, lt=1)
    b2: Finite = Field(0.99, ge=0, lt=1)
    weight_decay: Finite = Field(0.0, ge=0)
    grad_clip: Finite = Field(1.0, ge=0)  # global-norm clip; 0 disables
    schedule: Literal[SCHEDULES] = "constant"
    warmup_steps: Int = Field(0, ge=0)


class WarmstartSection(Config):
    """Supervised phase on worked solutions before GRPO (0 steps = none)."""

    steps: Int = Field(0, ge=0)
    batch_size: Int = Field(32, ge=1)
    lr: Finite = Field(3e-3, gt=0)
    warmup_steps: Int = Field(20, ge=0)

    def optimizer(self) -> OptimSection:
        """The warm start's optimiser: AdamW with a cosine schedule, clipped at global norm 1."""
        return OptimSection(name="adamw", lr=self.lr, b1=0.9, b2=0.99, weight_decay=0.0, grad_clip=1.0,
                            schedule="cosine", warmup_steps=self.warmup_steps, momentum=0.0)


class EvalSection(Config):
    every: Int = Field(10, ge=0)
    n: Int = Field(128, ge=0)
    samples: Int = Field(1, ge=1)  # completions per eval problem at the sampling temperature
    greedy: Bool = True  # also report greedy accuracy (eval_accuracy_greedy)


class LogSection(Config):
    tensorboard: Bool = False


class CheckpointSection(Config):
    every: Int = Field(50, ge=0)  # steps between checkpoints (0: only the last step); the last step is always saved
    keep: Int = Field(2, ge=1)  # newest checkpoints kept (>= 1; the newest clean one is never evicted by a NaN stop)
    at_start: Bool = False  # also save the state before the first GRPO step (after the warm start)


class MeshSection(Config):
    model_axis: Int = Field(1, ge=1)  # size of the 'model' axis; 'data' gets the remaining devices


class TrainConfig(Config):
    """One GRPO run (see the section classes for each field)."""

    name: str = "grpo"
    seed: Int = 0
    steps: Int = Field(100, ge=1)  # GRPO optimiser steps
    model: ModelSection = Field(default_factory=ModelSection)
    tokenizer: TokenizerSection = Field(default_factory=TokenizerSection)
    data: DataSection = Field(default_factory=DataSection)
    rewards: RewardSection = Field(default_factory=RewardSection)
    sampling: SamplingSection = Field(default_factory=SamplingSection)
    grpo: GRPOSection = Field(default_factory=GRPOSection)
    optim: OptimSection = Field(default_factory=OptimSection)
    warmstart: WarmstartSection = Field(default_factory=WarmstartSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    log: LogSection = Field(default_factory=LogSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    mesh: MeshSection = Field(default_factory=MeshSection)

    @model_validator(mode="after")
    def _context(self):
        m, d, s = self.model, self.data, self.sampling
        if m.pretrained is None and d.max_prompt_len + s.max_new_tokens > m.max_position_embeddings:
            raise ValueError(f"data.max_prompt_len + sampling.max_new_tokens = {d.max_prompt_len + s.max_new_tokens} "
                             f"exceeds the context model.max_position_embeddings={m.max_position_embeddings}")
        return self

    def validate(self) -> "TrainConfig":
        """Return ``self``: a built config is already validated (kept for callers of the older API)."""
        return self


def config_to_dict(cfg: TrainConfig) -> dict:
    """The config as plain nested dicts (what ``config.yaml`` in a run folder stores)."""
    return cfg.to_dict()


def shipped_configs() -> list[str]:
    """Names of the configs shipped in ``grpojax/grpo/configs``."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _read_yaml(p: pathlib.Path) -> Any:
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: {yaml_error(exc)}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a UTF-8 text file; expected a YAML config") from None


def resolve_config_path(name_or_path: str | pathlib.Path) -> pathlib.Path:
    """The file a config name or path refers to (a path first, then a shipped config's name).

    Raises:
      FileNotFoundError: neither a shipped name nor an existing file.
    """
    p = pathlib.Path(name_or_path)
    if not p.is_file():
        shipped = CONFIG_DIR / f"{name_or_path}.yaml"
        if shipped.is_file():
            p = shipped
        else:
            raise FileNotFoundError(
                f"config {str(name_or_path)!r} is neither a file nor a shipped config ({', '.join(shipped_configs())})"
            )
    return p


def load_config(name_or_path: str | pathlib.Path) -> TrainConfig:
    """Load a shipped config by name (``"tiny-arith"``) or a YAML file by path.

    Raises:
      FileNotFoundError: neither a shipped name nor an existing file.
      ConfigError: invalid YAML, unknown keys or bad values (the message names the file and the key).
    """
    p = resolve_config_path(name_or_path)
    return TrainConfig.from_dict(_read_yaml(p), where=str(p))


def read_config_dict(path: str | pathlib.Path) -> dict:
    """The full config (defaults filled in, :func:`config_to_dict` form) stored in a YAML file.

    Raises:
      ConfigError: the file is not a readable config.
    """
    p = pathlib.Path(path)
    return config_to_dict(TrainConfig.from_dict(_read_yaml(p), where=str(p)))


def save_config(cfg: TrainConfig, path: str | pathlib.Path) -> pathlib.Path:
    """Write ``cfg`` as YAML to ``path`` (atomically)."""
    from grpojax._io import write_text_atomic

    return write_text_atomic(path, yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def apply_overrides(cfg: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Return a validated copy of ``cfg`` with ``section.key=value`` overrides applied (values parsed as YAML).

    Raises:
      ConfigError: an override without ``=`` or a value, with invalid YAML, an unknown key or a bad value
        (the message names the override).
    """
    return _apply_overrides(cfg, overrides)
