"""The canonical run log (``docs/guide/run-log.md``): one table indexed by step, plus the errors readers raise."""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any

import numpy as np

__all__ = ["RunLog", "LogFormatError", "LogWarning", "CANONICAL_COLUMNS"]

#: Canonical column names every reader maps to. Other metrics keep their own names.
CANONICAL_COLUMNS: tuple[str, ...] = (
    "reward_mean",
    "reward_std",
    "frac_zero_std",
    "eval_reward",
    "entropy",
    "kl",
    "grad_norm",
    "lr",
    "is_ratio_mean",
    "is_ratio_max",
    "clip_frac",
    "response_length",
    "response_clip_frac",
)


class LogFormatError(ValueError):
    """A log file is malformed, empty, of an unknown format, or has no reward column.

    The message is one line and names the file and the problem, e.g.
    ``"runs/a.json: truncated JSON (line 120, column 3: Expecting ',' delimiter)"``.
    """

    def __init__(self, path: str | os.PathLike | None, problem: str):
        self.path = None if path is None else str(path)
        self.problem = " ".join(str(problem).split())  # one line, always
        super().__init__(self.problem if path is None else f"{self.path}: {self.problem}")


class LogWarning(UserWarning):
    """Something in a log was repaired or is suspicious (duplicated/decreasing steps, NaN values)."""


def warn(path: str | os.PathLike, message: str, meta: dict | None = None) -> None:
    """Emit one ``LogWarning`` line naming the file and record it in ``meta["warnings"]``."""
    msg = " ".join(str(message).split())
    if meta is not None:
        meta.setdefault("warnings", []).append(msg)
    warnings.warn(f"{path}: {msg}", LogWarning, stacklevel=4)


@dataclasses.dataclass(frozen=True, eq=False)
class RunLog:
    """One training run as a step-indexed table of float64 columns.

    Attributes:
        name: run name (from the log when it carries one, else the file/folder name).
        source: the file or folder it was read from.
        format: the reader that produced it (one of :data:`grpojax.logs.FORMATS`).
        steps: ``(T,)`` int64, strictly increasing: the union of train and eval steps.
        columns: name -> ``(T,)`` float64 aligned with ``steps``; NaN where the metric was not
            logged at that step (or was logged as NaN; see ``meta["nan_counts"]``). Arrays are
            read-only; copy before modifying.
        meta: free-form facts about the run: ``mapping`` (canonical -> original name),
            ``original_names``, ``group_size`` (or None), ``reward_functions``, ``warnings``,
            ``nan_counts``, ``n_train_points``, ``n_eval_points``, format-specific extras.
    """

    name: str
    source: str
    format: str
    steps: np.ndarray
    columns: dict[str, np.ndarray]
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        steps = np.asarray(self.steps)
        if steps.ndim != 1:
            raise ValueError(f"RunLog.steps must be 1-D, got shape {steps.shape}")
        steps = steps.astype(np.int64, copy=True)
        if steps.size > 1 and not np.all(np.diff(steps) > 0):
            raise ValueError("RunLog.steps must be strictly increasing")
        steps.setflags(write=False)
        cols = {}
        for k, v in self.columns.items():
            a = np.array(v, dtype=np.float64, copy=True)
            if a.shape != steps.shape:
                raise ValueError(
                    f"RunLog column {k!r} has shape {a.shape}, expected {steps.shape} (aligned with steps)"
                )
            a.setflags(write=False)
            cols[str(k)] = a
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "source", str(self.source))

    # -- queries ---------------------------------------------------------------------------
    def has(self, col: str) -> bool:
        """True if column ``col`` exists and has at least one non-NaN value."""
        a = self.columns.get(col)
        return a is not None and bool(np.any(~np.isnan(a)))

    def series(self, col: str) -> tuple[np.ndarray, np.ndarray]:
        """The logged points of one column.

        Returns:
            ``(steps, values)``: int64 and float64 arrays of equal length with NaNs dropped.

        Raises:
            KeyError: ``col`` is not a column of this run (the message lists what is there).
        """
        if col not in self.columns:
            names = ", ".join(sorted(self.columns)[:30])
            raise KeyError(f"run {self.name!r} has no column {col!r}; columns: {names}")
        a = self.columns[col]
        ok = ~np.isnan(a)
        return self.steps[ok], a[ok]

    def __len__(self) -> int:
        return int(self.steps.size)

    def __repr__(self) -> str:
        canon = [c for c in CANONICAL_COLUMNS if self.has(c)]
        return (
            f"RunLog(name={self.name!r}, format={self.format!r}, steps={self.steps.size}, "
            f"canonical={canon}, other_columns={len(self.columns) - len(canon)})"
        )

    # -- conversion ----------------------------------------------------------------------
    def to_jsonl(self, path: str | os.PathLike) -> None:
        """Write this run in the project's own JSONL format (see :mod:`grpojax.logs`)."""
        from grpojax.logs._jsonl import write_jsonl

        write_jsonl(path, self)

    def to_dict(self) -> dict[str, np.ndarray]:
        """``{"step": steps, **columns}`` (handy for ``pandas.DataFrame(run.to_dict())``)."""
        return {"step": self.steps, **self.columns}
