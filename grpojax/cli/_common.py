"""Shared plumbing for the ``grpojax`` subcommands: output folders, JSON, console, progress."""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

from rich.console import Console

from grpojax._defaults import LAG
from grpojax._errors import InvalidValueError
from grpojax._io import to_jsonable, write_json  # noqa: F401  (the CLI's JSON goes through grpojax._io)

if TYPE_CHECKING:
    from rich.progress import Progress


class _OutConsole(Console):
    """stdout: as wide as a table needs when it is a file or a pipe (a terminal keeps its width; so does an
    explicit COLUMNS), so that ``grpojax fit ... > table.txt`` does not cut columns at 80 characters."""

    @property
    def size(self):
        size = Console.size.fget(self)
        if self._width is None and not self.is_terminal and "COLUMNS" not in self._environ:
            return size._replace(width=max(size.width, 1000))
        return size

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)


console = _OutConsole(stderr=False)


def print_table(table) -> None:
    """Print ``table`` on stdout at least as wide as its widest row: on a terminal narrower than that, the
    terminal wraps the lines, and no value is cut short with an ellipsis."""
    from rich.measure import Measurement  # noqa: PLC0415

    need = Measurement.get(console, console.options.update_width(10_000), table).maximum
    width = console.width
    if need <= width:
        console.print(table)
        return
    console.width = need  # (print's own width= is capped at the console's)
    try:
        console.print(table)
    finally:
        console.width = width
err_console = Console(stderr=True)


class CLIError(InvalidValueError):
    """A flag the command line refuses: one line naming it (exit status 2; no traceback unless ``--debug``)."""


def start_distributed(mode: str) -> int:
    """:func:`grpojax._distributed.initialize_distributed` for ``--distributed MODE``; its refusal names the flag."""
    from grpojax._distributed import initialize_distributed  # noqa: PLC0415

    try:
        return initialize_distributed(mode)
    except ValueError as exc:
        raise CLIError(f"--distributed {mode}: {exc}") from None


def out_dir(path: str | pathlib.Path) -> pathlib.Path:
    """Create (if needed) and return the output folder."""
    p = pathlib.Path(path)
    p.mkdir(parents=True, exist_ok=True)
    return p


def refuse_existing(path: str | pathlib.Path, force: bool) -> pathlib.Path:
    """``path``, unless it is a non-empty folder and ``force`` is not set (then ``FileExistsError``)."""
    path = pathlib.Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())) and not force:
        raise FileExistsError(17, "output exists (use --force to overwrite)", str(path))
    return path


def progress() -> Progress:
    """The project's progress bar on stderr (use as a context manager)."""
    from grpojax._progress import progress as _progress  # noqa: PLC0415  (rich.progress: ~9 ms, only for a bar)

    return _progress(err_console)


def add_bounds_arg(p, *, effect: str) -> None:
    """``--bounds LO HI``: the range the forecast metric can take; ``effect`` says what it does here."""
    from grpojax.cli._types import Real  # noqa: PLC0415

    p.add_argument("--bounds", type=Real(what="an end of the metric's range"), nargs=2, default=None, metavar=("LO", "HI"),
                   help=f"the range the metric can take (e.g. 0 1 for an accuracy): {effect}")


def check_bounds_arg(args) -> tuple[float, float] | None:
    """``args.bounds`` as a pair, or None; refuses anything but two finite numbers LO < HI (one line)."""
    if args.bounds is None:  # before importing grpojax.fit (JAX): most calls give no bounds
        return None
    from grpojax.fit import check_bounds  # noqa: PLC0415

    try:
        return check_bounds(args.bounds)
    except ValueError:
        raise CLIError(f"--bounds must be two finite numbers LO < HI, got {args.bounds[0]} {args.bounds[1]}") from None


def add_log_read_args(p) -> None:
    """``--map CANONICAL=SOURCE`` (repeatable) and ``--explain``: the log-reading flags of every command that reads a log."""
    p.add_argument("--map", action="append", default=[], type=map_item, metavar="CANONICAL=SOURCE",
                   help="read the log's column SOURCE as the canonical column CANONICAL (e.g. --map reward_mean=acc_mean; "
                        "repeatable); for names the built-in alias table does not know. --map step=COLUMN takes the "
                        "steps of a JSON, JSONL or CSV table from COLUMN")
    p.add_argument("--explain", action="store_true",
                   help="print how the log was read: the column behind each canonical one, what was kept and skipped")


def map_item(item: str) -> tuple[str, str]:
    """One ``--map`` value as ``(canonical, source)``; a bad one is refused while the arguments are parsed."""
    import argparse  # noqa: PLC0415

    from grpojax.logs import CANDIDATES  # noqa: PLC0415  (the logs package imports no JAX)

    canon, sep, src = str(item).partition("=")
    canon, src = canon.strip(), src.strip()
    if not sep or not canon or not src:
        raise argparse.ArgumentTypeError(f"expects CANONICAL=SOURCE (e.g. reward_mean=acc_mean), got {item!r}")
    if canon not in CANDIDATES and canon != "step":
        raise argparse.ArgumentTypeError(f"{canon!r} is not a canonical column; valid names: {', '.join(CANDIDATES)} "
                                         "(and step, the step column)")
    return canon, src


