"""``read_logs`` / ``read_log``: format auto-detection and dispatch for files and folders."""

from __future__ import annotations

import json
import os
import re
import warnings

from grpojax._errors import DataError
from grpojax.logs import _jsonl, _openrlhf, _tensorboard, _trl, _verl, _wandb
from grpojax.logs._runlog import LogFormatError, LogWarning, RunLog, merge_runs
from grpojax.logs._text import find_event_dirs, is_event_file, read_text

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
            f == "trainer_state.json" or f.lower().endswith((".json", ".jsonl", ".log", ".txt", ".csv", ".out"))
            for _, _, files in os.walk(path)
            for f in files
        )
        return "tensorboard" if only_tb else "folder"
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or folder")
    if is_event_file(path):
        return "tensorboard"
    with open(path, "rb") as f:
        raw = f.read(_HEAD)
    if not raw.strip():
        raise LogFormatError(path, "empty file")
    if raw[:1] in (b"\x00",) or b"\x00" in raw[:1024]:
        raise LogFormatError(path, "binary file of unknown format (TensorBoard files need 'tfevents' in the name)")
    head = raw.decode("utf-8", errors="replace")
    stripped = head.lstrip("\ufeff \t\r\n")
    first_line = stripped.split("\n", 1)[0].strip()
    if stripped.startswith("{"):
        if re.search(r'"log_history"\s*:', head):
            return "trl_state"
        fmt = _jsonl_kind(first_line)
        if fmt:
            return fmt
        if first_line == "{" or not first_line.endswith("}") or stripped.strip().count("\n") == 0:
            # one JSON document that is not a trainer state: the TRL reader says what is missing
            return "trl_state"
    if "," in first_line and re.match(r'^"?(Step|_step|step)"?\s*,', first_line):
        return "wandb_csv"
    fmt = _console_kind(head)
    if fmt is None and len(raw) == _HEAD:  # big file: the first 64 KiB may be config dumps
        with open(path, encoding="utf-8", errors="replace") as f:
            fmt = _console_kind(f.read())
    if fmt is not None:
        return fmt
    raise LogFormatError(
        path,
        "unknown log format (expected TRL trainer_state.json or console dicts, verl console or "
        "JSONL, TensorBoard events, a W&B CSV export, OpenRLHF or grpojax JSONL)",
    )


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


