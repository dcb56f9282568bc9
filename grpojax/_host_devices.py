"""Host CPU cores as JAX devices, for the commands that run independent NUTS chains.

JAX runs a program on one device, and on a CPU that is one core at a time for the small, sequential programs
of a NUTS sampler. Declaring the cores as host devices (``jax_num_cpu_devices``) lets
:func:`grpojax.fit.fit_bayes` give each device its share of the chains and run them at the same time; the draws
are the same as on one device. The setting must be made before JAX starts its CPU backend, and a choice the
user made (``XLA_FLAGS=--xla_force_host_platform_device_count=N`` or ``JAX_NUM_CPU_DEVICES``) is left alone.
"""

from __future__ import annotations

import os


def usable_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def use_host_cores(max_devices: int) -> int | None:
    """Ask JAX for ``min(max_devices, usable cores)`` host CPU devices; return that number, or None when the
    user already chose, JAX's backend has already started, or there is only one to ask for."""
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "") or "JAX_NUM_CPU_DEVICES" in os.environ:
        return None
    n = min(int(max_devices), usable_cores())
    if n < 2:
        return None
    import jax  # noqa: PLC0415  (a config value, not an environment variable: child processes keep their one device)

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # the backend is already running: stay with its devices
        return None
    return n
