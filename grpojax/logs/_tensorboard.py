"""TensorBoard event files and log folders, read with tensorboard's own protobufs.

Each event file is a sequence of TFRecords (``uint64 length, uint32 crc, Event bytes, uint32
crc``) holding ``tensorboard.compat.proto.event_pb2.Event`` messages. The default engine walks
the records and parses every ``Event`` with tensorboard's protobuf classes (C-accelerated), which
is ~5x faster than tensorboard's ``EventAccumulator`` (whose stub record reader computes CRC32C in
pure Python); CRCs are not checked. If a file does not parse this way it is read again through
``EventAccumulator`` (the maintained reader, which checks CRCs); the two give identical tables
(tested).

Both scalar encodings are read: ``simple_value`` summaries (what ``torch.utils.tensorboard``
writes, hence TRL/HF ``Trainer``, verl and OpenRLHF) and scalar *tensors* of the ``scalars``
plugin (what ``tf.summary.scalar`` / ``tensorboard.summary.Writer`` write). Tags keep their names
up to the canonical mapping, which strips ``train/`` and turns ``eval/x`` into ``eval_x``.

A folder is searched recursively; every sub-folder that holds event files holds one or more
runs, named by its path relative to the folder given. Inside one folder the event files are taken
in name (= creation) order, and each file's events in the order they were written:

* a file whose first step is above the first step of the run read so far continues that run (a
  run resumed from a checkpoint: steps logged again keep the later file's value, with a warning);
* a file whose first step is not above it starts a new run (the step counter restarted: another
  run written to the same folder), as does a restart of the step counter inside one file (the
  step drops to or below the first step of the current segment).

Runs are never merged across restarts. Several runs from one folder are named
``<folder>/<event file name>`` (plus ``#k`` for the k-th run inside one file); a run's ``source``
is its first event file, so one run can be read on its own from that path.
"""

from __future__ import annotations

import os
import struct
import warnings
from typing import NamedTuple

import numpy as np

from grpojax.logs._runlog import LogFormatError, LogWarning, RunLog, warn
from grpojax.logs._table import TableBuilder, restart_points
from grpojax.logs._text import event_files, find_event_dirs

__all__ = ["read_tensorboard"]


class _Fallback(Exception):
    pass


def _scalar_of(v, tensor_util) -> float | None:
    kind = v.WhichOneof("value")
    if kind == "simple_value":
        return v.simple_value
    if kind == "tensor":
        t = v.tensor
        if t.tensor_shape.dim and any(d.size != 1 for d in t.tensor_shape.dim):
            return None
        if t.float_val:
            return t.float_val[0]
        if t.double_val:
            return t.double_val[0]
        try:
            a = tensor_util.make_ndarray(t)
        except Exception:  # noqa: BLE001 - strings, odd dtypes: not a scalar metric
            return None
        if a.size == 1 and a.dtype.kind in "biuf":
            return float(a.reshape(()))
    return None


class _Records(NamedTuple):
    """The scalar records of one event file in write order (one per summary value)."""

    path: str
    steps: np.ndarray  # (n,) int64
    tags: np.ndarray  # (n,) int: index into ``names``
    values: np.ndarray  # (n,) float64
    names: list[str]
    partial: bool  # the file ends in a partial record


def _records_fast(fn: str) -> _Records:
    from google.protobuf.message import DecodeError  # noqa: PLC0415
    from tensorboard.compat.proto import event_pb2  # noqa: PLC0415
    from tensorboard.util import tensor_util  # noqa: PLC0415

    parse = event_pb2.Event.FromString
    with open(fn, "rb") as f:
        data = f.read()
    pos, n = 0, len(data)
    n_records = 0
    partial = False
    steps: list[int] = []
    tags: list[int] = []
    vals: list[float] = []
    code: dict[str, int] = {}
    while pos < n:
        if pos + 12 > n:
            partial = True
            break
        (length,) = struct.unpack_from("<Q", data, pos)
        start = pos + 12
        end = start + length
        if end + 4 > n:
            partial = True
            break
        try:
            ev = parse(data[start:end])
        except DecodeError:
            raise _Fallback from None
        pos = end + 4
        n_records += 1
        if not ev.HasField("summary"):
            continue
        step = ev.step
        for v in ev.summary.value:
            x = _scalar_of(v, tensor_util)
            if x is None:
                continue
            c = code.get(v.tag)
            if c is None:
                c = code[v.tag] = len(code)
            steps.append(step)
            tags.append(c)
            vals.append(x)
    if n_records == 0 and n > 0:
        raise LogFormatError(fn, "not a TensorBoard event file (no complete record)")
    return _Records(fn, np.array(steps, dtype=np.int64), np.array(tags, dtype=np.int64),
                    np.array(vals, dtype=np.float64), list(code), partial)


