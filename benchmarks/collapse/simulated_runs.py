"""The runs of ``score_simulated.py`` and their labels: the rule of ``simulated_rule.md``, in code.

Three families, each a list of canonical grpojax run logs with a label fixed by how the run was made or
measured, never by ``grpojax.diagnose``:

- ``atlas_runs``: the policy-network stability atlas (``experiments/network_stability_atlas.py``: its
  ``run_atlas`` against the committed ``predictions.json`` and its ``save_logs``); label from the measured
  regime of the atlas's own rule (``RULE_TEXT``), onset from the policy's distance to the plateau;
- ``bandit_runs``: the two-arm softmax bandit (``grpojax.bandit.rollout_log`` over the rows of a
  ``grpojax.sweep.make_grid`` grid, with the sweep's own predictions), label from the sweep's measured regime
  (``grpojax.sweep.measure`` on the exact expected reward);
- ``simulated_runs``: the collapse simulator of the test suite (``tests/test_collapse.py::_collapsing``)
  drawn over a stated design: collapses, and four kinds of controls with the same noise.

Labels are ``"collapse"``, ``"control"`` or ``None`` (not scored: neither a collapse nor a control by the rule).
"""

from __future__ import annotations

import json
import math
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from label_rule import label_curve  # noqa: E402

# ---------------------------------------------------------------------------------------------- the rule
ATLAS_LABELS = {"diverged": "collapse", "stable": "control", "oscillating": None, "drifting": None}
"""Measured atlas regime -> label: diverged (the policy left the plateau's basin, late mean TV > 0.5, or went
non-finite) is a collapse; stable is a control; oscillating / drifting (unstable, still near the basin) are
neither."""
ATLAS_TV_OUT = 0.25
"""An atlas collapse starts at the step from which the policy's mean TV distance to the plateau policy stays
above this (half of the regime rule's 0.5), or at its first non-finite update when that is earlier."""
BANDIT_LOW = 0.5
"""A bandit run that escaped (regime ``collapsed``) with a late mean expected reward below this escaped to
p -> 0: it lost its whole rise and stays there (a collapse); above it, it escaped to p -> 1 (a control)."""


def atlas_label(regime: str) -> str | None:
    """The label of a measured atlas regime (``ATLAS_LABELS``)."""
    if regime not in ATLAS_LABELS:
        raise ValueError(f"unknown atlas regime {regime!r}; expected one of {sorted(ATLAS_LABELS)}")
    return ATLAS_LABELS[regime]


def atlas_onset(tv, alive, steps) -> float:
    """The step from which the TV distance to the plateau policy stays above ``ATLAS_TV_OUT`` (the first step
    when it never was at or below it), or the first step whose update was non-finite if earlier."""
    tv = np.asarray(tv, float)
    alive = np.asarray(alive, float)
    steps = np.asarray(steps)
    if not (tv.shape == alive.shape == steps.shape) or tv.ndim != 1 or tv.size == 0:
        raise ValueError(f"tv, alive and steps must be 1-d of one length, got {tv.shape}, {alive.shape}, "
                         f"{steps.shape}")
    dead = np.flatnonzero(alive <= 0)
    end = int(dead[0]) if dead.size else tv.size
    inside = np.flatnonzero(~(tv[:end] > ATLAS_TV_OUT))
    k = int(inside[-1]) + 1 if inside.size else 0
    return float(steps[min(k, end, tv.size - 1)])


def bandit_label(regime: str, late_mean: float) -> str | None:
    """The label of a measured bandit regime (``grpojax.sweep.MEASURED_REGIMES``): ``collapsed`` to p -> 0 is
    a collapse, ``diverged`` (non-finite: a numerical blow-up, its own finding) is not scored, the rest
    (overdamped, oscillatory, limit cycle, escaped to p -> 1) are controls."""
    from grpojax.sweep import MEASURED_REGIMES

    if regime not in MEASURED_REGIMES:
        raise ValueError(f"unknown bandit regime {regime!r}; expected one of {list(MEASURED_REGIMES)}")
    if regime == "diverged":
        return None
    if regime == "collapsed":
        return "collapse" if late_mean < BANDIT_LOW else "control"
    return "control"


# ------------------------------------------------------------------------------------------ the atlas
def atlas_runs(folder: pathlib.Path, quick: bool = False, log=print):
    """Run the atlas (1,080 runs x 400 steps; ``quick``: its 360 x 200-step quick grid), save every run as a
    canonical JSONL log in ``folder/runs`` and return ``[(path, info)]``, ``info`` with the cell, the
    measured regime, the label and the onset."""
    sys.path.insert(0, str(ROOT / "experiments"))
    import network_stability_atlas as atlas

    pred = json.loads((ROOT / "experiments" / "results" / "network_stability_atlas.predictions.json").read_text())
    ctx = atlas.context_from(pred)
    rows, outs, steps, wall = atlas.run_atlas(pred, ctx, folder, quick, log=log)
    paths = atlas.save_logs(rows, outs, steps, folder)
    step_axis = np.arange(1, steps + 1)
    out = []
    for i, (p, r) in enumerate(zip(paths, rows)):
        lab = atlas_label(r["measured"])
        out.append((p, dict(family="atlas", cell=f"{r['rule']}/{r['optimizer']}/K{r['k_ref']}",
                            optimizer=r["optimizer"], eta_rel=r["eta_rel"], seed=r["seed"], regime=r["measured"],
                            label=lab, label_onset=atlas_onset(outs["tv"][i], outs["alive"][i], step_axis)
                            if lab == "collapse" else None)))
    return out, dict(runs=len(rows), steps=steps, program_wall_s=wall)


# ------------------------------------------------------------------------------------------ the bandit
BANDIT_GRID = dict(eta_rel=list(np.round(np.geomspace(0.3, 10.0, 8), 4)), k_ref=[1, 4, 16], mu=[0.0, 0.9],
                   group_size=[8, 64], p_star=0.8, p_init=0.2, replica=[0, 1])
BANDIT_STEPS = 1000
BANDIT_COLUMNS = ("reward_mean", "reward_std", "frac_zero_std", "eval_reward", "entropy", "kl", "grad_norm", "lr",
                  "is_ratio_mean", "is_ratio_max", "clip_frac")


def bandit_runs(folder: pathlib.Path, quick: bool = False, log=print):
    """The two-arm bandit grid ``BANDIT_GRID`` (quick: one replica, 500 steps), every row simulated by
    ``rollout_log`` (one vmapped call per static-mode group), its regime measured by ``grpojax.sweep.measure``
    on the exact expected reward (``rollout_log`` returns no velocity: finiteness is judged on p and the
    logit), saved as canonical JSONL logs in ``folder/bandit``; returns ``[(path, info)]``."""
    import time

    import jax

    from grpojax.bandit import BanditConfig, rollout_log
    from grpojax.logs import RunLog, write_jsonl
    from grpojax.sweep import make_grid, measure
    from grpojax.sweep._predict import predict_rows

    axes = dict(BANDIT_GRID, replica=[0]) if quick else BANDIT_GRID
    n_steps = 500 if quick else BANDIT_STEPS
    grid = make_grid(**axes)
    c = grid.columns
    (folder / "bandit").mkdir(parents=True, exist_ok=True)
    out = []
    t0 = time.perf_counter()
    for modes, idx in grid.groups():
        pred = predict_rows(c, idx, modes)
        cfg = BanditConfig(pred["eta"], c["mu"][idx], c["k_ref"][idx].astype(int), c["group_size"][idx],
                           beta=pred["beta"], p_ref=pred["p_ref"], p_init=c["p_init"][idx],
                           clip_eps=c["clip_eps"][idx], adv_eps=c["adv_eps"][idx], **modes).broadcast()
        keys = jax.random.split(jax.random.key(20261205), len(idx))
        logs = jax.vmap(lambda cf, k: rollout_log(cf, n_steps, key=k))(cfg, keys)
        logs = {k: np.asarray(v) for k, v in logs.items()}
        m = measure(logs["p"], logs["theta"][:, -1], np.zeros(len(idx)), p_init=np.asarray(c["p_init"][idx], float),
                    stride=1, p_star=pred["p_star"], var_pred=pred["var_pred"])
        for j, i in enumerate(idx):
            regime, late = str(m["regime"][j]), float(m["late_mean"][j])
            lab = bandit_label(regime, late)
            onset = None
            if lab == "collapse":  # the committed rule of README.md on the exact (noise-free) expected reward
                got = label_curve(logs["step"][j], logs["p"][j])
                onset = got["onset"] if got else None
            name = (f"bandit-mu{c['mu'][i]:g}-k{int(c['k_ref'][i])}-G{int(c['group_size'][i])}-"
                    f"rel{c['eta_rel'][i]:.3f}-r{int(c['replica'][i])}")
            run = RunLog.from_columns({k: logs[k][j].astype(float) for k in BANDIT_COLUMNS}, steps=logs["step"][j],
                                      name=name, meta=dict(trainer="two-arm bandit", measured_regime=regime,
                                                           eta=float(pred["eta"][j]), mu=float(c["mu"][i]),
                                                           k_ref=int(c["k_ref"][i]),
                                                           group_size=int(c["group_size"][i])))
            p = folder / "bandit" / f"{name}.jsonl"
            write_jsonl(p, run)
            out.append((p, dict(family="bandit", cell=f"mu{c['mu'][i]:g}/K{int(c['k_ref'][i])}/G{int(c['group_size'][i])}",
                                eta_rel=float(c["eta_rel"][i]), regime=regime, late_mean=late, label=lab,
                                label_onset=onset)))
    return out, dict(runs=len(grid), steps=n_steps, simulate_wall_s=time.perf_counter() - t0)


# ------------------------------------------------------------------------------------------ simulated families
SIM_DESIGN = dict(n=(200, 400, 1000), onset_frac=(0.5, 0.7, 0.85), noise=(0.02, 0.05, 0.1),
                  fall_frac=(0.005, 0.02, 0.05), lost=(0.6, 0.8, 1.0), small_lost=(0.2, 0.35),
                  precursor=(None, "entropy", "response_length", "kl", "grad_norm"))
