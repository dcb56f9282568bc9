"""Runs are told apart, never interleaved: TRL console steps, multi-run TensorBoard folders, restarts;
the one moving average; the JSONL writer's streaming features. Small synthetic files only."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from grpojax.logs import (
    JsonlLogger,
    LogFormatError,
    LogWarning,
    RunLog,
    merge_runs,
    moving_average,
    read_log,
    read_logs,
    truncate_jsonl,
)


def reward(s):
    return round(0.2 + 0.01 * s, 6)


def _dict(s, **extra):
    d = {"loss": round(0.001 * s, 6), "reward": reward(s), "reward_std": 0.3, **extra}
    return repr(d)


def _bar(k, total):
    return f"{100 * k // total:3d}%|▌         | {k}/{total} [00:{k % 60:02d}<00:10,  1.00it/s]"


# ------------------------------------------------------------------------------- TRL console
def test_dicts_after_the_whole_progress_bar_get_one_point_each(tmp_path):
    """stdout captured after stderr: every dict follows the finished bar (counter 200). Each dict is
    one point, numbered by its order -- never 200 for all of them."""
    p = tmp_path / "console.log"
    bar = "".join("\r" + _bar(k, 200) for k in range(1, 201))  # tqdm redraws on one physical line
    dicts = [_dict(s, epoch=round(s / 2000, 2)) for s in range(1, 11)]  # epochs too coarse to give steps
    p.write_text(bar + "\n" + "\n".join(dicts) + "\n")
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, np.arange(1, 11))
    np.testing.assert_allclose(run.columns["reward_mean"], [reward(s) for s in range(1, 11)])
    assert run.meta["step_source"].startswith("row number")


def test_dicts_interleaved_with_carriage_return_bars_on_one_line(tmp_path):
    """Bars and dicts on one physical line separated only by \\r: one point per dict."""
    p = tmp_path / "console.log"
    parts = []
    for s in range(1, 7):
        parts += ["\r" + _bar(s, 6), "\r" + _dict(s)]
    p.write_text("".join(parts) + "\n")
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, np.arange(1, 7))
    np.testing.assert_allclose(run.series("loss")[1], 0.001 * np.arange(1, 7))


def test_logged_step_wins_and_epochs_convert_when_precise(tmp_path):
    p = tmp_path / "steps.log"
    p.write_text("\n".join(_dict(s, step=10 * s) for s in range(1, 6)) + "\n")
    run = read_log(p)
    np.testing.assert_array_equal(run.steps, 10 * np.arange(1, 6))
    assert run.meta["step_source"] == "logged step"
    # epochs printed to 4 decimals, 100 steps per epoch (bar total 50 over a final epoch of 0.5),
    # logging every 5 steps; the bar's last counter (50) must not be used for every dict
    q = tmp_path / "epochs.log"
    lines = ["\r".join(_bar(k, 50) for k in range(1, 51))]
    lines += [_dict(s, epoch=round(s / 100, 4)) for s in range(5, 51, 5)]
    lines.append(repr({"train_runtime": 9.0, "train_loss": 0.1, "epoch": 0.5}))
    q.write_text("\n".join(lines) + "\n")
    run = read_log(q)
    np.testing.assert_array_equal(run.steps, np.arange(5, 51, 5))
    np.testing.assert_allclose(run.columns["reward_mean"], [reward(s) for s in range(5, 51, 5)])
    assert run.meta["steps_per_epoch"] == pytest.approx(100.0)


def test_hard_wrapped_dicts_are_joined(tmp_path):
    p = tmp_path / "wrapped.txt"
    text = "\n".join(_dict(s, **{"completions/mean_length": 100.0 + s}) for s in range(1, 5))
    wrapped = "\n".join(line[i:i + 37] for line in text.split("\n") for i in range(0, len(line), 37))
    p.write_text("some banner\n" + wrapped + "\n")
    run = read_log(p, format="trl_console")
    np.testing.assert_array_equal(run.steps, np.arange(1, 5))
    np.testing.assert_allclose(run.columns["response_length"], 100.0 + np.arange(1, 5))
    assert run.meta["wrapped_dicts_joined"] == 4


def test_console_without_dicts_is_one_line_error(tmp_path):
    p = tmp_path / "bars.log"
    p.write_text("\r".join(_bar(k, 9) for k in range(1, 10)) + "\n")
    with pytest.raises(LogFormatError, match=r"bars.log: no Trainer log dicts found"):
        read_log(p, format="trl_console")


# ------------------------------------------------------------------------------ TensorBoard
def _events(folder, steps_values, tag="train/reward", suffix=""):
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(folder), filename_suffix=suffix)
    for s, v in steps_values:
        w.add_event(Event(wall_time=1.0 + s, step=int(s),
                          summary=Summary(value=[Summary.Value(tag=tag, simple_value=float(v))])))
    w.close()
    return w.get_logdir()


def _two_run_folder(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    _events(folder, [(s, 0.1 * s) for s in range(1, 11)], suffix=".a")
    _events(folder, [(s, 1.0 + 0.1 * s) for s in range(1, 8)], suffix=".b")  # counter restarts at 1
    return folder


def test_tensorboard_folder_of_runs_is_several_runs(tmp_path):
    folder = _two_run_folder(tmp_path)
    with pytest.warns(LogWarning, match="read as 2 separate runs"):
        runs = read_logs(folder)
    assert len(runs) == 2
    a, b = sorted(runs, key=lambda r: len(r), reverse=True)
    np.testing.assert_array_equal(a.steps, np.arange(1, 11))
    np.testing.assert_allclose(a.columns["reward_mean"], 0.1 * a.steps, rtol=1e-6)
    np.testing.assert_array_equal(b.steps, np.arange(1, 8))
    np.testing.assert_allclose(b.columns["reward_mean"], 1.0 + 0.1 * b.steps, rtol=1e-6)
    assert a.name != b.name and a.source != b.source
    # read_log: one line naming both runs and how to pick one; a run's own file reads alone
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(LogFormatError) as e:
            read_log(folder)
    msg = str(e.value)
    assert "\n" not in msg and "holds 2 runs" in msg and a.name in msg and b.source in msg
    one = read_log(b.source)
    np.testing.assert_allclose(one.columns["reward_mean"], b.columns["reward_mean"])


def test_one_event_file_whose_counter_restarts_is_split(tmp_path):
    steps_values = [(s, 0.1 * s) for s in range(0, 6)] + [(s, 5.0 + s) for s in range(0, 4)]
    fn = _events(tmp_path, steps_values)
    [path] = list(tmp_path.glob("*tfevents*"))
    with pytest.warns(LogWarning, match="separate runs"):
        runs = read_logs(path)
    assert [len(r) for r in runs] == [6, 4] and [r.name[-2:] for r in runs] == ["#1", "#2"]
    np.testing.assert_allclose(runs[1].columns["reward_mean"], 5.0 + np.arange(4))
    assert fn == str(tmp_path)


def test_resumed_event_file_continues_the_run(tmp_path):
    _events(tmp_path, [(s, 0.1 * s) for s in range(1, 26)], suffix=".a")
    _events(tmp_path, [(s, 1.0 + 0.1 * s) for s in range(20, 41)], suffix=".b")  # resumed from step 19
    with pytest.warns(LogWarning, match="logged more than once"):
        run = read_log(tmp_path)
    np.testing.assert_array_equal(run.steps, np.arange(1, 41))
    expect = np.where(run.steps >= 20, 1.0, 0.0) + 0.1 * run.steps  # the resumed file's values win
    np.testing.assert_allclose(run.columns["reward_mean"], expect, rtol=1e-6)


def test_event_files_are_taken_in_creation_order_when_the_counter_gains_a_digit(tmp_path):
    """The writer names files ``events.out.tfevents.<time>.<host>.<pid>.<counter>``: counter 10 comes after 9
    (a plain string sort puts it first, and a resumed run would be read before the run it resumes)."""
    from grpojax.logs._text import event_files

    names = ["events.out.tfevents.1700000000.vm.812.10.b", "events.out.tfevents.1700000000.vm.812.9.a",
             "events.out.tfevents.1699999999.vm.99.11", "events.out.tfevents.1700000001.vm.7.2"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    got = [p.rsplit("/", 1)[-1] for p in event_files(str(tmp_path))]
    assert got == [names[2], names[1], names[0], names[3]]


def test_restarted_event_segment_without_reward_is_one_line_error(tmp_path):
    _events(tmp_path, [(s, 1.0) for s in range(1, 5)], tag="train/loss")
    [path] = list(tmp_path.glob("*tfevents*"))
    with pytest.raises(LogFormatError) as e:
        read_log(path)
    assert str(e.value).startswith(str(path)) and "no reward column" in str(e.value) and "\n" not in str(e.value)


def test_run_with_only_an_eval_reward_is_read(tmp_path):
    """A run that logged only its eval accuracy is a run: read, with that column and its header's meta, and
    usable by the eval metric; a file with no reward at all is still refused in one line."""
    head = {"_grpojax": {"version": 1, "name": "lr-sweep", "meta": {"lr": 3e-5}}}
    rows = [{"step": s, "eval_reward": 0.5 + 0.01 * s} for s in range(0, 50, 5)] + [{"step": 52, "loss": 0.1}]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [head, *rows]) + "\n")
    run = read_log(path)
    steps, ev = run.series("eval_reward")
    assert run.name == "lr-sweep" and run.meta["lr"] == 3e-5 and "reward_mean" not in run.columns
    assert list(steps) == list(range(0, 50, 5)) and ev[-1] == pytest.approx(0.95)
    path.write_text("\n".join(json.dumps(r) for r in [head, {"step": 0, "loss": 1.0}, {"step": 1, "loss": 0.9}]))
    with pytest.raises(LogFormatError) as e:
        read_log(path)
    assert "no reward column" in str(e.value) and "\n" not in str(e.value)


def test_cli_diagnose_writes_one_folder_per_run(tmp_path):
    from grpojax.cli import main

    folder = tmp_path / "runs"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for suffix, shift in ((".a", 0.0), (".b", 0.2)):
        _events(folder, [(s, shift + 0.8 - 0.5 * math.exp(-s / 20) + 0.02 * rng.standard_normal())
                         for s in range(1, 61)], suffix=suffix)
    out = tmp_path / "diag"
    assert main(["diagnose", str(folder), "--out", str(out), "--no-plot", "--no-validity"]) == 0
    rep = json.loads((out / "diagnosis.json").read_text())
    assert len(rep["runs"]) == 2
    subs = sorted(p.parent.name for p in out.glob("*/diagnosis.json"))
    assert len(subs) == 2
    for sub in subs:
        [one] = json.loads((out / sub / "diagnosis.json").read_text())["runs"]
        assert one["run"] in {r["run"] for r in rep["runs"]}
    name = rep["runs"][1]["run"]
    out2 = tmp_path / "one"
    assert main(["diagnose", str(folder), "--out", str(out2), "--no-plot", "--no-validity", "--run", name]) == 0
    assert [r["run"] for r in json.loads((out2 / "diagnosis.json").read_text())["runs"]] == [name]
    assert main(["diagnose", str(folder), "--out", str(out2), "--run", "nope"]) == 2


# ---------------------------------------------------------------------------- moving average
def _reference_ma(y, w, edge):
    out = np.full(y.shape, np.nan)
    for i in range(y.size):
        lo, hi = i - (w - 1) // 2, i - (w - 1) // 2 + w
        if edge == "nan" and (lo < 0 or hi > y.size):
            continue
        out[i] = np.mean(y[max(lo, 0):min(hi, y.size)])
    return out


@pytest.mark.parametrize("edge", ["shrink", "nan"])
@pytest.mark.parametrize("w", [1, 2, 3, 4, 7, 30])
def test_moving_average_matches_direct_reference(edge, w):
    y = np.random.default_rng(w).standard_normal(23)
    np.testing.assert_allclose(moving_average(y, w, edge=edge), _reference_ma(y, w, edge), rtol=1e-12,
                               atol=1e-12, equal_nan=True)
    batch = np.stack([y, 2 * y])  # (..., T)
    np.testing.assert_allclose(moving_average(batch, w, edge=edge)[1], 2 * _reference_ma(y, w, edge),
                               rtol=1e-12, atol=1e-12, equal_nan=True)


def test_moving_average_bad_arguments():
    with pytest.raises(ValueError, match="edge must be one of shrink, nan, got 'same'"):
        moving_average(np.ones(5), 3, edge="same")
    with pytest.raises(ValueError, match="positive integer, got 0"):
        moving_average(np.ones(5), 0, edge="nan")
    with pytest.raises(TypeError):
        moving_average(np.ones(5), 3)  # the edge policy is always explicit


# ------------------------------------------------------------------------------ JSONL writer
def test_jsonl_logger_append_truncate_and_mirror(tmp_path):
    path = tmp_path / "m.jsonl"
    with JsonlLogger(path, name="t", meta={"k": 2}, tensorboard_dir=tmp_path / "tb") as log:
        rec = log.write(1, {"reward_mean": np.float32(0.5), "timing": {"rollout": 1.5}, "note": "x"})
        log.write(2, reward_mean=0.6, kl=float("nan"))
        log.write(3, reward_mean=0.7)
    assert rec == {"step": 1, "reward_mean": 0.5, "timing/rollout": 1.5, "note": "x"}
    assert truncate_jsonl(path, 2) == 3  # header + steps 1, 2
    path.write_text(path.read_text() + '{"step": 3, "rew')  # a torn line
    assert truncate_jsonl(path, 2) == 3
    with JsonlLogger(path, name="t", append=True) as log:  # resumed: no second header
        log.write(3, reward_mean=0.9)
    lines = path.read_text().splitlines()
    assert sum("_grpojax" in x for x in lines) == 1 and json.loads(lines[2])["kl"] == "nan"
    run = read_log(path)
    np.testing.assert_allclose(run.columns["reward_mean"], [0.5, 0.6, 0.9])
    assert run.meta["k"] == 2 and np.isnan(run.columns["kl"][1])
    tb = read_log(tmp_path / "tb")
    np.testing.assert_allclose(tb.columns["reward_mean"], [0.5, 0.6, 0.7], rtol=1e-6)


def test_merge_runs_and_from_columns_errors():
    a = RunLog.from_columns({"reward_mean": [1.0, 2.0, 3.0]}, steps=[1, 2, 3])
    b = RunLog.from_columns({"reward_mean": [9.0, 4.0]}, steps=[3, 4])
    m = merge_runs([a, b])
    np.testing.assert_allclose(m.columns["reward_mean"], [1.0, 2.0, 9.0, 4.0])
    with pytest.raises(ValueError, match="at least one run"):
        merge_runs([])
    with pytest.raises(ValueError, match="steps must be integers"):
        RunLog.from_columns({"reward_mean": [1.0, 2.0]}, steps=[0.5, 1.0])
    assert a.count("kl") == 0 and not a.has("kl") and a.has("reward_mean", 3) and not a.has("reward_mean", 4)
    with pytest.raises(KeyError, match="no column 'kl'"):
        a.series("kl")