def _records_accumulator(fn: str) -> _Records:
    """The same records through tensorboard's ``EventAccumulator`` (checks CRCs), ordered by wall time."""
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415
    from tensorboard.util import tensor_util  # noqa: PLC0415

    acc = ea.EventAccumulator(
        fn,
        size_guidance={ea.SCALARS: 0, ea.TENSORS: 0, ea.HISTOGRAMS: 1, ea.IMAGES: 1, ea.AUDIO: 1,
                       ea.COMPRESSED_HISTOGRAMS: 1},
        purge_orphaned_data=False,
    )
    try:
        acc.Reload()
    except Exception as e:  # noqa: BLE001 - corrupted records surface as assorted errors
        raise LogFormatError(fn, f"unreadable TensorBoard events ({type(e).__name__}: {e})") from None
    tags = acc.Tags()
    rows: list[tuple[float, int, int, int, float]] = []  # (wall time, order, step, tag, value)
    names: list[str] = []
    for tag in tags.get("scalars", []):
        c = len(names)
        names.append(tag)
        for i, e in enumerate(acc.Scalars(tag)):
            rows.append((e.wall_time, i, e.step, c, float(e.value)))
    for tag in tags.get("tensors", []):
        try:
            vals = [tensor_util.make_ndarray(e.tensor_proto) for e in acc.Tensors(tag)]
        except Exception:  # noqa: BLE001 - strings etc.
            continue
        if not vals or not all(v.size == 1 and v.dtype.kind in "biuf" for v in vals):
            continue
        c = len(names)
        names.append(tag)
        for i, (e, v) in enumerate(zip(acc.Tensors(tag), vals)):
            rows.append((e.wall_time, i, e.step, c, float(v.reshape(()))))
    rows.sort(key=lambda r: (r[0], r[1]))
    return _Records(fn, np.array([r[2] for r in rows], dtype=np.int64), np.array([r[3] for r in rows], dtype=np.int64),
                    np.array([r[4] for r in rows], dtype=np.float64), names, False)


def _records(fn: str, engine: str) -> _Records:
    if os.path.getsize(fn) == 0:
        raise LogFormatError(fn, "empty file")
    if engine == "accumulator":
        return _records_accumulator(fn)
    try:
        return _records_fast(fn)
    except _Fallback:
        return _records_accumulator(fn)


def _split_runs(files: list[_Records]) -> list[list[tuple[_Records, int, int]]]:
    """Group (file, first record, end record) segments into runs (see the module docstring)."""
    runs: list[list[tuple[_Records, int, int]]] = []
    first_step = None
    for rec in files:
        if rec.steps.size == 0:
            continue
        bounds = [0, *restart_points(rec.steps), rec.steps.size]
        for k in range(len(bounds) - 1):
            a, b = bounds[k], bounds[k + 1]
            s0 = int(rec.steps[a])
            if k > 0 or first_step is None or s0 <= first_step:
                runs.append([])
                first_step = s0
            runs[-1].append((rec, a, b))
    return runs


def _build_run(segments: list[tuple[_Records, int, int]], name: str) -> RunLog | None:
    path = segments[0][0].path
    tb = TableBuilder(path)
    meta: dict = {"group_size": None, "event_files": sorted({os.path.basename(r.path) for r, _, _ in segments})}
    partial = sorted({os.path.basename(r.path) for r, _, _ in segments if r.partial})
    if partial:
        warn(path, f"event file(s) end in a partial record (still being written?): {', '.join(partial)}", meta)
    names: set[str] = set()
    for rec, a, b in segments:
        st, tg, vl = rec.steps[a:b], rec.tags[a:b], rec.values[a:b]
        order = np.argsort(tg, kind="stable")
        tg_sorted = tg[order]
        cuts = np.flatnonzero(np.diff(tg_sorted)) + 1
        for grp in np.split(order, cuts):
            if grp.size == 0:
                continue
            tag = rec.names[int(tg[grp[0]])]
            names.add(tag)
            tb.add_block(st[grp], {tag: vl[grp]})
    if len(tb) == 0:
        return None
    meta["tags"] = len(names)
    return tb.finish(name=name, format="tensorboard", meta=meta, require_reward=True)


