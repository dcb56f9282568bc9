"""Helpers every reader shares: loading a log's text, naming a run after its file, finding event files."""

from __future__ import annotations

import os
import re

from grpojax.logs._runlog import LogFormatError

__all__ = ["load_text", "read_text", "run_name", "is_event_file", "find_event_dirs", "event_files"]


def read_text(path: str) -> str:
    """The file's text (UTF-8, undecodable bytes replaced); a folder is a :class:`LogFormatError`."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except IsADirectoryError:
        raise LogFormatError(path, "is a folder, expected a file") from None


def load_text(path, text: str | None) -> tuple[str, str]:
    """(path as str, its text): ``text`` if given, else the file's; an empty one is a LogFormatError."""
    path = str(path)
    if text is None:
        text = read_text(path)
    if not text.strip():
        raise LogFormatError(path, "empty file")
    return path, text


def run_name(path: str) -> str:
    """A run's default name: its output folder for ``trainer_state.json``, else the file name's stem."""
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


def is_event_file(name: str) -> bool:
    """True for a TensorBoard event file name (``events.out.tfevents.*``)."""
    return "tfevents" in os.path.basename(name)


def _natural_key(name: str) -> tuple:
    """Sort key comparing the digit runs of ``name`` as numbers (``...26825.9`` before ``...26825.10``)."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name)))


def event_files(folder: str) -> list[str]:
    """The event files directly inside ``folder`` in creation order: their names
    (``events.out.tfevents.<time>.<host>.<pid>.<counter><suffix>``) with the numbers compared as numbers."""
    names = [f for f in os.listdir(folder) if is_event_file(f) and os.path.isfile(os.path.join(folder, f))]
    return [os.path.join(folder, f) for f in sorted(names, key=_natural_key)]


def find_event_dirs(root: str) -> list[str]:
    """Every folder under ``root`` (itself included) that directly holds event files, sorted."""
    out = []
    for d, _, files in os.walk(root):
        if any(is_event_file(f) for f in files):
            out.append(d)
    return sorted(out)
