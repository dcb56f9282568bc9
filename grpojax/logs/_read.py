"""``read_logs`` / ``read_log``: format auto-detection and dispatch for files and folders."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import warnings
from typing import Mapping

import numpy as np

from grpojax._errors import DataError
from grpojax.logs import _generic, _jsonl, _mlflow, _openrlhf, _tensorboard, _trl, _verl, _wandb, _wandb_local
from grpojax.logs._trackers import TRACKER_FORMATS, is_tracker_dir, read_tracker_dir
from grpojax.logs._hparams import attach_hparams, hparam_files_in, is_hparam_file
from grpojax.logs._names import STEP_MAPPING, USER_MAPPING, check_mapping
from grpojax.logs._runlog import LogFormatError, LogWarning, RunLog, merge_runs
from grpojax.logs._text import (find_event_dirs, holds_any, is_event_file, iter_text, plain_name, read_head,
                                read_text)

__all__ = ["read_log", "read_logs", "detect_format", "FORMATS"]

#: Format names ``read_log`` understands (``format=`` accepts these).
FORMATS: tuple[str, ...] = (
    "trl_state",
    "trl_console",
    "verl_console",
    "verl_jsonl",
    "tensorboard",
    "wandb_csv",
    "openrlhf_jsonl",
    "openrlhf_console",
    "jsonl",
    "json",
    "csv",
    "text_kv",
    "wandb_run",
    "mlflow",
    "wandb_api",
)

_HEAD = 1 << 16


def _reader(fmt: str):
    return {
        "trl_state": _trl.read_trl_state,
        "trl_console": _trl.read_trl_console,
        "verl_console": _verl.read_verl_console,
        "verl_jsonl": _verl.read_verl_jsonl,
        "tensorboard": _tensorboard.read_tensorboard,
        "wandb_csv": _wandb.read_wandb_csv,
        "openrlhf_jsonl": _jsonl.read_jsonl,
        "openrlhf_console": _openrlhf.read_openrlhf_console,
        "jsonl": _jsonl.read_jsonl,
        "json": _generic.read_json_table,
        "csv": _generic.read_csv_table,
        "text_kv": _generic.read_kv_text,
        "wandb_run": lambda path: _wandb_local.read_wandb_run(path, read_file=_read_detected),
        "mlflow": _mlflow.read_mlflow_runs,
        "wandb_api": _wandb.read_wandb_api,
    }[fmt]


def detect_format(path: str | os.PathLike) -> str:
    """Guess the format of one log file (folders: see :func:`read_log`).

    Raises:
        LogFormatError: empty file, or no known layout recognised.
        FileNotFoundError: ``path`` does not exist.
    """
    path = str(path)
    if os.path.isdir(path):
        only_tb = find_event_dirs(path) and not any(
            f == "trainer_state.json" or _is_log_name(f) for _, _, files in os.walk(path) for f in files
        )
        return "tensorboard" if only_tb else "folder"
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or folder")
    if is_event_file(path):
        return "tensorboard"
    _, head, more = read_head(path, _HEAD)
    if not head.strip():
        raise LogFormatError(path, "empty file")
    if "\x00" in head[:1024]:
        raise LogFormatError(path, "binary file of unknown format (TensorBoard files need 'tfevents' in the name)")
    stripped = head.lstrip("\ufeff \t\r\n")
    first_line = stripped.split("\n", 1)[0].strip()
    if stripped.startswith("{"):
        # a trainer_state.json is one JSON document; JSON lines may carry a log_history copy in a
        # later line (ms-swift's logging.jsonl ends with one) and stay JSON lines
        lines_of_objects = (first_line != "{" and first_line.endswith("}") and stripped.strip().count("\n") > 0
                            and _is_json_object(first_line))
        if re.search(r'"log_history"\s*:', head) and not lines_of_objects:
            return "trl_state"
        fmt = _jsonl_kind(first_line)
        if fmt:
            return fmt
        if first_line == "{" or not first_line.endswith("}") or stripped.strip().count("\n") == 0:
            return "json"  # one JSON document (a dict of lists, {"history": [...]}, ...)
        if _is_json_object(first_line):
            return "jsonl"  # JSON lines without a step key: numbered by row
    if re.match(r"\[\s*(\{|\]|$)", stripped):
        return "json"  # a JSON list of per-step objects
    fmt = _csv_kind(first_line, path)
    if fmt is not None:
        return fmt
    fmt = _console_kind(head)
    if fmt is None and more:  # big file: the first 64 KiB may be config dumps
        fmt = _console_kind(read_text(path))
    if fmt is not None:
        return fmt
    if _json_lines_in(head) or (more and _json_lines_in(read_text(path))):
        return "jsonl"  # JSON lines after free text (a title line, console output, a long config dump)
    if _generic.looks_like_kv_text(read_text(path) if more else head):
        return "text_kv"
    lines = stripped.split("\n", 2)
    fmt = _csv_kind(first_line, path, loose=True, second=lines[1] if len(lines) > 1 else "")
    if fmt is not None:
        return fmt
    raise LogFormatError(
        path,
        "unknown log format (expected TRL trainer_state.json or console dicts, verl console or "
        "JSONL, TensorBoard events, a W&B CSV export, OpenRLHF or grpojax JSONL, a JSON list of per-step "
        "objects, JSON lines, a CSV table or console lines of 'name: value' metrics)",
    )


_LOG_ENDINGS = (".json", ".jsonl", ".log", ".txt", ".csv", ".tsv", ".out")


def _is_log_name(name: str) -> bool:
    """True for the names of files a folder's logs may be in (``.jsonl``, ``.csv``, ..., each also ``.gz``)."""
    return plain_name(name).lower().endswith(_LOG_ENDINGS)


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def _json_lines_in(head: str) -> bool:
    """At least two lines of ``head`` are JSON objects (a JSONL log behind free-text lines)."""
    n = 0
    for line in head.splitlines():
        s = line.strip()
        if s.startswith("{") and s.endswith("}") and _is_json_object(s):
            n += 1
            if n >= 2:
                return True
    return False


