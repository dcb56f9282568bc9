"""Orbax checkpoints of the trainer state for exact resume.

The state is any pytree of arrays (policy parameters, optimiser state, frozen reference
parameters); it is saved leaf by leaf with :class:`orbax.checkpoint.args.StandardSave` next to a
small JSON record (step, phase, reason). Restoring needs a *target* pytree of the same structure
(e.g. the freshly initialised trainer state): leaves come back with the target's shapes, dtypes and
shardings, so a run resumed on a different mesh is re-sharded on load.
"""

from __future__ import annotations

import pathlib
from typing import Any

import jax
import orbax.checkpoint as ocp

__all__ = ["CheckpointStore"]


class CheckpointStore:
    """Numbered checkpoints in ``directory`` (keeps the newest ``keep``).

    Args:
      directory: checkpoint folder (created).
      keep: how many checkpoints to keep (``None`` keeps all).
    """

    def __init__(self, directory: str | pathlib.Path, *, keep: int | None = 2):
        self.directory = pathlib.Path(directory).absolute()
        self.directory.mkdir(parents=True, exist_ok=True)
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, create=True, enable_async_checkpointing=False)
        self._mgr = ocp.CheckpointManager(self.directory, options=options, item_names=("state", "meta"))

    def latest_step(self) -> int | None:
        return self._mgr.latest_step()

    def all_steps(self) -> list[int]:
        return list(self._mgr.all_steps())

    def save(self, step: int, state: Any, meta: dict | None = None, *, force: bool = True) -> pathlib.Path:
        """Save ``state`` (pytree of arrays) and ``meta`` (JSON-able dict) as checkpoint ``step``
        (replacing an existing checkpoint of that step)."""
        leaves = jax.tree.leaves(state)
        if int(step) in self._mgr.all_steps():
            self._mgr.delete(int(step))
        self._mgr.save(
            int(step),
            args=ocp.args.Composite(
                state=ocp.args.StandardSave({"leaves": leaves}),
                meta=ocp.args.JsonSave(dict(meta or {}, step=int(step))),
            ),
            force=force,
        )
        self._mgr.wait_until_finished()
        return self.directory / str(int(step))

    def restore(self, target: Any, step: int | None = None) -> tuple[Any, dict]:
        """Restore checkpoint ``step`` (default: latest) into the structure of ``target``.

        Raises:
          FileNotFoundError: no checkpoint exists.
          ValueError: the checkpoint does not match ``target`` (different model/optimiser).
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        leaves, treedef = jax.tree.flatten(target)
        abstract = [ocp.utils.to_shape_dtype_struct(x) for x in leaves]
        try:
            got = self._mgr.restore(
                int(step),
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore({"leaves": abstract}),
                    meta=ocp.args.JsonRestore(),
                ),
            )
        except (ValueError, KeyError) as exc:
            raise ValueError(
                f"checkpoint {self.directory / str(step)} does not match this run's state ({exc})"
            ) from exc
        restored = got["state"]["leaves"]
        if len(restored) != len(leaves):
            raise ValueError(
                f"checkpoint {self.directory / str(step)} has {len(restored)} arrays; this run's state has {len(leaves)}"
            )
        return jax.tree.unflatten(treedef, restored), dict(got["meta"])

    def close(self) -> None:
        self._mgr.close()
