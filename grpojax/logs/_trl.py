"""TRL readers: ``trainer_state.json`` (``log_history``) and console dict lines.

``trainer_state.json`` (HF ``Trainer`` checkpoint state) holds ``log_history``: a list of dicts,
each with ``step`` and either train metrics, eval metrics (``eval_*``) or the end-of-training
summary (``train_runtime``, ``train_loss``, ...). Train and eval rows share steps; eval rows keep
only their ``eval_*`` values (their ``epoch`` duplicates the train row's), and the summary row
goes to ``meta["summary"]``.

Console dict lines are what ``Trainer`` prints at each logging step, e.g.
``{'loss': 0.0143, 'grad_norm': 1.64, 'learning_rate': 4.9e-05, 'reward': -9.66, 'epoch': 0.01}``
(values may be strings such as ``'0.0143'``; ``nan``/``inf`` appear bare). They usually carry no
step: it is taken from a ``step`` entry, else from the epoch times the steps per epoch where the
progress bar's total and the printed epochs resolve single steps, else rows are numbered 1, 2, ...
(the tqdm counter itself is not used: bars redraw on one line and are captured out of order);
``meta["step_source"]`` says which. Eval dicts (``eval_*`` keys) attach to the current step.
"""

from __future__ import annotations

import ast
import json
import os
import re

import numpy as np

from grpojax.logs._runlog import LogFormatError, warn
from grpojax.logs._table import TableBuilder
from grpojax.logs._text import load_text, run_name

__all__ = ["read_trl_state", "read_trl_console", "looks_like_trl_console"]

_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "total_flos")


def _load_json(path: str, text: str):
    try:
        return json.loads(text)
    except RecursionError:
        raise LogFormatError(path, "JSON nested too deeply to read (a corrupt or hostile file?)") from None
    except json.JSONDecodeError as e:
        where = f"line {e.lineno}, column {e.colno}"
        if e.pos >= len(text.rstrip()) - 200 or e.msg.startswith("Unterminated"):
            raise LogFormatError(path, f"truncated JSON (ends at {where}: {e.msg})") from None
        raise LogFormatError(path, f"invalid JSON at {where}: {e.msg}") from None


def read_trl_state(path: str | os.PathLike, text: str | None = None):
    """Read a TRL/HF ``trainer_state.json``.

    Returns:
        One :class:`RunLog` (format ``"trl_state"``).
    """
    path, text = load_text(path, text)
    doc = _load_json(path, text)
    if not isinstance(doc, dict) or "log_history" not in doc:
        raise LogFormatError(path, "JSON without a 'log_history' list (not a trainer_state.json)")
    hist = doc["log_history"]
    if not isinstance(hist, list):
        raise LogFormatError(path, "'log_history' is not a list")
    tb = TableBuilder(path)
    meta: dict = {"summary": {}}
    n_train = n_eval = 0
    add = tb.add
    for i, row in enumerate(hist):
        if type(row) is not dict:
            raise LogFormatError(path, f"log_history[{i}] is not an object")
        step = row.pop("step", None)
        if step is None:
            raise LogFormatError(path, f"log_history[{i}] has no 'step'")
        if "loss" in row or "reward" in row or "grad_norm" in row:  # a train row (the usual case)
            n_train += 1
            add(step, row)
        elif any(k in row for k in _SUMMARY_KEYS):
            meta["summary"].update(row)
        elif any(k.startswith("eval_") for k in row):
            add(step, {k: v for k, v in row.items() if k.startswith("eval_")})
            n_eval += 1
        else:
            n_train += 1
            add(step, row)
    for k in ("global_step", "max_steps", "logging_steps", "eval_steps", "train_batch_size", "num_train_epochs"):
        if k in doc:
            meta[k] = doc[k]
    meta["group_size"] = None  # trainer_state.json does not record num_generations
    meta["rows"] = {"train": n_train, "eval": n_eval}
    return tb.finish_runs(name=run_name(path), format="trl_state", meta=meta)


