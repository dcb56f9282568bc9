"""Every original log of the real-run corpus in a standard format reads to the same series as the
run's hand-checked ``run.jsonl`` (same steps; same values of every canonical column both have).

The corpus lives outside the repository (``../shared/real-runs``); these tests skip without it.
Runs whose originals are custom layouts of their authors are skipped by name, with the reason.
"""

from __future__ import annotations

import csv
import warnings

import numpy as np
import pytest

from grpojax.logs import CANONICAL_COLUMNS, LogWarning, merge_runs, read_log, read_logs

#: run id -> (original files in the order they were written, format to read them as)
STANDARD = {
    "chaos-economy-llama-grpo": (["training_logs.json"], "trl_state"),
    "incident-commander-grpo": (["training_log.json"], "trl_state"),
    "text2sql-grpo-3b": (["trainer_state_1000steps.json"], "trl_state"),
    "finqa-toolcall-grpo": (["train_stage7_grpo_long2400_r32.log"], "trl_console"),
    "watchdog-qwen3-8b-grpo": (["output1.txt"], "trl_console"),  # dict lines hard-wrapped at 180 columns
    "searchr1-grpo-resume-wxh": (["train_v2.pre_resume_step100.log", "train_v2_resume_from100.log"], "verl_console"),
    "searchr1-gigpo-resume-wxh": (
        ["train_300_gigpo.pre_resume_step100.log", "train_300_gigpo_resume_from100.log"], "verl_console"),
    "tb-llama32-1b-gsm8k-grpo": (None, "tensorboard"),
    "tb-llama32-1b-gsm8k-grpo--attempt-Feb01_08-20": (None, "tensorboard"),
    "tb-llama32-1b-gsm8k-grpo--attempt-Feb01_08-25": (None, "tensorboard"),
}

#: run id prefix -> why its originals are not read (their run.jsonl is the only standard form)
CUSTOM = {
    "cs336shz-": "custom metrics.jsonl / eval-points CSV of the CS336 assignment code (not a trainer's format)",
    "incident-ops-grpo-csv": "custom CSV written by the author's TRL callback (checked separately below)",
}


def _ids(real_runs):
    return sorted(p.name for p in real_runs.iterdir() if p.is_dir())


def _reference(folder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return read_log(folder / "run.jsonl")


def _read_original(folder, files, fmt):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if files is None:  # TensorBoard: the run's event file (the folder also holds run.jsonl)
            [event_file] = folder.glob("*tfevents*")
            return read_log(event_file)
        runs = [read_log(folder / f, format=fmt) for f in files]
    return runs[0] if len(runs) == 1 else merge_runs(runs)  # a run resumed into a second file


def _assert_same(run, ref, rid):
    np.testing.assert_array_equal(run.steps, ref.steps, err_msg=f"{rid}: steps")
    common = [c for c in CANONICAL_COLUMNS if c in run.columns and c in ref.columns]
    assert "reward_mean" in common, rid
    for c in common:
        a, b = run.columns[c], ref.columns[c]
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=f"{rid}: {c} logged at other steps")
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True, err_msg=f"{rid}: {c}")
    # every canonical column of the reference is found in the original
    missing = [c for c in CANONICAL_COLUMNS if ref.has(c) and not run.has(c)]
    assert not missing, f"{rid}: canonical columns not read from the original: {missing}"


def test_every_run_is_classified(real_runs):
    for rid in _ids(real_runs):
        assert rid in STANDARD or any(rid.startswith(k) for k in CUSTOM), rid


@pytest.mark.parametrize("rid", sorted(STANDARD))
def test_original_reads_like_run_jsonl(real_runs, rid):
    folder = real_runs / rid
    if not folder.is_dir():
        pytest.skip(f"{rid} is not in this copy of the corpus")
    files, fmt = STANDARD[rid]
    run = _read_original(folder, files, fmt)
    assert run.format == fmt
    _assert_same(run, _reference(folder), rid)


@pytest.mark.parametrize("rid", ["incident-ops-grpo-csv"])
def test_restarted_custom_csv_splits_into_runs(real_runs, rid):
    """A CSV whose step counter restarts (a first attempt, then the full run) is two runs, never one
    interleaved table; the second equals the run.jsonl (which keeps the complete attempt)."""
    folder = real_runs / rid
    src = folder / "reward_log.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = read_logs(src, format="wandb_csv")
    with pytest.warns(LogWarning, match=r"holds 2 runs .*read the last, 'reward_log#2'"):
        last = read_log(src, format="wandb_csv")  # read_log: the last run of a restarted file
    np.testing.assert_array_equal(last.steps, runs[1].steps)
    with open(src, newline="") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f)]
    restart = next(i for i in range(1, len(steps)) if steps[i] <= steps[0])
    assert [len(r) for r in runs] == [restart, len(steps) - restart]
    assert [r.name for r in runs] == ["reward_log#1", "reward_log#2"]
    ref = _reference(folder)
    np.testing.assert_array_equal(runs[1].steps, ref.steps)
    np.testing.assert_allclose(runs[1].columns["reward_mean"], ref.columns["reward_mean"], rtol=1e-9)
