"""Follow a log that is still being written: a cheap change signature and a tolerant re-read."""

from __future__ import annotations

import os
import pathlib

from grpojax._errors import InvalidValueError
from grpojax.logs import LogFormatError, RunLog, read_logs

__all__ = ["log_signature", "read_growing"]


def log_signature(path: str | os.PathLike) -> tuple:
    """``(total bytes, newest mtime_ns, number of files)`` of a file or of every file under a folder.

    Appended lines change the size; new TensorBoard event files change the count. Raises
    ``FileNotFoundError`` when the path does not exist.
    """
    p = pathlib.Path(path)
    if p.is_file():
        st = p.stat()
        return (st.st_size, st.st_mtime_ns, 1)
    if not p.exists():
        raise FileNotFoundError(2, "No such file or directory", str(p))
    size = newest = count = 0
    for f in p.rglob("*"):
        if f.is_file():
            try:
                st = f.stat()
            except OSError:  # removed between listing and stat
                continue
            size += st.st_size
            newest = max(newest, st.st_mtime_ns)
            count += 1
    return (size, newest, count)


def read_growing(path: str | os.PathLike, *, format: str | None = None, run: str | None = None,
                 mapping: dict | None = None) -> RunLog | None:
    """The run a growing log holds so far: ``run`` by name, else the last run of the log.

    Returns None while the log cannot be read yet (empty, a line half written, no reward column yet):
    the next poll tries again. A ``run`` name the log does not hold is a ``ValueError``; so is a
    ``mapping`` (``{canonical: source}``, see :func:`grpojax.logs.read_logs`) whose source column the
    log does not have.
    """
    try:
        runs = read_logs(path, format=format, mapping=mapping)
    except LogFormatError as e:
        if mapping and e.problem.startswith("mapping "):
            raise
        return None
    if not runs:
        return None
    if run is None:
        return runs[-1]
    for r in runs:
        if r.name == run:
            return r
    raise InvalidValueError(f"{path} holds no run named {run!r}; runs: {', '.join(r.name for r in runs)}")