def log_read_kwargs(args) -> dict:
    """``{"mapping": {canonical: source} or None, "explain": bool}`` from ``--map`` / ``--explain``."""
    mapping = {}
    for item in getattr(args, "map", None) or []:
        canon, src = item if isinstance(item, tuple) else map_item(item)
        mapping[canon] = src
    return {"mapping": mapping or None, "explain": bool(getattr(args, "explain", False))}


def explain_runs(runs) -> None:
    """Print each run's read report (``--explain``) on stderr."""
    for r in runs:
        err_console.print(r.report.explain(), markup=False, highlight=False, soft_wrap=True)


LAG_HELP = ("what --k-ref K means, the same for every command: periodic (default) -- the behaviour policy is "
            "refreshed every K updates, K updates per rollout (synchronous GRPO); constant -- every update uses "
            "samples K steps stale (an asynchronous pipeline)")


def add_lag_arg(p, *, default: str | None = LAG, help: str = LAG_HELP) -> None:
    """``--lag {periodic,constant}``: one meaning and one default for every command (:data:`LAG_HELP`)."""
    p.add_argument("--lag", choices=("periodic", "constant"), default=default, help=help)


def add_batch_reuse_arg(p) -> None:
    """``--batch-reuse``: P(escape) with one rollout batch per refresh period (``predict`` and ``advise``)."""
    p.add_argument("--batch-reuse", action="store_true",
                   help="the K_ref updates of a refresh reuse its one rollout batch (as TRL num_iterations, verl "
                        "ppo_epochs and grpojax's trainers do): P(escape) with the sampling noise drawn once per "
                        "period (periodic lag; default: a fresh draw every step)")


def add_oscillator_args(p, *, group_size_help: str, instant_help: str) -> None:
    """The hyperparameters of the oscillator shared by ``predict`` and ``simulate`` (checked as they are parsed)."""
    from grpojax.cli._types import Int, Real  # noqa: PLC0415

    p.add_argument("--eta", type=Real(0, lo_open=True, what="the learning rate"), required=True,
                   help="learning rate η > 0")
    p.add_argument("--mu", type=Real(0, 1, hi_open=True, what="heavy-ball momentum"), default=0.0,
                   help="heavy-ball momentum μ in [0, 1) (default 0)")
    p.add_argument("--k-ref", type=Int(1, what="optimizer steps per reference refresh"), required=True,
                   help="refresh interval K_ref >= 1 (optimizer steps)")
    p.add_argument("--curvature", type=Real(0, lo_open=True, what="the stiffness measured at a stable plateau"),
                   required=True, help="stale stiffness K_d > 0 (measured curvature)")
    p.add_argument("--k-instant", type=Real(0, what="stiffness of an exact anchor such as the KL term"), default=0.0,
                   help=instant_help)
    add_lag_arg(p)
    p.add_argument("--group-size", type=Int(1, what="completions per prompt"), default=8, help=group_size_help)
    p.add_argument("--noise", type=Real(0, what="a variance"), default=0.25,
                   help="per-sample gradient noise variance σ² (default 0.25)")


def check_oscillator_args(args) -> None:
    """Refuse hyperparameters for which the oscillator's answer would be meaningless, naming the flag.

    The curvature is the stiffness measured at a stable plateau, so it must be > 0: with K_d ≤ 0 there is
    no restoring force and every threshold is undefined (not "unstable").
    """
    import math

    for name in ("eta", "mu", "curvature", "k_instant", "noise", "p0", "p_star"):
        value = getattr(args, name, None)
        if value is not None and not math.isfinite(value):
            raise CLIError(f"--{name.replace('_', '-')} must be a finite number, got {value}")
    if args.eta <= 0:
        raise CLIError(f"--eta must be > 0 (the learning rate), got {args.eta}")
    if not 0 <= args.mu < 1:
        raise CLIError(f"--mu must be in [0, 1) (heavy-ball momentum), got {args.mu}")
    if args.k_ref < 1:
        raise CLIError(f"--k-ref must be >= 1 (optimizer steps per reference refresh), got {args.k_ref}")
    if args.curvature <= 0:
        raise CLIError(f"--curvature must be > 0 (the stiffness measured at a stable plateau), got {args.curvature}")
    if args.k_instant < 0:
        raise CLIError(f"--k-instant must be >= 0 (stiffness of an exact anchor such as the KL term), got {args.k_instant}")
    if args.noise < 0:
        raise CLIError(f"--noise must be >= 0 (a variance), got {args.noise}")
    if args.group_size < 1:
        raise CLIError(f"--group-size must be >= 1, got {args.group_size}")
    from grpojax.cli._types import F32_MAX, F32_TINY  # noqa: PLC0415

    for other, value in (("curvature", args.curvature), ("k-instant", args.k_instant)):
        a = args.eta * value  # the stiffness in optimizer units, computed in float32
        if value > 0 and not F32_TINY <= a <= F32_MAX:
            raise CLIError(f"--eta × --{other} = {a:.3g} is outside the float32 range [{F32_TINY:.2g}, {F32_MAX:.3g}] "
                           f"the computation uses (it would be {'0' if a < F32_TINY else 'inf'}); rescale the two")
