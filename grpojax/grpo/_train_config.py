"""Run configuration for the GRPO trainer: nested dataclasses, YAML in and out, dotted overrides.

A config file is YAML whose top-level keys are the sections below (any omitted key keeps its
default). ``load_config("tiny-arith")`` loads a shipped config from ``grpojax/grpo/configs/``;
anything else is read as a path. ``apply_overrides(cfg, ["grpo.k_ref=2", "optim.lr=1e-3"])``
changes single values (parsed as YAML scalars).

Values are typed strictly: booleans must be YAML booleans (``true``/``false``, unquoted), numbers must
be finite, strings must be strings; :meth:`TrainConfig.validate` then checks ranges and consistency
(e.g. ``model.hidden_size`` divisible by ``model.num_attention_heads``). Every error is a one-line
``ValueError`` naming the key, the bad value and what was expected.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any

import yaml

from grpojax._errors import ConfigError

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
    # end-of-sequence / padding token (string or id); None: what the checkpoint's tokenizer files say
    # (tokenizer_config.json, generation_config.json, config.json), see ``grpojax.lm.load_tokenizer``
    eos: str | int | None = None
    pad: str | int | None = None


@dataclass
class TokenizerSection:
    """``auto``: the tokenizer of ``path`` or of the ``pretrained`` checkpoint when either is set, else
    ``char``; ``char``: built-in character-level tokenizer; ``word``: word-level tokenizer built from the
    training data (digits stay single tokens); ``file``: load ``path`` (a ``tokenizer.json`` or a
    Hugging Face folder; default: the ``pretrained`` folder). A character- or word-level tokenizer is
    refused for a pretrained checkpoint, and any tokenizer whose ids do not fit the model's vocabulary."""

    kind: str = "auto"
    path: str | None = None


@dataclass
class DataSection:
    """``source: arith`` uses the offline generator; ``source: jsonl`` reads GSM8K/MATH JSONL (``path``: a file,
    or the name of one shipped in ``grpojax/grpo/data``, e.g. ``gsm8k-train-200.jsonl``)."""

    source: str = "arith"
    path: str | None = None
    eval_path: str | None = None  # None: hold out ``heldout_frac`` of ``path`` by question hash
    heldout_frac: float = 0.1
    difficulty: int = 2
    n_train: int = 20000
    prompt_template: str = "{question}\n"  # the prompt text, or the user turn with the chat template
    max_prompt_len: int = 96  # prompts are left-padded to this; longer ones are rejected
    # render prompts with the tokenizer's chat template (system turn, user turn, assistant turn opened);
    # None: when the tokenizer has one
    chat_template: bool | None = None
    system_prompt: str | None = None  # the chat's system turn (None: none, the template may add its own)


