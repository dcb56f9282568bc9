"""Reading the trainer's run log back as records.

The trainer writes its log with :class:`grpojax.logs.JsonlLogger` (grpojax JSONL: a header line,
then one ``{"step": n, ...}`` object per step; nested metric dicts flattened with ``/``; non-finite
values as ``"nan"``/``"inf"``/``"-inf"``; an optional TensorBoard mirror) and cuts it back to a
checkpoint's step with :func:`grpojax.logs.truncate_jsonl` before a resumed run appends.
:func:`read_jsonl_metrics` gives the raw records (for tests and quick looks);
:func:`grpojax.logs.read_log` gives the canonical :class:`grpojax.logs.RunLog`.
"""

from __future__ import annotations

import json
import pathlib

from grpojax._io import from_json_number

__all__ = ["NoLog", "read_jsonl_metrics"]


def read_jsonl_metrics(path: str | pathlib.Path) -> list[dict]:
    """The step records of a trainer log in order (header skipped; ``"nan"``/``null`` -> NaN)."""
    out = []
    for line in pathlib.Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            if "step" not in rec:
                continue  # header
            out.append({k: float("nan") if v is None else from_json_number(v) for k, v in rec.items()})
    return out


class NoLog:
    """The run log of a process other than process 0: the log is written once, by process 0."""

    def write(self, step, rec) -> None:
        pass

    def record(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass
