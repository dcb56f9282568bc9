"""Malformed input: one-line LogFormatError or LogWarning naming the file and the problem, never a
traceback from inside json/csv/tensorboard."""

from __future__ import annotations

import json
import pathlib
import warnings

import numpy as np
import pytest

from grpojax.logs import LogFormatError, LogWarning, read_log, read_logs

BAD = pathlib.Path(__file__).resolve().parent / "fixtures" / "logs" / "bad"


def _err(path, match, **kw):
    with pytest.raises(LogFormatError) as ei:
        read_log(path, **kw)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(str(path)), msg
    assert match in msg, msg
    assert isinstance(ei.value, ValueError)
    assert ei.value.__cause__ is None or isinstance(ei.value.__cause__, LogFormatError)
    return msg


@pytest.mark.parametrize(
    "name, match",
    [
        ("truncated_trainer_state.json", "truncated JSON"),
        ("empty.log", "empty file"),
        ("unknown.txt", "unknown log format"),
        ("no_reward.json", "no reward column"),
        ("broken_middle.jsonl", "line 5 is not valid JSON"),
        ("bad_step.jsonl", "step value 1.5 is not an integer"),
    ],
)
def test_errors_name_file_and_problem(name, match):
    _err(BAD / name, match)


def test_errors_made_on_the_fly(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"log_history": [{"reward": 1.0}]}')
    _err(p, "log_history[0] has no 'step'")
    p.write_text('{"foo": 1}')
    _err(p, "without a 'log_history' list")
    p.write_text('{"log_history": [{"reward": 1.0, "step": 1}, ')
    _err(p, "truncated JSON")
    p = tmp_path / "empty.json"
    p.write_text("   \n\n")
    _err(p, "empty file")
    p = tmp_path / "v.log"
    p.write_text("step:1 - loss:0.1 - grad:2\nstep:2 - loss:0.1 - grad:2\n")
    _err(p, "no reward column")
    p = tmp_path / "w.csv"
    p.write_text("Step,run - train/reward\n")
    _err(p, "no rows")
    p.write_text('Step,run - train/reward\n1,0.1\n2,0.2,7\n3,0.3\n')
    _err(p, "row 3 has 3 cells")
    p = tmp_path / "bin.dat"
    p.write_bytes(b"\x00\x01\x02binary")
    _err(p, "binary file")
    d = tmp_path / "folder"
    d.mkdir()
    (d / "notes.txt").write_text("nothing here")
    with pytest.warns(LogWarning, match="skipped 1 file"):
        _err(d, "no readable log")
    ev = tmp_path / "events.out.tfevents.123.host"
    ev.write_bytes(b"garbage that is not a tfrecord")
    with pytest.raises(LogFormatError, match="events.out.tfevents"):
        read_log(ev)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_log(tmp_path / "missing.json")


def test_resumed_run_keeps_last_value_and_warns():
    with pytest.warns(LogWarning) as rec:
        run = read_log(BAD / "resumed_trainer_state.json")
    msgs = [str(w.message) for w in rec]
    assert any(m.startswith(str(BAD / "resumed_trainer_state.json")) and "logged more than once" in m for m in msgs)
    np.testing.assert_array_equal(run.steps, np.arange(1, 21))
    s, r = run.series("reward_mean")
    expect = 0.2 + 0.01 * s + np.where((s >= 11) & (s <= 15), 1.0, 0.0)  # the re-logged values win
    np.testing.assert_allclose(r, expect, atol=1e-9)
    assert run.meta["duplicated_steps"] == [11, 12, 13, 14, 15]
    assert any("more than once" in w for w in run.meta["warnings"])


def test_decreasing_steps_are_sorted_with_warning():
    with pytest.warns(LogWarning, match=r"decreasing.jsonl: steps are not increasing .*sorted"):
        run = read_log(BAD / "decreasing.jsonl")
    np.testing.assert_array_equal(run.steps, np.arange(1, 9))
    np.testing.assert_allclose(run.columns["reward_mean"], 0.2 + 0.01 * run.steps, atol=1e-9)
    assert "duplicated_steps" not in run.meta


