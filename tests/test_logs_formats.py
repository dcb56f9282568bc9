"""Every log format read from fixtures (tests/fixtures/logs, made by make_fixtures.py) and
checked value by value against the closed forms the fixtures were written from."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil
import warnings

import numpy as np
import pytest

from grpojax.logs import LogWarning, detect_format, read_log, read_logs, write_jsonl

FIX = pathlib.Path(__file__).resolve().parent / "fixtures" / "logs"
_spec = importlib.util.spec_from_file_location("make_fixtures", FIX / "make_fixtures.py")
mf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mf)


def f(fn, steps):
    return np.array([fn(int(s)) for s in steps])


def one(path, **kw):
    runs = read_logs(FIX / path, **kw)
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


def test_trl_console_lines_string_values_epoch_steps():
    assert detect_format(FIX / "trl_console.log") == "trl_console"
    with pytest.warns(LogWarning, match=r"trl_console.log: 1 NaN/null value\(s\).*grad_norm"):
        run = one("trl_console.log")
    st = np.arange(2, 31, 2)  # logging_steps=2: step = epoch x (30 steps / 1 epoch), epochs printed to 0.01
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
    assert run.meta["step_source"] == "epoch x 30 steps per epoch"


def test_trl_console_without_step_numbers(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("".join(f"{{'loss': 0.1, 'reward': {mf.reward(s)}, 'epoch': 0.1}}\n" for s in range(1, 6)))
    run = read_log(p)
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


# ---------------------------------------------------------------------------------- TensorBoard
def test_tensorboard_folder_with_several_runs():
    with pytest.warns(LogWarning) as rec:
        runs = read_logs(FIX / "tb_runs")
    assert detect_format(FIX / "tb_runs") == "tensorboard"
    by = {r.name: r for r in runs}
    assert sorted(by) == ["openrlhf/run_b", "trl_run_a"]
    a = by["trl_run_a"]  # torch-style simple_value events, TRL names with train/ eval/ prefixes
    st = np.arange(1, 31)
    for col, fn in [("reward_mean", mf.reward), ("reward_std", mf.reward_std), ("entropy", mf.entropy),
                    ("kl", mf.kl), ("response_length", mf.length), ("grad_norm", mf.grad_norm), ("lr", mf.lr)]:
        check(a, col, fn, st)  # float32 on disk
    check(a, "eval_reward", mf.eval_reward, np.array([10, 20, 30]))
    assert a.meta["mapping"]["reward_mean"] == "train/reward"
    assert a.meta["warnings"] == []
    b = by["openrlhf/run_b"]  # scalar tensors, OpenRLHF names, restarted at step 20
    st = np.arange(1, 41)
    check(b, "entropy", mf.entropy, st)
    check(b, "lr", mf.lr, st)
    check(b, "clip_frac", lambda s: round(0.001 * s, 6), st)
    # duplicated steps 20..25 keep the value of the second (restarted) file: +1.0
    check(b, "reward_mean", lambda s: mf.reward(s) + (1.0 if 20 <= s <= 25 else 0.0), st)
    assert b.meta["duplicated_steps"] == [20, 21, 22, 23, 24, 25]
    msgs = [str(w.message) for w in rec]
    assert any("run_b" in m and "more than once" in m for m in msgs)
    # eval_reward: mean over the pass1 of two eval sets; pass4 kept by name
    check(b, "eval_reward", mf.eval_reward, np.array([10, 20, 30, 40]))
    assert b.meta["eval_datasets"] == ["gsm8k", "math"]
    assert b.has("eval_math_pass4") and b.has("return")


def test_tensorboard_single_event_file_and_run_dir():
    ev = next((FIX / "tb_runs" / "trl_run_a").glob("*tfevents*"))
    assert detect_format(ev) == "tensorboard"
    assert one(ev.relative_to(FIX)).meta["n_train_points"] == 30
    assert one("tb_runs/trl_run_a").name == "trl_run_a"


# ------------------------------------------------------------------------------------------ W&B
def test_wandb_chart_export_several_runs():
    assert detect_format(FIX / "wandb_chart.csv") == "wandb_csv"
    runs = read_logs(FIX / "wandb_chart.csv")
    by = {r.name: r for r in runs}
    assert sorted(by) == ["grpo-lr1e-6", "grpo-lr3e-6"]
    check(by["grpo-lr1e-6"], "reward_mean", mf.reward, np.arange(1, 41))
    check(by["grpo-lr1e-6"], "entropy", mf.entropy, np.arange(1, 41))
    # the second run stopped at 25: its empty cells are not steps of its own
    check(by["grpo-lr3e-6"], "reward_mean", lambda s: mf.reward(s) + 0.1, np.arange(1, 26))
    np.testing.assert_array_equal(by["grpo-lr3e-6"].steps, np.arange(1, 26))
    assert not any(k.endswith(("__MIN", "__MAX")) for r in runs for k in r.columns)
    assert "grpo-lr1e-6 - train/reward__MIN" in by["grpo-lr1e-6"].meta["dropped_columns"]


def test_wandb_folder_of_panel_exports_merges_runs():
    runs = read_logs(FIX / "wandb_panels")
    by = {r.name: r for r in runs}
    assert sorted(by) == ["grpo-lr1e-6", "grpo-lr3e-6"]
    r = by["grpo-lr1e-6"]
    check(r, "reward_mean", mf.reward, np.arange(1, 41))
    check(r, "kl", mf.kl, np.arange(1, 41))
    check(r, "eval_reward", mf.eval_reward, np.arange(10, 41, 10))
    check(by["grpo-lr3e-6"], "eval_reward", mf.eval_reward, np.array([10, 20]))


def test_wandb_history_export():
    with pytest.warns(LogWarning, match="NaN"):
        run = one("wandb_history.csv")
    check(run, "reward_mean", mf.reward, np.arange(0, 30))
    check(run, "eval_reward", mf.eval_reward, np.array([0, 10, 20]))
    assert run.meta["nan_counts"] == {"grad_norm": 1}
    assert "_runtime" not in run.columns


# ------------------------------------------------------------------------------ OpenRLHF / JSONL
def test_openrlhf_jsonl():
    assert detect_format(FIX / "openrlhf.jsonl") == "openrlhf_jsonl"
    run = one("openrlhf.jsonl")
    assert run.format == "openrlhf_jsonl"
    st = np.arange(1, 31)
    for col, fn in [("reward_mean", mf.reward), ("entropy", mf.entropy), ("kl", mf.kl),
                    ("lr", mf.lr), ("response_length", mf.length)]:
        check(run, col, fn, st)
    check(run, "clip_frac", lambda s: round(0.001 * s, 6), st)
    check(run, "response_clip_frac", lambda s: round(0.002 * s, 6), st)
    check(run, "eval_reward", mf.eval_reward, np.array([10, 20, 30]))
    check(run, "return", lambda s: round(mf.reward(s) - mf.kl(s), 6), st)
    assert run.meta["mapping"]["entropy"] == "train/policy_entropy"


def test_own_jsonl():
    assert detect_format(FIX / "grpojax.jsonl") == "jsonl"
    with pytest.warns(LogWarning, match="NaN"):
        run = one("grpojax.jsonl")
    assert run.name == "tiny-grpo" and run.meta["group_size"] == 8
    st = np.arange(1, 31)
    for col, fn in [("reward_mean", mf.reward), ("reward_std", mf.reward_std), ("entropy", mf.entropy)]:
        check(run, col, fn, st)
    check(run, "eval_reward", mf.eval_reward, np.array([10, 20, 30]))
    assert np.isnan(run.columns["grad_norm"][4]) and run.meta["nan_counts"] == {"grad_norm": 1}
    assert run.has("adv_abs_mean")


@pytest.mark.parametrize(
    "path",
    ["trl_state_modern.json", "verl_console.log", "wandb_chart.csv", "openrlhf.jsonl", "tb_runs", "trl_console.log"],
)
def test_jsonl_round_trip(path, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        runs = read_logs(FIX / path)
    for i, run in enumerate(runs):
        out = tmp_path / f"r{i}.jsonl"
        write_jsonl(out, run)
        assert detect_format(out) == "jsonl"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LogWarning)
            back = read_log(out)
        assert back.name == run.name and back.format == "jsonl"
        assert back.meta["converted_from"]["format"] == run.format
        np.testing.assert_array_equal(back.steps, run.steps)
        assert set(back.columns) == set(run.columns)
        for k in run.columns:
            np.testing.assert_array_equal(back.columns[k], run.columns[k], err_msg=k)
        assert back.meta["mapping"].keys() >= {c for c in run.meta["mapping"] if c in run.columns}


def test_jsonl_logger_writes_reference_format(tmp_path):
    from grpojax.logs import JsonlLogger

    p = tmp_path / "loop.jsonl"
    with JsonlLogger(p, name="loop", meta={"group_size": 4, "beta": 0.0}) as log:
        for s in range(1, 6):
            log.write(s, {"reward_mean": np.float32(mf.reward(s))}, kl=mf.kl(s))
        log.write(5, eval_reward=0.3)
    run = read_log(p)
    assert run.name == "loop" and run.meta["group_size"] == 4
    check(run, "reward_mean", mf.reward, np.arange(1, 6))
    check(run, "eval_reward", lambda s: 0.3, np.array([5]))


def test_format_override_and_bad_format_name():
    with pytest.raises(ValueError, match="format='nope'"):
        read_log(FIX / "grpojax.jsonl", format="nope")
    runs = read_logs(FIX / "verl_console_old.log", format="verl_console")
    assert runs[0].format == "verl_console"


def test_runlog_api():
    run = one("trl_state_modern.json")
    assert run.has("reward_mean") and not run.has("nope")
    with pytest.raises(KeyError, match="no column 'nope'"):
        run.series("nope")
    with pytest.raises(ValueError):
        run.columns["reward_mean"][0] = 1.0  # read-only
    with pytest.raises(Exception):
        run.name = "x"  # frozen
    d = run.to_dict()
    assert d["step"] is run.steps and len(run) == 8


def test_tensorboard_fast_engine_matches_event_accumulator():
    from grpojax.logs._tensorboard import read_tensorboard

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        fast = {r.name: r for r in read_tensorboard(FIX / "tb_runs")}
        acc = {r.name: r for r in read_tensorboard(FIX / "tb_runs", engine="accumulator")}
    assert fast.keys() == acc.keys()
    for k in fast:
        np.testing.assert_array_equal(fast[k].steps, acc[k].steps)
        assert fast[k].columns.keys() == acc[k].columns.keys()
        for c in fast[k].columns:
            np.testing.assert_array_equal(fast[k].columns[c], acc[k].columns[c], err_msg=f"{k}:{c}")


def test_openrlhf_console_progress_bar_status():
    assert detect_format(FIX / "openrlhf_console.log") == "openrlhf_console"
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogWarning)  # tqdm redraws are not "duplicated steps"
        run = one("openrlhf_console.log")
    st = np.arange(1, 21)
    for col, fn in [("reward_mean", mf.reward), ("entropy", mf.entropy), ("kl", mf.kl),
                    ("lr", mf.lr), ("response_length", mf.length)]:
        check(run, col, fn, st)
    check(run, "clip_frac", lambda s: round(0.001 * s, 6), st)
    assert "rm" not in run.columns and "glen" not in run.columns  # inner micro-batch bars ignored


def test_folder_with_trl_output_tensorboard_and_csv(tmp_path):
    """A mixed folder: a TRL output dir (its runs/ events are the same run), a TB run, a W&B CSV."""
    out = tmp_path / "exp"
    shutil.copytree(FIX / "trl_output", out / "trl_out")
    (out / "trl_out" / "config.json").write_text('{"model_type": "qwen2"}')  # not a log: ignored quietly
    shutil.copytree(FIX / "tb_runs" / "trl_run_a", out / "trl_out" / "runs" / "x")  # same run as the state
    shutil.copytree(FIX / "tb_runs" / "trl_run_a", out / "tb" / "other")
    shutil.copy(FIX / "wandb_chart.csv", out / "wandb_chart.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogWarning)
        runs = read_logs(out)
    got = sorted((r.format, r.name) for r in runs)
    assert got == [("tensorboard", "tb/other"), ("trl_state", "trl_out"),
                   ("wandb_csv", "grpo-lr1e-6"), ("wandb_csv", "grpo-lr3e-6")]
    trl = next(r for r in runs if r.format == "trl_state")
    assert trl.steps[-1] == 40  # the newest (largest) checkpoint state


def test_trl_without_total_reward_sums_the_functions(tmp_path):
    hist = [{"rewards/a/mean": 0.1 * s, "rewards/a/std": 0.5, "rewards/b/mean": 1.0, "loss": 0.0, "step": s}
            for s in range(1, 6)]
    hist += [{"eval_rewards/a/mean": 0.2, "eval_rewards/b/mean": 0.5, "eval_loss": 0.0, "step": 5}]
    p = tmp_path / "trainer_state.json"
    p.write_text(json.dumps({"log_history": hist}))
    with pytest.warns(LogWarning, match="unweighted sum of rewards/a/mean, rewards/b/mean"):
        run = read_log(p)
    np.testing.assert_allclose(run.columns["reward_mean"], 0.1 * run.steps + 1.0)
    assert run.meta["mapping"]["reward_mean"] == ["rewards/a/mean", "rewards/b/mean"]
    assert run.series("eval_reward")[1].tolist() == [0.7]
    assert run.meta["reward_functions"] == ["a", "b"]
    assert run.has("rewards/a/std")


def test_runlog_validates_its_invariants():
    from grpojax.logs import RunLog

    with pytest.raises(ValueError, match="strictly increasing"):
        RunLog(name="x", source="-", format="jsonl", steps=[1, 1, 2], columns={})
    with pytest.raises(ValueError, match="aligned with steps"):
        RunLog(name="x", source="-", format="jsonl", steps=[1, 2], columns={"a": [1.0]})
    r = RunLog(name="x", source="-", format="jsonl", steps=[1, 2], columns={"a": [1, np.nan]})
    assert r.columns["a"].dtype == np.float64 and r.steps.dtype == np.int64
    assert r.series("a")[0].tolist() == [1]
