"""JAX's persistent compilation cache, set in one place.

A short command spends more time compiling XLA programs than running them. The commands that answer in
seconds avoid compiling altogether (``grpojax fit --prefix`` fits its laws and its window forecast in NumPy
and compiles nothing); for what still compiles (NUTS posteriors, least-squares batches too large for NumPy,
simulations) the persistent cache writes each compiled program to disk, and the next process that needs
the same program (same shapes, same options) loads it instead of compiling it again. The large
least-squares batches are padded to bucketed lengths, so a log of another length finds its programs too.
Every program is cached, however fast it compiled: loading a small one takes a few milliseconds where
compiling it takes tens.

The folder is ``$GRPOJAX_JAX_CACHE`` when set, else ``$XDG_CACHE_HOME/grpojax/jax`` (by default
``~/.cache/grpojax/jax``); ``GRPOJAX_JAX_CACHE=off`` turns the cache off. A folder that cannot be created
or written leaves the cache off silently: a cache is an optimisation, never a reason to fail.
"""

from __future__ import annotations

import os
import pathlib
import sys

_ENABLED: list[str] = []


def cache_dir() -> pathlib.Path | None:
    """The cache folder this process uses (None: turned off with ``GRPOJAX_JAX_CACHE=off``)."""
    env = os.environ.get("GRPOJAX_JAX_CACHE")
    if env is not None and env.strip().lower() in ("off", "0", "none", ""):
        return None
    if env:
        return pathlib.Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "grpojax" / "jax"


def enable_compilation_cache() -> str | None:
    """Turn JAX's persistent compilation cache on (idempotent); return its folder, or None when off.

    Safe to call before or after JAX is imported and before any program is compiled; programs
    compiled earlier in the process are simply not cached.
    """
    if _ENABLED:
        return _ENABLED[0]
    where = cache_dir()
    if where is None:
        return None
    try:
        where.mkdir(parents=True, exist_ok=True)
        if not os.access(where, os.W_OK):
            return None
    except OSError:
        return None
    settings = {"jax_compilation_cache_dir": str(where), "jax_persistent_cache_min_compile_time_secs": 0.0,
                "jax_persistent_cache_min_entry_size_bytes": 0}
    if "jax" in sys.modules:
        import jax  # noqa: PLC0415

        for k, v in settings.items():
            jax.config.update(k, v)
    else:  # JAX reads its options from the environment when it is imported: no import (and its cost) here
        for k, v in settings.items():
            os.environ.setdefault(k.upper(), str(v))
    _ENABLED.append(str(where))
    return str(where)


def active_cache_dir() -> str | None:
    """The folder :func:`enable_compilation_cache` turned on in this process (None when it has not)."""
    return _ENABLED[0] if _ENABLED else None