_WANDB_STEP = re.compile(r'^"?(Step|_step|step)"?\s*,')


def _csv_kind(first_line: str, path: str, *, loose: bool = False, second: str = "") -> str | None:
    """``wandb_csv`` (a ``Step``/``_step`` column, or ``<run> - <metric>`` panel columns), ``csv`` (another
    header row of names), or None. ``loose`` (a file not named ``.csv``): a comma- or tab-separated header
    of two or more names without ``:``/``=``, followed by a row of as many cells with a number among them."""
    delim = "\t" if first_line.count("\t") > first_line.count(",") else ","
    if delim not in first_line:
        return None
    cells = [c.strip().strip('"') for c in first_line.split(delim)]
    if delim == "," and (_WANDB_STEP.match(first_line) or "_step" in cells
                         or (cells[0] == "Step" and any(" - " in c for c in cells[1:]))):
        return "wandb_csv"
    if plain_name(path).lower().endswith((".csv", ".tsv")):
        return "csv" if len(cells) >= 2 and all(c and not _is_float(c) for c in cells) else None
    if not loose or len(cells) < 2 or not all(c and not _is_float(c) and ":" not in c and "=" not in c for c in cells):
        return None
    row = [c.strip().strip('"') for c in second.strip().split(delim)]
    return "csv" if len(row) == len(cells) and any(_is_float(c) for c in row) else None


