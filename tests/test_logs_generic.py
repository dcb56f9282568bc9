"""The generic readers: every tabular layout a user may hold, built here from synthetic values.

Each test writes a small file (or run folder) in a layout of its own, reads it without flags and
compares what was read with the values written: the reward, the mapped columns, the steps, the run
split, the facts taken into the meta and the read report's counts.
"""

from __future__ import annotations

import csv
import json
import math
import warnings

import numpy as np
import pytest

from grpojax.logs import LogFormatError, LogWarning, detect_format, read_log, read_logs


def curve(s, shift=0.0):
    return round(shift + 0.8 - 0.6 * math.exp(-s / 25.0), 6)


def _quiet(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        return fn(*a, **kw)


STEPS = list(range(1, 41))


def _step_rows():
    return [{"step": s, "reward": curve(s), "accuracy": curve(s) - 0.1, "loss": 0.01 * s, "grad_norm": 1.0 + 0.01 * s,
             "reward_std": 0.3} for s in STEPS]


# ------------------------------------------------------------------------------------------ JSON tables
def test_json_list_of_step_dicts(tmp_path):
    p = tmp_path / "step_stat_history.json"
    p.write_text(json.dumps(_step_rows()))
    assert detect_format(p) == "json"
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    np.testing.assert_allclose(run.columns["grad_norm"], [1.0 + 0.01 * s for s in STEPS])
    assert run.meta["mapping"]["reward_mean"] == "reward" and run.has("reward_std")
    assert run.has("accuracy")  # a lower-priority alias of the reward: kept under its name when reward exists
    assert run.report.step_key == "step" and run.report.format == "json"


def test_json_dict_of_lists(tmp_path):
    p = tmp_path / "history.json"
    p.write_text(json.dumps({"iteration": STEPS, "mean_reward": [curve(s) for s in STEPS],
                             "kl_div": [0.001 * s for s in STEPS], "model": "tiny"}))
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    np.testing.assert_allclose(run.columns["kl"], [0.001 * s for s in STEPS])
    assert run.report.mapped == {"reward_mean": "mean_reward", "kl": "kl_div"}
    assert run.report.step_key == "iteration"


def test_run_folder_history_eval_and_args(tmp_path):
    """step_stat_history.json + eval_history.json + args.json: one run, eval joined, G/lr/epochs in the meta."""
    d = tmp_path / "run_g5"
    d.mkdir()
    (d / "step_stat_history.json").write_text(json.dumps(_step_rows()))
    evals = [{"step": s, "accuracy": curve(s, -0.2), "n": 100} for s in range(0, 41, 10)]
    (d / "eval_history.json").write_text(json.dumps(evals))
    (d / "args.json").write_text(json.dumps({"model": "m", "num_generations": 5, "learning_rate": 1e-6,
                                              "trainer": {"num_iterations": 2, "beta": 0.04}}))
    [run] = read_logs(d)
    assert run.name == "run_g5"
    np.testing.assert_allclose(run.series("reward_mean")[1], [curve(s) for s in STEPS])
    es, ev = run.series("eval_reward")
    np.testing.assert_array_equal(es, [0, 10, 20, 30, 40])
    np.testing.assert_allclose(ev, [curve(s, -0.2) for s in es])
    assert run.meta["group_size"] == 5 and run.meta["lr"] == 1e-6
    assert run.meta["epochs_per_rollout"] == 2 and run.meta["kl_coef"] == 0.04
    rep = run.report
    assert rep.hyperparameters["group_size"] == 5 and "args.json" in rep.hyperparameters_from
    assert "eval_history.json" in rep.explain()
    # the history file alone reads too, and takes the facts of args.json beside it
    alone = read_log(d / "step_stat_history.json")
    assert alone.meta["group_size"] == 5 and not alone.has("eval_reward")


# ----------------------------------------------------------------------------------------------- JSONL
def test_jsonl_nested_metrics_free_text_and_question_rows(tmp_path):
    """A title line, {"step": n, "logs": {...}} lines and per-question rows in between."""
    lines = ["Training run 7: GRPO on arithmetic (free text)"]
    for s in STEPS:
        lines.append(json.dumps({"step": s, "logs": {"score": curve(s), "policy_entropy": 1.0 / s}}))
        for q in range(3):
            lines.append(json.dumps({"question": f"what is {q}+{s}?", "completion": str(q + s), "reward": 1.0}))
    lines.append("training finished")
    p = tmp_path / "train_output.txt"
    p.write_text("\n".join(lines) + "\n")
    assert detect_format(p) == "jsonl"
    with pytest.warns(LogWarning, match="skipped 2 of"):
        run = read_log(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    np.testing.assert_allclose(run.columns["entropy"], [1.0 / s for s in STEPS])
    rows = run.report.skipped_rows
    assert rows["lines that are not JSON"] == {"count": 2, "first_line": 1}
    assert rows["per-sample rows (question/completion text, no step)"]["count"] == 3 * len(STEPS)
    assert rows["per-sample rows (question/completion text, no step)"]["first_line"] == 3


def test_run_folder_with_a_generations_dump_is_still_one_run(tmp_path):
    """A samples file (question/completion text in every row) beside the history is no run of its own."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "history.json").write_text(json.dumps(_step_rows()))
    (d / "eval_history.json").write_text(json.dumps([{"step": 20, "accuracy": 0.5}, {"step": 40, "accuracy": 0.6}]))
    (d / "samples.jsonl").write_text("".join(json.dumps({"step": s, "prompt": "Solve the equation 3x + 1 = 7 please.",
                                                         "completion": "x = 2 because 3*2+1 = 7", "reward": 1.0}) + "\n"
                                             for s in STEPS))
    with pytest.warns(LogWarning, match=r"skipped 1 file\(s\): samples.jsonl \(holds per-sample rows"):
        [run] = read_logs(d)
    np.testing.assert_allclose(run.series("eval_reward")[1], [0.5, 0.6])


def test_jsonl_appended_runs_split_and_read_log_takes_the_last(tmp_path):
    p = tmp_path / "sweep.jsonl"
    lines = []
    for k in range(3):
        lines += [json.dumps({"step": s, "mean_reward": curve(s, 0.05 * k), "kl_div": 0.01 * k}) for s in STEPS]
    p.write_text("\n".join(lines) + "\n")
    with pytest.warns(LogWarning, match="restarts 2 time"):
        runs = read_logs(p)
    assert [r.name for r in runs] == ["sweep#1", "sweep#2", "sweep#3"]
    for k, r in enumerate(runs):
        np.testing.assert_allclose(r.columns["reward_mean"], [curve(s, 0.05 * k) for s in STEPS])
        np.testing.assert_allclose(r.columns["kl"], 0.01 * k)
    with pytest.warns(LogWarning, match="read the last, 'sweep#3'"):
        last = read_log(p)
    np.testing.assert_allclose(last.columns["reward_mean"], runs[2].columns["reward_mean"])
    first = _quiet(read_log, p, run="sweep#1")
    np.testing.assert_allclose(first.columns["reward_mean"], runs[0].columns["reward_mean"])


def test_appended_run_counting_from_1_after_one_from_0_is_a_new_run(tmp_path):
    """Back to one logging interval past the segment's first step: a new run; back to a later step: a
    resume (one run, re-logged steps keep their last value)."""
    p = tmp_path / "two.jsonl"
    rows = [{"step": s, "mean_reward": 0.1} for s in range(0, 30)] + [{"step": s, "mean_reward": 0.9} for s in range(1, 30)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runs = _quiet(read_logs, p)
    assert [len(r) for r in runs] == [30, 29]
    np.testing.assert_allclose(runs[1].columns["reward_mean"], 0.9)
    q = tmp_path / "resumed.jsonl"
    rows = [{"step": s, "mean_reward": 0.1} for s in range(0, 30)] + [{"step": s, "mean_reward": 0.9} for s in range(20, 40)]
    q.write_text("".join(json.dumps(r) + "\n" for r in rows))
    [run] = _quiet(read_logs, q)
    assert len(run) == 40 and run.columns["reward_mean"][25] == 0.9 and run.columns["reward_mean"][15] == 0.1


def test_jsonl_typed_rows_eval_marked_and_optimizer_steps_averaged(tmp_path):
    """Rows tagged type=rollout/train/eval: eval rows become eval_*, 4 train rows of a step are averaged."""
    lines = []
    for s in range(1, 21):
        if s % 5 == 0:
            lines.append({"type": "eval", "it": s, "reward": curve(s, -0.1), "stop": "</answer>"})
        lines.append({"type": "rollout", "it": s, "reward": curve(s), "group_size": 8})
        lines += [{"type": "train", "it": s, "grad_norm": float(j), "loss_type": "grpo"} for j in range(4)]
    p = tmp_path / "metrics.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = read_log(p)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in range(1, 21)])
    np.testing.assert_allclose(run.columns["grad_norm"], 1.5)  # mean of 0, 1, 2, 3
    es, ev = run.series("eval_reward")
    np.testing.assert_array_equal(es, [5, 10, 15, 20])
    np.testing.assert_allclose(ev, [curve(s, -0.1) for s in es])
    assert run.meta["group_size"] == 8
    rep = run.report
    assert rep.skipped_columns == {"eval_stop": "text, not a number", "loss_type": "text, not a number"}
    assert any("80 rows averaged into 20 steps" in n for n in rep.notes)


# ------------------------------------------------------------------------------------------------- CSV
def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def test_csv_table_with_restart_split(tmp_path):
    p = tmp_path / "reward_log.csv"
    rows = [[s, curve(s, -0.3)] for s in range(1, 11)] + [[s, curve(s)] for s in STEPS]
    _write_csv(p, ["Iteration", "Avg Reward"], rows)
    assert detect_format(p) == "csv"
    with pytest.warns(LogWarning):
        runs = read_logs(p)
    assert [len(r) for r in runs] == [10, len(STEPS)]
    np.testing.assert_allclose(runs[1].columns["reward_mean"], [curve(s) for s in STEPS])
    assert runs[1].report.mapped == {"reward_mean": "Avg Reward"}  # case and spaces ignored


def test_csv_with_a_run_column_is_one_run_per_value(tmp_path):
    p = tmp_path / "lr_sweep_eval_points.csv"
    rows = [[f"lr={lr}", s, curve(s, k * 0.1), "done"] for k, lr in enumerate(("1e-6", "3e-6")) for s in range(0, 41, 5)]
    _write_csv(p, ["label", "grpo_step", "accuracy", "status"], rows)
    runs = read_logs(p)
    assert [r.name for r in runs] == ["lr=1e-6", "lr=3e-6"]
    for k, r in enumerate(runs):  # the file name says evaluations: accuracy -> eval_accuracy -> eval_reward
        np.testing.assert_allclose(r.series("eval_reward")[1], [curve(s, k * 0.1) for s in range(0, 41, 5)])
    with pytest.raises(LogFormatError, match="holds 2 runs"):
        read_log(p)


def test_wandb_history_csv_detected_without_format(tmp_path):
    p = tmp_path / "export.csv"
    rows = [[1000.0 + s, s, curve(s), 0.1 * s, ""] for s in STEPS]
    _write_csv(p, ["_runtime", "_step", "train/reward", "train/kl", "eval/reward"], rows)
    assert detect_format(p) == "wandb_csv"
    run = read_log(p)
    np.testing.assert_allclose(run.columns["reward_mean"], [curve(s) for s in STEPS])
    np.testing.assert_allclose(run.columns["kl"], [0.1 * s for s in STEPS])


def test_json_list_restart_splits_too(tmp_path):
    p = tmp_path / "log.json"
    p.write_text(json.dumps([{"step": s, "score": curve(s)} for s in STEPS] * 2))
    runs = _quiet(read_logs, p)
    assert len(runs) == 2 and all(len(r) == len(STEPS) for r in runs)


def test_resumed_run_in_a_second_file_is_joined_in_its_folder(tmp_path):
    d = tmp_path / "resumed"
    d.mkdir()
    (d / "train.jsonl").write_text("".join(json.dumps({"step": s, "reward": curve(s)}) + "\n" for s in range(1, 31)))
    (d / "train_resumed.jsonl").write_text("".join(json.dumps({"step": s, "reward": curve(s) + 0.5 * (s <= 30)}) + "\n"
                                           for s in range(21, 61)))
    [run] = read_logs(d)
    np.testing.assert_array_equal(run.steps, np.arange(1, 61))
    want = [curve(s) + (0.5 if 21 <= s <= 30 else 0.0) for s in range(1, 61)]  # the later file wins on 21..30
    np.testing.assert_allclose(run.columns["reward_mean"], want)
    assert any("continues" in n for n in run.report.notes)


def test_console_lines_of_name_value_pairs(tmp_path):
    """Free-text console layouts: 'Epoch:[e/E](k/M), Reward: r, ...' and 'step k/N | name: v | ...'."""
    p = tmp_path / "train.log"
    lines = ["Model Params: 30.03M", "Loading checkpoint shards: 100%|####| 2/2 [00:00<00:00]"]
    for e in (1, 2):
        lines += [f"Epoch:[{e}/2]({k}/20), Reward: {curve(20 * (e - 1) + k):.4f}, KL_ref: 0.0010, Adv Std: 0.92, "
                  f"Avg Response Len: {100 + k}.00, Learning Rate: 0.00000030" for k in range(1, 21)]
    p.write_text("\n".join(lines) + "\n")
    assert detect_format(p) == "text_kv"
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    np.testing.assert_allclose(run.columns["reward_mean"], [round(curve(s), 4) for s in STEPS])
    assert run.report.mapped == {"reward_mean": "Reward", "kl": "KL_ref", "lr": "Learning Rate",
                                 "response_length": "Avg Response Len"}
    assert run.report.skipped_rows["lines without name: value metrics"]["count"] == 2
    first = tmp_path / "grpo.log"  # a metric line first: commas, but no CSV header
    first.write_text("\n".join(lines[2:]) + "\n")
    assert detect_format(first) == "text_kv"
    q = tmp_path / "grpo_log.txt"
    q.write_text("Found 1000 images\n" + "".join(
        f"GRPO step {s}/500 | loss: 0.0000 | mean_reward: {curve(s):.4f} | KL: 0.0001 | lr: 0.000001\n"
        f"  Rewards: [-1.0, 0.5] (1/2 rendered)\n" for s in range(10, 101, 10)))
    run = read_log(q)
    np.testing.assert_array_equal(run.steps, np.arange(10, 101, 10))
    np.testing.assert_allclose(run.columns["kl"], 1e-4)


def test_averaged_and_plural_names_meet_the_alias_table(tmp_path):
    p = tmp_path / "grpo_metrics.json"
    p.write_text(json.dumps({"rewards_avg": [curve(s) for s in STEPS], "val_accuracies_avg": [0.5] * len(STEPS),
                             "kl_avg": [0.01] * len(STEPS)}))
    run = read_log(p)
    assert run.report.mapped == {"reward_mean": "rewards_avg", "eval_reward": "val_accuracies_avg", "kl": "kl_avg"}
    q = tmp_path / "log.json"
    q.write_text(json.dumps({"it": STEPS, "train_grad_norm": [1.0] * len(STEPS), "rollout_rewards_mean": [0.5] * len(STEPS),
                             "train_loss": [0.1] * len(STEPS)}))
    run = read_log(q)
    assert run.report.mapped == {"reward_mean": "rollout_rewards_mean", "grad_norm": "train_grad_norm"}
    assert "train_loss" in run.columns


def test_no_step_column_numbers_the_rows(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps([{"mean_reward": curve(s)} for s in STEPS]))
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, STEPS)
    assert run.meta["step_source"] == "row number"


def test_reading_does_not_import_jax(tmp_path):
    import subprocess
    import sys

    p = tmp_path / "a.json"
    p.write_text(json.dumps(_step_rows()))
    code = f"import sys; from grpojax.logs import read_log; read_log({str(p)!r}); print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
