"""The trainer's run log: one JSON object per line (``step`` + canonical column names), optional TensorBoard.

This is the grpojax JSONL format of :mod:`grpojax.logs` (version 1): an optional header line
``{"_grpojax": {"version": 1, "name": ..., "meta": {...}}}``, then one line per step
``{"step": n, "reward_mean": ..., ...}`` with finite floats as numbers and non-finite ones as the
strings ``"nan"``, ``"inf"``, ``"-inf"``. Nested dictionaries are flattened with
``/`` (``{"timing_s": {"rollout": 1.2}}`` -> ``"timing_s/rollout"``). :func:`truncate_log` drops the
lines after a checkpoint's step so that a resumed run appends exactly where the checkpoint was.
"""

from __future__ import annotations

import json
import math
import pathlib
import time
from typing import Any

import numpy as np

__all__ = ["RunLogger", "read_jsonl_metrics", "truncate_log"]


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def _clean(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if hasattr(v, "shape") and np.ndim(v) == 0:
        v = np.asarray(v).item()
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isfinite(v):
            return v
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (int, str)) or v is None:
        return v
    return str(v)


class RunLogger:
    """Append-only JSONL writer (flushed every line) with an optional TensorBoard mirror.

    Args:
      path: the ``.jsonl`` file (parent folder created).
      tensorboard_dir: folder for TensorBoard event files, or ``None``.
      header: a JSON object written as the first line when the file is new or empty.
    """

    def __init__(self, path: str | pathlib.Path, *, tensorboard_dir: str | pathlib.Path | None = None,
                 header: dict | None = None):
        self.path = pathlib.Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        self._f = self.path.open("a")
        if header is not None and fresh:
            self._f.write(json.dumps(header) + "\n")
        self._tb = None
        if tensorboard_dir is not None:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter

            pathlib.Path(tensorboard_dir).mkdir(parents=True, exist_ok=True)
            self._tb = EventFileWriter(str(tensorboard_dir))

    def log(self, step: int, metrics: dict) -> dict:
        """Write one line for ``step`` and return the flattened, cleaned record."""
        rec = {"step": int(step)}
        rec.update({k: _clean(v) for k, v in _flatten(metrics).items() if k != "step"})
        self._f.write(json.dumps(rec) + "\n")
        self._f.flush()
        if self._tb is not None:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary

            values = [
                Summary.Value(tag=k, simple_value=float(v))
                for k, v in rec.items()
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
            ]
            self._tb.add_event(Event(wall_time=time.time(), step=int(step), summary=Summary(value=values)))
            self._tb.flush()
        return rec

    def close(self) -> None:
        self._f.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def truncate_log(path: str | pathlib.Path, last_step: int) -> int:
    """Drop every line whose ``step`` exceeds ``last_step`` (and any torn last line); return lines kept."""
    path = pathlib.Path(path)
    if not path.exists():
        return 0
    kept = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a kill
        if isinstance(rec, dict) and ("step" not in rec or int(rec["step"]) <= last_step):
            kept.append(line)
    path.write_text("".join(x + "\n" for x in kept))
    return len(kept)


def read_jsonl_metrics(path: str | pathlib.Path) -> list[dict]:
    """The records of a trainer log (``null`` -> NaN), for tests and quick looks."""
    out = []
    for line in pathlib.Path(path).read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            if "step" not in rec:
                continue  # header
            out.append({k: (float(v) if isinstance(v, str) and v in ("nan", "inf", "-inf") else
                            float("nan") if v is None else v) for k, v in rec.items()})
    return out
