"""The ``grpojax`` command line."""

from grpojax.cli._app import build_parser, main

__all__ = ["build_parser", "main"]