"""The draws (uniform over each tuple, numpy ``default_rng(0)``). ``lost``: the fraction of the rise the fall
takes away (of a collapse, a slow decline and a recovering fall); ``small_lost``: that of a small drop."""
SIM_KINDS = {"collapse": "collapse", "flat": "control", "small_drop": "control", "slow_decline": "control",
             "recovers": "control"}


def _simulator():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_collapse import _collapsing

    return _collapsing


def simulated_run(kind: str, rng: np.random.Generator, seed: int):
    """One simulated run of ``kind`` (``SIM_KINDS``) with its parameters drawn from ``SIM_DESIGN`` by ``rng``
    and its noise from ``seed``: ``(RunLog, info)``. The reward rises from 0.1 towards 0.7 (time constant
    n/8) and, from index ``onset``:

    - collapse: falls linearly over ``max(2, round(fall_frac n))`` points by ``lost`` of its rise
      (``level - lost (level - 0.1)``, ``level`` the value before the fall) and stays there;
    - flat: stays at ``level`` (a plateau);
    - small_drop: as a collapse, losing ``small_lost`` of the rise (less than half);
    - slow_decline: loses ``lost`` of the rise over ``round(0.35 n)`` points (onset at 0.5 or 0.55 n);
    - recovers: as a collapse (onset at 0.5 or 0.7 n), then ``round(0.05 n)`` points after the fall's end
      returns linearly, over ``round(0.05 n)`` points, to the curve of the flat run with the same noise.

    Entropy, response length, KL and grad norm are logged with their own noise; the precursor metric (if any)
    jumps ``max(1, round(0.05 n))`` points before ``onset`` (the simulator's precursor: entropy -0.3,
    length x0.4, KL +0.2, grad norm x20), in controls too."""
    if kind not in SIM_KINDS:
        raise ValueError(f"unknown simulated kind {kind!r}; expected one of {sorted(SIM_KINDS)}")
    collapsing = _simulator()
    d = SIM_DESIGN
    pick = lambda k: d[k][int(rng.integers(len(d[k])))]  # noqa: E731
    n, noise, pre = pick("n"), pick("noise"), pick("precursor")
    u = {"slow_decline": (0.5, 0.55), "recovers": (0.5, 0.7)}.get(kind) or d["onset_frac"]
    u = u[int(rng.integers(len(u)))]
    onset = int(round(u * n))
    fall = max(2, int(round(pick("fall_frac") * n)))
    lost = pick("small_lost") if kind == "small_drop" else pick("lost")
    if kind == "slow_decline":
        fall = int(round(0.35 * n))
    t = np.arange(n, dtype=float)
    level = 0.1 + 0.6 * (1 - math.exp(-(onset - 1) / (n / 8)))  # the simulator's curve before the fall
    floor = level if kind == "flat" else level - lost * (level - 0.1)
    lead = max(1, int(round(0.05 * n)))
    precursors = {pre: lead} if pre else None
    run, onset_step, _ = collapsing(n=n, onset=onset, fall=1 if kind == "flat" else fall, noise=noise, seed=seed,
                                    floor=floor, precursors=precursors)
    if kind == "recovers":
        flat, _, _ = collapsing(n=n, onset=onset, fall=1, noise=noise, seed=seed, floor=level,
                                precursors=precursors)
        a = onset + fall + lead
        w = np.clip((t - a) / lead, 0.0, 1.0)
        cols = dict(run.columns)
        cols["reward_mean"] = (1 - w) * run.columns["reward_mean"] + w * flat.columns["reward_mean"]
        run = type(run).from_columns(cols, steps=run.steps, name=run.name)
    label = SIM_KINDS[kind]
    info = dict(family="simulated", cell=kind, kind=kind, n=n, noise=noise, precursor=pre or "none",
                onset_frac=u, fall_points=fall, lost=0.0 if kind == "flat" else lost, label=label,
                label_onset=float(onset_step) if label == "collapse" else None)
    return run, info


def simulated_runs(folder: pathlib.Path, quick: bool = False):
    """240 collapses and 60 of each control kind (quick: 40 and 10), drawn in a fixed order from
    ``default_rng(0)``, saved as canonical JSONL logs in ``folder/simulated``; returns ``[(path, info)]``."""
    from grpojax.logs import write_jsonl

    counts = {"collapse": 40 if quick else 240, **{k: 10 if quick else 60 for k in SIM_KINDS if k != "collapse"}}
    rng = np.random.default_rng(0)
    (folder / "simulated").mkdir(parents=True, exist_ok=True)
    out = []
    seed = 0
    for kind, cnt in counts.items():
        for _ in range(cnt):
            run, info = simulated_run(kind, rng, seed)
            p = folder / "simulated" / f"sim-{kind}-{seed}.jsonl"
            write_jsonl(p, type(run).from_columns(dict(run.columns), steps=run.steps, name=p.stem,
                                                  meta=dict(trainer="simulated collapse family", **info)))
            out.append((p, info))
            seed += 1
    return out, dict(runs=len(out))
