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
        ("bad_step.jsonl", "step value 1.5 is not an integer"),
    ],
)
def test_errors_name_file_and_problem(name, match):
    _err(BAD / name, match)


def test_a_broken_jsonl_line_in_the_middle_is_skipped_and_counted():
    """A line that is not JSON is skipped with a warning naming it; the report counts it."""
    path = BAD / "broken_middle.jsonl"
    with pytest.warns(LogWarning, match=r"skipped 1 of \d+ lines that are not JSON objects \(first: line 5\)"):
        run = read_log(path)
    assert run.report.skipped_rows["lines that are not JSON"] == {"count": 1, "first_line": 5}
    good = [json.loads(x) for x in path.read_text().splitlines() if x.strip().startswith("{") and x.strip().endswith("}")]
    assert len(run) == len(good)


def test_errors_made_on_the_fly(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"log_history": [{"reward": 1.0}]}')
    _err(p, "log_history[0] has no 'step'")
    p.write_text('{"foo": 1}')
    _err(p, "JSON without a table of metrics")
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
    # read_log: the last run, with a one-line warning naming the others and how to get them
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        last = read_log(p)
        assert read_log(p, run="twice#1").columns["reward_mean"][0] == pytest.approx(0.01)
    np.testing.assert_allclose(last.columns["reward_mean"], 1 + 0.01 * last.steps)
    msg = next(str(w.message) for w in caught if "read the last" in str(w.message))
    assert "\n" not in msg and msg.startswith(str(p)) and "holds 2 runs ('twice#1', 'twice#2')" in msg
    assert "run=NAME" in msg and "read_logs" in msg


# ------------------------------------------------------------------------ TensorBoard: CRC-checked records
def _event_file(folder: pathlib.Path, n: int = 30) -> tuple[pathlib.Path, list[int]]:
    """An event file written by tensorboard's own EventFileWriter: reward 0.01·s at steps 1..n.

    Returns the file and the byte offset of every record (the first is the file-version event).
    """
    import struct

    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(folder))
    for s in range(1, n + 1):
        w.add_event(Event(step=s, wall_time=1.0 + s, summary=Summary(value=[Summary.Value(tag="reward", simple_value=0.01 * s)])))
    w.close()
    [path] = folder.glob("*tfevents*")
    data = path.read_bytes()
    offsets, p = [], 0
    while p < len(data):
        offsets.append(p)
        p += 16 + struct.unpack_from("<Q", data, p)[0]
    assert p == len(data) and len(offsets) == n + 1
    return path, offsets


def _read_warned(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = read_log(path)
    msgs = [str(w.message) for w in caught if issubclass(w.category, LogWarning)]
    return run, msgs


def test_masked_crc32c_matches_tensorboards_reference():
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    from grpojax.logs._tensorboard import _VECTOR_MAX, _masked_crcs

    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, 3 * _VECTOR_MAX, dtype=np.uint8)
    starts = rng.integers(0, _VECTOR_MAX, 60)
    lengths = np.r_[rng.integers(0, 300, 55), 0, 1, _VECTOR_MAX, _VECTOR_MAX + 1, 2 * _VECTOR_MAX - 7]
    got = _masked_crcs(buf, starts, lengths)
    want = [masked_crc32c(buf[a:a + n].tobytes()) for a, n in zip(starts, lengths)]
    np.testing.assert_array_equal(got, np.asarray(want, dtype=np.uint32))


def test_tensorboard_value_with_a_flipped_bit_is_skipped_with_a_warning(tmp_path):
    path, offsets = _event_file(tmp_path)
    data = bytearray(path.read_bytes())
    # step 15's record: a bit flipped in the float's exponent turns 0.15 into ~5e37
    value_at = data.index(np.float32(0.15).tobytes(), offsets[15])
    assert value_at < offsets[16]
    data[value_at + 3] ^= 0x40
    path.write_bytes(bytes(data))
    run, msgs = _read_warned(path)
    s, r = run.series("reward_mean")
    np.testing.assert_array_equal(s, [k for k in range(1, 31) if k != 15])
    np.testing.assert_allclose(r, 0.01 * s, rtol=1e-6)  # no corrupted value is read
    [msg] = msgs
    assert msg.startswith(str(path)) and "1 record(s) fail their CRC32C check" in msg
    assert f"at byte {offsets[15]}" in msg and "step(s) 15" in msg and "1 point(s) lost" in msg
    assert run.meta["warnings"] == [msg[len(str(path)) + 2:]]


def test_tensorboard_corrupt_length_field_skips_to_the_next_valid_record(tmp_path):
    path, offsets = _event_file(tmp_path)
    data = bytearray(path.read_bytes())
    data[offsets[10]] ^= 0x07  # the length of step 10's record: the reader cannot trust where the next one starts
    path.write_bytes(bytes(data))
    run, msgs = _read_warned(path)
    np.testing.assert_array_equal(run.steps, [k for k in range(1, 31) if k != 10])
    np.testing.assert_allclose(run.columns["reward_mean"], 0.01 * run.steps, rtol=1e-6)
    [msg] = msgs
    assert f"a record header fails its CRC32C check at byte {offsets[10]}" in msg
    assert f"bytes {offsets[10]}-{offsets[11]}" in msg and "between step 9 and step 11" in msg