@dataclass
class RewardSection:
    """Weights of the named reward functions (``grpojax.grpo.REWARD_FUNCTIONS``) and how answers are parsed:
    ``parse`` holds :class:`grpojax.grpo.ParseOptions` fields (``formats``: a list of ``ANSWER_FORMATS``
    names tried in order, ``fallback_last_number``: take the last number when none matches); empty: the
    defaults."""

    weights: dict = field(default_factory=lambda: {"correctness": 1.0})
    parse: dict = field(default_factory=dict)

    def parse_options(self):
        """The :class:`grpojax.grpo.ParseOptions` of ``parse``.

        Raises:
          ValueError: an unknown key or a bad value (the message names ``rewards.parse``).
        """
        from grpojax.grpo._rewards import ParseOptions

        fields = ("formats", "fallback_last_number")
        unknown = sorted(str(k) for k in self.parse if k not in fields)
        if unknown:
            raise ConfigError(f"rewards.parse: unknown key(s) {unknown}; expected some of {list(fields)}")
        kw = dict(self.parse)
        if "formats" in kw:
            f = kw["formats"]
            if isinstance(f, str):
                f = [f]
            if not isinstance(f, (list, tuple)) or not all(isinstance(x, str) for x in f):
                raise ConfigError(f"rewards.parse.formats={kw['formats']!r}; expected a list of answer format names")
            kw["formats"] = tuple(f)
        try:
            return ParseOptions(**kw)
        except ValueError as exc:
            raise ConfigError(f"rewards.parse: {exc}") from None


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
    every: int = 50  # steps between checkpoints (0: only the last step); the last step is always saved
    keep: int = 2  # newest checkpoints kept (>= 1; the newest clean one is never evicted by a NaN stop)
    at_start: bool = False  # also save the state before the first GRPO step (after the warm start)


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
        _check_types(self, "")
        g, m, o, s, d, w, e = self.grpo, self.model, self.optim, self.sampling, self.data, self.warmstart, self.eval
        dtypes = ("float32", "bfloat16", "float16")
        checks = [
            (self.steps >= 1, f"steps={self.steps}; expected >= 1"),
            (g.prompts_per_step >= 1, f"grpo.prompts_per_step={g.prompts_per_step}; expected >= 1"),
            (g.group_size >= 2, f"grpo.group_size={g.group_size}; expected >= 2"),
            (g.advantage in ("grpo", "dr_grpo", "rloo"), f"grpo.advantage={g.advantage!r}; expected grpo|dr_grpo|rloo"),
            (g.adv_eps > 0, f"grpo.adv_eps={g.adv_eps}; expected > 0"),
            (g.k_ref >= 1, f"grpo.k_ref={g.k_ref}; expected >= 1"),
            (g.beta >= 0, f"grpo.beta={g.beta}; expected >= 0"),
            (g.eps_low > 0 and g.eps_high > 0, f"grpo.eps_low/eps_high={g.eps_low}/{g.eps_high}; expected > 0"),
            (
                g.aggregation in ("seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"),
                f"grpo.aggregation={g.aggregation!r}; expected seq_mean_token_mean|token_mean|seq_mean_token_sum_norm",
            ),
            (m.dtype in dtypes, f"model.dtype={m.dtype!r}; expected float32|bfloat16|float16"),
            (m.param_dtype in dtypes, f"model.param_dtype={m.param_dtype!r}; expected float32|bfloat16|float16"),
            (o.name in ("adamw", "sgd"), f"optim.name={o.name!r}; expected adamw|sgd"),
            (o.lr > 0, f"optim.lr={o.lr}; expected a finite number > 0"),
            (0 <= o.momentum < 1, f"optim.momentum={o.momentum}; expected 0 <= mu < 1"),
            (0 <= o.b1 < 1, f"optim.b1={o.b1}; expected 0 <= b1 < 1"),
            (0 <= o.b2 < 1, f"optim.b2={o.b2}; expected 0 <= b2 < 1"),
            (o.weight_decay >= 0, f"optim.weight_decay={o.weight_decay}; expected >= 0"),
            (o.grad_clip >= 0, f"optim.grad_clip={o.grad_clip}; expected >= 0 (0 disables clipping)"),
            (o.warmup_steps >= 0, f"optim.warmup_steps={o.warmup_steps}; expected >= 0"),
            (
                o.schedule in ("constant", "cosine", "linear"),
                f"optim.schedule={o.schedule!r}; expected constant|cosine|linear",
            ),
            (w.steps >= 0, f"warmstart.steps={w.steps}; expected >= 0 (0: no warm start)"),
            (w.batch_size >= 1, f"warmstart.batch_size={w.batch_size}; expected >= 1"),
            (w.lr > 0, f"warmstart.lr={w.lr}; expected a finite number > 0"),
            (w.warmup_steps >= 0, f"warmstart.warmup_steps={w.warmup_steps}; expected >= 0"),
            (d.source in ("arith", "jsonl"), f"data.source={d.source!r}; expected arith|jsonl"),
            (d.source != "jsonl" or bool(d.path), "data.source=jsonl needs data.path"),
            (0 < d.heldout_frac < 1, f"data.heldout_frac={d.heldout_frac}; expected 0 < frac < 1"),
            (d.difficulty in range(1, 6), f"data.difficulty={d.difficulty}; expected 1..5"),
            (d.n_train >= 1, f"data.n_train={d.n_train}; expected >= 1"),
            (d.max_prompt_len >= 1, f"data.max_prompt_len={d.max_prompt_len}; expected >= 1"),
            ("{question}" in d.prompt_template,
             f"data.prompt_template={d.prompt_template!r}; expected a template with a {{question}} field"),
            (self.tokenizer.kind in ("auto", "char", "word", "file"),
             f"tokenizer.kind={self.tokenizer.kind!r}; expected auto|char|word|file"),
            (s.max_new_tokens >= 1, f"sampling.max_new_tokens={s.max_new_tokens}; expected >= 1"),
            (s.temperature > 0, f"sampling.temperature={s.temperature}; expected > 0"),
            (0 < s.top_p <= 1, f"sampling.top_p={s.top_p}; expected 0 < top_p <= 1"),
            (s.top_k >= 0, f"sampling.top_k={s.top_k}; expected >= 0 (0: no top-k)"),
            (e.every >= 0, f"eval.every={e.every}; expected >= 0"),
            (e.n >= 0, f"eval.n={e.n}; expected >= 0"),
            (e.samples >= 1, f"eval.samples={e.samples}; expected >= 1"),
            (self.checkpoint.every >= 0, f"checkpoint.every={self.checkpoint.every}; expected >= 0"),
            (self.checkpoint.keep >= 1,
             f"checkpoint.keep={self.checkpoint.keep}; expected >= 1 (a run must keep a checkpoint to resume from)"),
            (self.mesh.model_axis >= 1, f"mesh.model_axis={self.mesh.model_axis}; expected >= 1"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ConfigError(msg)
        if m.pretrained is None:
            sizes = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "max_position_embeddings")
            for name in sizes:
                if getattr(m, name) < 1:
                    raise ConfigError(f"model.{name}={getattr(m, name)}; expected >= 1")
            if m.hidden_size % m.num_attention_heads:
                raise ConfigError(f"model.hidden_size={m.hidden_size} is not divisible by "
                                 f"model.num_attention_heads={m.num_attention_heads}")
            if m.num_attention_heads % m.num_key_value_heads:
                raise ConfigError(f"model.num_attention_heads={m.num_attention_heads} is not divisible by "
                                 f"model.num_key_value_heads={m.num_key_value_heads}")
            if (m.hidden_size // m.num_attention_heads) % 2:
                raise ConfigError(f"model.hidden_size / model.num_attention_heads = "
                                 f"{m.hidden_size // m.num_attention_heads}; expected an even head size (rotary)")
            if not m.rope_theta > 0:
                raise ConfigError(f"model.rope_theta={m.rope_theta}; expected > 0")
            if d.max_prompt_len + s.max_new_tokens > m.max_position_embeddings:
                raise ConfigError(
                    f"data.max_prompt_len + sampling.max_new_tokens = {d.max_prompt_len + s.max_new_tokens} "
                    f"exceeds the context model.max_position_embeddings={m.max_position_embeddings}"
                )
        if not self.rewards.weights:
            raise ConfigError("rewards.weights is empty; expected at least one reward, e.g. {correctness: 1.0}")
        for k, v in self.rewards.weights.items():
            if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ConfigError(f"rewards.weights.{k}={v!r}; expected a finite number")
        self.rewards.parse_options()
        for name in ("eos", "pad"):
            v = getattr(m, name)
            if isinstance(v, int) and v < 0 or isinstance(v, str) and not v:
                raise ConfigError(f"model.{name}={v!r}; expected a token string or a non-negative id")
        return self


_EXPECTED = {"bool": "a YAML boolean (true or false, unquoted)", "int": "an integer", "float": "a finite number",
             "str": "a string", "dict": "a mapping"}


def _kind(f: dataclasses.Field) -> tuple[str, bool]:
    """``(base type name, optional)`` of a config field from its annotation (``"str | None"`` ...)."""
    parts = [p.strip() for p in str(f.type).split("|")]
    return parts[0], "None" in parts[1:]


def _coerce(f: dataclasses.Field, v: Any, where: str) -> Any:
    """Check ``v`` against the field's type; convert the conversions YAML makes necessary.

    YAML 1.1 reads ``5e-4`` as a string and ``1`` where a float is meant, so numbers given as numeric
    strings and integers for floats are converted; everything else must already have the field's type
    (in particular ``"no"`` is not a boolean).
    """
    base, optional = _kind(f)
    if v is None:
        if optional:
            return None
        raise ConfigError(f"{where} has no value; expected {_EXPECTED.get(base, base)}")
    if base == "bool":
        if isinstance(v, bool):
            return v
        raise ConfigError(f"{where}={v!r}; expected a YAML boolean (true or false, unquoted)")
    if base in ("int", "float"):
        num = v
        if isinstance(v, str):
            try:
                num = float(v.strip())
            except ValueError:
                raise ConfigError(f"{where}={v!r}; expected {_EXPECTED[base]}") from None
        if isinstance(num, bool) or not isinstance(num, (int, float)):
            raise ConfigError(f"{where}={v!r}; expected {_EXPECTED[base]}")
        if not math.isfinite(num):
            raise ConfigError(f"{where}={v!r}; expected a finite number")
        if base == "float":
            return float(num)
        if isinstance(num, float) and not num.is_integer():
            raise ConfigError(f"{where}={v!r}; expected an integer")
        return int(num)
    if base == "str":
        if isinstance(v, str):
            return v
        if isinstance(v, int) and not isinstance(v, bool) and "int" in str(f.type).split(" | "):
            return v  # ``str | int``: a token string or id
        if "int" in str(f.type).split(" | "):
            raise ConfigError(f"{where}={v!r}; expected a string or an integer")
        raise ConfigError(f"{where}={v!r}; expected a string")
    if base == "dict":
        if isinstance(v, dict):
            return dict(v)
        raise ConfigError(f"{where}={v!r}; expected a mapping")
    return v


def _check_types(obj: Any, prefix: str) -> None:
    """Re-check every field of a (possibly hand-built) config against its annotation."""
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            _check_types(v, f"{prefix}{f.name}.")
        else:
            _coerce(f, v, f"{prefix}{f.name}")


def _from_dict(cls, data: Any, where: str = ""):
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping of keys to values, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k, v in data.items():
        key = f"{where}.{k}" if where else str(k)
        if k not in fields:
            raise ConfigError(f"{where or 'config'}: unknown key {k!r}; expected one of {sorted(fields)}")
        default = fields[k].default_factory() if fields[k].default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            kwargs[k] = _from_dict(type(default), {} if v is None else v, key)
        else:
            kwargs[k] = _coerce(fields[k], v, key)
    return cls(**kwargs)


def config_to_dict(cfg: TrainConfig) -> dict:
    return dataclasses.asdict(cfg)


def shipped_configs() -> list[str]:
    """Names of the configs shipped in ``grpojax/grpo/configs``."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _yaml_error(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{where}: {getattr(exc, 'problem', None) or str(exc).splitlines()[0]}"


def _read_yaml(p: pathlib.Path) -> Any:
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: {_yaml_error(exc)}") from None
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
      ValueError: invalid YAML, unknown keys or bad values (the message names the file and the key).
    """
    p = resolve_config_path(name_or_path)
    data = _read_yaml(p)
    try:
        return _from_dict(TrainConfig, {} if data is None else data).validate()
    except ValueError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def read_config_dict(path: str | pathlib.Path) -> dict:
    """The full config (defaults filled in, :func:`config_to_dict` form) stored in a YAML file, unvalidated.

    Raises:
      ValueError: the file is not a readable config.
    """
    p = pathlib.Path(path)
    data = _read_yaml(p)
    try:
        return config_to_dict(_from_dict(TrainConfig, {} if data is None else data))
    except ValueError as exc:
        raise ConfigError(f"{p}: {exc}") from None


def save_config(cfg: TrainConfig, path: str | pathlib.Path) -> pathlib.Path:
    """Write ``cfg`` as YAML to ``path`` (atomically)."""
    from grpojax._io import write_text_atomic

    return write_text_atomic(path, yaml.safe_dump(config_to_dict(cfg), sort_keys=False))


def apply_overrides(cfg: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Return a copy of ``cfg`` with ``section.key=value`` overrides applied (values parsed as YAML).

    Raises:
      ValueError: an override without ``=`` or a value, with invalid YAML, an unknown key or a bad value
        (the message names the override).
    """
    data = config_to_dict(cfg)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r}; expected KEY=VALUE such as grpo.k_ref=2")
        key, val = item.split("=", 1)
        key = key.strip()
        parts = key.split(".")
        if not key or not all(parts):
            raise ConfigError(f"override {item!r}: empty key; expected KEY=VALUE such as grpo.k_ref=2")
        if not val.strip():
            raise ConfigError(f"override {item!r}: {key} has no value; expected {key}=VALUE")
        node = data
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a config section")
            node = node[p]
        if parts[-1] not in node:
            raise ConfigError(f"override {item!r}: unknown key {parts[-1]!r}")
        try:
            node[parts[-1]] = yaml.safe_load(val)
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {item!r}: the value of {key} is {_yaml_error(exc)}") from None
    return _from_dict(TrainConfig, data).validate()
