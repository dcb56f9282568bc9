"""The trainer's run log goes through grpojax.logs' one JSONL writer: header, non-finite values,
nested metrics, truncation on resume, TensorBoard mirror; read back by grpojax.logs and the trainer."""

from __future__ import annotations

import json
import math

import numpy as np

from grpojax import logs
from grpojax.grpo import read_jsonl_metrics


def _write(tmp_path, tensorboard=False):
    path = tmp_path / "metrics.jsonl"
    header = logs.jsonl_header("t", source="test", meta={"k_ref": 2})
    with logs.JsonlLogger(path, header=header, append=True,
                          tensorboard_dir=tmp_path / "tb" if tensorboard else None) as log:
        log.write(0, {"eval_reward": 0.25})
        log.write(1, {"reward_mean": 0.5, "kl": np.float32(0.01), "timing_s": {"rollout": 1.5}, "unparsed": 3})
        log.write(2, {"reward_mean": 0.75, "kl": float("nan"), "grad_norm": math.inf})
    return path


def test_jsonl_lines_and_nonfinite(tmp_path):
    path = _write(tmp_path)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["_grpojax"]["meta"] == {"k_ref": 2} and lines[1] == {"step": 0, "eval_reward": 0.25}
    assert lines[2]["timing_s/rollout"] == 1.5 and lines[2]["unparsed"] == 3
    assert lines[2]["kl"] == float(np.float32(0.01))
    assert lines[3]["kl"] == "nan" and lines[3]["grad_norm"] == "inf"
    recs = read_jsonl_metrics(path)
    assert [r["step"] for r in recs] == [0, 1, 2] and math.isnan(recs[2]["kl"]) and recs[2]["grad_norm"] == math.inf


def test_truncate_keeps_header_and_drops_torn_lines(tmp_path):
    path = _write(tmp_path)
    path.write_text(path.read_text() + '{"step": 3, "rew')  # a line torn by a kill
    assert logs.truncate_jsonl(path, 1) == 3
    assert [r["step"] for r in read_jsonl_metrics(path)] == [0, 1]
    # a resumed run appends after the truncation and keeps a single header
    with logs.JsonlLogger(path, header=logs.jsonl_header("t"), append=True) as log:
        log.write(2, {"reward_mean": 0.1})
    assert sum("_grpojax" in x for x in path.read_text().splitlines()) == 1
    assert [r["step"] for r in read_jsonl_metrics(path)] == [0, 1, 2]
    assert logs.truncate_jsonl(path.with_name("absent.jsonl"), 3) == 0


def test_grpojax_logs_reads_jsonl_and_tensorboard(tmp_path):
    path = _write(tmp_path, tensorboard=True)
    run = logs.read_log(path)
    assert list(run.steps) == [0, 1, 2] and run.meta.get("k_ref") == 2
    np.testing.assert_allclose(run.series("reward_mean")[1], [0.5, 0.75])
    assert np.isnan(run.columns["kl"][2])
    tb = logs.read_log(tmp_path / "tb")
    np.testing.assert_allclose(tb.series("reward_mean")[1], [0.5, 0.75], rtol=1e-6)
