"""The transformer stability atlas (``experiments/transformer_atlas.py``) and the population trainer's
``start`` / ``direction`` arguments it runs on.

Default suite (cheap): the pre-registered regime rule on synthetic trajectories; the learning-rate grid.
``slow`` (each compiles a tiny transformer, tens of seconds on 2 cores): the experiment's mean update u(θ, θ)
equals the trainer's own GRPO step on the same groups; a population started at ``start`` logs the projection
on ``direction`` and the distance from ``start`` that its final parameters give.
"""

from __future__ import annotations

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
import transformer_atlas as ta  # noqa: E402

_OVERRIDES = ["steps=2", "warmstart.steps=2", "eval.n=0", "grpo.prompts_per_step=2", "grpo.group_size=4",
              "rewards.weights={correctness: 1.0, format: 0.5}", "sampling.max_new_tokens=6",
              "model.hidden_size=16", "model.intermediate_size=32", "model.num_hidden_layers=1",
              "model.num_attention_heads=2", "model.num_key_value_heads=1", "data.n_train=50"]


def test_regime_rule_on_synthetic_trajectories():
    """Stationary AR(1) noise well inside the basin is stable; the same noise with a larger step crosses w
    and escapes; a single step past w escapes; a diverged or non-finite run escapes."""
    rng = np.random.default_rng(0)
    w = 1.0

    def ar1(a, s, n=400):
        x = np.zeros(n)
        for t in range(1, n):
            x[t] = (1 - a) * x[t - 1] + s * rng.standard_normal()
        return x

    small = ar1(0.5, 0.05)  # stationary std 0.05 / sqrt(1 - 0.25) ~ 0.058: 17 std from the edge
    assert ta.classify(small, False, w) == "stable"
    big = ar1(0.05, 0.5)  # stationary std ~ 1.6 > w: leaves the basin
    assert ta.classify(big, False, w) == "escaped"
    one = small.copy()
    one[123] = -1.01 * w
    assert ta.classify(one, False, w) == "escaped"
    assert ta.classify(small, True, w) == "escaped"
    bad = small.copy()
    bad[-1] = np.nan
    assert ta.classify(bad, False, w) == "escaped"


def test_lr_grid_covers_eta_star_and_the_escape_onset():
    g = ta.lr_grid(0.016, 16)
    assert g[0] == pytest.approx(0.004) and g[-1] == pytest.approx(10.0) and len(g) == 16
    assert np.all(np.diff(np.log(g)) > 0)
    assert ta.lr_grid(0.5, 8)[0] == pytest.approx(0.1)
    assert ta.lr_grid(0.0, 4)[0] == pytest.approx(0.1)


@pytest.fixture(scope="module")
def tiny():
    import tempfile

    from grpojax.grpo import apply_overrides, load_config
    from grpojax.grpo._population import WarmStart
    from grpojax.grpo._trainer import GRPOTrainer

    cfg = apply_overrides(load_config("tiny-arith"), _OVERRIDES)
    with tempfile.TemporaryDirectory() as tmp:
        tr = GRPOTrainer(cfg, tmp, devices=jax.devices()[:1])
    params = jax.device_get(tr.params)
    return cfg, WarmStart(tr.graphdef, params, jax.device_get(tr.rest), tr)


@pytest.mark.slow
def test_mean_update_equals_the_trainers_grpo_step(tiny):
    """u(θ, θ) on fixed groups == minus the gradient the trainer's ``grpo_step`` takes on the same batch
    (plain SGD at lr 1: the parameter change), at a θ away from the reference."""
    import optax

    from grpojax.grpo._logprobs import completion_logprobs
    from grpojax.grpo._step import RolloutBatch
    from grpojax.grpo._update import LossSettings, grpo_step
    from flax import nnx

    cfg, warm = tiny
    theta = jax.tree.map(lambda a: a + 0.05 * jax.random.normal(jax.random.key(3), a.shape, a.dtype), warm.params)
    groups = ta.sample_groups(warm, cfg, theta, 6, seed=1)
    u, _, group_grads = ta.update_fns(warm, cfg, groups, theta)
    mine = u(theta, theta)
    graphdef, rest = warm.graphdef, warm.rest
    ref = completion_logprobs(nnx.merge(graphdef, warm.params, rest), groups["prompts"], groups["pmask"],
                              groups["comp"], temperature=cfg.sampling.temperature)[0]
    batch = RolloutBatch(groups["prompts"], groups["pmask"], groups["comp"], groups["cmask"], jnp.zeros_like(ref),
                         ref, groups["adv"])
    step = grpo_step(graphdef, optax.sgd(1.0), aggregation=cfg.grpo.aggregation, use_ref=True,
                     temperature=cfg.sampling.temperature)
    new, _, m = step(theta, optax.sgd(1.0).init(theta), rest, batch, jnp.asarray(True),
                     LossSettings(beta=ta.BETA, eps_low=ta.CLIP, eps_high=ta.CLIP))
    for a, b, t in zip(jax.tree.leaves(mine), jax.tree.leaves(new), jax.tree.leaves(theta)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b - t), rtol=2e-3, atol=1e-6)
    # the per-group gradients average to the same update
    g = np.asarray(group_grads(theta)).mean(0)
    flat = np.concatenate([np.asarray(x).ravel() for x in jax.tree.leaves(mine)])
    assert np.abs(flat).max() > 1e-4  # a real update, not zero == zero
    np.testing.assert_allclose(-g, flat, rtol=2e-3, atol=1e-6)


