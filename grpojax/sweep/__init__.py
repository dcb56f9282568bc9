"""Vmapped, chunked, sharded sweeps of the two-arm bandit: grids, measured vs predicted regimes.

- :func:`make_grid` builds the rows; :func:`run_sweep` simulates them (one compiled, vmapped call per chunk,
  sharded over all devices) and returns a :class:`SweepResult` with predictions and measurements side by side.
- :func:`measure` turns recorded trajectories into statistics and a measured regime (:data:`MEASURED_REGIMES`).
- :func:`sweep_preset` builds the named grids of ``grpojax sweep --preset`` (:data:`PRESETS`).
- :func:`initialize_distributed` starts JAX's multi-process runtime from the environment (``grpojax launch``,
  a cluster job); :func:`run_sweep` then spans the devices of every process, and :func:`is_primary` says
  which process writes.
"""

from grpojax._distributed import initialize_distributed, is_primary
from grpojax.sweep._engine import SweepResult, run_sweep, simulate_traces
from grpojax.sweep._grid import MODE_KNOBS, NUMERIC_KNOBS, Grid, make_grid
from grpojax.sweep._measure import MEASURED_REGIMES, measure
from grpojax.sweep._predict import PREDICTED_REGIMES, predict_rows
from grpojax.sweep._presets import PRESETS, SweepPreset, sweep_preset

__all__ = [
    "MEASURED_REGIMES",
    "MODE_KNOBS",
    "NUMERIC_KNOBS",
    "PREDICTED_REGIMES",
    "PRESETS",
    "Grid",
    "SweepPreset",
    "SweepResult",
    "initialize_distributed",
    "is_primary",
    "make_grid",
    "measure",
    "predict_rows",
    "run_sweep",
    "simulate_traces",
    "sweep_preset",
]
