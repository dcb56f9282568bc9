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


TABLE_COMMANDS = {
    "predict": lambda t: ["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5",
                          "--out", str(t / "p")],
    "advise": lambda t: ["advise", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--group-size", "8",
                         "--curvature", "0.5"],
    "fit": lambda t: ["fit", LOG, "--no-plot", "--law", "exponential", "--out", str(t / "f")],
    "diagnose": lambda t: ["diagnose", LOG, "--no-plot", "--no-validity", "--out", str(t / "d")],
}


@pytest.mark.parametrize("command", TABLE_COMMANDS)
def test_tables_as_json_and_csv_on_stdout(command, tmp_path, capsys):
    """--json / --csv put the table's rows on stdout (strict JSON: NaN is null) and the messages on stderr."""
    import csv
    import io
    import json

    assert main(TABLE_COMMANDS[command](tmp_path) + ["--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)  # the whole of stdout is one JSON document
    assert data["rows"] and all(isinstance(r, dict) for r in data["rows"])
    assert "NaN" not in out and '"nan"' not in out
    assert main(TABLE_COMMANDS[command](tmp_path) + ["--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == len(data["rows"]) and set(rows[0]) >= set(data["rows"][0])


@pytest.fixture
def no_columns(monkeypatch):
    """A pipe from a shell that exports no COLUMNS (pytest-xdist workers export COLUMNS=80, which rich read
    into the console's width when it was built)."""
    from grpojax.cli._common import console

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(console, "_width", None)


def test_json_into_a_file_keeps_the_table(tmp_path, capsys, no_columns):
    assert main(TABLE_COMMANDS["fit"](tmp_path) + ["--json", str(tmp_path / "rows.json")]) == 0
    out = capsys.readouterr().out
    assert "law/model" in out and (tmp_path / "rows.json").is_file()


def test_a_table_piped_to_a_file_is_not_cut_at_80_columns(tmp_path, capsys, no_columns):
    """stdout is not a terminal here: the fit table keeps every column whole (it is wider than 80)."""
    assert main(["fit", LOG, "--no-plot", "--law", "exponential", "--out", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert "law/model" in out and "…" not in out
    assert max(len(line) for line in out.splitlines()) > 80


def test_help_imports_no_jax():
    """`grpojax --help` and `grpojax COMMAND --help` build every parser without importing JAX, matplotlib or
    SciPy (JAX alone takes seconds to import on a busy machine); only `sweep --help`, which lists the
    presets of grpojax.sweep, imports it."""
    import subprocess
    import sys

    code = ("import sys\nfrom grpojax.cli import main\n"
            "for argv in (['--help'], ['predict', '--help'], ['fit', '--help'], ['diagnose', '--help'],\n"
            "             ['advise', '--help'], ['train', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "heavy = [m for m in ('jax', 'matplotlib', 'scipy', 'orbax', 'flax') if m in sys.modules]\n"
            "print(heavy, file=sys.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_launch_sets_the_variables_the_runtime_reads():
    from grpojax import _distributed
    from grpojax.cli import _launch

    for name in ("ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID"):
        assert getattr(_launch, name) == getattr(_distributed, name)