# ---------------------------------------------------------------------------------------- console
_DICT_LINE = re.compile(r"\{'[^'\n]+': [^\n]*\}")
_TQDM = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")
_BARE = re.compile(r"(?<=: )(-?inf|nan)(?=[,}])")
_KNOWN = ("'loss'", "'reward'", "'epoch'", "'grad_norm'", "'learning_rate'", "'eval_")
_KNOWN_KEY = re.compile("|".join(map(re.escape, _KNOWN)))  # any of them, in one search
_WRAP_MAX_LINES = 64


def looks_like_trl_console(head: str) -> bool:
    """True if ``head`` has a printed Trainer log dict."""
    for m in _DICT_LINE.finditer(head):
        s = m.group(0)
        if any(k in s for k in _KNOWN):
            return True
    return False


def _parse_dict(s: str):
    if "nan" in s or "inf" in s:
        s = _BARE.sub(lambda m: "'" + m.group(1) + "'", s)
    j = s.replace("'", '"').replace(": True", ": true").replace(": False", ": false").replace(": None", ": null")
    try:
        d = json.loads(j)
        if isinstance(d, dict):
            return d
    except json.JSONDecodeError:
        pass
    try:
        d = ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return d if isinstance(d, dict) else None


def _unwrap_lines(text: str) -> tuple[str, int]:
    """Join log dicts that a terminal hard-wrapped over several physical lines.

    A line piece (after the last ``\r``) that opens a dict ``{'`` without closing it is joined with
    the following lines (no separator: the wrap cut the text anywhere) until the braces balance,
    at most ``_WRAP_MAX_LINES`` lines. Returns the text and how many dicts were joined.
    """
    if "{'" not in text:
        return text, 0
    lines = text.split("\n")
    out: list[str] = []
    joined = 0
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        tail = line.rsplit("\r", 1)[-1]
        start = tail.find("{'")
        if start >= 0 and tail.count("{") > tail.count("}") and any(k[1:] in tail for k in _KNOWN):
            buf = line
            depth = tail[start:].count("{") - tail[start:].count("}")
            j = i + 1
            while depth > 0 and j < n and j - i <= _WRAP_MAX_LINES:
                nxt = lines[j]
                if "\r" in nxt or nxt.lstrip().startswith(("{'", "[", "  0%")):
                    break
                buf += nxt
                depth += nxt.count("{") - nxt.count("}")
                j += 1
            if depth == 0:
                out.append(buf)
                joined += 1
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out), joined


def _steps_per_epoch(total_steps: int | None, final_epoch: float | None) -> float | None:
    if not total_steps or not final_epoch or final_epoch <= 0:
        return None
    return total_steps / final_epoch


def _decimals(x) -> int:
    r = repr(float(x))
    if "e" in r or "E" in r:
        return 17
    return len(r.split(".", 1)[1]) if "." in r else 0


def _epoch_steps(epochs: list, per_epoch: float | None) -> list[int] | None:
    """Steps from logged epochs (``step = epoch x steps per epoch``), or ``None`` unless that is safe.

    HF rounds the printed epoch, so the conversion is used only when (a) one unit of the finest
    printed precision is at most one step, (b) every converted value is within a quarter step of
    an integer, and (c) the integers are strictly increasing on a regular grid starting at most
    one interval in (every gap the same logging interval, the last one possibly shorter), as
    ``logging_steps`` makes them. Anything else falls back to the dicts' order.
    """
    if per_epoch is None or not epochs or any(e is None for e in epochs):
        return None
    try:
        ep = np.array([float(e) for e in epochs])
    except (TypeError, ValueError):
        return None
    worst = max(_decimals(e) for e in ep.tolist())
    if per_epoch * 10.0 ** (-worst) > 1.0:  # the printed epoch cannot resolve single steps
        return None
    raw = ep * per_epoch
    steps = np.round(raw)
    if not np.all(np.isfinite(raw)) or np.any(np.abs(raw - steps) > 0.25) or steps[0] < 1:
        return None
    gaps = np.diff(steps)
    if gaps.size and (np.any(gaps <= 0) or np.any(gaps[:-1] != gaps[0]) or gaps[-1] > gaps[0]):
        return None
    if gaps.size and steps[0] > gaps[0]:
        return None  # the first log comes after one logging interval, not later
    return [int(x) for x in steps]


