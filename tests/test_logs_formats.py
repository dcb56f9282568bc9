"""Every log format read from fixtures (tests/fixtures/logs, made by make_fixtures.py) and
checked value by value against the closed forms the fixtures were written from."""

from __future__ import annotations

import importlib.util
import pathlib
import shutil
import warnings

import numpy as np
import pytest

from grpojax.logs import LogWarning, detect_format, read_log

FIX = pathlib.Path(__file__).resolve().parent / "fixtures" / "logs"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)


def f(fn, steps):
    return np.array([fn(int(s)) for s in steps])


def one(path, **kw):
    runs = read_log(FIX / path, **kw)
    assert len(runs) == 1
    return runs[0]


def check(run, col, fn, steps, rtol=1e-6, atol=1e-6):
    s, v = run.series(col)
    np.testing.assert_array_equal(s, steps, err_msg=col)
    np.testing.assert_allclose(v, f(fn, s), rtol=rtol, atol=atol, err_msg=col)


# ---------------------------------------------------------------------------------------- TRL
def test_trl_state_old_names():
    run = one("trl_state_old.json")
    assert run.format == "trl_state" and run.name == "trl_state_old"
    st = np.arange(1, 21)
    check(run, "reward_mean", mf.reward, st)
    check(run, "reward_std", mf.reward_std, st)
    check(run, "kl", mf.kl, st)
    check(run, "response_length", mf.length, st)
    check(run, "grad_norm", mf.grad_norm, st)
    check(run, "lr", mf.lr, st)
    assert "reward" not in run.columns and "completion_length" not in run.columns  # renamed
    assert run.meta["reward_functions"] == ["int_reward_func", "xmlcount_reward_func"]
    assert run.has("rewards/int_reward_func")
    assert run.meta["n_train_points"] == 20 and run.meta["n_eval_points"] == 0


def test_trl_state_modern_names_with_eval_and_summary():
    run = one("trl_state_modern.json")
    st = np.arange(5, 41, 5)
    for col, fn in [("reward_mean", mf.reward), ("entropy", mf.entropy), ("kl", mf.kl),
                    ("response_length", mf.length), ("grad_norm", mf.grad_norm)]:
        check(run, col, fn, st)
    check(run, "frac_zero_std", lambda s: round(s / 80, 6), st)
    check(run, "clip_frac", lambda s: round(0.001 * s, 6), st)
    check(run, "response_clip_frac", lambda s: round(0.002 * s, 6), st)
    check(run, "is_ratio_max", lambda s: round(1.0 + 0.01 * s, 6), st)
    check(run, "eval_reward", mf.eval_reward, np.array([10, 20, 30, 40]))
    check(run, "eval_entropy", mf.entropy, np.array([10, 20, 30, 40]))
    np.testing.assert_array_equal(run.steps, st)  # eval steps are train steps: union = train
    assert run.meta["summary"]["train_runtime"] == 500.0
    assert "train_runtime" not in run.columns
    # eval rows' epoch does not collide with the train rows' epoch
    assert "duplicated_steps" not in run.meta and run.meta["warnings"] == []


def test_trl_output_dir_takes_newest_checkpoint():
    run = one("trl_output")
    assert run.name == "trl_output"
    assert run.steps[-1] == 40 and run.meta["n_eval_points"] == 4


def test_trl_console_lines_string_values_tqdm_steps():
    assert detect_format(FIX / "trl_console.log") == "trl_console"
    with pytest.warns(LogWarning, match=r"trl_console.log: 1 NaN/null value\(s\).*grad_norm"):
        run = one("trl_console.log")
    st = np.arange(2, 31, 2)  # logging_steps=2, step from the tqdm counter
    check(run, "reward_mean", mf.reward, st)  # printed as strings
    check(run, "kl", mf.kl, st)
    check(run, "response_length", mf.length, st)
    check(run, "eval_reward", mf.eval_reward, np.array([10, 20, 30]))
    gs, g = run.series("grad_norm")
    assert 14 not in gs and gs.size == 14  # the NaN is kept as NaN, not dropped silently
    assert np.isnan(run.columns["grad_norm"][run.steps == 14][0])
    assert run.meta["nan_counts"] == {"grad_norm": 1}
    np.testing.assert_allclose(run.series("loss")[1], 0.001 * st, atol=1e-4)
    assert run.meta["summary"]["train_loss"] == 0.0123
    assert run.meta["step_source"] == "tqdm counter"


def test_trl_console_without_step_numbers(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("".join(f"{{'loss': 0.1, 'reward': {mf.reward(s)}, 'epoch': 0.1}}\n" for s in range(1, 6)))
    run = read_log(p)[0]
    check(run, "reward_mean", mf.reward, np.arange(1, 6))
    assert "row number" in run.meta["step_source"]


# ---------------------------------------------------------------------------------------- verl
def test_verl_console_modern():
    run = one("verl_console.log")
    assert run.format == "verl_console"
    st = np.arange(1, 41)
    for col, fn in [("reward_mean", mf.reward), ("entropy", mf.entropy), ("kl", mf.kl),
                    ("grad_norm", mf.grad_norm), ("lr", mf.lr), ("response_length", mf.length)]:
        check(run, col, fn, st)
    check(run, "clip_frac", lambda s: round(0.001 * s, 6), st)
    check(run, "response_clip_frac", lambda s: round(0.002 * s, 6), st)
    # validation at 0, 10, ..., 40: mean of two sets = eval_reward(s) (step 0: both 0.1)
    es, e = run.series("eval_reward")
    np.testing.assert_array_equal(es, [0, 10, 20, 30, 40])
    np.testing.assert_allclose(e[1:], f(mf.eval_reward, es[1:]), atol=1e-9)
    assert e[0] == pytest.approx(0.1)
    np.testing.assert_array_equal(run.steps, np.arange(0, 41))
    assert run.meta["group_size"] == 8
    assert run.meta["mapping"]["kl"] == "actor/kl_loss"
    assert run.has("actor/ppo_kl")  # the PPO old->new KL is not the KL to the reference
    assert run.meta["mapping"]["reward_mean"] == "critic/score/mean"
    assert run.meta["experiment_name"] == "fixture_grpo"


def test_verl_console_old_names():
    run = one("verl_console_old.log")
    st = np.arange(1, 26)
    check(run, "entropy", mf.entropy, st)
    check(run, "reward_mean", mf.reward, st)
    check(run, "eval_reward", mf.eval_reward, np.arange(5, 26, 5))
    assert run.meta["mapping"]["entropy"] == "actor/entropy_loss"
    assert run.meta["mapping"]["eval_reward"] == ["val/test_score/openai/gsm8k"]


def test_verl_jsonl_file_logger():
    assert detect_format(FIX / "verl_file.jsonl") == "verl_jsonl"
    run = one("verl_file.jsonl")
    st = np.arange(1, 31)
    check(run, "reward_mean", mf.reward, st)
    check(run, "kl", mf.kl, st)
    check(run, "eval_reward", mf.eval_reward, np.arange(10, 31, 10))
    assert run.name == "verl_file"
