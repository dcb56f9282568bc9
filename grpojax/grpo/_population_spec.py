"""A population file: the YAML that ``grpojax train --population FILE.yaml`` runs.

Example::

    config: tiny-arith            # the base run config (a shipped name or a path)
    set: [steps=200, eval.every=50]   # dotted overrides of the base config (optional)
    optimizer: sgd                # sgd (heavy-ball) | adam; one per file
    kl_reference: behaviour       # behaviour (refreshed with every rollout) | initial (the warm start)
    grad_clip: 0.0                # global-norm clipping, 0: none
    schedule: constant            # lr schedule of every member: constant | cosine | linear (peak: the member's lr)
    warmup_steps: 0               # linear warm-up from 0 over this many steps
    chunk: 10                     # optimiser steps per compiled call
    defaults: {momentum: 0.9}     # member fields every member starts from (optional)
    members:                      # members one by one ...
      - {lr: 0.01, k_ref: 1, name: base}
    grid:                         # ... and/or the product of these lists (in the order written)
      lr: [0.01, 0.03, 0.1]
      k_ref: [1, 4]
      seed: [0, 1]

Member fields are those of :class:`grpojax.grpo.Member` plus ``group_size``: members with different group
sizes are trained in separate programs (one per size, ``G<size>/`` subfolders). Every error is one line naming
the key.
"""

from __future__ import annotations

import itertools
import pathlib
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from grpojax._config import Config, Finite, Int, yaml_error
from grpojax._errors import ConfigError
from grpojax.grpo._optim import SCHEDULES
from grpojax.grpo._population import KL_REFERENCES, OPTIMIZERS, Member
from grpojax.grpo._train_config import TrainConfig, apply_overrides, load_config, resolve_config_path

__all__ = ["PopulationSpec", "load_population_spec", "train_population_file"]


class _Entry(Member):
    """A member as a population file writes it: the member's fields and its group size."""

    group_size: Int | None = Field(None, ge=2)


_FIELDS = tuple(_Entry.model_fields)


