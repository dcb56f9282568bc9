"""Row collection -> canonical :class:`RunLog`: vectorised conversion, dedup, sorting, checks.

Readers feed rows ``(step, {name: value})`` into a :class:`TableBuilder`. Rows are grouped by
their key signature (the tuple of names, in order), so a log whose rows all carry the same metrics
is converted with one ``np.array(..., float64)`` call per signature instead of per-value Python
work. ``finish`` then

1. maps every row to the sorted union of steps (``np.unique``),
2. keeps the *last* logged value where a (step, column) pair occurs more than once (a resumed run
   re-logging steps) and warns, naming the file and the steps,
3. sorts rows whose steps go backwards, with a warning,
4. counts NaN values logged explicitly (kept as NaN, never dropped),
5. maps names to the canonical columns (:mod:`grpojax.logs._names`) and checks that a reward
   column exists (else :class:`LogFormatError`).
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Iterable

import numpy as np

from grpojax.logs._names import canonicalize
from grpojax.logs._runlog import LogFormatError, RunLog, real_array, warn

__all__ = ["TableBuilder", "to_float", "int_steps", "restart_points", "logged_once", "read_dict"]

_INT_TEXT = re.compile(r"\s*[-+]?\d+\s*")
#: rows of one signature collected as Python floats before they become one float64 array (add_text_kv)
_FLOAT_BLOCK = 4096


def to_float(v: Any) -> float | None:
    """One logged value as float; ``None`` if it is not a number (text, lists, dicts).

    Accepts ints, floats, bools, numpy scalars (``bfloat16`` and the other ``ml_dtypes`` floats too),
    numeric strings (``"0.5"``, ``"nan"``, ``"1e-3"``, ``"12%"`` is *not* numeric), 0-d arrays and
    ``None`` (-> NaN, i.e. "logged as null").
    """
    if v is None:
        return math.nan
    t = type(v)
    if t is float or t is int or t is bool:
        return float(v)
    if isinstance(v, str):
        s = v.strip()
        try:
            return float(s)
        except ValueError:
            return None
    try:
        a = real_array(v)
    except Exception:  # noqa: BLE001 - anything odd is "not numeric"
        return None
    if a is not None and a.ndim == 0:
        return float(a)
    return None


class TableBuilder:
    """Collects rows of one run and turns them into a :class:`RunLog`.

    Args:
        path: the file being read (used in warnings and errors).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._n = 0
        # signature -> (row indices, steps, value tuples)
        self._groups: dict[tuple, tuple[list, list, list]] = {}
        # signature -> (float64 blocks, pending float rows, positions in the group of its rows kept as text):
        # rows added by add_text_kv whose values all read as numbers (the value tuples hold the others)
        self._floats: dict[tuple, tuple[list, list, list]] = {}
        # column blocks: (row indices, steps, {name: (logged mask, float64 values)})
        self._blocks: list[tuple[np.ndarray, np.ndarray, dict]] = []

    def __len__(self) -> int:
        return self._n

    def add(self, step: Any, values: dict[str, Any]) -> None:
        """Add one row: ``values`` maps metric names to (numeric-ish) values logged at ``step``."""
        if not values:
            values = {}
        self.add_kv(step, tuple(values), tuple(values.values()))

    def add_kv(self, step: Any, keys: tuple, vals: tuple) -> None:
        """Add one row given its names and values as parallel tuples (fast path for parsers)."""
        g = self._groups.get(keys)
        if g is None:
            g = self._groups[keys] = ([], [], [])
        if self._floats and keys in self._floats:  # a text row among rows added by add_text_kv
            self._floats[keys][2].append(len(g[0]))
        g[0].append(self._n)
        g[1].append(step)
        g[2].append(vals)
        self._n += 1

    def add_text_kv(self, step: Any, keys: tuple, vals: tuple) -> None:
        """:meth:`add_kv` for values read as text (console logs): a row whose values all read as floats is
        kept as floats, ``_FLOAT_BLOCK`` rows of one signature to a float64 array, not as a tuple of strings
        (a long log costs its numbers, not millions of string objects); the other rows as their text,
        converted (and counted as non-numeric where they are not numbers) when the table is finished, as
        :meth:`add_kv` rows are. The run read is the same either way."""
        g = self._groups.get(keys)
        if g is None:
            g = self._groups[keys] = ([], [], [])
        f = self._floats.get(keys)
        if f is None:  # rows of this signature added by add_kv before are text rows
            f = self._floats[keys] = ([], [], list(range(len(g[0]))))
        try:
            row = tuple(map(float, vals))  # float() reads text as np.array(..., float64) does
        except (ValueError, TypeError, OverflowError):
            f[2].append(len(g[0]))
            g[2].append(vals)
        else:
            pending = f[1]
            pending.append(row)
            if len(pending) == _FLOAT_BLOCK:
                f[0].append(np.array(pending, dtype=np.float64))
                pending.clear()
        g[0].append(self._n)
        g[1].append(step)
        self._n += 1

    def add_block(self, steps, columns: dict[str, np.ndarray], logged: dict[str, np.ndarray] | None = None) -> None:
        """Add many rows at once (column-oriented readers: TensorBoard, CSV).

        Args:
            steps: ``(n,)`` integer-valued steps of the rows.
            columns: name -> ``(n,)`` float64 values.
            logged: name -> ``(n,)`` bool, False where the metric was not logged in that row
                (default: all logged). Rows where nothing is logged are dropped.
        """
        steps = np.asarray(steps)
        n = steps.shape[0]
        if logged is None:
            logged = {k: np.ones(n, dtype=bool) for k in columns}
        any_logged = np.zeros(n, dtype=bool)
        for m in logged.values():
            any_logged |= m
        keep = np.flatnonzero(any_logged)
        if keep.size == 0:
            return
        idx = np.arange(self._n, self._n + keep.size, dtype=np.int64)
        cols = {k: (np.asarray(logged[k])[keep], np.asarray(v, dtype=np.float64)[keep]) for k, v in columns.items()}
        self._blocks.append((idx, steps[keep], cols))
        self._n += keep.size

    # ------------------------------------------------------------------------------------
    def _convert_group(self, keys: tuple, vals: list, meta: dict) -> np.ndarray:
        """``(rows, len(keys))`` float64 values of one signature group; non-numeric -> NaN."""
        if not keys:
            return np.empty((len(vals), 0))
        try:
            arr = np.array(vals, dtype=np.float64)
            if arr.shape == (len(vals), len(keys)):
                return arr
        except (ValueError, TypeError, OverflowError):
            pass
        out = np.empty((len(vals), len(keys)))
        non_numeric = meta.setdefault("_non_numeric", {})
        for j, k in enumerate(keys):
            col = [row[j] for row in vals]
            try:
                out[:, j] = np.array(col, dtype=np.float64)
                continue
            except (ValueError, TypeError, OverflowError):
                pass
            bad = 0
            for i, v in enumerate(col):
                f = to_float(v)
                if f is None:
                    bad += 1
                    f = math.nan
                out[i, j] = f
            if bad:
                non_numeric[k] = non_numeric.get(k, 0) + bad
        return out

    def _merge_floats(self, keys: tuple, n: int, vals: list, floats: tuple[list, list, list],
                      meta: dict) -> np.ndarray:
        """``(n, len(keys))`` values of a group filled by :meth:`add_text_kv`: its float blocks in the rows
        read as numbers, its text rows converted by :meth:`_convert_group` in theirs."""
        blocks, pending, text_pos = floats
        parts = list(blocks)
        if pending:
            parts.append(np.array(pending, dtype=np.float64).reshape(len(pending), len(keys)))
        if not vals:
            return np.concatenate(parts) if len(parts) > 1 else parts[0]
        arr = np.empty((n, len(keys)))
        is_text = np.zeros(n, dtype=bool)
        is_text[text_pos] = True
        if parts:
            arr[~is_text] = np.concatenate(parts)
        arr[is_text] = self._convert_group(keys, vals, meta)
        return arr

    def _steps(self, raw) -> np.ndarray:
        if isinstance(raw, np.ndarray) and raw.dtype.kind in "iu":
            return raw.astype(np.int64)
        exact = int_steps(raw, self.path)
        if exact is not None:
            return exact
        try:
            s = np.array(raw, dtype=np.float64)
        except (ValueError, TypeError):
            conv = [to_float(x) for x in raw]
            s = np.array([math.nan if c is None else c for c in conv])
        bad = ~np.isfinite(s) | (s != np.round(s))
        if np.any(bad):
            i = int(np.argmax(bad))
            raise LogFormatError(self.path, f"step value {raw[i]!r} is not an integer")
        if s.size and np.max(np.abs(s)) >= 2.0**63:
            raise LogFormatError(self.path, f"step value {raw[int(np.argmax(np.abs(s)))]!r} is out of range "
                                            "(steps must fit in 64-bit integers)")
        return s.astype(np.int64)

    def _collect(self, meta: dict) -> tuple[np.ndarray, dict[str, list[tuple[np.ndarray, np.ndarray]]], dict]:
        """Row steps (in row order) and, per column, its (row indices, values) parts."""
        n = self._n
        row_steps = np.empty(n, dtype=np.int64)
        per_col: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for keys, (idx, steps, vals) in self._groups.items():
            idx_a = np.asarray(idx, dtype=np.int64)
            row_steps[idx_a] = self._steps(steps)
            floats = self._floats.get(keys)
            if floats is None:
                arr = self._convert_group(keys, vals, meta)
            else:
                arr = self._merge_floats(keys, len(idx), vals, floats, meta)
            for j, k in enumerate(keys):
                per_col.setdefault(k, []).append((idx_a, arr[:, j]))
        for idx_a, steps, cols in self._blocks:
            row_steps[idx_a] = self._steps(steps)
            for k, (m, v) in cols.items():
                per_col.setdefault(k, []).append((idx_a[m], v[m]))
        return row_steps, per_col, meta.pop("_non_numeric", {})

    def finish(
        self,
        *,
        name: str,
        format: str,
        meta: dict | None = None,
        require_reward: bool = True,
    ) -> RunLog:
        """Build the run log from every row (see the module docstring for what happens).

        Raises:
            LogFormatError: no rows, non-integer steps, or (``require_reward``) no reward column.
        """
        meta = dict(meta or {})
        meta.setdefault("warnings", [])
        if self._n == 0:
            raise LogFormatError(self.path, "no metric rows found")
        row_steps, per_col, non_numeric = self._collect(meta)
        return self._build(row_steps, per_col, non_numeric, name, format, meta, require_reward)

    def finish_runs(
        self,
        *,
        name: str,
        format: str,
        meta: dict | None = None,
        require_reward: bool = True,
    ) -> list[RunLog]:
        """Like :meth:`finish`, but split where the step counter restarts (rows in file order).

        A row whose step is lower than the previous row's and not above the first step of the
        current segment starts a new run (a second run appended to the same file, or a restart
        from scratch). A smaller rewind (a run resumed from a checkpoint into the same file) stays
        one run whose re-logged steps keep their last value, with a warning. Each segment becomes
        its own :class:`RunLog`, named ``<name>#1``, ``<name>#2``, ... with ``meta["segment"]``
        saying which; a file without restarts gives one run named ``name``.
        """
        meta = dict(meta or {})
        meta.setdefault("warnings", [])
        if self._n == 0:
            raise LogFormatError(self.path, "no metric rows found")
        row_steps, per_col, non_numeric = self._collect(meta)
        cuts = restart_points(row_steps)
        if cuts and all(logged_once(row_steps[np.concatenate([p[0] for p in parts])]) for parts in per_col.values()):
            cuts = []  # no metric is logged twice at a step: one run whose rows are out of order, sorted below
        if not cuts:
            return [self._build(row_steps, per_col, non_numeric, name, format, meta, require_reward)]
        bounds = [0, *cuts, row_steps.size]
        out = []
        n_seg = len(bounds) - 1
        for k in range(n_seg):
            a, b = bounds[k], bounds[k + 1]
            part: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
            for col, parts in per_col.items():
                for idx, val in parts:
                    m = (idx >= a) & (idx < b)
                    if m.any():
                        part.setdefault(col, []).append((idx[m], val[m]))
            seg_meta = {kk: (list(v) if isinstance(v, list) else v) for kk, v in meta.items()}
            seg_meta["segment"] = {"index": k + 1, "of": n_seg, "first_step": int(row_steps[a]),
                                   "last_step": int(row_steps[b - 1])}
            if k == 0:
                firsts = ", ".join(str(int(row_steps[c])) for c in cuts[:5])
                warn(self.path, f"the step counter restarts {len(cuts)} time(s) (at rows {', '.join(str(c + 1) for c in cuts[:5])}, "
                     f"back to step {firsts}): read as {n_seg} runs {name}#1..{name}#{n_seg}", None)
            seg_meta["warnings"] = list(seg_meta.get("warnings", [])) + [
                f"run {k + 1} of {n_seg} in a file whose step counter restarts"]
            out.append(self._build(row_steps, part, non_numeric, f"{name}#{k + 1}",
                                   format, seg_meta, require_reward, rows=(a, b)))
        return out

    def _build(self, row_steps, per_col, non_numeric, name, format, meta, require_reward, rows=None) -> RunLog:
        if rows is None:
            uniq = np.unique(row_steps)
        else:
            uniq = np.unique(row_steps[rows[0]:rows[1]])
        backwards: list[tuple[str, int, int, int]] = []  # (column, count, from, to)

        # -- columns, keep-last on duplicates -----------------------------------------------------
        columns: dict[str, np.ndarray] = {}
        nan_counts: dict[str, int] = {}
        dup_steps: set[int] = set()
        dropped: list[str] = []
        for k, parts in per_col.items():
            idx = np.concatenate([p[0] for p in parts])
            val = np.concatenate([p[1] for p in parts])
            if len(parts) > 1:
                o = np.argsort(idx, kind="stable")
                idx, val = idx[o], val[o]
            cs = row_steps[idx]
            pos = np.searchsorted(uniq, cs)
            if cs.size > 1:
                back = np.flatnonzero(np.diff(cs) < 0)
                if back.size:
                    backwards.append((k, back.size, int(cs[back[0]]), int(cs[back[0] + 1])))
            nn = int(np.count_nonzero(np.isnan(val)))
            if k in non_numeric and nn == val.size:
                # every logged entry was text (or null): not a metric
                dropped.append(k)
                continue
            out = np.full(uniq.shape, np.nan)
            if pos.size > 1 and np.any(np.diff(pos) <= 0):
                rpos = pos[::-1]
                u, first = np.unique(rpos, return_index=True)
                if u.size < pos.size:
                    counts = np.bincount(pos, minlength=uniq.size)
                    dup_steps.update(uniq[counts > 1].tolist())
                out[u] = val[::-1][first]
            else:
                out[pos] = val
            nn = max(nn - non_numeric.get(k, 0), 0)
            if nn:
                nan_counts[k] = nn
            columns[k] = out
        if backwards:
            k, cnt, a, b = max(backwards, key=lambda t: t[1])
            warn(
                self.path,
                f"steps are not increasing ({cnt} place(s) in {k!r}, first: step {a} followed by {b}); "
                "rows sorted by step",
                meta,
            )
            meta["steps_sorted"] = True
        if dup_steps:
            ds = sorted(dup_steps)
            shown = ", ".join(map(str, ds[:5])) + (", ..." if len(ds) > 5 else "")
            warn(
                self.path,
                f"{len(ds)} step(s) logged more than once (a resumed run?): {shown}; kept the last value logged for each",
                meta,
            )
            meta["duplicated_steps"] = ds
        if dropped:
            meta["non_numeric_columns"] = sorted(dropped)
        partly = {k: v for k, v in non_numeric.items() if k not in dropped}
        if partly:
            meta["non_numeric_values"] = partly
            warn(self.path, f"non-numeric values read as NaN in: {_names_list(partly)}", meta)
        columns = canonicalize(columns, self.path, meta)
        if nan_counts:
            new = {v: k for k, v in meta.get("original_names", {}).items()}
            nan_counts = {new.get(k, k): v for k, v in nan_counts.items()}
            meta["nan_counts"] = nan_counts
            warn(
                self.path,
                f"{sum(nan_counts.values())} NaN/null value(s) logged (kept as NaN) in: "
                f"{_names_list(nan_counts)}",
                meta,
            )
        if require_reward and "reward_mean" not in columns and "eval_reward" not in columns:
            if meta.get("preference_log"):
                raise LogFormatError(self.path, f"a preference-optimization (DPO-style) log: {meta['preference_log']}, "
                                     "not a task reward (expected a GRPO-family RL log; --map reward_mean=COLUMN, "
                                     "mapping= in Python, reads a column anyway)")
            raise LogFormatError(
                self.path,
                "no reward column (looked for reward_mean, reward, critic/score/mean, "
                "critic/rewards/mean, rewards/<f>/mean, ..., and eval rewards); columns found: "
                + _names_list(columns, limit=12),
            )
        rm = columns.get("reward_mean")
        if rm is not None and np.all(np.isnan(rm)):
            warn(self.path, "the reward column has no finite values", meta)
        meta["n_train_points"] = int(np.count_nonzero(~np.isnan(rm))) if rm is not None else 0
        ev = columns.get("eval_reward")
        meta["n_eval_points"] = int(np.count_nonzero(~np.isnan(ev))) if ev is not None else 0
        _facts_from_columns(columns, meta)
        meta["read"] = read_dict(self.path, name, format, uniq, columns, meta)
        return RunLog(name=name, source=self.path, format=format, steps=uniq, columns=columns, meta=meta)


