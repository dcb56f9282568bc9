"""JSON values and atomic file writes: the one place where results become files.

:func:`to_jsonable` turns numpy/JAX scalars and arrays, NamedTuples, dataclasses and paths into plain
JSON values, so that every file stays strict JSON: NaN (a value that does not exist) becomes ``null``,
infinities the strings ``"inf"`` and ``"-inf"`` (their sign is information). Run logs write each
metric with :func:`json_number` (NaN as ``"nan"``, the log format); :func:`from_json_number` reads both
back.

:func:`write_text_atomic`, :func:`write_json` and :func:`save_figure` all write through
:func:`atomic_write` -- a temporary file in the target folder followed by :func:`os.replace` -- so a reader
(or a crash, or a full disk) never leaves a half-written file under the final name, and a test can
inject a full disk into every writer by replacing that one function.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["atomic_write", "from_json_number", "json_number", "save_figure", "to_jsonable", "write_json", "write_text_atomic"]


def json_number(x: float) -> float | str:
    """A float as a JSON value: itself when finite, else ``"nan"``, ``"inf"`` or ``"-inf"``."""
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def from_json_number(v: Any) -> Any:
    """Inverse of :func:`json_number` for one value (other values are returned unchanged)."""
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    return v


def to_jsonable(obj: Any) -> Any:
    """Convert ``obj`` to plain JSON values (dicts, lists, str, int, float, bool, None).

    NamedTuples and dataclasses become dicts, arrays become (nested) lists, NaN becomes ``None`` (JSON
    ``null``) and ±inf the strings ``"inf"`` / ``"-inf"``; anything else unknown becomes its ``str``. The conversion recurses
    into the object, so it is meant for results, not for untrusted input.
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
    if isinstance(obj, pathlib.PurePath):
        return str(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return None if math.isnan(obj) else json_number(obj)
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        arr = np.asarray(obj)
        if arr.ndim == 0:
            return to_jsonable(arr.item())
        return [to_jsonable(v) for v in arr.tolist()]
    return str(obj)


def _file_mode() -> int:
    """The mode ``open(..., "w")`` would give a new file (0o666 less the umask); mkstemp makes 0o600."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | os.PathLike, write: Callable[[str], None]) -> pathlib.Path:
    """The one atomic write of grpojax: ``write(tmp)`` fills a temporary file beside ``path``, then it is renamed.

    Every file grpojax writes (JSON results, figures, configs, summaries) goes through here. The parent
    folder is created if needed. On any error the temporary file is removed and the previous content
    of ``path`` (if any) is left untouched; an ``OSError`` without a file name gets ``path`` as its
    name, so that the message says which file could not be written (a full disk, a read-only folder).
    """
    path = pathlib.Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, _file_mode())
        finally:
            os.close(fd)
        write(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        ours = e.filename is None or os.path.basename(str(e.filename)).startswith(f".{path.name}.")
        if isinstance(e, OSError) and e.errno is not None and ours:  # name the file the user asked for, not the temporary
            raise type(e)(e.errno, e.strerror or str(e), str(path)) from e
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> pathlib.Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`: temporary file in the same folder, then rename)."""

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    return atomic_write(path, write)


def write_json(directory: str | os.PathLike, name: str, obj: Any) -> pathlib.Path:
    """Write ``obj`` (through :func:`to_jsonable`) as indented JSON to ``directory/name``, atomically."""
    text = json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"
    return write_text_atomic(pathlib.Path(directory) / name, text)


def save_figure(fig: Any, path: str | os.PathLike, **kwargs: Any) -> pathlib.Path:
    """``fig.savefig(path, **kwargs)`` atomically (:func:`atomic_write`).

    The format comes from ``path``'s suffix unless ``format=`` is given. On any error the temporary
    file is removed and a previous figure at ``path`` is left untouched.
    """
    path = pathlib.Path(path)
    kwargs.setdefault("format", path.suffix[1:] or None)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, **kwargs))
