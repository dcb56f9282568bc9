"""The ``grpojax`` console script: argparse front end, one module per subcommand.

Each subcommand lives in ``grpojax/cli/_<name>.py`` and exposes ``register(subparsers)``, which adds
its parser and sets ``func=run`` where ``run(args) -> int``. Errors a user can fix (bad file, bad
value, unknown format) are printed as one line and exit with status 2; ``--debug`` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from grpojax.cli._common import CLIError, err_console

SUBCOMMANDS = ("predict", "simulate", "sweep", "fit", "diagnose", "train", "reproduce")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``grpojax CMD: error: ...``) instead of usage + error."""

    def error(self, message: str):
        err_console.print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", markup=False,
                          highlight=False, soft_wrap=True)
        self.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="grpojax",
        description="GRPO training dynamics as a predictable damped oscillator.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `grpojax COMMAND --help` for the options and an example of each command.",
    )
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            module = importlib.import_module(f"grpojax.cli._{name}")
        except ModuleNotFoundError as exc:  # a subcommand whose module is not built yet
            if exc.name != f"grpojax.cli._{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        err_console.print("grpojax: interrupted", soft_wrap=True)
        return 130
    except (CLIError, ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        if args.debug:
            raise
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        err_console.print(f"grpojax {args.command}: error: {msg}", markup=False, highlight=False, soft_wrap=True)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