def test_nan_values_are_kept_and_counted():
    with pytest.warns(LogWarning, match=r"nan_values.jsonl: 3 NaN/null value\(s\)"):
        run = read_log(BAD / "nan_values.jsonl")
    assert run.steps.size == 10  # no row dropped
    r = run.columns["reward_mean"]
    assert np.isnan(r[3]) and np.isnan(r[4]) and np.isfinite(r[5])
    assert run.meta["nan_counts"] == {"reward_mean": 2, "grad_norm": 1}
    assert run.meta["n_train_points"] == 8


def test_truncated_last_jsonl_line_is_a_warning():
    with pytest.warns(LogWarning, match=r"truncated_last_line.jsonl: last line 10 is truncated JSON"):
        run = read_log(BAD / "truncated_last_line.jsonl")
    np.testing.assert_array_equal(run.steps, np.arange(1, 10))


def test_non_numeric_values(tmp_path):
    p = tmp_path / "x.jsonl"
    rows = [{"step": s, "reward_mean": 0.1 * s, "ckpt": f"checkpoint-{s}", "grad_norm": "oops" if s == 2 else 1.0}
            for s in range(1, 5)]
    p.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.warns(LogWarning, match="non-numeric values read as NaN in: grad_norm"):
        run = read_log(p)
    assert "ckpt" not in run.columns and run.meta["non_numeric_columns"] == ["ckpt"]
    assert np.isnan(run.columns["grad_norm"][1])


def test_no_traceback_from_inside_parsers(tmp_path):
    """Fuzz: random corruptions of every fixture raise only LogFormatError (or read with warnings)."""
    rng = np.random.default_rng(0)
    fix = BAD.parent
    files = [p for p in fix.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl", ".log", ".csv")]
    files += list(fix.rglob("*tfevents*"))
    n_err = 0
    for i, src in enumerate(sorted(files)):
        data = bytearray(src.read_bytes())
        for trial in range(3):
            b = bytearray(data)
            cut = int(rng.integers(0, max(len(b), 1)))
            if trial == 0:
                b = b[:cut]
            elif trial == 1 and len(b):
                for j in rng.integers(0, len(b), size=8):
                    b[j] = int(rng.integers(0, 256))
            else:
                b = b[:cut] + b"\n\x00{'a': [1, \n" + b[cut:]
            p = tmp_path / f"{i}_{trial}_{src.name}"
            p.write_bytes(bytes(b))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    read_log(p)
                except LogFormatError as e:
                    assert "\n" not in str(e)
                    n_err += 1
    assert n_err > 0


def test_log_that_starts_over_is_two_runs(tmp_path):
    p = tmp_path / "twice.jsonl"
    p.write_text("".join(json.dumps({"step": s, "reward_mean": k + 0.01 * s}) + "\n" for k in (0, 1) for s in range(1, 6)))
    with pytest.warns(LogWarning, match=r"twice.jsonl: the step counter restarts 1 time"):
        runs = read_logs(p)
    assert [r.name for r in runs] == ["twice#1", "twice#2"]
    for k, r in enumerate(runs):
        np.testing.assert_array_equal(r.steps, np.arange(1, 6))
        np.testing.assert_allclose(r.columns["reward_mean"], k + 0.01 * r.steps)  # never interleaved
        assert r.meta["segment"]["index"] == k + 1 and r.meta["segment"]["of"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(LogFormatError) as e:
            read_log(p)
        assert read_log(p, run="twice#2").columns["reward_mean"][0] == pytest.approx(1.01)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p)) and "holds 2 runs ('twice#1', 'twice#2')" in msg
    assert "run=NAME" in msg and "read_logs" in msg
