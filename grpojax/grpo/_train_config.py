"""Run configuration for the GRPO trainer: nested dataclasses, YAML in and out, dotted overrides.

A config file is YAML whose top-level keys are the sections below (any omitted key keeps its
default). ``load_config("tiny-arith")`` loads a shipped config from ``grpojax/grpo/configs/``;
anything else is read as a path. ``apply_overrides(cfg, ["grpo.k_ref=2", "optim.lr=1e-3"])``
changes single values (parsed as YAML scalars).
"""

from __future__ import annotations

import dataclasses
import pathlib
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "CONFIG_DIR",
    "TrainConfig",
    "apply_overrides",
    "config_to_dict",
    "load_config",
    "save_config",
    "shipped_configs",
]

CONFIG_DIR = pathlib.Path(__file__).parent / "configs"


@dataclass
class ModelSection:
    """The policy network: a random-init Qwen2-style decoder or a Hugging Face directory."""

    pretrained: str | None = None  # local HF directory; None = random init from the fields below
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 160
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    dtype: str = "float32"
    param_dtype: str = "float32"


@dataclass
class TokenizerSection:
    """``char``: built-in character-level tokenizer; ``word``: word-level tokenizer built from the
    training data (digits stay single tokens); ``file``: load ``path`` (a ``tokenizer.json`` or a
    Hugging Face folder, also used for ``pretrained`` models)."""

    kind: str = "char"
    path: str | None = None


@dataclass
class DataSection:
    """``source: arith`` uses the offline generator; ``source: jsonl`` reads GSM8K/MATH JSONL."""

    source: str = "arith"
    path: str | None = None
    eval_path: str | None = None  # None: hold out ``heldout_frac`` of ``path`` by question hash
    heldout_frac: float = 0.1
    difficulty: int = 2
    n_train: int = 20000
    prompt_template: str = "{question}\n"
    max_prompt_len: int = 96  # prompts are left-padded to this; longer ones are rejected


@dataclass
class RewardSection:
    """Weights of the named reward functions (``grpojax.grpo.REWARD_FUNCTIONS``)."""

    weights: dict = field(default_factory=lambda: {"correctness": 1.0})


@dataclass
class SamplingSection:
    max_new_tokens: int = 24
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0


@dataclass
class GRPOSection:
    prompts_per_step: int = 8  # B
    group_size: int = 8  # G
    advantage: str = "grpo"  # grpo | dr_grpo | rloo
    adv_eps: float = 1e-4
    k_ref: int = 1  # optimisation steps per rollout batch (behaviour-policy refresh interval)
    beta: float = 0.0  # k3 KL coefficient to the frozen reference (the warm-started model)
    log_kl: bool = True  # keep the reference and log its k3 KL even when beta == 0 (one extra forward)
    eps_low: float = 0.2
    eps_high: float = 0.2
    aggregation: str = "seq_mean_token_mean"


@dataclass
class OptimSection:
    name: str = "adamw"  # adamw | sgd (heavy-ball momentum)
    lr: float = 1e-3
    momentum: float = 0.9  # mu for sgd
    b1: float = 0.9
    b2: float = 0.99
    weight_decay: float = 0.0
    grad_clip: float = 1.0  # global-norm clip; 0 disables
    schedule: str = "constant"  # constant | cosine | linear
    warmup_steps: int = 0


@dataclass
class WarmstartSection:
    """Supervised phase on worked solutions before GRPO (0 steps = none)."""

    steps: int = 0
    batch_size: int = 32
    lr: float = 3e-3
    warmup_steps: int = 20


@dataclass
class EvalSection:
    every: int = 10
    n: int = 128
    samples: int = 1  # completions per eval problem at the sampling temperature
    greedy: bool = True  # also report greedy accuracy (eval_accuracy_greedy)


@dataclass
class LogSection:
    tensorboard: bool = False


@dataclass
class CheckpointSection:
    every: int = 50
    keep: int = 2


@dataclass
class MeshSection:
    model_axis: int = 1  # size of the 'model' axis; 'data' gets the remaining devices


