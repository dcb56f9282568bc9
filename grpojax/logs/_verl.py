"""verl readers: console lines and the JSONL file logger.

Console (``trainer.logger=['console']``): one line per step,
``step:12 - actor/entropy:0.354 - critic/score/mean:0.433 - ... - val-core/<ds>/reward/mean@1:0.52``,
usually behind a Ray prefix such as ``(TaskRunner pid=1) `` and ANSI colour codes; validation
metrics sit on the same line as the train metrics of that step (the line for step 0 has only
validation). Values may be printed as ``np.float64(0.5)``. Everything else in the file (config
dump, samples, warnings) is ignored, except that the config dump is searched for the group size
(``rollout.n``), the advantage estimator and the experiment name.

File logger (``trainer.logger=['file']``): JSONL, one ``{"step": N, "data": {name: value}}``
object per line.
"""

from __future__ import annotations

import json
import os
import re

from grpojax.logs._generic import is_question_row, join_question_evals
from grpojax.logs._runlog import LogFormatError, warn
from grpojax.logs._table import TableBuilder
from grpojax.logs._text import iter_text, load_text, run_name

__all__ = ["read_verl_console", "read_verl_jsonl", "looks_like_verl_console"]

_STEP_LINE = re.compile(r"(?:^|[\s\]\)>]|\x1b\[[0-9;]*[A-Za-z])step:(\d+) - (.*)$", re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PAIR = re.compile(r"([^\s:][^:]*?):(\S+)(?: - |\s*$)")
_HEAD = 200_000  # characters at the start of a console log searched for the config dump
_WRAP = re.compile(r"^(?:np\.)?(?:float|int)\d*\((.*)\)$|^tensor\((.*?)(?:, .*)?\)$")


def looks_like_verl_console(head: str) -> bool:
    """True if ``head`` contains a verl ``step:N - key:value`` line."""
    return re.search(r"step:\d+ - [^\s:]+:\S", head) is not None


def _config_meta(text: str, meta: dict) -> None:
    m = re.search(r"rollout\.n=(\d+)", text)
    if m is None:
        r = text.find("'rollout': {")
        if r >= 0:
            m = re.search(r"'n': (\d+)", text[r : r + 6000])
    meta["group_size"] = int(m.group(1)) if m else None
    m = re.search(r"adv_estimator[=:]\s*'?([A-Za-z_0-9]+)", text)
    if m:
        meta["adv_estimator"] = m.group(1)
    m = re.search(r"'experiment_name': '([^']+)'|experiment_name=(\S+)", text)
    if m:
        meta["experiment_name"] = m.group(1) or m.group(2).strip("'\"")


def read_verl_console(path: str | os.PathLike, text: str | None = None):
    """Read a verl console log (``text``: its text, else the file is read a piece at a time, never whole).

    Returns:
        One :class:`RunLog` (format ``"verl_console"``).
    """
    if text is not None:
        path, text = load_text(path, text)
        pieces = (text,)
    else:
        path = str(path)
        pieces = iter_text(path)
    parser = ConsoleParser(path)
    for piece in pieces:
        parser.feed(piece)
    return parser.finish()


class ConsoleParser:
    """The rows of a verl console log fed as pieces of its text that end at line ends (whole lines):
    :meth:`finish` gives what :func:`read_verl_console` returns for the text of all the pieces."""

    def __init__(self, path: str):
        self.path = path
        self.tb = TableBuilder(path)
        self.bad = 0
        self.head = ""  # the text's first _HEAD characters: the config dump (group size, estimator, name)
        self.blank = True  # no piece so far holds more than whitespace
        self._names: tuple[list, tuple] = ([], ())  # the last line's names, as a list and as a tuple

    def feed(self, piece: str) -> None:
        """Read the step lines of ``piece`` (whole lines of the log, in order)."""
        if self.blank and piece and not piece.isspace():
            self.blank = False
        if len(self.head) < _HEAD:
            self.head += piece[: _HEAD - len(self.head)]
        ansi = "\x1b" in piece  # colour codes are removed from the step lines only (not a copy of the text)
        add = self.tb.add_text_kv  # rows of numbers become float arrays as they come, not tuples of strings
        key_list, keys = self._names
        for step, body in _step_lines(piece):
            body = body.rstrip()
            if ansi and "\x1b" in body:
                body = _ANSI.sub("", body).rstrip()
            # fast path: every "k:v" item has exactly one ':' -> split once, keys/values by slicing
            parts = body.replace(":", " - ").split(" - ")
            if len(parts) % 2 == 0 and body.count(":") == len(parts) // 2 and "" not in parts:
                ks = parts[0::2]
                if ks != key_list:  # the same names as the line before: the same signature tuple, hashed once
                    key_list, keys = ks, tuple(ks)
                vals = parts[1::2]
            else:
                pairs = _PAIR.findall(body)
                if not pairs:
                    self.bad += 1
                    continue
                ks, vals = zip(*pairs)
                key_list, keys = list(ks), ks
            if ")" in body:
                vals = [_unwrap(v) for v in vals]
            add(int(step), keys, tuple(vals))
        self._names = (key_list, keys)

    def finish(self):
        """The runs read (a list of :class:`RunLog`); an empty text or one without step lines is a
        :class:`LogFormatError`."""
        path, meta = self.path, {}
        if self.blank:
            raise LogFormatError(path, "empty file")
        if len(self.tb) == 0:
            raise LogFormatError(path, "no verl 'step:N - key:value' lines found")
        if self.bad:
            warn(path, f"{self.bad} step line(s) without key:value pairs were skipped", meta)
        _config_meta(_ANSI.sub("", self.head) if "\x1b" in self.head else self.head, meta)
        return self.tb.finish_runs(name=run_name(path), format="verl_console", meta=meta)


def _step_lines(text: str):
    """(step, rest of the line) of each verl step line in ``text``, in order: what ``_STEP_LINE.finditer``
    finds, but only the lines holding ``step:`` (found by ``str.find``) meet the regular expression, not
    every character of the noise between them."""
    find, rfind, search = text.find, text.rfind, _STEP_LINE.search
    end = len(text)
    i = 0
    while True:
        j = find("step:", i)
        if j < 0:
            return
        a = rfind("\n", 0, j) + 1
        b = find("\n", j)
        if b < 0:
            b = end
        m = search(text, a, b)  # (re.M: '^' holds at a line start, '$' at b)
        if m is not None:
            yield m.group(1), m.group(2)
        i = b + 1


def _unwrap(v: str) -> str:
    m = _WRAP.match(v)
    if m:
        return m.group(1) if m.group(1) is not None else m.group(2)
    return v


def read_verl_jsonl(path: str | os.PathLike, text: str | None = None):
    """Read verl's JSONL file logger output (``{"step": N, "data": {...}}`` per line).

    Per-question lines among them (a question/prompt/completion text in each: an evaluation dumped into the
    same file) are read as the run's eval series, the mean over the questions of each step.

    Returns:
        One :class:`RunLog` (format ``"verl_jsonl"``).
    """
    path, text = load_text(path, text)
    tb = TableBuilder(path)
    meta: dict = {"group_size": None}
    questions: list[tuple[int, dict]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if i == len(lines) - 1 or not any(x.strip() for x in lines[i + 1 :]):
                warn(path, f"last line {i + 1} is truncated JSON ({e.msg}); skipped it", meta)
                continue
            raise LogFormatError(path, f"line {i + 1} is not valid JSON ({e.msg})") from None
        if isinstance(obj, dict) and is_question_row(obj) and not isinstance(obj.get("data"), dict):
            questions.append((i + 1, obj))
            continue
        if not isinstance(obj, dict) or "step" not in obj or not isinstance(obj.get("data"), dict):
            raise LogFormatError(path, f'line {i + 1} is not a {{"step": N, "data": {{...}}}} object')
        tb.add(obj["step"], obj["data"])
    if not len(tb) and questions:
        raise LogFormatError(path, 'no {"step": N, "data": {...}} line: only per-question lines')
    runs = tb.finish_runs(name=run_name(path), format="verl_jsonl", meta=meta, require_reward=not questions)
    return join_question_evals(path, runs, questions, fmt="verl_jsonl") if questions else runs
