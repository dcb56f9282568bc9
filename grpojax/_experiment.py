"""The experiment harness: command line, claims and ``summary.json`` of the scripts ``grpojax reproduce`` runs.

An experiment is a script ``experiments/<name>.py``. Its command line starts from
:func:`experiment_parser` (``--quick`` for a small, fast version, ``--out DIR`` for the output folder);
it states its results as :class:`Claim` rows and writes them with :func:`write_summary` to
``DIR/summary.json``::

    {"experiment": name, "quick": bool, "claims": [{"claim", "paper", "measured", "verdict"}, ...],
     "figures": ["a.png", ...], ...further results of the experiment}

``grpojax reproduce`` runs every script as ``python experiments/<name>.py --out DIR [--quick]`` and turns
the claims of all ``summary.json`` files into one report (a claim with a ``paper`` statement is listed
among the claims of the paper, the others among grpojax's own additions) with the figures linked.
"""

from __future__ import annotations

import argparse
import os
import pathlib
from typing import Any, Iterable, NamedTuple

from grpojax._errors import InvalidValueError
from grpojax._io import write_json

__all__ = ["SUMMARY_FILE", "VERDICTS", "Claim", "committed_predictions", "experiment_parser", "load_average",
           "parse_args", "print_claims", "write_summary"]

SUMMARY_FILE = "summary.json"
"""The file every experiment writes into its output folder, and ``grpojax reproduce`` reads."""

VERDICTS = ("confirmed", "partial", "refuted", "not_tested")
"""What a run of an experiment can say of a claim."""


class Claim(NamedTuple):
    """One checked statement: one row of the reproduction report.

    Attributes:
        claim: what is checked, in words.
        measured: what this run measured (numbers in words).
        verdict: one of :data:`VERDICTS`.
        paper: the paper's statement that the claim checks; None for a claim of grpojax's own.
    """

    claim: str
    measured: str
    verdict: str
    paper: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The claim as a ``summary.json`` row (keys ``claim``, ``paper``, ``measured``, ``verdict``)."""
        return {"claim": self.claim, "paper": self.paper, "measured": self.measured, "verdict": self.verdict}


def experiment_parser(name: str, doc: str | None, *, quick_help: str) -> argparse.ArgumentParser:
    """The command line every experiment shares: ``--quick`` and ``--out DIR`` (default ``out/<name>``).

    Args:
        name: the experiment's name (its script's name without ``.py``).
        doc: the description shown by ``--help`` (the script's docstring), kept as written.
        quick_help: what ``--quick`` does in this experiment.

    Returns:
        An :class:`argparse.ArgumentParser`; add the experiment's own options, then call :func:`parse_args`.
    """
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--out", type=pathlib.Path, default=pathlib.Path("out") / name,
                    help=f"output folder (default out/{name})")
    return ap


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` (the process's arguments when None) and create the output folder ``args.out``."""
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def write_summary(out: str | os.PathLike, name: str, *, quick: bool, claims: Iterable[Claim],
                  figures: Iterable[str], **results: Any) -> pathlib.Path:
    """Write ``out/summary.json`` (atomically, through :func:`grpojax._io.write_json`).

    Args:
        out: the experiment's output folder.
        name: the experiment's name.
        quick: whether this was the ``--quick`` version.
        claims: the :class:`Claim` rows, in report order.
        figures: file names of the figures in ``out``, in report order.
        **results: further results of the experiment, written after these keys.

    Returns:
        The path of the written file.

    Raises:
        ValueError: a claim that is not a :class:`Claim` or has a verdict outside :data:`VERDICTS`, or a
            result named like one of the keys above.
    """
    rows = []
    for c in claims:
        if not isinstance(c, Claim):
            raise InvalidValueError(f"claims must be Claim records, got {type(c).__name__}: {c!r}")
        if c.verdict not in VERDICTS:
            raise InvalidValueError(f"claim {c.claim!r} has verdict {c.verdict!r}; expected one of {VERDICTS}")
        rows.append(c.to_dict())
    clash = sorted({"experiment", "quick", "claims", "figures"} & set(results))
    if clash:
        raise InvalidValueError(f"results may not be named {clash}: those keys are written by write_summary")
    summary = {"experiment": name, "quick": bool(quick), "claims": rows, "figures": list(figures), **results}
    return write_json(out, SUMMARY_FILE, summary)


def print_claims(claims: Iterable[Claim]) -> None:
    """Print each claim as ``[verdict] claim`` with what was measured on the next line."""
    for c in claims:
        print(f"[{c.verdict}] {c.claim}\n    {c.measured}")


def committed_predictions(out: str | os.PathLike, quick: bool) -> dict:
    """The ``predictions.json`` a pre-registered experiment wrote (and committed) in ``out`` before its runs; exits
    with one line when it was written for the other mode (``--quick`` or not)."""
    import json  # noqa: PLC0415

    path = pathlib.Path(out) / "predictions.json"
    pred = json.loads(path.read_text())
    if pred["quick"] != quick:
        raise SystemExit(f"{path} was written with quick={pred['quick']}; pass the same --quick")
    return pred


def load_average() -> str:
    """``"load average 1m, 5m, 15m on N CPUs"`` of this machine now (``"unknown"`` where the OS has none)."""
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except (OSError, AttributeError):
        return "unknown"
