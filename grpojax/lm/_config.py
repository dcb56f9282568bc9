"""Decoder configuration read from (and written back to) a Hugging Face ``config.json``.

One frozen, validated, hashable config (a :class:`grpojax._config.Config`) covers the Qwen2 and Llama
families (and Llama-like checkpoints such as DeepSeek-LLM or Mistral without sliding windows). It is
hashable so that it can sit in an NNX graph definition and be a static argument of ``jax.jit``.
"""

from __future__ import annotations

import json
import pathlib
from typing import Annotated, Any, Mapping

from pydantic import BeforeValidator, Field, PrivateAttr, model_validator

from grpojax._config import Bool, Config, Finite, Int
from grpojax._errors import InvalidValueError

__all__ = ["ModelConfig", "SUPPORTED_MODEL_TYPES"]

SUPPORTED_MODEL_TYPES = ("qwen2", "llama")

_ARCHITECTURES = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}
_SUPPORTED_ROPE_TYPES = ("default", "llama3", "linear")


def _as_eos(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return (int(value),)


class ModelConfig(Config):
    """Architecture hyper-parameters of a Qwen2/Llama decoder.

    Attributes:
        vocab_size: number of rows of the embedding / columns of the logits ``V``.
        hidden_size: residual width ``D``.
        intermediate_size: SwiGLU width ``I``.
        num_hidden_layers: number of decoder blocks ``L``.
        num_attention_heads: query heads ``H``.
        num_key_value_heads: key/value heads ``K`` (grouped-query attention; ``H % K == 0``).
        head_dim: per-head width ``d`` (defaults to ``D // H``).
        rope_theta: rotary base ``theta``; frequencies ``theta^(-2i/d)``.
        rope_scaling: ``None`` or a dict with ``rope_type`` in ``{"linear", "llama3"}`` and its parameters
            (``factor``, ``low_freq_factor``, ``high_freq_factor``, ``original_max_position_embeddings``).
        rms_norm_eps: epsilon of RMSNorm.
        tie_word_embeddings: logits use the transposed input embedding (no separate ``lm_head``).
        attention_bias: q/k/v projections carry a bias (Qwen2: always ``True``; Llama: config field).
        max_position_embeddings: longest sequence the checkpoint was trained for (informational).
        bos_token_id, pad_token_id: special ids or ``None``.
        eos_token_id: tuple of end-of-sequence ids (Llama-3 checkpoints list several).
        model_type: ``"qwen2"`` or ``"llama"``.
    """

    vocab_size: Int = Field(ge=1)
    hidden_size: Int = Field(ge=1)
    intermediate_size: Int = Field(ge=1)
    num_hidden_layers: Int = Field(ge=1)
    num_attention_heads: Int = Field(ge=1)
    num_key_value_heads: Int = Field(ge=1)
    head_dim: Int = Field(ge=1)
    rope_theta: Finite = Field(10000.0, gt=0)
    rope_scaling: dict[str, Any] | None = None
    rms_norm_eps: Finite = Field(1e-6, gt=0)
    tie_word_embeddings: Bool = False
    attention_bias: Bool = False
    max_position_embeddings: Int = Field(4096, ge=1)
    bos_token_id: Int | None = None
    eos_token_id: Annotated[tuple[int, ...], BeforeValidator(_as_eos)] = ()
    pad_token_id: Int | None = None
    model_type: str = "llama"
    _hash: int | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self):
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"model_type={self.model_type!r} is not supported; expected one of {SUPPORTED_MODEL_TYPES}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} must be a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for rotary embeddings")
        if self.rope_scaling is not None:
            rtype = self.rope_scaling.get("rope_type", self.rope_scaling.get("type", "default"))
            if rtype not in _SUPPORTED_ROPE_TYPES:
                raise ValueError(f"rope_scaling type {rtype!r} is not supported; expected one of {_SUPPORTED_ROPE_TYPES}")
        return self

    # Hashable although rope_scaling is a dict (needed for jit static args / NNX graphdefs).
    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(json.dumps(self.to_hf(), sort_keys=True))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelConfig):
            return NotImplemented
        return self.to_hf() == other.to_hf()

    @property
    def rope_type(self) -> str:
        """``"default"``, ``"linear"`` or ``"llama3"``."""
        if not self.rope_scaling:
            return "default"
        return self.rope_scaling.get("rope_type", self.rope_scaling.get("type", "default"))

    @property
    def num_groups(self) -> int:
        """Query heads per key/value head, ``H / K``."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_hf(cls, config: Mapping[str, Any] | str | pathlib.Path) -> "ModelConfig":
        """Read a Hugging Face ``config.json`` (dict, file, or checkpoint directory).

        Accepts both the classic fields (``rope_theta``, ``rope_scaling``) and the transformers>=5
        ``rope_parameters`` dict.

        Raises:
            ValueError: unknown ``model_type``, unsupported rope scaling, or a missing required field.
            FileNotFoundError: the path holds no ``config.json``.
        """
        if not isinstance(config, Mapping):
            path = pathlib.Path(config)
            if path.is_dir():
                path = path / "config.json"
            if not path.is_file():
                raise FileNotFoundError(f"no config.json at {path}")
            config = json.loads(path.read_text())
        cfg = dict(config)
        model_type = cfg.get("model_type")
        if model_type not in SUPPORTED_MODEL_TYPES:
            raise InvalidValueError(f"model_type={model_type!r} is not supported; expected one of {SUPPORTED_MODEL_TYPES}")
        required = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
        missing = [k for k in required if k not in cfg]
        if missing:
            raise InvalidValueError(f"config.json lacks required field(s) {missing}")
        if cfg.get("use_sliding_window"):
            raise InvalidValueError("use_sliding_window=True (sliding-window attention) is not supported")
        act = cfg.get("hidden_act", "silu")
        if act != "silu":
            raise InvalidValueError(f"hidden_act={act!r} is not supported; expected 'silu'")
        if cfg.get("mlp_bias"):
            raise InvalidValueError("mlp_bias=True is not supported")
        rope_params = dict(cfg.get("rope_parameters") or {})
        rope_theta = float(cfg.get("rope_theta", rope_params.pop("rope_theta", 10000.0)))
        rope_params.pop("rope_theta", None)
        scaling = cfg.get("rope_scaling")
        if scaling is None and rope_params.get("rope_type", "default") != "default":
            scaling = rope_params
        if scaling is not None:
            scaling = dict(scaling)
            if scaling.get("rope_type", scaling.get("type", "default")) == "default":
                scaling = None
        heads = int(cfg["num_attention_heads"])
        head_dim = cfg.get("head_dim") or int(cfg["hidden_size"]) // heads
        return cls(
            vocab_size=int(cfg["vocab_size"]),
            hidden_size=int(cfg["hidden_size"]),
            intermediate_size=int(cfg["intermediate_size"]),
            num_hidden_layers=int(cfg["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(cfg.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rope_theta=rope_theta,
            rope_scaling=scaling,
            rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
            tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            attention_bias=True if model_type == "qwen2" else bool(cfg.get("attention_bias", False)),
            max_position_embeddings=int(cfg.get("max_position_embeddings", 4096)),
            bos_token_id=cfg.get("bos_token_id"),
            eos_token_id=_as_eos(cfg.get("eos_token_id")),
            pad_token_id=cfg.get("pad_token_id"),
            model_type=model_type,
        )

    def to_hf(self) -> dict[str, Any]:
        """The ``config.json`` dict (classic field names, readable by transformers 4 and 5)."""
        eos: Any = None
        if len(self.eos_token_id) == 1:
            eos = self.eos_token_id[0]
        elif self.eos_token_id:
            eos = list(self.eos_token_id)
        out: dict[str, Any] = {
            "architectures": [_ARCHITECTURES[self.model_type]],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rope_theta": self.rope_theta,
            "rope_scaling": dict(self.rope_scaling) if self.rope_scaling else None,
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "pad_token_id": self.pad_token_id,
        }
        if self.model_type == "llama":
            out["attention_bias"] = self.attention_bias
            out["mlp_bias"] = False
        else:
            out["use_sliding_window"] = False
        return out
