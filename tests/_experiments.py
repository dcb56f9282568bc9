"""Loading a script of ``experiments/`` as a module, for tests of its functions."""

from __future__ import annotations

import importlib.util
import pathlib
from types import ModuleType

EXPERIMENTS = pathlib.Path(__file__).resolve().parents[1] / "experiments"


def load_experiment(name: str) -> ModuleType:
    """``experiments/<name>.py`` as a fresh module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
