"""Vmapped, chunked, sharded sweeps of the two-arm bandit: grids, measured vs predicted regimes.

- :func:`make_grid` builds the rows (a :class:`Grid`); :func:`run_sweep` simulates them (one compiled, vmapped call per chunk,
  sharded over all devices) and returns a :class:`SweepResult` with predictions and measurements side by side.
- :func:`measure` turns recorded trajectories into statistics and a measured regime (:data:`MEASURED_REGIMES`),
  set beside the exact discrete prediction of each row (:data:`PREDICTED_REGIMES`).
- :func:`sweep_preset` builds the named grids of ``grpojax sweep --preset`` (:data:`PRESETS`).
- :func:`initialize_distributed` starts JAX's multi-process runtime from the environment (``grpojax launch``,
  a cluster job); :func:`run_sweep` then spans the devices of every process, and :func:`is_primary` says
  which process writes.
"""

from grpojax._distributed import initialize_distributed, is_primary
from grpojax.sweep._engine import SweepResult, run_sweep
from grpojax.sweep._grid import Grid, make_grid
from grpojax.sweep._measure import MEASURED_REGIMES, measure
from grpojax.sweep._predict import PREDICTED_REGIMES
from grpojax.sweep._presets import PRESETS, sweep_preset

# Importable for the packages after this one, the command line and the experiments, but not part
# of the public API (not in __all__, not in the API reference).
from grpojax.sweep._engine import simulate_traces

__all__ = [
    "Grid",
    "MEASURED_REGIMES",
    "PREDICTED_REGIMES",
    "PRESETS",
    "SweepResult",
    "initialize_distributed",
    "is_primary",
    "make_grid",
    "measure",
    "run_sweep",
    "sweep_preset",
]
