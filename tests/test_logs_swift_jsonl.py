"""ms-swift's ``logging.jsonl``: JSON lines whose step is the progress text ``global_step/max_steps``.

ms-swift writes one line per logging step (``"global_step/max_steps": "10/40"``, beside ``percentage``,
``elapsed_time`` ... as text), eval lines of their own at the same step, and closes the file with a
summary line holding ``global_step`` and a copy of the whole ``log_history``. Built here from synthetic
values; read without flags, the steps are the logged ones, not row numbers, and the summary line's
``log_history`` does not make the file a ``trainer_state.json``.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np

from grpojax.logs import LogWarning, detect_format, read_log

STEPS = [5, 10, 15, 20, 25, 30, 35, 40]
EVAL_STEPS = [20, 40]


def curve(s):
    return round(0.8 - 0.6 * math.exp(-s / 15.0), 6)


def _write(path, *, summary: bool):
    lines = []
    for s in STEPS:
        lines.append({"loss": 0.001 * s, "grad_norm": 0.5, "learning_rate": 1e-6, "reward": curve(s),
                      "reward_std": 0.3, "frac_reward_zero_std": 0.25, "rewards/AccuracyORM/mean": curve(s),
                      "kl": 0.0001 * s, "completions/mean_length": 200.0 + s, "epoch": s / 40,
                      "global_step/max_steps": f"{s}/40", "percentage": f"{100 * s / 40:.2f}%",
                      "elapsed_time": f"{s}m", "remaining_time": f"{40 - s}m", "memory(GiB)": 20.5,
                      "train_speed(iter/s)": 0.1})
        if s in EVAL_STEPS:
            lines.append({"eval_loss": 0.1, "eval_reward": curve(s) - 0.05, "epoch": s / 40,
                          "global_step/max_steps": f"{s}/40", "percentage": f"{100 * s / 40:.2f}%",
                          "elapsed_time": f"{s}m", "remaining_time": f"{40 - s}m"})
    if summary:
        lines.append({"train_runtime": 600.0, "train_loss": 0.02, "epoch": 1.0, "global_step/max_steps": "40/40"})
        lines.append({"last_model_checkpoint": "/out/checkpoint-40", "best_metric": None, "global_step": 40,
                      "log_history": [{"loss": 0.005, "reward": curve(5), "step": 5}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


def _read(p):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        return read_log(p)


def test_swift_logging_jsonl_steps_from_progress_text(tmp_path):
    p = tmp_path / "logging.jsonl"
    _write(p, summary=False)
    run = _read(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    es, ev = run.series("eval_reward")
    np.testing.assert_array_equal(es, EVAL_STEPS)
    np.testing.assert_allclose(ev, [curve(s) - 0.05 for s in EVAL_STEPS])
    assert run.report.step_key == "global_step/max_steps"
    assert run.meta["mapping"]["frac_zero_std"] == "frac_reward_zero_std"


def test_swift_summary_line_with_log_history_stays_json_lines(tmp_path):
    p = tmp_path / "logging.jsonl"
    _write(p, summary=True)
    assert detect_format(p) != "trl_state"
    run = _read(p)
    np.testing.assert_array_equal(run.steps, STEPS)  # the summary's global_step is no step column
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    assert run.report.step_key == "global_step/max_steps"
