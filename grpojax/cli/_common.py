"""Shared plumbing for the ``grpojax`` subcommands: output folders, JSON, console, progress."""

from __future__ import annotations

import pathlib
from typing import Any

from rich.console import Console
from rich.progress import Progress

from grpojax._io import to_jsonable, write_json  # noqa: F401  (the CLI's JSON goes through grpojax._io)
from grpojax._progress import progress as _progress

console = Console(stderr=False)
err_console = Console(stderr=True)


class CLIError(Exception):
    """An error the command line reports as one line (no traceback unless ``--debug``)."""


def out_dir(path: str | pathlib.Path) -> pathlib.Path:
    """Create (if needed) and return the output folder."""
    p = pathlib.Path(path)
    p.mkdir(parents=True, exist_ok=True)
    return p


def progress() -> Progress:
    """The project's progress bar on stderr (use as a context manager)."""
    return _progress(err_console)


def add_oscillator_args(p, *, group_size_help: str, instant_help: str) -> None:
    """The hyperparameters of the oscillator shared by ``predict`` and ``simulate``."""
    p.add_argument("--eta", type=float, required=True, help="learning rate η > 0")
    p.add_argument("--mu", type=float, default=0.0, help="heavy-ball momentum μ in [0, 1) (default 0)")
    p.add_argument("--k-ref", type=int, required=True, help="refresh interval K_ref >= 1 (optimizer steps)")
    p.add_argument("--curvature", type=float, required=True, help="stale stiffness K_d (measured curvature)")
    p.add_argument("--k-instant", type=float, default=0.0, help=instant_help)
    p.add_argument("--lag", choices=("constant", "periodic"), default="constant", help="lag model (default constant)")
    p.add_argument("--group-size", type=int, default=8, help=group_size_help)
    p.add_argument("--noise", type=float, default=0.25, help="per-sample gradient noise variance σ² (default 0.25)")