def read_trl_console(path: str | os.PathLike, text: str | None = None):
    """Read TRL/HF ``Trainer`` console output (printed log dicts, optionally with tqdm bars).

    One point per printed train dict, whatever the progress bars around it show (tqdm redraws with
    ``\r`` on one physical line, bars printed before or after the dicts, stdout and stderr captured
    out of order). The step of a train dict is

    1. its own ``step`` entry when it has one;
    2. else its ``epoch`` times the steps per epoch, when that is known (progress-bar total over
       the final epoch of the end-of-training summary) and the printed epochs are precise enough
       to give distinct integer steps;
    3. else its rank among the train dicts (1, 2, 3, ...).

    ``meta["step_source"]`` says which. Eval dicts (``eval_*`` keys) attach to the step of the
    train dict before them (their own ``step`` when printed). Dicts a terminal hard-wrapped over
    several lines are joined first.

    Returns:
        One :class:`RunLog` (format ``"trl_console"``).
    """
    path, text = load_text(path, text)
    text, n_joined = _unwrap_lines(text)
    meta: dict = {"summary": {}, "group_size": None}
    totals: list[int] = []
    bad = 0
    rows: list[tuple[bool, dict]] = []  # (is_eval, dict)
    for m in re.finditer(r"\|\s*(\d+)/(\d+)\s*\[|\{'[^'\n\r]+': [^\n\r]*?\}(?=[^,}]|$)", text):
        s = m.group(0)
        if s[0] == "|":
            totals.append(int(m.group(2)))
            continue
        if not any(k in s for k in _KNOWN):
            continue
        d = _parse_dict(s)
        if d is None:
            bad += 1
            continue
        if ("train_runtime" in d or "train_loss" in d) and not ("reward" in d or "loss" in d):
            meta["summary"].update(d)
            continue
        is_eval = any(str(k).startswith("eval_") for k in d)
        if is_eval:
            d = {k: v for k, v in d.items() if str(k).startswith("eval_") or k == "step"}
        rows.append((is_eval, d))
    if not rows:
        raise LogFormatError(path, "no Trainer log dicts found")
    train = [d for e, d in rows if not e]
    if train and all("step" in d for d in train):
        source = "logged step"
        train_steps = [d["step"] for d in train]
    else:
        total = max(totals) if totals else None
        final_epoch = meta["summary"].get("epoch")
        if final_epoch is None and train and "epoch" in train[-1]:
            final_epoch = None  # no summary: the last logged epoch need not be the end of training
        per_epoch = _steps_per_epoch(total, _as_float(final_epoch))
        train_steps = _epoch_steps([d.get("epoch") for d in train], per_epoch)
        if train_steps is not None:
            source = f"epoch x {per_epoch:g} steps per epoch"
            meta["steps_per_epoch"] = per_epoch
        else:
            source = "row number (no step printed)"
            train_steps = list(range(1, len(train) + 1))
    tb = TableBuilder(path)
    k = 0
    last_step = None
    for is_eval, d in rows:
        if is_eval:
            step = d.pop("step", last_step if last_step is not None else 0)
        else:
            d.pop("step", None)
            step = train_steps[k]
            k += 1
            last_step = step
        tb.add(step, d)
    if bad:
        warn(path, f"{bad} log dict line(s) could not be parsed and were skipped", meta)
    if n_joined:
        meta["wrapped_dicts_joined"] = n_joined
    meta["step_source"] = source
    return tb.finish_runs(name=run_name(path), format="trl_console", meta=meta)


def _as_float(v) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None
