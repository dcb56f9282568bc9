"""The error classes and the command line's one error boundary.

A :class:`grpojax.UserError` (a bad value, an unreadable file, a config that does not validate) is the
user's to fix: exit status 2 with its message. Anything else that escapes a command -- a plain
``KeyError``, ``ValueError`` or ``TypeError`` -- is a bug in grpojax and is reported as an internal
error (status 1, "rerun with --debug"), never dressed up as a user mistake.
"""

from __future__ import annotations

import errno

import pytest

import grpojax
import grpojax.cli._predict as predict_mod
from grpojax import ConfigError, DataError, GrpojaxError, InvalidValueError, StorageError, UserError
from grpojax.cli import main


def _run_raising(monkeypatch, capsys, exc: BaseException, *extra: str) -> tuple[int, str]:
    """``grpojax predict ...`` whose command body raises ``exc``: (status, stderr)."""

    def boom(args):
        raise exc

    monkeypatch.setattr(predict_mod, "run", boom)  # register() binds the module's run when the parser is built
    capsys.readouterr()
    rc = main([*extra, "predict", "--eta", "0.01", "--k-ref", "4", "--curvature", "0.5"])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("exc", [KeyError("p_star"), ValueError("operands could not be broadcast"),
                                 TypeError("unsupported operand"), IndexError("index 3 is out of bounds"),
                                 AttributeError("'NoneType' object has no attribute 'M'")])
def test_a_bug_is_an_internal_error(monkeypatch, capsys, exc):
    rc, err = _run_raising(monkeypatch, capsys, exc)
    lines = err.strip().splitlines()
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith(f"grpojax predict: error: internal error ({type(exc).__name__}: ")
    assert lines[0].endswith("rerun with --debug for the traceback")


@pytest.mark.parametrize("exc, status", [
    (InvalidValueError("--eta must be > 0, got -1"), 2),
    (DataError("run.jsonl: no reward column"), 2),
    (ConfigError("grpo.group_size must be >= 2, got 1"), 2),
    (UserError("the folder holds another run"), 2),
    (StorageError("could not write checkpoint 3 in /x/checkpoints: no space left on the device"), 1),
    (OSError(errno.ENOSPC, "No space left on device", "/x/fit.json"), 1),
    (PermissionError(errno.EACCES, "Permission denied", "/x"), 1),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/run.jsonl"), 2),
])
def test_a_known_error_is_its_message(monkeypatch, capsys, exc, status):
    rc, err = _run_raising(monkeypatch, capsys, exc)
    lines = err.strip().splitlines()
    assert rc == status and len(lines) == 1 and "internal error" not in lines[0], err
    assert lines[0].startswith("grpojax predict: error: ")


def test_debug_shows_the_traceback(monkeypatch, capsys):
    with pytest.raises(KeyError):
        _run_raising(monkeypatch, capsys, KeyError("p_star"), "--debug")


def test_the_classes():
    """One base; user errors about values are still ValueErrors; storage errors are OSErrors; all exported."""
    for cls in (UserError, InvalidValueError, DataError, ConfigError, StorageError):
        assert issubclass(cls, GrpojaxError) and getattr(grpojax, cls.__name__) is cls
    for cls in (InvalidValueError, DataError, ConfigError):
        assert issubclass(cls, UserError) and issubclass(cls, ValueError)
    assert issubclass(StorageError, OSError) and not issubclass(StorageError, UserError)
    assert str(StorageError("could not write x")) == "could not write x"


def test_library_errors_carry_the_classes(tmp_path):
    """Where the library knows the error, it raises the class: a value check, a log, a run folder, a checkpoint."""
    import grpojax.dynamics as dyn
    from grpojax.grpo._checkpoint import CheckpointError
    from grpojax.grpo._run_folder import RunFolderError
    from grpojax.logs import LogFormatError, read_log

    with pytest.raises(InvalidValueError, match="eta"):
        dyn.from_hyperparams(-1.0, 0.9, 4, 0.5)
    bad = tmp_path / "notes.txt"
    bad.write_text("not a log\n")
    with pytest.raises(LogFormatError) as e:
        read_log(bad)
    assert isinstance(e.value, DataError)
    assert issubclass(CheckpointError, DataError) and issubclass(RunFolderError, UserError)


def test_a_bad_flag_is_status_2_and_a_bad_value_inside_is_too(capsys):
    assert main(["predict", "--eta", "-1", "--k-ref", "4", "--curvature", "0.5"]) == 2
    assert "argument --eta" in capsys.readouterr().err


def test_values_float32_cannot_hold_are_refused_at_the_api():
    """With JAX's float64 off, a value float32 flushes to 0 / inf or rounds out of range is refused, naming it."""
    import jax

    import grpojax.dynamics as dyn

    with jax.enable_x64(False):
        for args, name in (((1e-300, 0.9, 4, 0.5), "eta=1e-300 is below the smallest float32 number"),
                           ((0.01, 0.9999999999, 4, 0.5), "mu=0.9999999999 is 1.0 in float32"),
                           ((0.01, 0.9, 4, 1e300), "curvature=1e+300 is beyond the float32 range")):
            with pytest.raises(InvalidValueError, match=name.replace("(", r"\(").replace("+", r"\+")):
                dyn.from_hyperparams(*args)
        assert float(dyn.from_hyperparams(0.01, 0.9, 4, 0.5).M) > 0
    assert float(dyn.from_hyperparams(1e-300, 0.9, 4, 0.5).M) > 0  # float64 holds it
