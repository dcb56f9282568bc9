"""Reading the runs of a log for ``grpojax fit`` / ``grpojax diagnose``, and one output folder per run."""

from __future__ import annotations

import pathlib
import re
import warnings

from grpojax.cli._common import CLIError, err_console, explain_runs
from grpojax.logs import LogWarning, RunLog, read_logs


def check_format_arg(format: str | None) -> str | None:
    """``--format``: None (detect) or one of the formats the readers know; one line naming the flag otherwise."""
    from grpojax.logs import FORMATS  # noqa: PLC0415

    if format is not None and format not in FORMATS:
        raise CLIError(f"--format {format!r} is not a log format; expected one of {', '.join(FORMATS)} "
                       "(or leave it out to detect the format)")
    return format


def read_runs(log: str, format: str | None, name: str | None, *, mapping: dict | None = None,
              explain: bool = False) -> list[RunLog]:
    """Every run of ``log`` (``read_logs``), or only the one called ``name``.

    ``mapping``: ``--map`` (``{canonical: source}``); ``explain``: print each run's read report.

    What the readers repaired or skipped (a corrupt TensorBoard record, a truncated last line, ...)
    is printed on stderr as one ``warning: ...`` line each.

    Raises:
        CLIError: ``name`` is given and no run has it (the message lists the runs).
    """
    check_format_arg(format)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LogWarning)
        runs = read_logs(log, format=format, mapping=mapping)
    for w in caught:
        if issubclass(w.category, LogWarning):
            err_console.print(f"warning: {' '.join(str(w.message).split())}", markup=False, highlight=False,
                              soft_wrap=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if explain:
        explain_runs(runs if name is None else [r for r in runs if r.name == name])
    if name is None:
        return runs
    picked = [r for r in runs if r.name == name]
    if not picked:
        names = ", ".join(repr(r.name) for r in runs[:10]) + (", ..." if len(runs) > 10 else "")
        raise CLIError(f"--run {name!r}: {log} has no run of that name (runs: {names})")
    return picked[:1]


def slug(name: str) -> str:
    """A file-name-safe form of a run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.") or "run"


def run_folders(out: pathlib.Path, runs: list[RunLog]) -> list[pathlib.Path]:
    """``[out]`` for one run; else one sub-folder per run, named after it (made unique), created."""
    if len(runs) == 1:
        return [out]
    folders, used = [], set()
    for r in runs:
        base = slug(r.name)
        s, k = base, 2
        while s in used:
            s, k = f"{base}_{k}", k + 1
        used.add(s)
        f = out / s
        f.mkdir(parents=True, exist_ok=True)
        folders.append(f)
    return folders