def int_steps(raw, path: str) -> np.ndarray | None:
    """The steps as int64, exactly, when every one is logged as an integer (a number or its text);
    None when some are not (floats go through float64: ``10.0`` is step 10)."""
    try:
        fast = np.array(raw)
    except (ValueError, TypeError, OverflowError):
        fast = None
    if fast is not None and fast.ndim == 1 and fast.dtype.kind == "i":
        return fast.astype(np.int64)
    if fast is not None and fast.ndim == 1 and fast.dtype.kind == "f":
        return None
    out = []
    add = out.append
    for x in raw:
        t = type(x)
        if t is int:
            add(x)
        elif t is str and _INT_TEXT.fullmatch(x):
            add(int(x))
        elif isinstance(x, np.integer):
            add(int(x))
        else:
            return None
    try:
        return np.array(out, dtype=np.int64)
    except OverflowError:
        big = max(out, key=abs)
        raise LogFormatError(path, f"step value {big!r} is out of range (steps must fit in 64-bit "
                                        "integers)") from None


def logged_once(steps: np.ndarray, keys: np.ndarray | None = None) -> bool:
    """True when no step occurs twice in ``steps`` (the steps at which one metric was logged), or no
    (step, key) pair twice when the metric of each entry is given as ``keys``.

    Where the step drops back, a run appended or restarted from scratch logs its metrics again at
    steps the first one logged; rows that are merely out of order never repeat a step.
    """
    steps = np.asarray(steps)
    if keys is None:
        return np.unique(steps).size == steps.size
    return np.unique(np.stack([steps, np.asarray(keys, dtype=steps.dtype)], axis=1), axis=0).shape[0] == steps.size


