"""What the quick commands import: ``grpojax --help`` imports no subcommand module and no numeric library,
``fit --prefix`` no JAX, scipy.stats or pyplot, and the top-level help lists what each module registers.

Each check runs a fresh interpreter and reads its ``sys.modules``: an import added at module level
anywhere on these paths (a package ``__init__``, a subcommand module) fails here. No timings: the speed
targets are measured by ``benchmarks/cli_latency.py``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import pathlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HEAVY = ("jax", "jaxlib", "numpyro", "equinox", "optimistix", "diffrax", "flax", "torch")


def _modules_after(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "GRPOJAX_JAX_CACHE": "off"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_top_level_help_imports_no_subcommand_and_no_numpy():
    got = _modules_after("""
        import json, sys
        from grpojax.cli import main
        try:
            main(["--help"])
        except SystemExit as exc:
            rc = exc.code
        mods = sorted(m for m in sys.modules if m.startswith("grpojax.cli._") or m.split(".")[0] in
                      ("numpy", "rich", "scipy", "matplotlib", "jax", "pydantic"))
        print(json.dumps({"rc": rc, "mods": mods}))
    """)
    assert got["rc"] in (0, None)
    # the parser module itself only: no subcommand module, no numeric or console library
    assert got["mods"] == ["grpojax.cli._app"], got["mods"]


def test_a_subcommand_imports_only_its_own_module():
    got = _modules_after("""
        import json, sys
        from grpojax.cli import main
        try:
            main(["diagnose", "--help"])
        except SystemExit:
            pass
        others = ("_fit", "_fit_pool", "_watch", "_train", "_sweep", "_simulate", "_predict", "_advise", "_export",
                  "_launch", "_reproduce", "_convert")
        print(json.dumps(sorted(m for m in sys.modules if m in {"grpojax.cli." + o for o in others})))
    """)
    assert got == []


def test_the_help_table_matches_what_each_module_registers():
    """The names, aliases and help lines ``grpojax --help`` shows without importing the modules are the ones
    the modules register (the full parser, every module imported, against the lazy one)."""
    from grpojax.cli._app import COMMANDS, SUBCOMMANDS, build_parser

    def listed(parser):
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return [(a.dest, a.metavar, a.help) for a in sub._choices_actions], sorted(sub.choices)

    full = listed(build_parser())
    lazy = listed(build_parser(["--help"]))
    assert lazy == full
    assert list(COMMANDS) == list(SUBCOMMANDS)
    for name in SUBCOMMANDS:  # each command's own parser is the full one when it is the one asked for
        command = COMMANDS[name][0]
        one = build_parser([command])
        sub = next(a for a in one._actions if isinstance(a, argparse._SubParsersAction))
        assert sub.choices[command].add_help, command


def _log(path, n=200, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    m = 0.2 + 0.5 * (1 - np.exp(-t / 40))
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"step": int(t[i]), "reward_mean": float(rng.binomial(64, m[i]) / 64),
                                 "entropy": 0.5, "kl": float(0.001 * t[i])}) + "\n")


def test_fit_prefix_imports_no_jax_scipy_stats_or_pyplot(tmp_path):
    log = tmp_path / "run.jsonl"
    _log(log)
    got = _modules_after("""
        import json, sys
        from grpojax.cli import main
        rc = main(["fit", sys.argv[1], "--prefix", "0.3", "--out", sys.argv[2]])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in %r + ("arviz", "xarray", "pandas")
                       or m in ("matplotlib.pyplot", "scipy.stats"))
        print(json.dumps({"rc": rc, "heavy": heavy}))
    """ % (HEAVY,), str(log), str(tmp_path / "fit"))
    assert got["rc"] == 0
    assert got["heavy"] == [], f"imported on the fit --prefix path: {got['heavy']}"
    assert (tmp_path / "fit" / "fit.json").is_file()
    assert any(p.suffix == ".png" for p in (tmp_path / "fit").iterdir())  # the figure is still drawn


@pytest.mark.parametrize("package", ["grpojax.fit", "grpojax.plot"])
def test_lazy_names_are_the_typed_imports(package):
    """A package whose names are imported on first use lists each name once in its table and once in its
    ``TYPE_CHECKING`` imports (what readers, type checkers and the API reference see): both name the same
    module, and an unknown name is an AttributeError, not an import."""
    mod = importlib.import_module(package)
    typed, table = {}, None
    for node in ast.walk(ast.parse(pathlib.Path(mod.__file__).read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(package + "."):
            typed.update({a.asname or a.name: node.module + (f":{a.name}" if a.asname else "") for a in node.names})
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_lazy_names":
            table = ast.literal_eval(node.args[1])
    assert table is not None and table == typed
    assert set(table) <= set(dir(mod))
    assert not hasattr(mod, "no_such_name")


def test_fit_figure_from_the_worker_equals_the_one_drawn_in_process(tmp_path):
    """With two cores ``fit --prefix`` draws its figure in a forked worker while it forecasts; pinned to one core it
    draws in its own process. Both write the same PNG, byte for byte, and the same fit.json."""
    log = tmp_path / "run.jsonl"
    _log(log, n=150, seed=3)
    code = """
        import json, os, sys
        if sys.argv[3] == "one":
            os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        from grpojax.cli import main
        rc = main(["fit", sys.argv[1], "--prefix", "0.4", "--out", sys.argv[2]])
        print(json.dumps({"rc": rc, "mpl": "matplotlib" in sys.modules}))
    """
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores and os.sched_setaffinity (Linux) to compare the worker's figure with the inline one")
    two = _modules_after(code, str(log), str(tmp_path / "two"), "two")
    one = _modules_after(code, str(log), str(tmp_path / "one"), "one")
    assert two == {"rc": 0, "mpl": False}  # matplotlib was imported by the worker only
    assert one == {"rc": 0, "mpl": True}
    png = "fit_run.png"
    assert (tmp_path / "two" / png).read_bytes() == (tmp_path / "one" / png).read_bytes()
    fit_two, fit_one = (json.loads((tmp_path / d / "fit.json").read_text()) for d in ("two", "one"))
    assert fit_two["runs"] == fit_one["runs"] and fit_two["runs"]["run"]["figure"] == png
