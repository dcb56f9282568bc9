"""Test configuration: float64 for numerics, reproducible keys, real-log fixtures.

x64 is enabled for the whole test session (never by the library at import time). Library code
must therefore be explicit about dtypes where it wants float32/bf16.

Dtype promotion is strict and implicit rank promotion raises for the whole suite (as diffrax's own
suite does): ``float32 + float64`` or ``(3,) + (2, 3)`` is an error here, so the library states its
dtypes and broadcasts explicitly, and a user's float32 arrays are not silently promoted.
"""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("MPLBACKEND", "Agg")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

REPO = pathlib.Path(__file__).resolve().parents[1]
REAL_LOGS = REPO.parent / "shared" / "real-logs"


@pytest.fixture(scope="session")
def real_logs() -> pathlib.Path:
    """Folder of the four real GRPO logs; tests using it skip when the folder is absent."""
    if not REAL_LOGS.is_dir():
        pytest.skip("../shared/real-logs is absent (a user's clone has no shared folder)")
    return REAL_LOGS


@pytest.fixture
def key():
    return jax.random.key(0)


REAL_RUNS = REPO.parent / "shared" / "real-runs"


@pytest.fixture(scope="session")
def real_runs() -> pathlib.Path:
    """Folder of the 37-run development corpus; tests using it skip when the folder is absent."""
    if not REAL_RUNS.is_dir():
        pytest.skip("../shared/real-runs is absent (a user's clone has no shared folder)")
    return REAL_RUNS


@pytest.fixture(scope="session")
def labelled_corpus(real_runs, real_logs):
    """``(module, runs)``: ``experiments/diagnose_real_runs.py`` loaded as a module, and every run of the
    real corpus it reads (skips where the corpus is absent)."""
    from _experiments import load_experiment

    mod = load_experiment("diagnose_real_runs")
    return mod, mod.load_runs(real_runs, real_logs)
