"""TRL readers: ``trainer_state.json`` (``log_history``) and console dict lines.

``trainer_state.json`` (HF ``Trainer`` checkpoint state) holds ``log_history``: a list of dicts,
each with ``step`` and either train metrics, eval metrics (``eval_*``) or the end-of-training
summary (``train_runtime``, ``train_loss``, ...). Train and eval rows share steps; eval rows keep
only their ``eval_*`` values (their ``epoch`` duplicates the train row's), and the summary row
goes to ``meta["summary"]``.

Console dict lines are what ``Trainer`` prints at each logging step, e.g.
``{'loss': 0.0143, 'grad_norm': 1.64, 'learning_rate': 4.9e-05, 'reward': -9.66, 'epoch': 0.01}``
(values may be strings such as ``'0.0143'``; ``nan``/``inf`` appear bare). They carry no step:
the step is taken from the last tqdm counter ``| N/M [`` printed before the line when there is
one, else rows are numbered 1, 2, ... and ``meta["step_source"]`` says so. Eval dicts
(``eval_*`` keys) attach to the current step.
"""

from __future__ import annotations

import ast
import json
import os
import re

from grpojax.logs._runlog import LogFormatError, warn
from grpojax.logs._table import TableBuilder

__all__ = ["read_trl_state", "read_trl_console", "looks_like_trl_console"]

_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss", "total_flos")


def _load_json(path: str, text: str):
    try:
        return json.loads(text)
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
    path, text = _load_text(path, text)
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
    name = _run_name(path)
    return [tb.finish(name=name, format="trl_state", meta=meta)]


def _run_name(path: str) -> str:
    p = os.path.abspath(path)
    base = os.path.basename(p)
    if base == "trainer_state.json":
        parent = os.path.dirname(p)
        if re.fullmatch(r"checkpoint-\d+", os.path.basename(parent)):
            parent = os.path.dirname(parent)
        return os.path.basename(parent) or base
    for suf in ("-trainer_state.json", "_trainer_state.json", ".json", ".jsonl", ".log", ".txt", ".csv"):
        if base.endswith(suf):
            return base[: -len(suf)]
    return base


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except IsADirectoryError:
        raise LogFormatError(path, "is a folder, expected a file") from None


def _load_text(path, text: str | None) -> tuple[str, str]:
    """(path as str, its text): ``text`` if given, else the file's; an empty one is a LogFormatError."""
    path = str(path)
    if text is None:
        text = _read_text(path)
    if not text.strip():
        raise LogFormatError(path, "empty file")
    return path, text


# ---------------------------------------------------------------------------------------- console
_DICT_LINE = re.compile(r"\{'[^'\n]+': [^\n]*\}")
_TQDM = re.compile(r"\|\s*(\d+)/(\d+)\s*\[")
_BARE = re.compile(r"(?<=: )(-?inf|nan)(?=[,}])")
_KNOWN = ("'loss'", "'reward'", "'epoch'", "'grad_norm'", "'learning_rate'", "'eval_")


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


def read_trl_console(path: str | os.PathLike, text: str | None = None):
    """Read TRL/HF ``Trainer`` console output (printed log dicts, optionally with tqdm bars).

    Returns:
        One :class:`RunLog` (format ``"trl_console"``).
    """
    path, text = _load_text(path, text)
    tb = TableBuilder(path)
    meta: dict = {"summary": {}, "group_size": None}
    have_tqdm = False
    tqdm_step = None
    ordinal = 0
    bad = 0
    last_step = None
    # tqdm redraws with \r; every dict sits on its own line or after a \r
    for m in re.finditer(r"\|\s*(\d+)/(\d+)\s*\[|\{'[^'\n\r]+': [^\n\r]*\}", text):
        s = m.group(0)
        if s[0] == "|":
            tqdm_step = int(m.group(1))
            have_tqdm = True
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
        is_eval = "'eval_" in s
        if "step" in d:
            step = d.pop("step")
        elif is_eval and last_step is not None:
            step = last_step
        elif tqdm_step is not None:
            step = tqdm_step
        else:
            ordinal += 1
            step = ordinal
        if is_eval:
            d = {k: v for k, v in d.items() if k.startswith("eval_")}
        tb.add(step, d)
        last_step = step
    if len(tb) == 0:
        raise LogFormatError(path, "no Trainer log dicts found")
    if bad:
        warn(path, f"{bad} log dict line(s) could not be parsed and were skipped", meta)
    meta["step_source"] = "tqdm counter" if have_tqdm else "row number (no step printed)"
    return [tb.finish(name=_run_name(path), format="trl_console", meta=meta)]
