"""Learning-rate schedules in the population trainer (``train_population(schedule=, warmup_steps=)``).

Default suite (cheap): bad schedule input is one line naming the value (function and population file).

``slow`` (each compiles the population program): the logged and the applied learning rate of every member
equal its peak ``lr`` times :func:`grpojax.dynamics.schedule_shape` at every step, for each schedule (the applied
rate read from plain SGD: ``|update| = lr_t |grad|``); a scheduled population equals the same members run
unbatched.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

_OVERRIDES = ["steps=6", "warmstart.steps=20", "eval.n=0", "grpo.prompts_per_step=2", "grpo.group_size=4",
              "rewards.weights={correctness: 1.0, format: 0.5}", "sampling.max_new_tokens=12",
              "model.hidden_size=32", "model.intermediate_size=64", "model.num_hidden_layers=1",
              "model.num_attention_heads=2", "model.num_key_value_heads=1"]


def _cfg(*extra):
    from grpojax.grpo import apply_overrides, load_config

    return apply_overrides(load_config("tiny-arith"), _OVERRIDES + list(extra))


@pytest.mark.parametrize("kw, shown", [
    (dict(schedule="cosin"), "'cosin'"), (dict(schedule=None), "None"),
    (dict(warmup_steps=-1), "-1"), (dict(warmup_steps=1.5), "1.5"), (dict(warmup_steps="two"), "'two'"),
    (dict(warmup_steps=True), "True")])
def test_bad_schedule_input_is_one_line_naming_the_value(kw, shown):
    from grpojax import ConfigError
    from grpojax.grpo import Member, train_population

    with pytest.raises(ConfigError) as exc:
        train_population(_cfg(), [Member(lr=0.1)], None, show_progress=False, **kw)
    msg = str(exc.value)
    assert "\n" not in msg and shown in msg and next(iter(kw)) in msg


@pytest.mark.parametrize("line, key", [("schedule: cosin", "schedule"), ("warmup_steps: -2", "warmup_steps")])
def test_population_file_bad_schedule_is_one_line_naming_the_key(tmp_path, line, key):
    from grpojax import ConfigError
    from grpojax.grpo._population_spec import load_population_spec

    p = tmp_path / "pop.yaml"
    p.write_text(f"config: tiny-arith\n{line}\nmembers:\n  - {{lr: 0.01}}\n")
    with pytest.raises(ConfigError) as exc:
        load_population_spec(p)
    assert "\n" not in str(exc.value) and key in str(exc.value)


def test_population_file_passes_the_schedule(tmp_path):
    from grpojax.grpo._population_spec import load_population_spec

    p = tmp_path / "pop.yaml"
    p.write_text("config: tiny-arith\nschedule: cosine\nwarmup_steps: 3\nmembers:\n  - {lr: 0.01}\n")
    spec, _, _ = load_population_spec(p)
    assert (spec.schedule, spec.warmup_steps) == ("cosine", 3)


@pytest.fixture(scope="module")
def warm():
    from grpojax.grpo import Member, train_population

    return train_population(_cfg("steps=1"), [Member(lr=0.01)], None, show_progress=False).warm


# (population schedule, warmup) -> the same shape as the model side names it
_CASES = [("cosine", 2, "cosine"), ("linear", 0, "linear"), ("constant", 2, "constant_with_warmup"),
          ("constant", 0, "constant")]


@pytest.mark.slow
@pytest.mark.parametrize("schedule, warmup, shape", _CASES)
def test_logged_and_applied_lr_are_peak_times_schedule_shape(warm, tmp_path, schedule, warmup, shape):
    from grpojax.dynamics import schedule_shape
    from grpojax.grpo import Member, train_population

    peaks = np.array([0.05, 0.2])
    members = [Member(lr=float(lr), momentum=0.0, seed=i) for i, lr in enumerate(peaks)]
    res = train_population(_cfg(), members, tmp_path, optimizer="sgd", schedule=schedule, warmup_steps=warmup,
                           chunk=4, show_progress=False, warm=warm)
    want = peaks[None, :] * schedule_shape(shape, 6, warmup_steps=warmup)[:, None]
    np.testing.assert_allclose(res.metrics["lr"], want, rtol=1e-6, atol=1e-9)
    # applied: plain SGD without clipping moves the parameters by lr_t times the gradient
    g = res.metrics["grad_norm"]
    assert (g > 0).sum() >= 6  # steps where every group had the same reward have no gradient
    np.testing.assert_allclose(res.metrics["update_norm"], want * g, rtol=1e-4, atol=1e-8)
    for j, m in enumerate(res.members):  # and each member's log says the same
        lines = (tmp_path / "members" / m.name / "metrics.jsonl").read_text().splitlines()
        rows = [json.loads(x) for x in lines[1:]]
        logged = {r["step"]: r["lr"] for r in rows if "lr" in r}
        np.testing.assert_allclose([logged[t] for t in range(1, 7)], want[:, j], rtol=1e-6, atol=1e-9)
    header = json.loads(lines[0])
    assert json.dumps(header).count(schedule) >= 1
    if schedule == "constant" and warmup == 0:  # the member's lr itself, bit for bit
        np.testing.assert_array_equal(res.metrics["lr"], np.broadcast_to(peaks.astype(np.float32), (6, 2)))


@pytest.mark.slow
def test_scheduled_population_equals_members_run_unbatched(warm):
    from grpojax.grpo import Member, train_population

    members = [Member(lr=0.05, momentum=0.9, k_ref=2, seed=1), Member(lr=0.1, k_ref=1, beta=0.1, seed=2),
               Member(lr=0.03, k_ref=1, seed=3, rule="unclipped")]
    kw = dict(schedule="cosine", warmup_steps=2, chunk=4, show_progress=False, warm=warm)
    pop = train_population(_cfg(), members, None, **kw)
    seq = train_population(_cfg(), members, None, batched=False, **kw)
    assert not pop.diverged.any() and np.all(pop.metrics["param_dist"][-1] > 1e-4)
    for k in pop.metrics:
        np.testing.assert_allclose(pop.metrics[k], seq.metrics[k], rtol=1e-4, atol=2e-5, equal_nan=True, err_msg=k)
    for x, y in zip(jax.tree.leaves(pop.params), jax.tree.leaves(seq.params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=2e-5)
