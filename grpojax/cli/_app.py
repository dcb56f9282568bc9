"""The ``grpojax`` console script: argparse front end, one module per subcommand.

Each subcommand lives in ``grpojax/cli/_<name>.py`` and exposes ``register(subparsers)``, which adds
its parser and sets ``func=run`` where ``run(args) -> int``. :func:`main` is the one error boundary:
every error becomes one line on stderr. Errors a user can fix -- a :class:`grpojax.UserError` (bad
value, unreadable file or config, unknown format), a missing input or an output that already exists --
exit with status 2; errors of the environment (permissions, a full disk, memory,
:class:`grpojax.StorageError`) with status 1. Anything else (a plain ``ValueError``, ``KeyError``,
``TypeError`` ...) is a bug in grpojax: "internal error ... rerun with --debug", status 1.
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ("predict", "simulate", "sweep", "fit", "diagnose", "compare", "train", "reproduce", "convert", "export", "watch",
               "status", "advise", "launch", "curvature")

# What ``grpojax --help`` lists, without importing the subcommand modules: module -> (command, aliases, help).
# Each module's ``register`` gives its parser the same name, aliases and help (a test compares the two).
COMMANDS = {
    "predict": ("predict", (), "M, C, K_eff, ζ, regime and thresholds from (η, μ, K_ref, K)"),
    "simulate": ("simulate", (), "simulate the stochastic oscillator (diffrax ensemble) and compare with the exact "
                                 "moments"),
    "sweep": ("sweep", (), "sweep the two-arm bandit over a preset grid; measured vs predicted regimes"),
    "fit": ("fit", (), "fit reward-curve laws / posteriors to a training log"),
    "diagnose": ("diagnose", (), "diagnose failure modes from a training log"),
    "compare": ("compare", (), "compare runs: differing hyperparameters and where the curves diverge"),
    "train": ("train", (), "GRPO-train a small causal LM on verifiable math rewards"),
    "reproduce": ("reproduce", (), "run every experiment and write report.md with figures"),
    "convert": ("convert-gguf", ("convert",), "convert a GGUF (llama.cpp) Llama/Qwen2 checkpoint into a Hugging Face "
                                              "folder"),
    "export": ("export", (), "write a training run's policy as a Hugging Face folder (weights + tokenizer files)"),
    "watch": ("watch", (), "live forecast, stability margin, findings and best checkpoint of a run being written"),
    "status": ("status", (), "status of training runs: running, finished, or stale (the process that wrote them is gone)"),
    "advise": ("advise", (), "ζ, exact stability margin and advised η, K_ref (or staleness) and group-size ranges"),
    "launch": ("launch", (), "run a command as N local processes of one multi-process JAX program"),
    "curvature": ("curvature", (), "measure K_0, K_d, gradient noise and pass rate of a GRPO update on a checkpoint "
                                   "(curvature.json)"),
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``grpojax CMD: error: ...``) instead of usage + error."""

    def error(self, message: str):
        from grpojax.cli._common import err_console  # noqa: PLC0415  (rich: not needed by --help)

        err_console.print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", markup=False,
                          highlight=False, soft_wrap=True)
        self.exit(2)


