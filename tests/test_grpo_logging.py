"""The trainer's run log: grpojax JSONL (header, non-finite values), truncation on resume, TensorBoard."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpojax.grpo import RunLogger, read_jsonl_metrics, truncate_log


def _write(tmp_path, tensorboard=False):
    path = tmp_path / "metrics.jsonl"
    header = {"_grpojax": {"version": 1, "name": "t", "format": "jsonl", "source": "test", "meta": {"k_ref": 2}}}
    with RunLogger(path, header=header, tensorboard_dir=tmp_path / "tb" if tensorboard else None) as log:
        log.log(0, {"eval_reward": 0.25})
        log.log(1, {"reward_mean": 0.5, "kl": np.float32(0.01), "timing_s": {"rollout": 1.5}, "unparsed": 3})
        log.log(2, {"reward_mean": 0.75, "kl": float("nan"), "grad_norm": math.inf})
    return path


def test_jsonl_lines_and_nonfinite(tmp_path):
    path = _write(tmp_path)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert "_grpojax" in lines[0] and lines[1] == {"step": 0, "eval_reward": 0.25}
    assert lines[2]["timing_s/rollout"] == 1.5 and lines[2]["unparsed"] == 3
    assert lines[3]["kl"] == "nan" and lines[3]["grad_norm"] == "inf"
    recs = read_jsonl_metrics(path)
    assert [r["step"] for r in recs] == [0, 1, 2] and math.isnan(recs[2]["kl"])


def test_truncate_keeps_header_and_drops_torn_lines(tmp_path):
    path = _write(tmp_path)
    path.write_text(path.read_text() + '{"step": 3, "rew')  # a line torn by a kill
    assert truncate_log(path, 1) == 3
    assert [r["step"] for r in read_jsonl_metrics(path)] == [0, 1]
    # appending after truncation keeps a single header
    with RunLogger(path, header={"_grpojax": {"version": 1}}) as log:
        log.log(2, {"reward_mean": 0.1})
    assert sum("_grpojax" in x for x in path.read_text().splitlines()) == 1


def test_grpojax_logs_reads_jsonl_and_tensorboard(tmp_path):
    logs = pytest.importorskip("grpojax.logs")
    path = _write(tmp_path, tensorboard=True)
    (run,) = logs.read_log(path)
    assert list(run.steps) == [0, 1, 2] and run.meta.get("k_ref") == 2
    np.testing.assert_allclose(run.series("reward_mean")[1], [0.5, 0.75])
    assert np.isnan(run.columns["kl"][2])
    tb = logs.read_log(tmp_path / "tb")
    assert len(tb) == 1 and tb[0].has("reward_mean")
    np.testing.assert_allclose(tb[0].series("reward_mean")[1], [0.5, 0.75], rtol=1e-6)
