"""EasyR1's metric names (a verl fork): the reward function's ``reward/overall`` is the train reward,
``val/reward_score`` the eval reward. Built here from synthetic values, read without flags."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np

from grpojax.logs import LogWarning, read_log

STEPS = list(range(1, 31))
VAL_STEPS = [10, 20, 30]


def curve(s):
    return round(0.7 - 0.5 * math.exp(-s / 12.0), 6)


def test_easyr1_reward_overall_and_val_reward_score(tmp_path):
    rows = []
    for s in STEPS:
        r = {"step": s, "reward/overall": curve(s), "reward/format": 0.9, "reward/accuracy": curve(s) - 0.05,
             "actor/entropy_loss": 0.8 - 0.01 * s, "actor/kl_loss": 0.001 * s, "actor/grad_norm": 0.3,
             "actor/lr": 1e-6, "response_length/mean": 400.0 + s}
        if s in VAL_STEPS:
            r.update({"val/reward_score": curve(s) - 0.1, "val/overall_reward": curve(s) - 0.1})
        rows.append(r)
    p = tmp_path / "experiment_log.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        run = read_log(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    vs, vv = run.series("eval_reward")
    np.testing.assert_array_equal(vs, VAL_STEPS)
    np.testing.assert_allclose(vv, [curve(s) - 0.1 for s in VAL_STEPS])
    assert run.report.mapped["reward_mean"] == "reward/overall"
    assert run.report.mapped["eval_reward"] == "val/reward_score"
    assert run.has("reward/accuracy")  # per-function rewards keep their names