def restart_points(steps: np.ndarray) -> list[int]:
    """Indices where a step sequence (in logging order) restarts: the step drops below the previous
    one, back to the first step of the current segment or at most one logging interval (the median
    step increment so far) past it -- a run appended from step 1 after one that started at 0 is a new
    run; a rewind to a later checkpoint is a resumed run, not a restart."""
    steps = np.asarray(steps)
    if steps.size < 2:
        return []
    drops = np.flatnonzero(np.diff(steps) < 0) + 1
    cuts: list[int] = []
    start, first = 0, steps[0]
    for i in drops.tolist():
        d = np.diff(steps[start:i])
        d = d[d > 0]
        tol = max(int(np.median(d)), 1) if d.size else 1
        if steps[i] <= first + tol and steps[i] < steps[i - 1]:
            cuts.append(i)
            start, first = i, steps[i]
    return cuts


def _names_list(names: Iterable[str], limit: int = 8) -> str:
    names = list(names)
    s = ", ".join(names[:limit])
    return s + (f", ... ({len(names)} in all)" if len(names) > limit else "")


#: run facts a log may carry as a constant column (cs336-style rows): meta key -> column names.
_FACT_COLUMNS = {"group_size": ("group_size", "num_generations", "n_generations", "generations_per_prompt",
                                "samples_per_prompt", "n_samples_per_prompt", "rollout_n")}