def _is_float(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _console_kind(text: str) -> str | None:
    if _verl.looks_like_verl_console(text):
        return "verl_console"
    if _openrlhf.looks_like_openrlhf_console(text):
        return "openrlhf_console"
    if _trl.looks_like_trl_console(text):
        return "trl_console"
    return None


def _jsonl_kind(line: str) -> str | None:
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    if "_grpojax" in obj:
        return "jsonl"
    if "step" in obj and isinstance(obj.get("data"), dict):
        return "verl_jsonl"
    if any(k in obj for k in ("train/global_step", "global_step", "eval/epoch")):
        return "openrlhf_jsonl"
    if "step" in obj or "_step" in obj:
        return "jsonl"
    return None


def read_logs(path: str | os.PathLike, *, format: str | None = None,
              mapping: Mapping[str, str] | None = None) -> list[RunLog]:
    """Read every run a training log holds into canonical run logs (``docs/guide/run-log.md``).

    Args:
        path: a log file, or a folder: TensorBoard log dir (every sub-folder holding event files
            holds one or more runs), a TRL output dir (the newest ``checkpoint-*/trainer_state.json``),
            a run folder (a per-step history file, an eval history file and a hyperparameter file
            such as ``args.json``: one run), or a folder of log files (each read on its own; W&B CSVs
            with the same run name merged; a run resumed into a second file joined to the first);
            a local W&B run folder or ``wandb/`` folder, an MLflow ``mlruns/`` store, experiment or run
            folder (also inside a folder); or ``wandb://ENTITY/PROJECT/RUN_ID``, a run on a W&B server
            read through its API (needs the ``wandb`` package).
        format: force one of :data:`FORMATS` instead of auto-detecting.
        mapping: ``{canonical column: source column}`` for names the alias table
            (:data:`CANDIDATES`) does not know, e.g. ``{"reward_mean": "acc_mean"}``; applied before it.
            ``{"step": COLUMN}`` takes the steps of a JSON, JSONL or CSV table from ``COLUMN``.

    Returns:
        A list of :class:`RunLog`, one per run found, never merged across runs: several for
        multi-run folders, W&B CSVs with several runs, TensorBoard folders with several runs,
        tables with a run column, and files whose step counter restarts (each restart starts a new
        run, named ``<name>#k``). Each run's :attr:`RunLog.report` says what was mapped and skipped.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``mapping`` names a column that is not canonical (the message lists the valid names).
        LogFormatError: empty, truncated, malformed, unknown-format or mixed-format input (a
            console log of two trainers: pass ``format`` to read one of them, with a warning),
            JSON nested too deeply, no reward column, or a ``mapping`` source the log does not have
            (the message lists the columns found); the message is one line naming the file and the problem.
    """
    path = os.fspath(path)
    user = check_mapping(mapping)
    url = _wandb.is_wandb_url(path)  # a run on a W&B server (wandb://ENTITY/PROJECT/RUN_ID)
    if not url and not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or folder")
    if format is not None and format not in FORMATS:
        raise DataError(f"format={format!r} is not one of {', '.join(FORMATS)}")
    token = USER_MAPPING.set(user or None)
    try:
        if url or format == "wandb_api":
            runs = _wandb.read_wandb_api(path)
        elif os.path.isdir(path) and (format in TRACKER_FORMATS or (format is None and is_tracker_dir(path))):
            runs = read_tracker_dir(path, format, read_file=_read_detected)  # W&B run folders, MLflow stores
        elif os.path.isdir(path):
            if format not in (None, "tensorboard"):
                raise LogFormatError(path, f"is a folder; format={format!r} needs a file")
            if format is None:
                return _read_folder(path)
            runs = _read_file(path, format, forced=True)
        else:
            runs = _read_file(path, format or detect_format(path), forced=format is not None)
            attach_hparams(runs, hparam_files_in(os.path.dirname(os.path.abspath(path))))
        _check_step_mapping(path, runs, user)
        return runs
    finally:
        USER_MAPPING.reset(token)


def _check_step_mapping(path: str, runs: list[RunLog], user: Mapping[str, str] | None) -> None:
    """A step column named by the caller must have given the steps (tables do; formats whose records carry
    their own step, such as TensorBoard events or verl console lines, cannot take another)."""
    chosen = (user or {}).get(STEP_MAPPING)
    if chosen is None:
        return
    other = next((r for r in runs if not r.meta.get("step_mapped")), None)
    if other is not None:
        raise LogFormatError(other.source, f"mapping step={chosen}: a {other.format} log takes its steps from its own "
                                           "step field; step= chooses the step column of a JSON, JSONL or CSV table")


def _read_detected(path: str) -> list[RunLog]:
    """Read one file in the format detected (a W&B run's console output)."""
    return _read_file(path, detect_format(path), forced=False)


def _read_file(path: str, fmt: str, *, forced: bool) -> list[RunLog]:
    """Read one file as ``fmt``; ``forced``: the caller chose the format (mixed consoles warn, not fail)."""
    try:
        if fmt == "verl_console":
            runs = _verl_console_pieces(path)
            if runs is not None:
                return runs
        if fmt in _CONSOLE_FORMATS:
            text = read_text(path)
            fmt = _one_console_format(path, text, fmt, forced)
            return list(_reader(fmt)(path, text))
        return list(_reader(fmt)(path))
    except (LogFormatError, FileNotFoundError):
        raise
    except RecursionError:
        raise LogFormatError(path, f"could not read as {fmt}: nested too deeply (a corrupt or hostile file?)") from None
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError, OSError) as e:
        # last line of defence: never a traceback from inside a parser
        raise LogFormatError(path, f"could not read as {fmt}: {type(e).__name__}: {e}") from None


