"""Device meshes ``('data', 'model')`` and placement of annotated NNX parameters on them.

Every parameter carries a partition spec over ``('data', 'model')`` (``out_sharding`` metadata). On a given
mesh an axis that does not divide the dimension it shards is dropped (that dimension is replicated), so
the same annotations serve any mesh shape, e.g. a tiny test model on two forced host devices.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from grpojax._errors import InvalidValueError

__all__ = ["make_mesh", "fit_spec", "param_shardings", "shard_model", "MESH_AXES"]

MESH_AXES = ("data", "model")


def make_mesh(data: int | None = None, model: int = 1, *, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ``('data', 'model')`` mesh of ``data * model`` devices.

    Args:
        data: size of the data/FSDP axis; ``None`` uses all remaining devices.
        model: size of the tensor-parallel axis.
        devices: devices to use (default ``jax.devices()``).
    """
    devices = list(jax.devices() if devices is None else devices)
    if data is None:
        if len(devices) % model:
            raise InvalidValueError(f"model={model} does not divide the {len(devices)} available devices")
        data = len(devices) // model
    if data * model > len(devices) or data < 1 or model < 1:
        raise InvalidValueError(f"mesh data={data} x model={model} needs more than the {len(devices)} available devices")
    arr = np.asarray(devices[: data * model], dtype=object).reshape(data, model)
    return Mesh(arr, MESH_AXES)


def fit_spec(shape: Sequence[int], spec: Sequence | None, mesh: Mesh) -> PartitionSpec:
    """``spec`` with every mesh axis that does not divide its dimension replaced by ``None``."""
    if not spec:
        return PartitionSpec()
    out = []
    for dim, ax in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec))):
        if ax is None:
            out.append(None)
            continue
        names = ax if isinstance(ax, tuple) else (ax,)
        size = math.prod(mesh.shape[n] for n in names if n in mesh.shape)
        ok = all(n in mesh.shape for n in names) and dim % size == 0
        out.append(ax if ok else None)
    return PartitionSpec(*out)


def _var_spec(var) -> tuple | None:
    return var.get_metadata().get("out_sharding") if isinstance(var, nnx.Variable) else None


def param_shardings(state: nnx.State, mesh: Mesh) -> nnx.State:
    """A state-shaped tree of ``NamedSharding`` for the (possibly abstract) parameter ``state``."""

    def one(var):
        return NamedSharding(mesh, fit_spec(var.shape, _var_spec(var), mesh))

    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def shard_model(model: nnx.Module, mesh: Mesh) -> nnx.Module:
    """Place every parameter of ``model`` on ``mesh`` following its annotation (in place; returns ``model``)."""
    state = nnx.state(model)
    shardings = param_shardings(state, mesh)
    placed = jax.tree.map(
        lambda var, sh: var.replace(jax.device_put(var[...], sh)),
        state,
        shardings,
        is_leaf=lambda x: isinstance(x, nnx.Variable),
    )
    nnx.update(model, placed)
    return model