class PopulationSpec(Config):
    """A population file (see the module docstring): validated when read, every error one line naming the key.

    The members (``members`` then the ``grid`` product, each over ``defaults``) are checked when the file is
    read; :meth:`buckets` gives them grouped by group size, :meth:`train_config` the base run config.
    """

    config: str
    """The base run config: a shipped config name or a config file."""
    set: list[str] = Field(default_factory=list)
    """Dotted ``KEY=VALUE`` overrides of the base config."""
    optimizer: Literal[OPTIMIZERS] = "sgd"
    kl_reference: Literal[KL_REFERENCES] = "behaviour"
    grad_clip: Finite = Field(0.0, ge=0)
    """Global-norm gradient clipping (0: none)."""
    schedule: Literal[SCHEDULES] = "constant"
    """Learning-rate schedule of every member (each member's ``lr`` is its peak)."""
    warmup_steps: Int = Field(0, ge=0)
    """Linear warm-up from 0 over this many steps."""
    chunk: Int = Field(10, ge=1)
    """Optimiser steps per compiled call."""
    defaults: dict[str, Any] = Field(default_factory=dict)
    """Member fields every member starts from."""
    members: list[dict[str, Any]] = Field(default_factory=list)
    grid: dict[str, list] = Field(default_factory=dict)
    """Member field -> values; a member for each combination (in the order written)."""

    @model_validator(mode="before")
    @classmethod
    def _blank_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):  # a key written without a value (``grid:``) is its default
            data = {k: v for k, v in data.items() if not (v is None and k in ("set", "defaults", "members", "grid"))}
        return data

    @model_validator(mode="after")
    def _check(self) -> "PopulationSpec":
        for k in self.defaults:
            if k not in _FIELDS:
                raise ConfigError(f"defaults: unknown key {k!r}; expected one of {sorted(_FIELDS)}")
        for k, v in self.grid.items():
            if k not in _FIELDS:
                raise ConfigError(f"grid: unknown key {k!r}; expected one of {sorted(_FIELDS)}")
            if k == "name":
                raise ConfigError("grid.name: names are given to grid members automatically; expected other fields")
            if not v:
                raise ConfigError(f"grid.{k}=[]; expected a non-empty list of values")
        entries = self._entries()
        if not entries:
            raise ConfigError("no members; expected a members list and/or a grid")
        names = [m.name for _, m in entries]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"member name {dup[0]!r} is used twice; expected one folder per member")
        return self

    def _entries(self) -> list[tuple[int | None, Member]]:
        """``(group_size or None, member)`` for every member, in file order, names filled in."""
        raw = [(f"members[{i}]", {**self.defaults, **m}) for i, m in enumerate(self.members)]
        keys = list(self.grid)
        for j, values in enumerate(itertools.product(*(self.grid[k] for k in keys)) if keys else ()):
            raw.append((f"grid[{j}] ({', '.join(f'{k}={v}' for k, v in zip(keys, values))})",
                        {**self.defaults, **dict(zip(keys, values))}))
        out = []
        for i, (where, fields) in enumerate(raw):
            e = _Entry.from_dict(fields, key=where)
            kw = e.to_dict()
            g = kw.pop("group_size")
            out.append((g, Member(**{**kw, "name": kw["name"] or f"m{i:04d}"})))
        return out

    def buckets(self, group_size: int) -> list[tuple[int, list[Member]]]:
        """``[(group size, members)]`` in increasing group size (members without one get ``group_size``)."""
        by_g: dict[int, list[Member]] = {}
        for g, m in self._entries():
            by_g.setdefault(g or group_size, []).append(m)
        return sorted(by_g.items())

    def train_config(self) -> TrainConfig:
        """The base run config with the ``set`` overrides applied (validated)."""
        try:
            cfg = load_config(resolve_config_path(self.config))
        except FileNotFoundError as exc:  # the message names the config asked for and the shipped ones
            raise ConfigError(str(exc)) from None
        return (apply_overrides(cfg, self.set) if self.set else cfg).validate()

    @classmethod
    def read(cls, path: str | pathlib.Path) -> "PopulationSpec":
        """Read and validate a population file.

        Raises:
          ConfigError: an unreadable file, an unknown or bad key (named), or no member at all.
        """
        p = pathlib.Path(path)
        if not p.is_file():
            raise ConfigError(f"population file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"population file {p}: {yaml_error(exc)}") from None
        return cls.from_dict(data, where=f"population file {p}")


def load_population_spec(path: str | pathlib.Path) -> tuple[PopulationSpec, TrainConfig, list]:
    """Read a population file: ``(spec, base config, buckets)`` with ``buckets`` from
    :meth:`PopulationSpec.buckets` at the base config's group size.

    Raises:
      ConfigError: an unreadable file, an unknown or bad key (named), no member at all, or a bad base config.
    """
    spec = PopulationSpec.read(path)
    cfg = spec.train_config()
    return spec, cfg, spec.buckets(cfg.grpo.group_size)


def train_population_file(path: str | pathlib.Path, out_dir: str | pathlib.Path, *, show_progress: bool = True,
                          devices=None) -> list:
    """Train the population of a file: one :func:`grpojax.grpo.train_population` per group size, all from one
    shared warm start; a single group size writes to ``out_dir``, several to ``out_dir/G<size>/``.

    Returns the list of ``(group_size, PopulationResult)``.
    """
    from grpojax.grpo._population import train_population  # noqa: PLC0415

    spec, base, buckets = load_population_spec(path)
    out = pathlib.Path(out_dir)
    results = []
    warm = None
    for g, members in buckets:
        cfg = apply_overrides(base, [f"grpo.group_size={g}"])
        folder = out if len(buckets) == 1 else out / f"G{g}"
        res = train_population(cfg, members, folder, optimizer=spec.optimizer, kl_reference=spec.kl_reference,
                               grad_clip=spec.grad_clip, schedule=spec.schedule, warmup_steps=spec.warmup_steps,
                               chunk=spec.chunk, devices=devices,
                               show_progress=show_progress, warm=warm)
        warm = res.warm
        results.append((g, res))
    return results