_CONSOLE_FORMATS = ("verl_console", "trl_console", "openrlhf_console")


def _trl_entry(m) -> bool:
    d = _trl._parse_dict(m.group(0))
    return d is not None and any(k in d for k in ("loss", "reward", "epoch", "grad_norm", "learning_rate"))


_VERL_ENTRY = re.compile(r"step:\d+ - [^\s:]+:\S")


def _console_entries(text: str, fmt: str, *, validate: bool) -> tuple[int, int] | None:
    """(line number of the first entry, number of entries) of console format ``fmt`` in ``text``, or None.

    ``validate``: TRL entries must parse as a dict with a Trainer key at its top level (not a
    fragment of a config dump); otherwise only the first one is parsed.
    """
    if fmt == "verl_console":
        if "step:" not in text:
            return None
        pat, keep = _VERL_ENTRY, None
    elif fmt == "trl_console":
        if "{'" not in text:
            return None
        ok = [False]

        def keep(m) -> bool:
            if _trl._KNOWN_KEY.search(m.group(0)) is None:
                return False
            if not validate and ok[0]:
                return True
            ok[0] = _trl_entry(m)
            return ok[0]

        pat = _trl._DICT_LINE
    else:
        if not any(k in text for k in _openrlhf._FULL):
            return None
        pat, keep = _openrlhf._BAR, (lambda m: any(k in m.group(3) for k in _openrlhf._FULL))
    first, count = None, 0
    for m in pat.finditer(text):
        if keep is not None and not keep(m):
            continue
        if first is None:
            first = m.start()
        count += 1
    return None if first is None else (text.count("\n", 0, first) + 1, count)


def _verl_console_pieces(path: str) -> list[RunLog] | None:
    """A verl console log read a piece of its text at a time (a log of 10^6 lines is never in memory
    whole); None when the file also holds entries of another console format: the caller reads its whole
    text then, to say which and where (or to read the one format asked for)."""
    parser = _verl.ConsoleParser(path)
    for raw, piece in iter_text(path, with_bytes=True):
        parser.feed(piece)
        for fmt, words in _ENTRY_WORDS.items():  # (an entry lies within one line; every piece is whole lines)
            if (raw is None or holds_any(raw, words)) and _console_entries(piece, fmt, validate=True) is not None:
                return None
    return parser.finish()


#: the other console formats, each with the words one of which every entry of it holds (a piece without
#: any has none, found in one pass over its bytes)
_ENTRY_WORDS = {"trl_console": _trl._KNOWN, "openrlhf_console": _openrlhf._FULL}


