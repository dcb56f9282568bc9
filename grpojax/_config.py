"""The one configuration mechanism of grpojax: frozen, validated pydantic models with dotted overrides.

The user-facing configurations (the trainer's YAML config and its answer-parsing options, the detectors'
thresholds, the watch engine's settings, a decoder's architecture, a population file and its members) are
subclasses of :class:`Config`:

- fields are typed and validated when a config is built, from keywords, a mapping or a YAML file;
  unknown keys are refused; a config is immutable (assigning a field raises an ``AttributeError``;
  hashable when its fields are) and :meth:`Config.replace` returns a validated copy;
- every validation error becomes one :class:`grpojax.ConfigError` line that names the dotted key (list
  positions in brackets), the bad value and what was expected (``grpo.k_ref=0; expected >= 1``,
  ``members[2].lr=-1.0; expected a finite number > 0``);
- :func:`apply_overrides` applies ``section.key=value`` strings (values parsed as YAML), which is what
  ``--set`` does on the command line;
- choices are ``Literal`` types built from the tuple that names them where they are used
  (``Literal[ADVANTAGE_MODES]``), so each enumeration is written once.

Values are read strictly where YAML would otherwise guess: a boolean must be ``true``/``false``
(unquoted), an integer field refuses ``true`` and ``2.5``, every float must be finite. YAML 1.1 reads
``5e-4`` as a string, so numeric strings are accepted for numeric fields.

The softmax-bandit and sweep settings are not configs in this sense: they are pytrees of arrays that
``jax.jit`` and ``jax.vmap`` trace (one value per configuration of a sweep), and stay ``equinox``
modules.

pydantic (v2) is used because it validates nested models with precise error locations and is already
a dependency of the libraries grpojax builds on.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Self

import pydantic
from pydantic import BeforeValidator, ConfigDict

from grpojax._errors import ConfigError

if TYPE_CHECKING:
    import yaml

__all__ = ["Config", "Finite", "Int", "Bool", "apply_overrides", "dotted_key", "format_validation_error", "yaml_error"]


def _finite_number(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("expected a finite number")
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise ValueError("expected a finite number") from None
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise ValueError("expected a finite number")
        v = float(v)
    return v


def _integer(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("expected an integer")
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise ValueError("expected an integer") from None
    if isinstance(v, float):
        if not (math.isfinite(v) and v.is_integer()):
            raise ValueError("expected an integer")
        v = int(v)
    return v


Finite = Annotated[float, BeforeValidator(_finite_number)]
"""A finite float (numeric strings accepted, booleans refused)."""
Int = Annotated[int, BeforeValidator(_integer)]
"""An integer (``2.0`` and ``"2"`` accepted; ``2.5``, booleans and non-finite values refused)."""
Bool = pydantic.StrictBool
"""A boolean written as a boolean (``"no"`` or ``1`` are refused)."""


class Config(pydantic.BaseModel):
    """Base of every grpojax configuration: frozen, validated, no unknown keys."""

    # the fields' attribute docstrings are their documentation (the API reference reads them from the source);
    # pydantic's use_attribute_docstrings would also read every config module's source when it is imported
    # (~15 ms of each command line) to copy them into Field descriptions nothing reads
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            err = ConfigError(format_validation_error(exc, type(self)))
            # a section built inside a larger config: the outer error message rebuilds the full key from these
            err.validation_error, err.model = exc, type(self)
            raise err from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).model_fields:
            raise dataclasses.FrozenInstanceError(
                f"{type(self).__name__} is frozen; .replace({name}=...) returns a validated copy")
        super().__setattr__(name, value)

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "", key: str = "") -> Self:
        """Build from a mapping (``None``: every default); errors are one :class:`ConfigError` line.

        ``where`` prefixes the message (a file name); ``key`` is the place of this mapping inside a larger
        file, put before the keys the message names (``members[2]`` gives ``members[2].lr=-1.0; ...``).
        """
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            at = f"{where}: " if where else ""
            raise ConfigError(f"{at}{key + ': ' if key else ''}expected a mapping of keys to values, "
                              f"got {type(data).__name__}")
        try:
            return cls.model_validate(dict(data))
        except pydantic.ValidationError as exc:
            raise ConfigError(format_validation_error(exc, cls, where, (key,) if key else ())) from None

    def replace(self, **changes: Any) -> Self:
        """A validated copy with some fields changed (nested sections take a mapping or a section)."""
        data = self.to_dict()
        for k, v in changes.items():
            data[k] = v.to_dict() if isinstance(v, Config) else v
        return type(self).from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """Plain Python values (nested dicts), the form YAML files and run folders store."""
        return self.model_dump(mode="python")


def _field_names(cls: type[pydantic.BaseModel], loc: tuple) -> list[str]:
    """The field names of the model reached by following ``loc`` (for an unknown-key message)."""
    def model_in(ann: Any) -> type[pydantic.BaseModel] | None:  # a model, or one inside list[...] / X | None
        if isinstance(ann, type) and not typing.get_args(ann) and issubclass(ann, pydantic.BaseModel):
            return ann
        return next((m for m in map(model_in, typing.get_args(ann)) if m is not None), None)

    model = cls
    for part in loc:
        if isinstance(part, int):  # a list position: the same model
            continue
        inner = model_in(getattr(model.model_fields.get(part), "annotation", None))
        if inner is None:
            break
        model = inner
    return sorted(model.model_fields)


def dotted_key(loc: Iterable) -> str:
    """``("members", 2, "lr")`` as ``members[2].lr``: names joined by dots, list positions in brackets."""
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def format_validation_error(exc: pydantic.ValidationError, cls: type[pydantic.BaseModel], where: str = "",
                            base: tuple = ()) -> str:
    """The first error of ``exc`` as one line: ``key=value; expected ...`` (``key`` dotted, under ``base``)."""
    err = exc.errors(include_url=False)[0]
    rel = tuple(err["loc"])
    loc = base + rel
    key = dotted_key(loc)
    prefix = f"{where}: " if where else ""
    kind, msg, value = err["type"], err["msg"], err.get("input")
    inner = (err.get("ctx") or {}).get("error")
    if kind == "value_error" and getattr(inner, "validation_error", None) is not None:
        # a nested section raised its own one-line error: rebuild it with the full key
        return format_validation_error(inner.validation_error, inner.model, where, loc)
    if kind == "extra_forbidden":
        parent = dotted_key(loc[:-1])
        return (f"{prefix}{parent + ': ' if parent else ''}unknown key {loc[-1]!r}; expected one of "
                f"{_field_names(cls, rel[:-1])}")
    if kind == "missing":
        return f"{prefix}{key} is required"
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        what = "a finite number " if isinstance(value, float) else ""
        bound = next(iter(err.get("ctx", {}).values()), "?")
        msg = f"expected {what}{op} {bound:g}" if isinstance(bound, (int, float)) else f"expected {what}{op} {bound}"
    elif kind in ("bool_type", "bool_parsing"):
        msg = "expected a YAML boolean (true or false, unquoted)"
    elif msg.startswith("Input should be "):
        msg = "expected " + msg.removeprefix("Input should be ")
    if not key or (kind == "value_error" and isinstance(value, Mapping)):
        return f"{prefix}{msg}"  # a check of a whole section: its message names its keys
    return f"{prefix}{key}={value!r}; {msg}"


def yaml_error(exc: yaml.YAMLError) -> str:
    """One line for a YAML parse error, with its line and column when known."""
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"invalid YAML{at}: {getattr(exc, 'problem', None) or str(exc).splitlines()[0]}"


def apply_overrides(cfg: Config, overrides: Iterable[str]) -> Config:
    """A validated copy of ``cfg`` with ``section.key=value`` overrides applied (values parsed as YAML).

    Raises:
        ConfigError: an override without ``=`` or a value, with invalid YAML, an unknown key or a bad
            value (the message names the override).
    """
    import yaml  # noqa: PLC0415  (only for overrides: the configs themselves need no YAML)

    data = cfg.to_dict()
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
            raise ConfigError(f"override {item!r}: unknown key {parts[-1]!r}; expected one of {sorted(node)}")
        try:
            node[parts[-1]] = yaml.safe_load(val)
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {item!r}: the value of {key} is {yaml_error(exc)}") from None
    return type(cfg).from_dict(data)
