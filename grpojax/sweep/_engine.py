"""Run a grid of two-arm bandit configurations in one compiled, vmapped, sharded call per chunk.

Rows are grouped by static mode; each group is cut into equal chunks (padded, so one compilation serves
all chunks) whose leading axis is placed with ``NamedSharding(mesh, P("configs"))`` on a 1-D mesh of all
devices; inside the compiled call ``shard_map`` lets each device step its own rows, batched, with no
communication. Every row's randomness is ``threefry(fold_in(key, step), (row, draw))``, so results do not
depend on the chunk size or the number of devices. Each row records ``p`` every ``stride`` steps; summary
statistics and the measured regime are computed from that trace (:mod:`grpojax.sweep._measure`).

Several processes (JAX's multi-process runtime, :func:`grpojax.sweep.initialize_distributed`): the mesh holds
the devices of every process, each process places only its own devices' rows of a chunk
(``make_array_from_callback``), steps them, and the chunk's results are gathered back to every process
(``process_allgather``). Every process thus ends with the whole :class:`SweepResult`, bit-identical to a
one-process run; only process 0 should write it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from grpojax._errors import InvalidValueError
from grpojax._chunks import padded_chunks
from grpojax._distributed import check_started
from grpojax._io import to_jsonable
from grpojax.bandit import BanditConfig, mean_field_step, two_arm_init, two_arm_step_batch
from grpojax.sweep._grid import Grid
from grpojax.sweep._measure import MEASURED_REGIMES, measure
from grpojax.sweep._predict import predict_rows

__all__ = ["SweepResult", "run_sweep", "simulate_traces"]


@dataclass
class SweepResult:
    """Per-row inputs, predictions and measurements of a sweep.

    Attributes:
        columns: name → ``(N,)`` array (inputs such as ``eta``, ``k_ref``; predictions ``p_star``, ``K_d``,
            ``eta_crit_exact``, ``regime_exact`` ...; measurements ``late_mean``, ``late_std``,
            ``growth_rate``, ``frequency``, ``escaped``, ``finite``, ``regime``).
        traces: ``(N, W)`` recorded p every ``stride`` steps (``None`` unless requested).
        meta: num_steps, stride, devices (of all processes), processes, chunk size, seconds.
    """

    columns: dict[str, np.ndarray]
    traces: np.ndarray | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.columns["regime"])

    def regime_counts(self) -> dict[str, int]:
        return {r: int(np.sum(self.columns["regime"] == r)) for r in MEASURED_REGIMES}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``{"meta": ..., "rows": [{column: value}, ...]}``."""
        names = list(self.columns)
        rows = [{n: to_jsonable(self.columns[n][i]) for n in names} for i in range(len(self))]
        return {"meta": self.meta, "regime_counts": self.regime_counts(), "rows": rows}


def _trace_local(cfg: BanditConfig, rows, key, num_records: int, stride: int, mean_field: bool):
    """Trace a (device-local) batch: ``scan`` over records of ``scan`` over steps of the batched step."""
    st = jax.vmap(two_arm_init)(cfg)
    mf_step = jax.vmap(mean_field_step)

    def inner(s, n):
        if mean_field:
            return mf_step(s), None
        return two_arm_step_batch(s, jax.random.fold_in(key, n), rows), None

    def outer(s, j):
        s, _ = jax.lax.scan(inner, s, j * stride + jnp.arange(stride, dtype=jnp.uint32))
        return s, jax.nn.sigmoid(s.theta)

    s, trace = jax.lax.scan(outer, st, jnp.arange(num_records, dtype=jnp.uint32))
    return trace.T, s.theta, s.velocity


@partial(jax.jit, static_argnames=("num_records", "stride", "mean_field"))
def _trace_chunk(cfg: BanditConfig, rows, key, *, num_records: int, stride: int, mean_field: bool):
    # Each device runs its own rows (shard_map: no communication); the step key is shared by all rows and
    # each row's draws are threefry(step key, row id), so results do not depend on the device count.
    spec = PartitionSpec("configs")
    local = partial(_trace_local, num_records=num_records, stride=stride, mean_field=mean_field)
    return jax.shard_map(local, mesh=_mesh(), in_specs=(spec, spec, PartitionSpec()), out_specs=(spec, spec, spec),
                         check_vma=False)(cfg, rows, key)


def _mesh() -> Mesh:
    return Mesh(np.array(jax.devices()), ("configs",))


