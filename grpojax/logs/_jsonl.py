"""The project's own JSONL run log (the reference for what ``grpojax`` writes), and JSONL dumps.

Format (version 1), UTF-8, one JSON object per line:

* optional first line, the header: ``{"_grpojax": {"version": 1, "name": ..., "format": ...,
  "source": ..., "meta": {...}}}`` (``format``/``source`` describe where the data came from when
  the file was converted from another log);
* then one object per logged step: ``{"step": 12, "reward_mean": 0.41, "kl": 0.002, ...}`` with an
  integer ``step`` and metric values as JSON numbers, or the strings ``"nan"``, ``"inf"``,
  ``"-inf"`` (``null`` also reads as NaN). Use the canonical names
  (``reward_mean reward_std frac_zero_std eval_reward entropy kl grad_norm lr is_ratio_mean
  is_ratio_max clip_frac response_length response_clip_frac``) and any other name for other
  metrics. Eval results may share the train line of their step or come on their own line
  ``{"step": 20, "eval_reward": 0.3}``; lines of the same step merge. Logging the same (step,
  metric) twice keeps the last value, with a warning. Steps should increase.

:func:`write_jsonl` writes a :class:`RunLog` in this format (NaN entries = not logged are
omitted); :class:`JsonlLogger` streams it from a training loop. The same reader also takes JSONL
dumps of other loggers whose step key is ``step``, ``_step`` (W&B history), ``global_step`` or
``train/global_step``/``eval/epoch`` (OpenRLHF ``logs_dict`` as sent to W&B: ``train/<name>``,
``eval/<name>``); their names go through the usual canonical mapping.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

import numpy as np

from grpojax.logs._runlog import LogFormatError, RunLog, warn
from grpojax.logs._table import TableBuilder
from grpojax.logs._trl import _load_text, _run_name

__all__ = ["read_jsonl", "write_jsonl", "JsonlLogger", "JSONL_VERSION"]

JSONL_VERSION = 1
_STEP_KEYS = ("step", "_step", "train/global_step", "global_step", "eval/epoch", "eval/global_step")


def _num(v: float) -> Any:
    if math.isfinite(v):
        return int(v) if v.is_integer() and abs(v) < 2**53 else v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _clean(obj: Any) -> Any:
    """JSON-safe copy: non-finite floats -> "nan"/"inf"/"-inf", numpy -> Python, other -> str."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_clean(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else _num(f)
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


def _header(name: str, fmt: str, source: str, meta: Mapping) -> str:
    h = {"_grpojax": {"version": JSONL_VERSION, "name": name, "format": fmt, "source": source, "meta": dict(meta)}}
    return json.dumps(_clean(h), allow_nan=False)


def write_jsonl(path: str | os.PathLike, run: RunLog) -> None:
    """Write ``run`` as grpojax JSONL (header line + one line per step; NaN entries omitted)."""
    names = list(run.columns)
    mat = np.column_stack([run.columns[k] for k in names]) if names else np.empty((run.steps.size, 0))
    with open(path, "w", encoding="utf-8") as f:
        f.write(_header(run.name, run.format, run.source, run.meta) + "\n")
        for s, row in zip(run.steps.tolist(), mat.tolist()):
            d: dict[str, Any] = {"step": s}
            for k, v in zip(names, row):
                if v == v:  # not NaN
                    d[k] = _num(v)
            f.write(json.dumps(d) + "\n")


class JsonlLogger:
    """Stream a run log from a training loop in grpojax JSONL.

    Example:
        >>> with JsonlLogger("out/run.jsonl", name="tiny", meta={"group_size": 8}) as log:  # doctest: +SKIP
        ...     log.write(1, reward_mean=0.2, reward_std=0.1, kl=0.0)
        ...     log.write(1, eval_reward=0.15)

    Args:
        path: file to create (overwritten).
        name: run name stored in the header.
        meta: JSON-able facts about the run (group size, hyper-parameters, ...).
    """

    def __init__(self, path: str | os.PathLike, *, name: str = "run", meta: Mapping | None = None):
        self.path = str(path)
        self._f = open(self.path, "w", encoding="utf-8")
        self._f.write(_header(name, "jsonl", self.path, meta or {}) + "\n")

    def write(self, step: int, metrics: Mapping[str, Any] | None = None, **kw: Any) -> None:
        """Append one line ``{"step": step, **metrics, **kw}`` (arrays/scalars converted to float)."""
        d: dict[str, Any] = {"step": int(step)}
        for k, v in {**(metrics or {}), **kw}.items():
            d[str(k)] = _num(float(np.asarray(v)))
        self._f.write(json.dumps(d) + "\n")
        self._f.flush()

    def close(self) -> None:
        """Close the file."""
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> "JsonlLogger":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_jsonl(path: str | os.PathLike, text: str | None = None) -> list[RunLog]:
    """Read grpojax JSONL (or another logger's JSONL dump with a step key).

    Returns:
        One :class:`RunLog` (format ``"jsonl"``, or ``"openrlhf_jsonl"`` for OpenRLHF dumps).
    """
    path, text = _load_text(path, text)
    tb = TableBuilder(path)
    meta: dict = {}
    name = _run_name(path)
    fmt = "jsonl"
    lines = text.splitlines()
    step_key = None
    loads = json.loads
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except json.JSONDecodeError as e:
            if not any(x.strip() for x in lines[i + 1 :]):
                if len(tb) == 0:
                    raise LogFormatError(path, f"truncated JSON on line {i + 1} ({e.msg})") from None
                warn(path, f"last line {i + 1} is truncated JSON ({e.msg}); skipped it", meta)
                continue
            raise LogFormatError(path, f"line {i + 1} is not valid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise LogFormatError(path, f"line {i + 1} is not a JSON object")
        if "_grpojax" in obj:
            h = obj["_grpojax"]
            if isinstance(h, dict):
                name = str(h.get("name") or name)
                meta.update(h.get("meta") or {})
                meta["converted_from"] = {"format": h.get("format"), "source": h.get("source")}
                meta.pop("warnings", None)
            continue
        if step_key is None or step_key not in obj:
            step_key = next((k for k in _STEP_KEYS if k in obj), None)
            if step_key is None:
                raise LogFormatError(path, f"line {i + 1} has no step key (one of {', '.join(_STEP_KEYS)})")
            if step_key in ("train/global_step", "global_step", "eval/epoch", "eval/global_step"):
                fmt = "openrlhf_jsonl"
        step = obj.pop(step_key)
        for k in _STEP_KEYS:
            obj.pop(k, None)
        tb.add(step, obj)
    if fmt == "openrlhf_jsonl":
        meta.setdefault("group_size", None)
    meta.setdefault("group_size", None)
    for k in ("nan_counts", "duplicated_steps", "non_numeric_values", "mapping", "original_names", "steps_sorted",
              "n_train_points", "n_eval_points"):
        meta.pop(k, None)
    return [tb.finish(name=name, format=fmt, meta=meta)]