def _folder_runs(folder: str, name: str, engine: str, files: list[str] | None = None) -> list[RunLog]:
    """Every run held by the event files of one folder (or the given files)."""
    recs = [_records(fn, engine) for fn in (files if files is not None else event_files(folder))]
    groups = _split_runs(recs)
    if not groups:
        return []
    multi_file = len({segs[0][0].path for segs in groups}) > 1
    per_file: dict[str, int] = {}
    for segs in groups:
        per_file[segs[0][0].path] = per_file.get(segs[0][0].path, 0) + 1
    out = []
    seen: dict[str, int] = {}
    for segs in groups:
        src = segs[0][0].path
        if len(groups) == 1:
            rname = name
        else:
            rname = f"{name}/{os.path.basename(src)}" if multi_file else name
            if per_file[src] > 1:
                seen[src] = seen.get(src, 0) + 1
                rname = f"{rname}#{seen[src]}"
        run = _build_run(segs, rname)
        if run is not None:
            if len(groups) > 1:
                run.meta.setdefault("warnings", []).append(
                    f"one of {len(groups)} runs in {folder} (the step counter restarts)")
            out.append(run)
    if len(groups) > 1:
        warnings.warn(f"{folder}: the step counter restarts: read as {len(groups)} separate runs "
                      f"({', '.join(r.name for r in out)})", LogWarning, stacklevel=4)
    return out


def read_tensorboard(path: str | os.PathLike, *, engine: str = "auto") -> list[RunLog]:
    """Read a TensorBoard event file, run folder, or folder of runs.

    Args:
        path: event file, or folder searched recursively for event files.
        engine: ``"auto"`` (fast protobuf walk, falling back to ``EventAccumulator``) or
            ``"accumulator"`` (always tensorboard's ``EventAccumulator``).

    Returns:
        One :class:`RunLog` per run (see the module docstring for how runs are told apart).

    Raises:
        LogFormatError: no event files, no scalars, or no run with a reward column.
    """
    if engine not in ("auto", "accumulator"):
        raise ValueError(f"engine={engine!r} is not 'auto' or 'accumulator'")
    path = str(path)
    if os.path.isfile(path):
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) or "run"
        runs = _folder_runs(path, name, engine, files=[path])
        if not runs:
            raise LogFormatError(path, "no scalar summaries in the event file")
        return runs
    dirs = find_event_dirs(path)
    if not dirs:
        raise LogFormatError(path, "no TensorBoard event files (*tfevents*) in the folder")
    return read_event_dirs(path, dirs, engine)


def read_event_dirs(root: str, dirs: list[str], engine: str = "auto") -> list[RunLog]:
    """Every run in the folders ``dirs`` (named by their path relative to ``root``)."""
    runs: list[RunLog] = []
    problems = []
    root = os.path.abspath(root)
    for d in dirs:
        rel = os.path.relpath(os.path.abspath(d), root)
        name = os.path.basename(root) if rel == "." else rel.replace(os.sep, "/")
        try:
            found = _folder_runs(d, name, engine)
        except LogFormatError as e:
            problems.append(f"{rel}: {e.problem}")
            continue
        if not found:
            problems.append(f"{rel}: no scalar summaries")
        runs.extend(found)
    if not runs:
        raise LogFormatError(root, "no readable TensorBoard run: " + "; ".join(problems))
    if problems:
        msg = f"skipped {len(problems)} TensorBoard folder(s): " + "; ".join(problems[:5])
        for r in runs:
            r.meta.setdefault("warnings", []).append(msg)
        warnings.warn(f"{root}: {msg}", LogWarning, stacklevel=3)
    return runs