def _one_console_format(path: str, text: str, fmt: str, forced: bool) -> str:
    """The console format to read ``text`` as; refuse a log that mixes two (each reader would read its part).

    With the format forced by the caller, the other format's entries are ignored with a warning. A
    guess from the head of the file that finds no entry in the whole file gives way to the one
    format that has entries.
    """
    others = {f: e for f in _CONSOLE_FORMATS if f != fmt and (e := _console_entries(text, f, validate=True))}
    if not others:
        return fmt
    mine = _console_entries(text, fmt, validate=False)
    if mine is None:
        if forced or len(others) > 1:
            return fmt  # the reader says what it does not find
        return next(iter(others))
    other, (o_line, o_n) = min(others.items(), key=lambda kv: kv[1][0])
    what = f"{mine[1]} {fmt} entries (first at line {mine[0]}) and {o_n} {other} entries (first at line {o_line})"
    if forced:
        warnings.warn(f"{path}: holds {what}; read as {fmt} as asked, the {other} entries are ignored",
                      LogWarning, stacklevel=4)
        return fmt
    raise LogFormatError(path, f"mixes two log formats: {what}; split the file, or choose one format "
                               f"(format={fmt!r} / --format {fmt}) to read only its entries")


def read_log(path: str | os.PathLike, *, format: str | None = None, run: str | None = None,
             mapping: Mapping[str, str] | None = None) -> RunLog:
    """Read a log that holds one run (see :func:`read_logs` for what is read and how).

    A file whose step counter restarts (runs appended one after another, or an attempt restarted
    from scratch) gives the *last* run, with a :class:`LogWarning` naming the others;
    :func:`read_logs` returns them all and ``run="<name>#1"`` picks an earlier one.

    Args:
        path: a log file or folder.
        format: force one of :data:`FORMATS` instead of auto-detecting.
        run: pick the run of this name when the log holds several.
        mapping: ``{canonical column: source column}`` (see :func:`read_logs`).

    Returns:
        The run's :class:`RunLog`.

    Raises:
        LogFormatError: the log holds several distinct runs (a folder of runs, a W&B export of
            several runs, a table with a run column) and ``run`` is not given (or names none of
            them): the one-line message lists the runs and how to pick one; and everything
            :func:`read_logs` raises.
    """
    runs = read_logs(path, format=format, mapping=mapping)
    if run is not None:
        picked = [r for r in runs if r.name == run]
        if not picked:
            raise LogFormatError(path, f"no run named {run!r}; runs: {_run_list(runs)}")
        runs = picked[:1]
    if len(runs) > 1 and all(isinstance(r.meta.get("segment"), dict) for r in runs) \
            and len({r.source for r in runs}) == 1:
        last = runs[-1]
        warnings.warn(f"{path}: the step counter restarts: the file holds {len(runs)} runs ({_run_list(runs)}); "
                      f"read the last, {last.name!r} ({len(last)} steps); read_logs(path) returns all of them, "
                      f"read_log(path, run=NAME) one", LogWarning, stacklevel=2)
        return last
    if len(runs) > 1:
        raise LogFormatError(
            path,
            f"holds {len(runs)} runs ({_run_list(runs)}); read one with read_log(path, run=NAME), "
            "or pass the path of one run's file or sub-folder, or read them all with read_logs(path)",
        )
    return runs[0]


def _run_list(runs: list[RunLog], limit: int = 8) -> str:
    one_source = len({r.source for r in runs}) == 1
    items = [repr(r.name) if one_source or not r.source else f"{r.name!r} from {r.source}" for r in runs[:limit]]
    return ", ".join(items) + (f", ... ({len(runs)} in all)" if len(runs) > limit else "")


