"""Shared plumbing for the ``grpojax`` subcommands: output folders, JSON, console, progress."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from grpojax._progress import progress as _progress

console = Console(stderr=False)
err_console = Console(stderr=True)


class CLIError(Exception):
    """An error the command line reports as one line (no traceback unless ``--debug``)."""


def out_dir(path: str | pathlib.Path) -> pathlib.Path:
    """Create (if needed) and return the output folder."""
    p = pathlib.Path(path)
    p.mkdir(parents=True, exist_ok=True)
    return p


def to_jsonable(obj: Any) -> Any:
    """Convert numpy/JAX scalars and arrays, NamedTuples and dataclasses to plain JSON values.

    Non-finite floats become the strings ``"nan"``, ``"inf"``, ``"-inf"`` so that the files stay
    valid JSON and nothing is silently lost.
    """
    if hasattr(obj, "_asdict"):
        return {k: to_jsonable(v) for k, v in obj._asdict().items()}
    if hasattr(obj, "__dataclass_fields__"):
        return {k: to_jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (str, bool)) or obj is None:
        return obj
    if isinstance(obj, pathlib.Path):
        return str(obj)
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            return to_jsonable(arr.item())
        return [to_jsonable(v) for v in arr.tolist()]
    if isinstance(obj, float):
        if math.isnan(obj):
            return "nan"
        if math.isinf(obj):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        return to_jsonable(obj.item())
    return str(obj)


def write_json(directory: str | pathlib.Path, name: str, obj: Any) -> pathlib.Path:
    """Write ``obj`` as indented JSON to ``directory/name`` and return the path."""
    path = out_dir(directory) / name
    path.write_text(json.dumps(to_jsonable(obj), indent=2) + "\n")
    return path


def progress() -> Progress:
    """The project's progress bar on stderr (use as a context manager)."""
    return _progress(err_console)


def add_oscillator_args(p, *, group_size_help: str, instant_help: str) -> None:
    """The hyperparameters of the oscillator shared by ``predict`` and ``simulate``."""
    p.add_argument("--eta", type=float, required=True, help="learning rate η > 0")
    p.add_argument("--mu", type=float, default=0.0, help="heavy-ball momentum μ in [0, 1) (default 0)")
    p.add_argument("--k-ref", type=int, required=True, help="refresh interval K_ref >= 1 (optimizer steps)")
    p.add_argument("--curvature", type=float, required=True, help="stale stiffness K_d (measured curvature)")
    p.add_argument("--k-instant", type=float, default=0.0, help=instant_help)
    p.add_argument("--lag", choices=("constant", "periodic"), default="constant", help="lag model (default constant)")
    p.add_argument("--group-size", type=int, default=8, help=group_size_help)
    p.add_argument("--noise", type=float, default=0.25, help="per-sample gradient noise variance σ² (default 0.25)")
