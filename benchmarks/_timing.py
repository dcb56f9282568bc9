"""How the benchmark scripts time their work (imported by ``benchmarks/*.py`` as ``_timing``).

- :func:`time_calls` calls a function repeatedly and waits for its result each time
  (:func:`block`: ``jax.block_until_ready`` on whatever JAX arrays it returns). The first call, which
  compiles, is timed apart and is not one of the repeats; the compile time is reported as the first call
  minus the median repeat.
- :class:`Timing` holds the wall and process-CPU seconds of the repeats: median and minimum.
- :func:`machine_line` says what the numbers were measured on: cores, the cores this process may use,
  the thread settings in the environment, the load average (the machine may be shared), JAX's devices
  and torch's thread count when those are loaded.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from typing import Any, Callable, Iterable, NamedTuple

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS")
"""Environment variables that set how many threads (or host devices) the numeric libraries use."""


def block(x: Any) -> Any:
    """Wait until the JAX arrays in ``x`` (any pytree) are computed; return ``x``.

    A value with no JAX arrays is returned at once (and JAX is not imported for it).
    """
    if "jax" in sys.modules:
        return sys.modules["jax"].block_until_ready(x)
    return x


class Timing(NamedTuple):
    """Seconds of repeated calls of one function.

    Attributes:
        walls: wall-clock seconds of each repeat.
        cpus: process CPU seconds of each repeat (empty when not measured).
        first_s: wall seconds of the first call, compile included (None when there was no such call).
        result: the value the last call returned.
    """

    walls: tuple[float, ...]
    cpus: tuple[float, ...] = ()
    first_s: float | None = None
    result: Any = None

    @property
    def median_s(self) -> float:
        """Median wall seconds of the repeats."""
        return statistics.median(self.walls)

    @property
    def min_s(self) -> float:
        """Fastest repeat, wall seconds."""
        return min(self.walls)

    @property
    def cpu_median_s(self) -> float:
        """Median process CPU seconds of the repeats (nan when not measured)."""
        return statistics.median(self.cpus) if self.cpus else math.nan

    @property
    def compile_s(self) -> float:
        """First call minus the median repeat (≥ 0; nan when the first call was not timed apart)."""
        return math.nan if self.first_s is None else max(self.first_s - self.median_s, 0.0)

    def as_dict(self) -> dict[str, float]:
        """``first_s``, ``compile_s``, ``median_s``, ``min_s``, ``cpu_median_s`` as a dict."""
        return dict(first_s=math.nan if self.first_s is None else self.first_s, compile_s=self.compile_s,
                    median_s=self.median_s, min_s=self.min_s, cpu_median_s=self.cpu_median_s)


def time_calls(fn: Callable[[], Any], repeats: int, *, first: bool = True) -> Timing:
    """Time ``repeats`` calls of ``fn()``, each waited for with :func:`block`.

    Args:
        fn: the work, a function of no arguments.
        repeats: how many timed calls (≥ 1).
        first: call ``fn`` once before the repeats and time it apart (compilation, caches); False when the
            caller has already done so or when the first call is as representative as the others.

    Returns:
        :class:`Timing` (``result``: what the last call returned).

    Raises:
        ValueError: ``repeats`` < 1.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    first_s = None
    if first:
        t = time.perf_counter()
        block(fn())
        first_s = time.perf_counter() - t
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = block(fn())
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return Timing(tuple(walls), tuple(cpus), first_s, out)


def timing_of(walls: Iterable[float]) -> Timing:
    """A :class:`Timing` of wall times measured elsewhere (e.g. by a trainer's own step timer)."""
    walls = tuple(float(w) for w in walls)
    if not walls:
        raise ValueError("timing_of needs at least one time, got none")
    return Timing(walls)


def machine() -> dict[str, Any]:
    """Cores, usable cores, thread settings, load average, and JAX / torch threading when loaded."""
    cores = os.cpu_count() or 1
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    info: dict[str, Any] = dict(
        cores=cores, usable_cores=usable,
        load_average=os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan,
        thread_settings={k: os.environ[k] for k in THREAD_VARIABLES if os.environ.get(k)},
    )
    if "jax" in sys.modules:
        jax = sys.modules["jax"]
        devices = jax.devices()
        info.update(jax=jax.__version__, jax_devices=len(devices), jax_platform=devices[0].platform)
    if "torch" in sys.modules:
        info["torch_threads"] = sys.modules["torch"].get_num_threads()
    return info


def machine_line() -> str:
    """:func:`machine` as one line for a benchmark's header."""
    m = machine()
    parts = [f"{m['cores']} cores ({m['usable_cores']} usable)", f"load average {m['load_average']:.1f}"]
    settings = ", ".join(f"{k}={v}" for k, v in m["thread_settings"].items())
    parts.append(f"thread settings: {settings or 'none set'}")
    if "jax" in m:
        parts.append(f"jax {m['jax']} on {m['jax_devices']} {m['jax_platform']} device(s)")
    if "torch_threads" in m:
        parts.append(f"torch {m['torch_threads']} threads")
    return "; ".join(parts)