def read_logs(path: str | os.PathLike, *, format: str | None = None) -> list[RunLog]:
    """Read every run a training log holds into canonical run logs (``docs/guide/run-log.md``).

    Args:
        path: a log file, or a folder: TensorBoard log dir (every sub-folder holding event files
            holds one or more runs), a TRL output dir (the newest ``checkpoint-*/trainer_state.json``),
            or a folder of log files (each read on its own; W&B CSVs with the same run name merged).
        format: force one of :data:`FORMATS` instead of auto-detecting.

    Returns:
        A list of :class:`RunLog`, one per run found, never merged across runs: several for
        multi-run folders, W&B CSVs with several runs, TensorBoard folders with several runs, and
        files whose step counter restarts (each restart starts a new run, named ``<name>#k``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        LogFormatError: empty, truncated, malformed, unknown-format or mixed-format input (a
            console log of two trainers: pass ``format`` to read one of them, with a warning),
            JSON nested too deeply, or no reward column; the message is one line naming the file
            and the problem.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file or folder")
    if format is not None and format not in FORMATS:
        raise DataError(f"format={format!r} is not one of {', '.join(FORMATS)}")
    if os.path.isdir(path):
        if format not in (None, "tensorboard"):
            raise LogFormatError(path, f"is a folder; format={format!r} needs a file")
        if format is None:
            return _read_folder(path)
    return _read_file(path, format or detect_format(path), forced=format is not None)


def _read_file(path: str, fmt: str, *, forced: bool) -> list[RunLog]:
    """Read one file as ``fmt``; ``forced``: the caller chose the format (mixed consoles warn, not fail)."""
    try:
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
            if not any(k in m.group(0) for k in _trl._KNOWN):
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


def read_log(path: str | os.PathLike, *, format: str | None = None, run: str | None = None) -> RunLog:
    """Read a log that holds one run (see :func:`read_logs` for what is read and how).

    Args:
        path: a log file or folder.
        format: force one of :data:`FORMATS` instead of auto-detecting.
        run: pick the run of this name when the log holds several.

    Returns:
        The run's :class:`RunLog`.

    Raises:
        LogFormatError: the log holds several runs and ``run`` is not given (or names none of
            them): the one-line message lists the runs and how to pick one; and everything
            :func:`read_logs` raises.
    """
    runs = read_logs(path, format=format)
    if run is not None:
        picked = [r for r in runs if r.name == run]
        if not picked:
            raise LogFormatError(path, f"no run named {run!r}; runs: {_run_list(runs)}")
        runs = picked[:1]
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
    """Every run under a folder: TRL output dirs, TensorBoard run dirs, and other log files.

    A TRL output dir (holding ``trainer_state.json`` or ``checkpoint-*/trainer_state.json``) is
    one run, read from its most complete state file (the largest: ``log_history`` only grows);
    TensorBoard events inside such a dir (``runs/``) are the same run and are not read again.
    Other sub-folders with event files are TensorBoard runs. Every other ``.jsonl``, ``.log``,
    ``.txt``, ``.out``, ``.csv`` or ``.json`` file is read on its own; files that fail are skipped
    with one warning (``.json`` files that are not logs at all, like ``config.json``, silently).
    """
    states, others = [], []
    event_dirs = []
    for d, _, files in os.walk(path):
        if any(is_event_file(f) for f in files):
            event_dirs.append(d)
        for f in sorted(files):
            full = os.path.join(d, f)
            if f == "trainer_state.json":
                states.append(full)
            elif f.lower().endswith((".json", ".jsonl", ".log", ".txt", ".csv", ".out")):
                others.append(full)
    runs: list[RunLog] = []
    by_out: dict[str, list[str]] = {}
    for st in states:
        parent = os.path.dirname(st)
        key = os.path.dirname(parent) if re.fullmatch(r"checkpoint-\d+", os.path.basename(parent)) else parent
        by_out.setdefault(key, []).append(st)
    for key, lst in sorted(by_out.items()):
        best = max(lst, key=lambda f: (os.path.getsize(f), _ckpt_num(f)))
        runs.extend(read_logs(best, format="trl_state"))
    outs = [os.path.abspath(k) + os.sep for k in by_out]
    tb_dirs = [d for d in sorted(event_dirs) if not any((os.path.abspath(d) + os.sep).startswith(o) for o in outs)]
    if tb_dirs:
        runs.extend(_tensorboard.read_event_dirs(path, tb_dirs))
    skipped = []
    for f in others:
        if any((os.path.abspath(f)).startswith(o) for o in outs) and f.endswith(".json"):
            continue  # config.json, tokenizer.json, ... of a TRL output dir
        try:
            fmt = detect_format(f)
            if fmt == "wandb_csv":
                runs.extend(_wandb.read_wandb_csv(f, require_reward=False))
            else:
                runs.extend(_read_file(f, fmt, forced=False))
        except LogFormatError as e:
            if f.endswith(".json") and "log_history" not in e.problem and "truncated" not in e.problem:
                continue  # a JSON file that is no log at all
            skipped.append(f"{os.path.relpath(f, path)} ({e.problem})")
    if skipped:
        warnings.warn(f"{path}: skipped {len(skipped)} file(s): {'; '.join(skipped[:5])}", LogWarning, stacklevel=3)
    if not runs:
        raise LogFormatError(path, "folder holds no readable log (no event files, trainer_state.json or log files)")
    return _merge_same_name(runs)


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

