"""The errors grpojax raises on purpose: one base class, user errors and environment errors.

Every exception grpojax raises deliberately derives from :class:`GrpojaxError`. Two families:

- :class:`UserError` -- the caller can fix it: a value outside its domain (:class:`InvalidValueError`),
  a file or log that cannot be read as asked (:class:`DataError`), a configuration that does not
  validate (:class:`ConfigError`). The ``grpojax`` command prints the message as one line and exits
  with status 2.
- :class:`StorageError` -- the environment failed while writing (a full disk, a read-only folder, a
  checkpoint library error). The message names the folder; the command exits with status 1.

User errors about values also derive from :class:`ValueError`, so ``except ValueError`` keeps working
for code written before these classes existed. Anything else that escapes grpojax (a plain
``ValueError``, ``KeyError``, ``TypeError`` ...) is a bug: the command reports it as an internal error
and asks for ``--debug``.

This module imports nothing from grpojax, so every layer may raise these errors.
"""

from __future__ import annotations

__all__ = ["ConfigError", "DataError", "GrpojaxError", "InvalidValueError", "StorageError", "UserError"]


class GrpojaxError(Exception):
    """Base of every error grpojax raises on purpose."""


class UserError(GrpojaxError):
    """An error the caller can fix (a value, a file, a config, an output folder); the CLI exits with 2."""


class InvalidValueError(UserError, ValueError):
    """An argument (or command-line flag) outside its domain; the message names it and what was expected."""


class DataError(UserError, ValueError):
    """A file, log or checkpoint that cannot be read as asked; the message names the file."""


class ConfigError(UserError, ValueError):
    """A configuration (file, override or combination of settings) that does not validate; names the key."""


class StorageError(GrpojaxError, OSError):
    """Writing failed because of the environment (full disk, read-only folder, checkpoint library error).

    The message names the folder or file; the CLI exits with status 1. Derives from :class:`OSError` so
    that callers treating write failures as ``OSError`` keep working.
    """

    def __str__(self) -> str:  # OSError's str() of a one-argument error is the argument itself; keep it so
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()
