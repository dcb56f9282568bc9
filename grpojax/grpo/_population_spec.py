"""A population file: the YAML that ``grpojax train --population FILE.yaml`` runs.

Example::

    config: tiny-arith            # the base run config (a shipped name or a path)
    set: [steps=200, eval.every=50]   # dotted overrides of the base config (optional)
    optimizer: sgd                # sgd (heavy-ball) | adam; one per file
    kl_reference: behaviour       # behaviour (refreshed with every rollout) | initial (the warm start)
    grad_clip: 0.0                # global-norm clipping, 0: none
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

import dataclasses
import itertools
import pathlib
from typing import NamedTuple

import yaml

from grpojax._errors import ConfigError
from grpojax.grpo._population import KL_REFERENCES, OPTIMIZERS, Member
from grpojax.grpo._train_config import TrainConfig, apply_overrides, load_config, resolve_config_path

__all__ = ["PopulationSpec", "load_population_spec", "train_population_file"]

_TOP = ("config", "set", "optimizer", "kl_reference", "grad_clip", "chunk", "defaults", "members", "grid")
_FIELDS = tuple(f.name for f in dataclasses.fields(Member)) + ("group_size",)


class PopulationSpec(NamedTuple):
    """A validated population file.

    Attributes:
      cfg: the base run configuration (with the ``set`` overrides).
      buckets: ``[(group_size, members)]``, one entry per group size (one compiled program each).
      optimizer, kl_reference, grad_clip, chunk: the :func:`grpojax.grpo.train_population` options.
    """

    cfg: TrainConfig
    buckets: list
    optimizer: str
    kl_reference: str
    grad_clip: float
    chunk: int


def _member(fields: dict, where: str) -> tuple[int | None, Member]:
    if not isinstance(fields, dict):
        raise ConfigError(f"{where}: expected a mapping of member fields, got {type(fields).__name__}")
    unknown = sorted(str(k) for k in fields if k not in _FIELDS)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown member field; expected one of {', '.join(_FIELDS)}")
    kw = dict(fields)
    g = kw.pop("group_size", None)
    if g is not None and not (isinstance(g, int) and not isinstance(g, bool) and g >= 2):
        raise ConfigError(f"{where}.group_size={g!r}; expected an integer >= 2")
    if "lr" not in kw:
        raise ConfigError(f"{where}.lr is missing; every member needs a learning rate")
    for k in ("lr", "momentum", "b1", "b2", "beta", "clip_eps"):
        if k in kw and isinstance(kw[k], int) and not isinstance(kw[k], bool):
            kw[k] = float(kw[k])
        if k in kw and not isinstance(kw[k], float):
            raise ConfigError(f"{where}.{k}={kw[k]!r}; expected a number")
    return g, Member(**kw).check(where)


def load_population_spec(path: str | pathlib.Path) -> PopulationSpec:
    """Read and validate a population file (see the module docstring).

    Raises:
      ConfigError: an unreadable file, an unknown or bad key (named), or no member at all.
    """
    p = pathlib.Path(path)
    if not p.is_file():
        raise ConfigError(f"population file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"population file {p} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"population file {p}: expected a mapping with keys {', '.join(_TOP)}")
    unknown = sorted(str(k) for k in data if k not in _TOP)
    if unknown:
        raise ConfigError(f"population file {p}: unknown key {unknown[0]!r}; expected one of {', '.join(_TOP)}")
    if "config" not in data:
        raise ConfigError(f"population file {p}: config is missing (a shipped config name or a config file)")
    cfg = load_config(resolve_config_path(str(data["config"])))
    sets = data.get("set") or []
    if not isinstance(sets, list) or not all(isinstance(s, str) for s in sets):
        raise ConfigError(f"set={sets!r}; expected a list of KEY=VALUE strings")
    if sets:
        cfg = apply_overrides(cfg, sets)
    cfg.validate()
    optimizer = data.get("optimizer", "sgd")
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer={optimizer!r}; expected one of {'|'.join(OPTIMIZERS)}")
    kl_ref = data.get("kl_reference", "behaviour")
    if kl_ref not in KL_REFERENCES:
        raise ConfigError(f"kl_reference={kl_ref!r}; expected one of {'|'.join(KL_REFERENCES)}")
    clip = data.get("grad_clip", 0.0)
    if isinstance(clip, bool) or not isinstance(clip, (int, float)) or not clip >= 0:
        raise ConfigError(f"grad_clip={clip!r}; expected a number >= 0 (0: none)")
    chunk = data.get("chunk", 10)
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(f"chunk={chunk!r}; expected an integer >= 1")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ConfigError(f"defaults={defaults!r}; expected a mapping of member fields")
    bad = sorted(str(k) for k in defaults if k not in _FIELDS)
    if bad:
        raise ConfigError(f"defaults.{bad[0]}: unknown member field; expected one of {', '.join(_FIELDS)}")
    entries: list[tuple[str, dict]] = []
    listed = data.get("members") or []
    if not isinstance(listed, list):
        raise ConfigError(f"members: expected a list of member mappings, got {type(listed).__name__}")
    for i, m in enumerate(listed):
        if not isinstance(m, dict):
            raise ConfigError(f"members[{i}]: expected a mapping of member fields, got {type(m).__name__}")
        entries.append((f"members[{i}]", {**defaults, **m}))
    grid = data.get("grid") or {}
    if not isinstance(grid, dict):
        raise ConfigError(f"grid: expected a mapping of member field -> list of values, got {type(grid).__name__}")
    for k, v in grid.items():
        if k not in _FIELDS:
            raise ConfigError(f"grid.{k}: unknown member field; expected one of {', '.join(_FIELDS)}")
        if not isinstance(v, list) or not v:
            raise ConfigError(f"grid.{k}={v!r}; expected a non-empty list of values")
        if k == "name":
            raise ConfigError("grid.name: names are given to grid members automatically; expected other fields")
    if grid:
        keys = list(grid)
        for j, values in enumerate(itertools.product(*(grid[k] for k in keys))):
            entries.append((f"grid[{j}] ({', '.join(f'{k}={v}' for k, v in zip(keys, values))})",
                            {**defaults, **dict(zip(keys, values))}))
    if not entries:
        raise ConfigError(f"population file {p}: no members; expected a members list and/or a grid")
    buckets: dict[int, list[Member]] = {}
    for i, (where, fields) in enumerate(entries):
        g, m = _member(fields, where)
        if m.name is None:
            m = dataclasses.replace(m, name=f"m{i:04d}")
        buckets.setdefault(g or cfg.grpo.group_size, []).append(m)
    names = [m.name for ms in buckets.values() for m in ms]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"member name {dup[0]!r} is used twice; expected one folder per member")
    return PopulationSpec(cfg, sorted(buckets.items()), optimizer, kl_ref, float(clip), chunk)


def train_population_file(path: str | pathlib.Path, out_dir: str | pathlib.Path, *, show_progress: bool = True,
                          devices=None) -> list:
    """Train the population of a file: one :func:`grpojax.grpo.train_population` per group size, all from one
    shared warm start; a single group size writes to ``out_dir``, several to ``out_dir/G<size>/``.

    Returns the list of ``(group_size, PopulationResult)``.
    """
    from grpojax.grpo._population import train_population  # noqa: PLC0415

    spec = load_population_spec(path)
    out = pathlib.Path(out_dir)
    results = []
    warm = None
    for g, members in spec.buckets:
        cfg = apply_overrides(spec.cfg, [f"grpo.group_size={g}"])
        folder = out if len(spec.buckets) == 1 else out / f"G{g}"
        res = train_population(cfg, members, folder, optimizer=spec.optimizer, kl_reference=spec.kl_reference,
                               grad_clip=spec.grad_clip, chunk=spec.chunk, devices=devices,
                               show_progress=show_progress, warm=warm)
        warm = res.warm
        results.append((g, res))
    return results
