"""JAX's multi-process runtime, started from the environment: one program, several processes, one global mesh.

A multi-process run is N copies of the same program, one per host (or per group of devices), that call
:func:`jax.distributed.initialize` before touching JAX; afterwards ``jax.devices()`` lists the devices of
every process and one compiled call spans them all. This module reads where the processes meet from three
environment variables (set by ``grpojax launch`` for N local processes, or by hand / a job script on a
cluster):

- ``GRPOJAX_COORDINATOR_ADDRESS``: ``host:port`` of process 0, reachable from every process;
- ``GRPOJAX_NUM_PROCESSES``: the number of processes N;
- ``GRPOJAX_PROCESS_ID``: this process's id in ``0 .. N-1``.

On a Cloud TPU pod slice, under SLURM or Open MPI, JAX finds all three by itself: ``mode="on"`` calls
``jax.distributed.initialize()`` with no arguments when the variables are absent. On CPU the processes talk
through JAX's CPU collectives (gloo, the default of ``jax_cpu_collectives_implementation``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import jax
import numpy as np

from grpojax._errors import InvalidValueError

__all__ = ["ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID", "MODES", "barrier", "broadcast_ints",
           "check_started", "distributed_env", "initialize_distributed", "is_multiprocess", "is_primary", "to_global", "to_host"]

ENV_COORDINATOR = "GRPOJAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "GRPOJAX_NUM_PROCESSES"
ENV_PROCESS_ID = "GRPOJAX_PROCESS_ID"

MODES = ("auto", "on", "off")
"""``auto``: multi-process when the environment variables are set; ``on``: also let JAX detect a TPU pod,
SLURM or Open MPI job when they are not; ``off``: one process, whatever the environment says."""


def distributed_env(environ: Mapping[str, str] | None = None) -> tuple[str, int, int] | None:
    """``(coordinator address, number of processes, process id)`` from the environment; None when unset.

    Args:
        environ: the environment to read (default ``os.environ``).

    Raises:
        ValueError: only some of the three variables are set, or a value is not what is expected
            (``host:port``; an integer N >= 1; an integer id in ``0 .. N-1``).
    """
    env = os.environ if environ is None else environ
    names = (ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID)
    present = [n for n in names if env.get(n, "").strip()]
    if not present:
        return None
    if len(present) != len(names):
        missing = [n for n in names if n not in present]
        raise InvalidValueError(f"{', '.join(present)} set but {', '.join(missing)} not; expected all three "
                         "(coordinator host:port, number of processes, process id) or none")
    addr = env[ENV_COORDINATOR].strip()
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidValueError(f"{ENV_COORDINATOR}={addr!r} is not host:port (e.g. 10.0.0.1:12355)")
    try:
        n = int(env[ENV_NUM_PROCESSES])
    except ValueError:
        raise InvalidValueError(f"{ENV_NUM_PROCESSES}={env[ENV_NUM_PROCESSES]!r} is not an integer >= 1") from None
    if n < 1:
        raise InvalidValueError(f"{ENV_NUM_PROCESSES}={n} is not an integer >= 1")
    try:
        pid = int(env[ENV_PROCESS_ID])
    except ValueError:
        raise InvalidValueError(f"{ENV_PROCESS_ID}={env[ENV_PROCESS_ID]!r} is not an integer in [0, {n - 1}]") from None
    if not 0 <= pid < n:
        raise InvalidValueError(f"{ENV_PROCESS_ID}={pid} is not in [0, {n - 1}] ({ENV_NUM_PROCESSES}={n})")
    return addr, n, pid


def initialize_distributed(mode: str = "auto", *, timeout_s: int = 300) -> int:
    """Start JAX's multi-process runtime when asked to; return the number of processes.

    Call it first, before any JAX computation (``jax.random.key`` included). Calling it again, or when the
    runtime is already up, is harmless.

    Args:
        mode: one of :data:`MODES`.
        timeout_s: how long to wait for the other processes to join.

    Returns:
        ``jax.process_count()`` after the call (1 for a one-process run).

    Raises:
        ValueError: an unknown ``mode``, bad environment values (:func:`distributed_env`), or JAX already
            in use in this process when the environment asks for several processes.
    """
    if mode not in MODES:
        raise InvalidValueError(f"distributed mode must be one of {MODES}, got {mode!r}")
    if jax.distributed.is_initialized():
        return jax.process_count()
    if mode == "off":
        return 1
    env = distributed_env()
    if env is None and mode == "auto":
        return 1
    try:
        if env is None:
            try:
                jax.distributed.initialize(initialization_timeout=int(timeout_s))  # TPU pod, SLURM, Open MPI
            except ValueError as exc:
                raise InvalidValueError(f"no multi-process job found ({exc}); set {ENV_COORDINATOR}, "
                                 f"{ENV_NUM_PROCESSES} and {ENV_PROCESS_ID}, or run inside a TPU pod slice, "
                                 "SLURM or Open MPI job") from None
        else:
            addr, n, pid = env
            jax.distributed.initialize(addr, n, pid, initialization_timeout=int(timeout_s))
    except RuntimeError as exc:
        if "must be called before" not in str(exc):
            raise
        raise InvalidValueError("a multi-process run must start JAX's runtime before any JAX computation; call "
                         "initialize_distributed() first thing in the program") from None
    return jax.process_count()


def check_started() -> None:
    """Refuse a run whose environment asks for several processes when the runtime was not started.

    Without it every process would run the whole job alone and write the same outputs.

    Raises:
        ValueError: :func:`distributed_env` names N > 1 processes but ``jax.process_count()`` is 1.
    """
    env = distributed_env()
    if env is not None and env[1] > 1 and jax.process_count() == 1:
        raise InvalidValueError(f"{ENV_NUM_PROCESSES}={env[1]} is set but JAX runs one process; call "
                         "initialize_distributed() before any JAX computation")


def is_primary() -> bool:
    """Whether this is process 0, the one that prints and writes outputs."""
    return jax.process_index() == 0


# ------------------------------------------------------------------ host <-> global arrays


def is_multiprocess() -> bool:
    """Whether this program runs as several JAX processes."""
    return jax.process_count() > 1


def _place(x, sharding):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        return jax.device_put(x, sharding)
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def to_global(x, sharding):
    """``x`` (a pytree) placed with ``sharding`` (a sharding, or a tree of them that is a prefix of ``x``'s).

    In one process this is :func:`jax.device_put`. In several, a host value (the same on every process) becomes
    a global array of which each process holds only its own shards, and a global array is resharded.
    """
    if not is_multiprocess():
        return jax.device_put(x, sharding)
    return jax.tree.map(lambda sh, sub: jax.tree.map(lambda leaf: _place(leaf, sh), sub), sharding, x,
                        is_leaf=lambda s: isinstance(s, jax.sharding.Sharding))


def to_host(x) -> np.ndarray:
    """The whole value of ``x`` as a NumPy array on this process (gathered from the others if need be).

    In several processes, for an array that is neither fully addressable nor replicated, every process must
    call it (it is a collective).
    """
    if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer) or x.is_fully_addressable:
        return np.asarray(jax.device_get(x))  # a tracer raises jax.errors.TracerArrayConversionError
    if x.is_fully_replicated:
        return np.asarray(x.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def barrier(name: str) -> None:
    """Wait until every process has reached the barrier ``name`` (nothing in one process)."""
    if is_multiprocess():
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def broadcast_ints(values) -> list[int]:
    """Process 0's integers, on every process (the values themselves in one process)."""
    values = [int(v) for v in values]
    if not is_multiprocess():
        return values
    from jax.experimental import multihost_utils

    got = multihost_utils.broadcast_one_to_all(np.asarray(values, np.int32))
    return [int(v) for v in np.asarray(got)]
