"""The contract every `grpojax` subcommand keeps: --help with an example; a missing file, an unknown format or
an invalid value exits non-zero with exactly one line on stderr (no traceback, no usage dump)."""

from __future__ import annotations

import pathlib

import pytest

from grpojax.cli import main
from grpojax.cli._app import SUBCOMMANDS

LOG = str(pathlib.Path(__file__).parent / "fixtures" / "quickstart" / "trainer_state.json")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "Example:" in out and f"grpojax {command}" in out.split("Example:", 1)[1]


def _unknown_format(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("this is not a training log\njust words\n")
    return str(f)


CASES = [
    # (id, argv builder, text expected in the one line)
    ("predict-invalid", lambda t: ["predict", "--eta", "-1", "--k-ref", "2", "--curvature", "1"], "eta"),
    ("predict-not-a-number", lambda t: ["predict", "--eta", "abc", "--k-ref", "2", "--curvature", "1"], "abc"),
    ("simulate-invalid", lambda t: ["simulate", "--eta", "0.1", "--k-ref", "0", "--curvature", "1"], "--k-ref"),
    ("sweep-invalid", lambda t: ["sweep", "--preset", "stability", "--size", "1"], "size"),
    ("sweep-unknown-preset", lambda t: ["sweep", "--preset", "nope"], "nope"),
    ("fit-missing", lambda t: ["fit", str(t / "missing.json")], "missing.json"),
    ("fit-unknown-format", lambda t: ["fit", _unknown_format(t)], "notes.txt"),
    ("fit-invalid", lambda t: ["fit", LOG, "--prefix", "1.5"], "prefix"),
    ("diagnose-missing", lambda t: ["diagnose", str(t / "missing.json")], "missing.json"),
    ("diagnose-unknown-format", lambda t: ["diagnose", _unknown_format(t)], "notes.txt"),
    ("diagnose-invalid", lambda t: ["diagnose", LOG, "--set", "no_such_threshold=1"], "no_such_threshold"),
    ("train-missing", lambda t: ["train", "--config", str(t / "missing.yaml")], "missing.yaml"),
    ("train-unknown-format", lambda t: ["train", "--config", _unknown_format(t)], "notes.txt"),
    ("train-invalid", lambda t: ["train", "--config", "tiny-arith", "--set", "grpo.group_size=1"], "group_size"),
    ("reproduce-invalid", lambda t: ["reproduce", "--only", "no_such_experiment"], "no_such_experiment"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_user_errors_are_one_line(case, tmp_path, capsys):
    _, argv, needle = case
    try:
        rc = main(argv(tmp_path) + ["--out", str(tmp_path / "out")])
    except SystemExit as exc:  # argparse rejects the value before the command runs
        rc = exc.code
    assert rc != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("grpojax") and "error" in err and needle in err, err
    assert "Traceback" not in err