@pytest.mark.parametrize("keep", [1 / 3, 0.5, 0.9])
def test_truncated_tensorboard_file_warns_where_points_were_lost(tmp_path, keep):
    path, offsets = _event_file(tmp_path)
    data = path.read_bytes()
    cut = int(len(data) * keep)
    if cut in offsets:
        cut += 5  # inside a record: a cut at a record boundary is indistinguishable from a finished run
    path.write_bytes(data[:cut])
    run, msgs = _read_warned(path)
    last = max(k for k in range(1, 30) if offsets[k + 1] <= cut)  # the last record that is whole
    assert run.steps.tolist() == list(range(1, last + 1))
    np.testing.assert_allclose(run.columns["reward_mean"], 0.01 * run.steps, rtol=1e-6)
    [msg] = msgs
    assert f"at byte {offsets[last + 1]} ({cut - offsets[last + 1]} bytes of it present" in msg
    assert "ends in a partial record" in msg and f"the points logged after step {last} are lost" in msg


def test_tensorboard_file_with_no_valid_record_is_an_error(tmp_path):
    path, offsets = _event_file(tmp_path, n=3)
    data = bytearray(path.read_bytes())
    for o in offsets:
        data[o + 8] ^= 0xFF  # every header CRC broken
    path.write_bytes(bytes(data))
    with pytest.raises(LogFormatError, match="not a readable TensorBoard event file: a record header fails"):
        read_log(path)


# ---------------------------------------------------------------------------------- mixed formats, deep JSON
def _trl_line(s):
    return f"{{'loss': 0.1, 'reward': {0.01 * s:.4f}, 'epoch': {s / 60:.2f}}}"


def _verl_line(s):
    return f"step:{s} - critic/score/mean:{0.01 * s:.4f} - actor/entropy:0.3"


@pytest.mark.parametrize("trl_first", [True, False])
def test_console_log_mixing_two_formats_is_refused(tmp_path, trl_first):
    trl = [_trl_line(s) for s in range(1, 31)]
    verl = [_verl_line(s) for s in range(31, 61)]
    p = tmp_path / "mixed.log"
    p.write_text("\n".join(trl + verl if trl_first else verl + trl) + "\n")
    msg = _err(p, "mixes two log formats")
    t_line, v_line = (1, 31) if trl_first else (31, 1)
    assert f"30 trl_console entries (first at line {t_line})" in msg
    assert f"30 verl_console entries (first at line {v_line})" in msg
    # a format chosen by the caller reads its entries, with a warning naming the others
    with pytest.warns(LogWarning, match=r"holds 30 trl_console entries .* the verl_console entries are ignored"):
        run = read_log(p, format="trl_console")
    assert run.count("reward_mean") == 30


def test_console_head_guess_gives_way_to_the_format_found_in_the_file(tmp_path):
    """A config fragment that looks like a Trainer dict in the head is not a second format."""
    p = tmp_path / "verl.log"
    config = "    {'alfworld': {'eval_dataset': 'eval_in_distribution'}\n"
    p.write_text(config + "x" * 70_000 + "\n" + "\n".join(_verl_line(s) for s in range(1, 11)) + "\n")
    run = read_log(p)
    assert run.format == "verl_console" and run.count("reward_mean") == 10


@pytest.mark.parametrize(
    "foreign, kind",
    [
        (lambda s: {"step": s, "data": {"critic/score/mean": 0.01 * s}}, "verl_jsonl"),
        (lambda s: {"train/global_step": s, "train/reward": 0.01 * s}, "openrlhf_jsonl"),
    ],
)
def test_jsonl_with_lines_of_another_format_is_refused(tmp_path, foreign, kind):
    p = tmp_path / "mixed.jsonl"
    rows = [{"step": s, "reward_mean": 0.01 * s} for s in range(1, 21)] + [foreign(s) for s in range(21, 61)]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    msg = _err(p, "mixes two log formats")
    assert "20 jsonl line(s) (first at line 1)" in msg and f"40 {kind} line(s) (first at line 21)" in msg


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("deep.json", '{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        ("deep_dicts.json", '{"log_history": [' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "]}", "nested too deeply"),
        ("deep.jsonl", '{"step": 1, "reward_mean": 0.1}\n{"step": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
         "line 2 is JSON nested too deeply"),
        ("deep_verl.jsonl", '{"step": 1, "data": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "nested too deeply"),
    ],
)
def test_deeply_nested_json_is_a_one_line_error(tmp_path, name, text, match):
    p = tmp_path / name
    p.write_text(text)
    _err(p, match)


# --------------------------------------------------------------------------------- JSONL record lines
def test_record_lines_fold_into_meta_and_survive_truncation(tmp_path):
    from grpojax.logs import JsonlLogger, read_jsonl, truncate_jsonl

    p = tmp_path / "run.jsonl"
    with JsonlLogger(p, name="r", meta={"group_size": 4}) as log:
        for s in range(1, 4):
            log.write(s, reward_mean=0.1 * s)
    with JsonlLogger(p, name="r", append=True) as log:
        rec = log.record("resume", from_step=3, config_changes={"optim.lr": [0.01, 0.005]})
        log.write(4, reward_mean=0.4)
        with pytest.raises(ValueError, match="kind=''"):
            log.record("")
    lines = p.read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[4]) == rec  # one header only, the record in place
    assert rec == {"_grpojax": {"record": "resume", "from_step": 3, "config_changes": {"optim.lr": [0.01, 0.005]}}}
    [run] = read_jsonl(p)
    np.testing.assert_array_equal(run.steps, [1, 2, 3, 4])
    assert run.meta["records"] == [rec["_grpojax"]] and run.meta["group_size"] == 4
    assert truncate_jsonl(p, 3) == 5  # the record of a resume from step 3 stays
    assert truncate_jsonl(p, 2) == 3  # cut back below it: gone
    [run] = read_jsonl(p)
    assert "records" not in run.meta and run.steps.tolist() == [1, 2]