def _read_folder(path: str) -> list[RunLog]:
    """Every run under a folder: TRL output dirs, TensorBoard run dirs, run folders and other log files.

    A TRL output dir (holding ``trainer_state.json`` or ``checkpoint-*/trainer_state.json``) is
    one run, read from its most complete state file (the largest: ``log_history`` only grows);
    TensorBoard events inside such a dir (``runs/``) are the same run and are not read again.
    Other sub-folders with event files are TensorBoard runs. Every other ``.jsonl``, ``.log``,
    ``.txt``, ``.out``, ``.csv``, ``.tsv`` or ``.json`` file is read on its own; files that fail are
    skipped with one warning (``.json`` files that are not logs at all, like ``config.json``,
    silently). Hyperparameter files (``args.json``, ``config.yaml``, ...) are not read as logs:
    their facts go into the meta of the runs of their folder and the folders below. Within one
    folder, a run read from a file that continues another file's run (it starts after the other's
    first step, no later than just after its last, and ends later: a resumed run) is joined to it,
    and eval histories (files named ``eval...``/``val...``) join the folder's one train run.
    """
    states, others = [], []
    event_dirs, tracker_dirs = [], []
    for d, subdirs, files in os.walk(path):
        if d != path and is_tracker_dir(d):  # a W&B run folder or an MLflow store: its own reader, below
            tracker_dirs.append(d)
            subdirs[:] = []
            continue
        if any(is_event_file(f) for f in files):
            event_dirs.append(d)
        for f in sorted(files):
            full = os.path.join(d, f)
            if f == "trainer_state.json":
                states.append(full)
            elif is_hparam_file(f):
                continue
            elif _is_log_name(f):
                others.append(full)
    runs: list[RunLog] = []
    by_out: dict[str, list[str]] = {}
    for st in states:
        parent = os.path.dirname(st)
        key = os.path.dirname(parent) if re.fullmatch(r"checkpoint-\d+", os.path.basename(parent)) else parent
        by_out.setdefault(key, []).append(st)
    for key, lst in sorted(by_out.items()):
        best = max(lst, key=lambda f: (os.path.getsize(f), _ckpt_num(f)))
        runs.extend(_read_file(best, "trl_state", forced=True))
    outs = [os.path.abspath(k) + os.sep for k in by_out]
    tb_dirs = [d for d in sorted(event_dirs) if not any((os.path.abspath(d) + os.sep).startswith(o) for o in outs)]
    if tb_dirs:
        runs.extend(_tensorboard.read_event_dirs(path, tb_dirs))
    skipped = []
    per_dir: dict[str, list[tuple[str, list[RunLog]]]] = {}
    for f in others:
        if any((os.path.abspath(f)).startswith(o) for o in outs) and plain_name(f).endswith(".json"):
            continue  # config.json, tokenizer.json, ... of a TRL output dir
        try:
            fmt = detect_format(f)
            if fmt == "wandb_csv":
                got = _wandb.read_wandb_csv(f, require_reward=False)
            elif fmt in ("json", "csv", "jsonl") and _generic.is_eval_name(f):
                got = _reader(fmt)(f, require_reward=False)
            else:
                got = _read_file(f, fmt, forced=False)
        except LogFormatError as e:
            if plain_name(f).endswith(".json") and "log_history" not in e.problem and "truncated" not in e.problem:
                continue  # a JSON file that is no log at all
            skipped.append(f"{os.path.relpath(f, path)} ({e.problem})")
            continue
        per_dir.setdefault(os.path.dirname(f), []).append((f, list(got)))
    for d, files in per_dir.items():
        runs.extend(_join_in_folder(d, files))
    for d in tracker_dirs:
        try:
            runs.extend(read_tracker_dir(d, read_file=_read_detected))
        except LogFormatError as e:
            skipped.append(f"{os.path.relpath(d, path)} ({e.problem})")
    if skipped:
        warnings.warn(f"{path}: skipped {len(skipped)} file(s): {'; '.join(skipped[:5])}", LogWarning, stacklevel=3)
    if not runs:
        raise LogFormatError(path, "folder holds no readable log (no event files, trainer_state.json or log files)")
    runs = _merge_same_name(runs)
    root = os.path.abspath(path)
    for r in runs:
        src = os.path.abspath(r.source)
        d = src if os.path.isdir(src) else os.path.dirname(src)
        chain = []
        while True:
            chain.append(d)
            if d == root or not d.startswith(root) or os.path.dirname(d) == d:
                break
            d = os.path.dirname(d)
        attach_hparams([r], [f for folder in chain for f in hparam_files_in(folder)])
    return runs


