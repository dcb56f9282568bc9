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