@pytest.mark.slow
def test_population_start_and_direction(tiny):
    """Members started at ``start`` log param_proj = <θ_T − start, d> and param_dist = ‖θ_T − start‖, the values
    their returned final parameters give; a start of the wrong shape is a one-line error."""
    from grpojax._errors import InvalidValueError
    from grpojax.grpo import Member, train_population

    cfg, warm = tiny
    start = jax.tree.map(lambda a: a + 0.01, warm.params)
    d = jax.tree.map(lambda a: jax.random.normal(jax.random.key(a.size), a.shape, a.dtype), warm.params)
    ms = [Member(lr=0.5, beta=0.1, seed=0), Member(lr=0.05, momentum=0.9, k_ref=2, beta=0.1, seed=1)]
    res = train_population(cfg, ms, None, kl_reference="initial", warm=warm, start=start, direction=d,
                           show_progress=False)
    for j in range(2):
        fin = jax.tree.map(lambda a: a[j], res.params)
        diff = [np.asarray(f, np.float64) - np.asarray(s, np.float64) for f, s in
                zip(jax.tree.leaves(fin), jax.tree.leaves(start))]
        proj = sum(float((x * np.asarray(v, np.float64)).sum()) for x, v in zip(diff, jax.tree.leaves(d)))
        dist = float(np.sqrt(sum((x * x).sum() for x in diff)))
        assert dist > 0
        assert res.metrics["param_proj"][-1, j] == pytest.approx(proj, rel=1e-3, abs=1e-5)
        assert res.metrics["param_dist"][-1, j] == pytest.approx(dist, rel=1e-3)
    wrong = jax.tree.map(lambda a: a[..., :1], warm.params)
    with pytest.raises(InvalidValueError, match="start is not a tree"):
        train_population(cfg, ms, None, warm=warm, start=wrong, show_progress=False)


def test_logistic_onset_recovers_a_known_midpoint():
    """Runs drawn from a logistic law in log eta with midpoint 0.05: the fitted onset's bootstrap interval covers
    0.05 and is narrow; near-separable data (the case Newton without step control gets wrong) give the boundary."""
    rng = np.random.default_rng(1)
    rel = np.repeat(np.geomspace(0.003, 10, 16), 8)
    p = 1 / (1 + np.exp(-4.0 * (np.log(rel) - np.log(0.05))))
    y = rng.random(rel.size) < p
    est, lo, hi = ta.logistic_onset(np.log(rel), y, n_boot=100)
    assert lo <= 0.05 <= hi and hi / lo < 3
    assert abs(np.log(est / 0.05)) < np.log(1.5)
    sep = rel > 0.012  # every run above 0.012 escaped, none below
    est, _, _ = ta.logistic_onset(np.log(rel), sep, n_boot=20)
    assert 0.0095 < est < 0.0164  # between the last stable and the first escaped learning rate
    assert ta.logistic_onset(np.log(rel), np.zeros(rel.size, bool), n_boot=5)[0] == np.inf
    assert ta.logistic_onset(np.log(rel), np.ones(rel.size, bool), n_boot=5)[0] == 0.0


def test_with_seeds_replicates_every_planned_run_and_keeps_its_prediction():
    runs = [dict(prompt_set="a", schedule="constant", mu=0.0, k_ref=1, eta_rel=r, seed=s, p_escape=r / 10)
            for r in (0.1, 1.0) for s in (0, 1)]
    pred = ta.with_seeds(dict(runs=runs, steps=5), 3)
    assert len(pred["runs"]) == 6 and pred["steps"] == 5
    assert sorted((r["eta_rel"], r["seed"]) for r in pred["runs"]) == [(x, s) for x in (0.1, 1.0) for s in range(3)]
    assert all(r["p_escape"] == r["eta_rel"] / 10 for r in pred["runs"])


@pytest.mark.slow  # the quick atlas twice and a throughput check: several minutes on 2 cores
def test_device_script_runs_on_cpu_with_a_tiny_population(tmp_path):
    import os
    import subprocess

    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, OUT=str(tmp_path), TINY="1", PYTHON=sys.executable, JAX_PLATFORMS="cpu")
    done = subprocess.run(["bash", "benchmarks/device_transformer_atlas.sh"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    import json

    summary = json.loads((tmp_path / "transformer_atlas" / "summary.json").read_text())
    runs = json.loads((tmp_path / "transformer_atlas" / "runs.json").read_text())
    planned = json.loads((tmp_path / "transformer_atlas" / "predictions.json").read_text())["runs"]
    assert len(runs) == 3 * len({(r["mu"], r["k_ref"], r["eta_rel"]) for r in planned})
    assert summary["scores"]["n"] == len(runs)
    tp = json.loads((tmp_path / "population_throughput_device.json").read_text())
    assert [r["n"] for r in tp["rows"]] == [4, 16]
    assert "wall" in (tmp_path / "device_transformer_atlas.txt").read_text()
