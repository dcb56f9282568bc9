"""Trace-time validation of user inputs (concrete values only; traced values pass through)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

_LAGS = ("constant", "periodic")


def is_concrete(x: Any) -> bool:
    """True when ``x`` holds concrete values that can be checked eagerly (not a tracer)."""
    return not isinstance(x, jax.core.Tracer)


def check(name: str, value: Any, ok, expected: str) -> None:
    """Raise ``ValueError`` naming ``name`` and the offending value unless ``ok(values)`` holds.

    ``ok`` receives a NumPy array and returns a boolean array; traced values are skipped (checks under
    ``jit``/``vmap`` happen where the concrete values enter the public entry point).
    """
    if not is_concrete(value):
        return
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real number, got {name}={value!r}")
    if not np.all(np.isfinite(arr)):
        bad = arr.ravel()[np.argmin(np.isfinite(arr).ravel())].item()
        raise ValueError(f"{name} must be finite, got {name}={bad!r}")
    good = np.broadcast_to(np.asarray(ok(arr)), arr.shape)
    if not np.all(good):
        bad = arr.ravel()[np.argmin(good.ravel())].item()
        raise ValueError(f"{name} must be {expected}, got {name}={bad!r}")


def check_lag(lag: str) -> str:
    if lag not in _LAGS:
        raise ValueError(f"lag must be one of {_LAGS}, got lag={lag!r}")
    return lag


def check_hyperparams(eta=None, mu=None, k_ref=None, curvature=None, k_instant=None) -> None:
    """Validate the optimizer hyperparameters η, μ, K_ref (skipping those that are None)."""
    if eta is not None:
        check("eta", eta, lambda a: a > 0, "> 0 (the learning rate)")
    if mu is not None:
        check("mu", mu, lambda a: (a >= 0) & (a < 1), "in [0, 1) (heavy-ball momentum)")
    if k_ref is not None:
        check("k_ref", k_ref, lambda a: a >= 1, ">= 1 (refresh interval in optimizer steps)")
    if curvature is not None:
        check("curvature", curvature, lambda a: np.ones_like(a, bool), "finite")
    if k_instant is not None:
        check("k_instant", k_instant, lambda a: np.ones_like(a, bool), "finite")