def _place(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array sharded by ``sharding`` whose local shards this process fills from ``host``."""
    host = host.astype(jax.dtypes.canonicalize_dtype(host.dtype), copy=False)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _to_host(x: jax.Array) -> np.ndarray:
    """The whole of a (possibly multi-process) array on this host: gathered from every process if needed."""
    if x.is_fully_addressable:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def simulate_traces(cfg: BanditConfig, rows: np.ndarray, num_steps: int, *, key, stride: int = 1,
                    chunk_size: int = 8192, mean_field: bool = False, progress=None, task=None):
    """Simulate a flat batch of configurations; return (traces (N, W), final θ, final v) as NumPy.

    Args:
        cfg: batched :class:`BanditConfig` with leading axis N (broadcast).
        rows: ``(N,)`` global row ids (a row's draws are ``threefry(fold_in(key, step), row)``).
        num_steps: steps per row (rounded down to a multiple of ``stride``).
        key: PRNG key.
        stride: record p every ``stride`` steps.
        chunk_size: rows per compiled call (rounded up to a multiple of the device count, all processes').
        mean_field: iterate the exact mean-field map instead of sampling (deterministic).
        progress, task: optional rich progress bar and task id advanced by rows.

    Several processes: every process must call it with the same arguments; each steps the rows of its own
    devices and every process returns the whole result.
    """
    n = len(rows)
    ndev = jax.device_count()
    chunk = max(1, min(int(chunk_size), n))
    chunk = int(math.ceil(chunk / ndev) * ndev)
    num_records = max(1, int(num_steps) // int(stride))
    mesh = _mesh()
    shard = NamedSharding(mesh, PartitionSpec("configs"))
    traces, thetas, vels = [], [], []
    for pad, m in padded_chunks(n, chunk):
        sub = jax.tree_util.tree_map(lambda x: _place(np.asarray(x)[pad], shard), cfg)
        r = _place(np.asarray(rows)[pad].astype(np.uint32), shard)
        tr, th, v = _trace_chunk(sub, r, key, num_records=num_records, stride=int(stride),
                                 mean_field=bool(mean_field))
        traces.append(_to_host(tr)[:m])
        thetas.append(_to_host(th)[:m])
        vels.append(_to_host(v)[:m])
        if progress is not None:
            progress.advance(task, m)
    return np.concatenate(traces), np.concatenate(thetas), np.concatenate(vels)


def run_sweep(grid: Grid, num_steps: int, *, key, stride: int | None = None, chunk_size: int = 8192,
              mean_field: bool = False, return_traces: bool = False, show_progress: bool = False,
              **measure_kw) -> SweepResult:
    """Simulate every row of ``grid`` and measure its regime beside the predicted one.

    Args:
        grid: from :func:`grpojax.sweep.make_grid`.
        num_steps: GRPO steps per row.
        key: PRNG key.
        stride: record every ``stride`` steps (default: so that ~512 points are kept).
        chunk_size: rows per compiled call (memory bound ≈ chunk · num_steps/stride floats).
        mean_field: deterministic exact mean-field map instead of the sampled simulator.
        return_traces: keep the ``(N, W)`` traces in the result.
        show_progress: rich progress bar over rows.
        **measure_kw: thresholds for :func:`grpojax.sweep._measure.measure` (late_frac, amp_tol, ...).

    Returns:
        :class:`SweepResult`. A row that diverges (NaN/inf) is flagged ``regime="diverged"``; rows are
        independent, so it never affects the others.

    Several processes (after :func:`grpojax.sweep.initialize_distributed`): every process calls it with the
    same arguments, steps the rows of its own devices, and gets the whole result, bit-identical to one
    process; write it from process 0 only (:func:`grpojax.sweep.is_primary`). The progress bar shows on
    process 0 only.

    Raises:
        ValueError: ``num_steps`` < 8, or the environment names several processes
            (``GRPOJAX_NUM_PROCESSES``) but JAX's multi-process runtime was not started.
    """
    import time

    num_steps = int(num_steps)
    if num_steps < 8:
        raise InvalidValueError(f"num_steps must be >= 8, got num_steps={num_steps}")
    check_started()
    stride = int(stride or max(1, num_steps // 512))
    N = len(grid)
    out: dict[str, np.ndarray] = {}
    traces_all = None
    t0 = time.perf_counter()
    pbar = None
    if show_progress and jax.process_index() == 0:
        from grpojax._progress import progress

        pbar = progress()
        pbar.start()
        task = pbar.add_task("sweep", total=N)
    try:
        for modes, idx in grid.groups():
            pred = predict_rows(grid.columns, idx, modes)
            c = grid.columns
            cfg = BanditConfig(pred["eta"], c["mu"][idx], c["k_ref"][idx].astype(int), c["group_size"][idx],
                               beta=pred["beta"], p_ref=pred["p_ref"], p_init=c["p_init"][idx],
                               clip_eps=c["clip_eps"][idx], adv_eps=c["adv_eps"][idx], **modes).broadcast()
            tr, th, v = simulate_traces(cfg, idx, num_steps, key=key, stride=stride, chunk_size=chunk_size,
                                        mean_field=mean_field, progress=pbar, task=task if pbar else None)
            meas = measure(tr, th, v, p_init=np.asarray(c["p_init"][idx], float), stride=stride,
                           p_star=pred["p_star"], var_pred=pred["var_pred"], **measure_kw)
            block = {**{k: c[k][idx] for k in c}, **pred, **meas}
            for k, val in block.items():
                if k not in out:
                    out[k] = np.empty(N, dtype=np.asarray(val).dtype if np.asarray(val).dtype != object else object)
                    if out[k].dtype.kind == "U":
                        out[k] = out[k].astype(object)
                out[k][idx] = val
            if return_traces:
                if traces_all is None:
                    traces_all = np.full((N, tr.shape[1]), np.nan)
                traces_all[idx] = tr
    finally:
        if pbar is not None:
            pbar.stop()
    for k, v_ in out.items():
        if v_.dtype == object:
            out[k] = v_.astype(str)
    meta = dict(num_steps=num_steps, stride=stride, rows=N, devices=jax.device_count(), processes=jax.process_count(),
                chunk_size=chunk_size, mean_field=mean_field, seconds=time.perf_counter() - t0)
    return SweepResult(out, traces_all, meta)