def _join_in_folder(folder: str, files: list[tuple[str, list[RunLog]]]) -> list[RunLog]:
    """The runs of one folder's files with resumed runs joined and eval histories joined to the train run."""
    def is_eval(f: str, r: RunLog) -> bool:  # W&B panel CSVs are named after their metric: merged by run name
        return _generic.is_eval_name(f) and r.format != "wandb_csv"

    evals = [r for f, rs in files for r in rs if is_eval(f, r)]
    plain = [r for f, rs in files for r in rs if not is_eval(f, r)]
    singles = [r for r in plain if "segment" not in r.meta and r.format not in ("wandb_csv", "tensorboard")
               and len(r) > 0]
    rest = [r for r in plain if r not in singles]
    joined: list[RunLog] = []
    for r in sorted(singles, key=lambda r: (int(r.steps[0]), r.source)):
        cur = joined[-1] if joined else None
        if cur is not None and r.format == cur.format and _continues(cur, r):
            m = merge_runs([cur, r])
            note = f"{os.path.basename(r.source)} continues {', '.join(os.path.basename(s) for s in cur.meta.get('merged_from', [cur.source]))} (a resumed run): joined, the later file's values win where both logged a step"
            m.meta.setdefault("read", {}).setdefault("notes", []).append(note)
            m.meta["merged_from"] = [*cur.meta.get("merged_from", [cur.source]), r.source]
            joined[-1] = _renamed(m, os.path.basename(folder) or m.name)
        else:
            joined.append(r)
    trains = joined + rest
    if evals and len(trains) == 1 and "reward_mean" in trains[0].columns:
        t = trains[0]
        m = merge_runs([t, *evals])
        m.meta.setdefault("read", {}).setdefault("notes", []).append(
            "eval history joined: " + ", ".join(os.path.basename(e.source) for e in evals))
        name = os.path.basename(folder) if len(files) > 1 else t.name
        return [_renamed(m, name or t.name)]
    kept = []
    for e in evals:
        if "reward_mean" not in e.columns and "eval_reward" not in e.columns:
            warnings.warn(f"{e.source}: skipped: no reward column in this eval history (columns found: "
                          f"{', '.join(list(e.columns)[:12])})", LogWarning, stacklevel=4)
        else:
            kept.append(e)
    return trains + kept


def _renamed(run: RunLog, name: str) -> RunLog:
    if isinstance(run.meta.get("read"), dict):
        run.meta["read"]["run"] = name
    return dataclasses.replace(run, name=name, meta=run.meta)


def _continues(a: RunLog, b: RunLog) -> bool:
    """True when ``b`` reads like ``a`` resumed from a checkpoint into another file.

    ``b`` starts after ``a``'s first step and no later than just after its last, ends later, logs
    the same columns (90% in common), and the two file names share a stem of 5 characters or more
    (``train_v2.log`` / ``train_v2_resume.log``) or one of them says it resumes or continues.
    """
    gap = 2 * int(np.median(np.diff(a.steps))) if len(a) > 1 else 1
    if not (int(a.steps[0]) < int(b.steps[0]) <= int(a.steps[-1]) + max(gap, 1) and int(b.steps[-1]) > int(a.steps[-1])):
        return False
    ca, cb = set(a.columns), set(b.columns)
    if len(ca & cb) < 0.9 * len(ca | cb):
        return False
    na = os.path.basename(a.meta.get("merged_from", [a.source])[-1]).lower()
    nb = os.path.basename(b.source).lower()
    return len(os.path.commonprefix([na, nb])) >= 5 or any(w in na + nb for w in ("resum", "continu", "restart"))


def _ckpt_num(s: str) -> int:
    m = re.search(r"checkpoint-(\d+)", s)
    return int(m.group(1)) if m else -1


def _merge_same_name(runs: list[RunLog]) -> list[RunLog]:
    """Merge W&B CSV runs of the same name (one CSV per panel/metric is common)."""
    out: list[RunLog] = []
    groups: dict[str, list[RunLog]] = {}
    for r in runs:
        if r.format == "wandb_csv":
            groups.setdefault(r.name, []).append(r)
        else:
            out.append(r)
    for name, lst in groups.items():
        r = lst[0] if len(lst) == 1 else merge_runs(lst)
        if "reward_mean" not in r.columns and "eval_reward" not in r.columns:
            raise LogFormatError(
                r.source, f"W&B run {name!r}: no reward column in any CSV (columns: {', '.join(sorted(r.columns)[:10])})"
            )
        out.append(r)
    return out