@dataclass
class TrainConfig:
    """One GRPO run (see the section classes for each field)."""

    name: str = "grpo"
    seed: int = 0
    steps: int = 100  # GRPO optimiser steps
    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    rewards: RewardSection = field(default_factory=RewardSection)
    sampling: SamplingSection = field(default_factory=SamplingSection)
    grpo: GRPOSection = field(default_factory=GRPOSection)
    optim: OptimSection = field(default_factory=OptimSection)
    warmstart: WarmstartSection = field(default_factory=WarmstartSection)
    eval: EvalSection = field(default_factory=EvalSection)
    log: LogSection = field(default_factory=LogSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    mesh: MeshSection = field(default_factory=MeshSection)

    def validate(self) -> "TrainConfig":
        """Raise ``ValueError`` naming the first bad value; return ``self``."""
        g = self.grpo
        checks = [
            (self.steps >= 1, f"steps={self.steps}; expected >= 1"),
            (g.prompts_per_step >= 1, f"grpo.prompts_per_step={g.prompts_per_step}; expected >= 1"),
            (g.group_size >= 2, f"grpo.group_size={g.group_size}; expected >= 2"),
            (g.advantage in ("grpo", "dr_grpo", "rloo"), f"grpo.advantage={g.advantage!r}; expected grpo|dr_grpo|rloo"),
            (g.k_ref >= 1, f"grpo.k_ref={g.k_ref}; expected >= 1"),
            (g.beta >= 0, f"grpo.beta={g.beta}; expected >= 0"),
            (g.eps_low > 0 and g.eps_high > 0, f"grpo.eps_low/eps_high={g.eps_low}/{g.eps_high}; expected > 0"),
            (
                g.aggregation in ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"),
                f"grpo.aggregation={g.aggregation!r}; expected seq_mean_token_mean|token_mean|seq_mean_token_sum_norm",
            ),
            (self.optim.name in ("adamw", "sgd"), f"optim.name={self.optim.name!r}; expected adamw|sgd"),
            (self.optim.lr > 0, f"optim.lr={self.optim.lr}; expected > 0"),
            (0 <= self.optim.momentum < 1, f"optim.momentum={self.optim.momentum}; expected 0 <= mu < 1"),
            (
                self.optim.schedule in ("constant", "cosine", "linear"),
                f"optim.schedule={self.optim.schedule!r}; expected constant|cosine|linear",
            ),
            (self.data.source in ("arith", "jsonl"), f"data.source={self.data.source!r}; expected arith|jsonl"),
            (self.data.source != "jsonl" or self.data.path, "data.source=jsonl needs data.path"),
            (self.tokenizer.kind in ("char", "word", "file"), f"tokenizer.kind={self.tokenizer.kind!r}; expected char|word|file"),
            (self.sampling.max_new_tokens >= 1, f"sampling.max_new_tokens={self.sampling.max_new_tokens}; expected >= 1"),
            (self.sampling.temperature > 0, f"sampling.temperature={self.sampling.temperature}; expected > 0"),
            (
                self.data.max_prompt_len + self.sampling.max_new_tokens <= self.model.max_position_embeddings
                or self.model.pretrained is not None,
                f"data.max_prompt_len + sampling.max_new_tokens = "
                f"{self.data.max_prompt_len + self.sampling.max_new_tokens} exceeds the context "
                f"model.max_position_embeddings={self.model.max_position_embeddings}",
            ),
            (self.eval.every >= 0 and self.eval.n >= 0, "eval.every and eval.n must be >= 0"),
            (self.checkpoint.every >= 0, f"checkpoint.every={self.checkpoint.every}; expected >= 0"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)
        return self


def _coerce(default: Any, v: Any, where: str) -> Any:
    """YAML reads ``5e-4`` as a string and ``1`` where a float is meant: convert to the default's type."""
    if isinstance(default, bool) or default is None or default is dataclasses.MISSING or v is None:
        return v
    if isinstance(default, (int, float)) and not isinstance(v, bool):
        try:
            out = type(default)(v) if isinstance(default, float) else int(v)
        except (TypeError, ValueError):
            raise ValueError(f"{where}={v!r}; expected a number") from None
        if isinstance(default, int) and isinstance(v, float) and out != v:
            raise ValueError(f"{where}={v!r}; expected an integer")
        return out
    return v


def _from_dict(cls, data: dict, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k, v in data.items():
        if k not in fields:
            raise ValueError(f"{where}: unknown key {k!r}; expected one of {sorted(fields)}")
        default = fields[k].default_factory() if fields[k].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            kwargs[k] = _from_dict(type(default), v or {}, f"{where}.{k}")
        else:
            kwargs[k] = _coerce(fields[k].default, v, f"{where}.{k}")
    return cls(**kwargs)


def config_to_dict(cfg: TrainConfig) -> dict:
    return dataclasses.asdict(cfg)


def shipped_configs() -> list[str]:
    """Names of the configs shipped in ``grpojax/grpo/configs``."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def load_config(name_or_path: str | pathlib.Path) -> TrainConfig:
    """Load a shipped config by name (``"tiny-arith"``) or a YAML file by path.

    Raises:
      FileNotFoundError: neither a shipped name nor an existing file.
      ValueError: unknown keys or bad values (the message names them).
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
    data = yaml.safe_load(p.read_text()) or {}
    return _from_dict(TrainConfig, data, str(p)).validate()


def save_config(cfg: TrainConfig, path: str | pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.write_text(yaml.safe_dump(config_to_dict(cfg), sort_keys=False))
    return path


def apply_overrides(cfg: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Return a copy of ``cfg`` with ``section.key=value`` overrides applied (values parsed as YAML)."""
    data = config_to_dict(cfg)
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r}; expected KEY=VALUE such as grpo.k_ref=2")
        key, val = item.split("=", 1)
        parts = key.strip().split(".")
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                raise ValueError(f"override {item!r}: {p!r} is not a config section")
            node = node[p]
        if parts[-1] not in node:
            raise ValueError(f"override {item!r}: unknown key {parts[-1]!r}")
        node[parts[-1]] = yaml.safe_load(val)
    return _from_dict(TrainConfig, data, "overrides").validate()
