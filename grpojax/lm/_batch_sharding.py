"""Data-parallel placement of rollout and training batches on the ('data', 'model') mesh."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["batch_sharding", "place_batch"]


def batch_sharding(mesh: Mesh, shape: tuple[int, ...]) -> NamedSharding:
    """Split the first (batch) dimension over ``data`` when divisible, replicate otherwise."""
    if shape and shape[0] % mesh.shape["data"] == 0:
        return NamedSharding(mesh, P("data", *([None] * (len(shape) - 1))))
    return NamedSharding(mesh, P())


def place_batch(tree, mesh: Mesh):
    """Put every array leaf of ``tree`` on ``mesh`` with :func:`batch_sharding`."""
    return jax.tree.map(lambda x: jax.device_put(x, batch_sharding(mesh, np.shape(x))), tree)