def _facts_from_columns(columns: dict[str, np.ndarray], meta: dict) -> None:
    """The group size from a constant column that states it, when the reader found none elsewhere."""
    for key, names in _FACT_COLUMNS.items():
        if meta.get(key) is not None:
            continue
        for n in names:
            a = columns.get(n)
            if a is None:
                continue
            v = a[np.isfinite(a)]
            if v.size and np.all(v == v[0]) and v[0] >= 1 and v[0] == round(v[0]):
                meta[key] = int(v[0])
                meta.setdefault("facts", {})[key] = n
                break


def read_dict(path: str, name: str, format: str, steps: np.ndarray, columns: dict, meta: dict) -> dict:
    """The JSON-able read report of one run (``meta["read"]``; see :class:`grpojax.logs.ReadReport`)."""
    mapping = meta.get("mapping") or {}
    ren = meta.get("eval_renamed") or {}
    mapped = {k: (ren.get(v, v) if isinstance(v, str) else v) for k, v in mapping.items() if k in columns}
    skipped_cols: dict[str, str] = {}
    for c in meta.get("non_numeric_columns", ()):
        skipped_cols[c] = "text, not a number"
    for c in meta.get("dropped_columns", ()):
        skipped_cols.setdefault(c, "W&B sampling bound, not a metric")
    for c, why in (meta.get("skipped_columns") or {}).items():
        skipped_cols.setdefault(c, why)
    notes = [w for w in meta.get("warnings", [])]
    notes += [n for n in meta.get("notes", []) if n not in notes]
    facts = dict(meta.get("hyperparameters_taken") or {})
    for key, col in (meta.get("facts") or {}).items():
        facts.setdefault(key, meta.get(key))
        notes.append(f"{key} = {meta.get(key)} from the constant column {col!r}")
    return {
        "source": str(path), "format": format, "run": name, "n_steps": int(steps.size),
        "first_step": int(steps[0]) if steps.size else None, "last_step": int(steps[-1]) if steps.size else None,
        "step_key": meta.get("step_key"), "mapped": mapped, "user_mapped": sorted(meta.get("user_mapping") or ()),
        "kept": [c for c in columns if c not in mapped],
        "skipped_columns": skipped_cols, "skipped_rows": dict(meta.get("skipped_rows") or {}),
        "hyperparameters": facts, "hyperparameters_from": list(meta.get("hyperparameters_from") or ()),
        "notes": notes,
    }
