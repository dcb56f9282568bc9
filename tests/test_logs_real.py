"""The four real GRPO logs of ../shared/real-logs load with the right points and canonical columns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from grpojax.logs import CANONICAL_COLUMNS, LogWarning, read_logs


def _read(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", LogWarning)  # the real logs are clean: no repairs needed
        runs = read_logs(path)
    assert len(runs) == 1
    return runs[0]


def _check_common(run):
    assert run.steps.dtype == np.int64
    assert np.all(np.diff(run.steps) > 0)
    for k, v in run.columns.items():
        assert v.dtype == np.float64 and v.shape == run.steps.shape, k


def test_trl_llama_old_names(real_logs):
    run = _read(real_logs / "trl-llama3.1-8b-g6-trainer_state.json")
    _check_common(run)
    assert run.format == "trl_state"
    s, r = run.series("reward_mean")
    assert s.size == 250 and run.meta["n_train_points"] == 250
    np.testing.assert_array_equal(s, np.arange(1, 251))
    assert not run.has("eval_reward") and run.meta["n_eval_points"] == 0
    assert r[0] == 0.0 and r[-1] == pytest.approx(1.3333333730697632)
    for c in ("reward_std", "kl", "grad_norm", "lr", "response_length"):
        assert run.series(c)[0].size == 250, c
    assert run.meta["mapping"]["response_length"] == "completion_length"
    funcs = run.meta["reward_functions"]
    assert len(funcs) == 5 and "correctness_reward_func" in funcs
    # reward_mean is the logged total; the per-function columns (kept) sum to it
    total = sum(run.columns[f"rewards/{f}"] for f in funcs)
    np.testing.assert_allclose(total, run.columns["reward_mean"], atol=1e-6)


def test_trl_minesweeper_modern_names(real_logs):
    run = _read(real_logs / "trl-g4-minesweeper-trainer_state.json")
    _check_common(run)
    s, _ = run.series("reward_mean")
    assert s.size == 50 and run.meta["n_eval_points"] == 0
    np.testing.assert_array_equal(s, np.arange(10, 501, 10))
    for c in ("reward_std", "frac_zero_std", "entropy", "grad_norm", "lr", "clip_frac",
              "response_length", "response_clip_frac"):
        assert run.series(c)[0].size == 50, c
    assert not run.has("kl")  # beta = 0: TRL logs no kl
    _, fz = run.series("frac_zero_std")
    assert fz[0] == 0.0 and fz[-1] == pytest.approx(0.7)
    gs, g = run.series("grad_norm")
    assert np.all(g[(gs >= 60) & (gs <= 80)] == 0.0)
    assert run.series("reward_mean")[1][0] == pytest.approx(-9.6625)
    assert run.meta["reward_functions"] == ["gameplay_scores", "valid_json_reward"]


def test_trl_qwen_train_and_eval(real_logs):
    run = _read(real_logs / "trl-qwen2.5-3b-g2-train-eval-trainer_state.json")
    _check_common(run)
    s, r = run.series("reward_mean")
    assert s.size == 160 and run.meta["n_train_points"] == 160
    es, e = run.series("eval_reward")
    assert es.size == 8 and run.meta["n_eval_points"] == 8
    np.testing.assert_array_equal(es, np.arange(20, 161, 20))
    assert r[0] == pytest.approx(-0.866, abs=1e-3) and r[-1] == pytest.approx(1.05, abs=0.01)
    assert e[0] == pytest.approx(-0.49, abs=0.01) and e[-1] == pytest.approx(-0.1696, abs=1e-3)
    assert run.steps.size == 160  # eval steps coincide with train steps: union has 160
    for c in CANONICAL_COLUMNS:
        if c not in ("is_ratio_mean", "is_ratio_max"):
            assert run.has(c), c
    # other eval metrics keep their TRL names
    assert run.series("eval_entropy")[0].size == 8


def test_verl_console(real_logs):
    run = _read(real_logs / "verl-qwen2-7b-math-gpg.log")
    _check_common(run)
    assert run.format == "verl_console"
    s, score = run.series("reward_mean")
    assert s.size == 210 and run.meta["n_train_points"] == 210
    np.testing.assert_array_equal(s, np.arange(1, 211))
    es, _ = run.series("eval_reward")
    assert es.size == 43 and run.meta["n_eval_points"] == 43
    np.testing.assert_array_equal(es, np.arange(0, 211, 5))
    np.testing.assert_array_equal(run.steps, np.arange(0, 211))
    assert score[0] == pytest.approx(0.433) and score[-1] > 0.9
    _, ent = run.series("entropy")
    assert ent[0] == pytest.approx(0.354) and ent[-1] < 0.02
    for c in ("grad_norm", "lr", "response_length", "response_clip_frac"):
        assert run.series(c)[0].size == 210, c
    assert run.meta["group_size"] == 5
    assert run.meta["adv_estimator"] == "gpg"
    assert len(run.meta["eval_datasets"]) == 2
    # eval_reward is the mean of the two validation sets at step 0 (0.221, 0.514)
    assert run.series("eval_reward")[1][0] == pytest.approx((0.221 + 0.514) / 2)
    assert run.series("val-core/openai/gsm8k/reward/mean@1")[0].size == 43


def test_real_logs_folder(real_logs):
    runs = read_logs(real_logs)
    assert sorted(r.format for r in runs) == ["trl_state"] * 3 + ["verl_console"]