def _command_module(argv: list[str]) -> str | None:
    """The module of the subcommand ``argv`` names (its first word that is not an option), or None."""
    for word in argv:
        if word == "--":
            return None
        if word.startswith("-"):
            continue  # --debug, -h: the options of grpojax itself take no value
        for module, (name, aliases, _) in COMMANDS.items():
            if word == name or word in aliases:
                return module
        return None
    return None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``grpojax`` parser with every subcommand (``argv`` None), or, for ``argv``, with the full parser of
    only the subcommand ``argv`` names: the others are listed by name and help, their modules not imported
    (``grpojax --help`` and ``grpojax diagnose ...`` import nothing the other commands need)."""
    parser = _Parser(
        prog="grpojax",
        description="GRPO training dynamics as a predictable damped oscillator.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `grpojax COMMAND --help` for the options and an example of each command.",
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None if argv is None else _command_module(argv)
    for name in SUBCOMMANDS:
        if argv is not None and name != wanted and name in COMMANDS:  # (a module not in the table is imported)
            command, aliases, text = COMMANDS[name]
            sub.add_parser(command, aliases=list(aliases), help=text, add_help=False)  # listed, not built
            continue
        try:
            module = importlib.import_module(f"grpojax.cli._{name}")
        except ModuleNotFoundError as exc:  # a subcommand whose module is not built yet
            if exc.name != f"grpojax.cli._{name}":
                raise
            continue
        module.register(sub)
    return parser


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message (its type name when it has none)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line:
            return line
    return type(exc).__name__


def _classify(exc: BaseException) -> tuple[int, str] | None:
    """Map an exception to (exit status, one-line message); None for a genuine bug.

    Exit status 2: the user can fix the input (a value, a file, a format, an existing output).
    Exit status 1: the environment failed (permissions, a full disk, not enough memory).
    """
    import errno
    import json
    import os

    from grpojax._errors import GrpojaxError, StorageError, UserError
    from grpojax.cli._common import CLIError  # noqa: PLC0415

    if isinstance(exc, (CLIError, UserError)):
        return 2, _one_line(exc)
    if isinstance(exc, StorageError):
        return 1, _one_line(exc)
    if isinstance(exc, GrpojaxError):  # raised on purpose, not the user's to fix (e.g. a loss that became NaN)
        return 1, _one_line(exc)
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError)):
        what = {FileNotFoundError: "no such file or folder", IsADirectoryError: "is a folder, expected a file",
                NotADirectoryError: "is not a folder", FileExistsError: "already exists"}[type(exc)]
        if exc.strerror and exc.errno is not None and exc.strerror != os.strerror(exc.errno):
            what = exc.strerror  # a message of grpojax's own (e.g. how to overwrite), not the system's text
        return 2, f"{exc.filename}: {what}" if exc.filename else _one_line(exc)
    if isinstance(exc, PermissionError):
        return 1, f"{exc.filename}: permission denied" if exc.filename else _one_line(exc)
    if isinstance(exc, OSError):
        if exc.errno == errno.ENAMETOOLONG:  # a path the user gave
            return 2, f"{exc.filename}: file name too long" if exc.filename else _one_line(exc)
        if exc.errno == errno.ENOSPC:
            return 1, f"no space left on the device{f' while writing {exc.filename}' if exc.filename else ''}"
        if exc.errno == errno.EROFS:
            return 1, f"{exc.filename}: read-only file system" if exc.filename else _one_line(exc)
        return 1, _one_line(exc)
    if isinstance(exc, MemoryError):
        return 1, "out of memory: reduce the sizes of the request (paths, steps, batch, configurations)"
    if isinstance(exc, RecursionError):
        return 2, "the input is nested too deeply to read (a corrupt or hostile file?)"
    if isinstance(exc, json.JSONDecodeError):  # a file given by the user is not JSON
        return 2, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
    if isinstance(exc, UnicodeDecodeError):  # a file given by the user is not text
        return 2, f"the input is not UTF-8 text ({exc.reason} at byte {exc.start})"
    try:
        import yaml

        if isinstance(exc, yaml.YAMLError):
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            return 2, f"invalid YAML{where}: {getattr(exc, 'problem', None) or _one_line(exc)}"
    except ImportError:  # pragma: no cover - yaml is a dependency
        pass
    name = type(exc).__name__
    if name in ("EqxRuntimeError", "XlaRuntimeError", "JaxRuntimeError"):
        # A check inside a compiled function (eqx.error_if) or an allocation XLA refused.
        text = str(exc)
        if "RESOURCE_EXHAUSTED" in text or "Out of memory" in text:
            return 1, "out of memory: reduce the sizes of the request (paths, steps, batch, configurations)"
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("---", "*", "This "))]
        if lines and " must be " in lines[0]:  # a grpojax check inside a compiled function (grpojax._checks)
            return 2, lines[0]
        return None
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 environment error, 2 user error, 130 interrupted).

    A flag refused while parsing returns 2 as well (one line on stderr); ``--help`` exits as argparse does.
    """
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(words)
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        return int(exc.code) if isinstance(exc.code, int) else 2
    if args.command is None:
        parser.print_help()
        return 2
    from grpojax._jax_cache import enable_compilation_cache
    from grpojax.cli._common import err_console  # noqa: PLC0415

    enable_compilation_cache()  # a second command reuses the XLA programs the first one compiled
    if argv is None and getattr(args, "bayes", None):
        # the grpojax command's own process (not a caller's, whose JAX setup is theirs) sampling NUTS chains:
        # one host device per core, the chains split between them
        from grpojax._host_devices import use_host_cores  # noqa: PLC0415

        use_host_cores(getattr(args, "chains", 2))
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        err_console.print("grpojax: interrupted", soft_wrap=True)
        return 130
    except Exception as exc:  # the one error boundary of the command line
        if args.debug:
            raise
        known = _classify(exc)
        if known is None:
            status, msg = 1, (f"internal error ({type(exc).__name__}: {_one_line(exc)}); "
                              "rerun with --debug for the traceback")
        else:
            status, msg = known
        err_console.print(f"grpojax {args.command}: error: {msg}", markup=False, highlight=False, soft_wrap=True)
        return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
