"""`grpojax watch` on a JSONL log that a writer subprocess appends a simulated bandit run to."""

import json
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest

from grpojax.bandit import BanditConfig, rollout_log, with_fixed_point
from grpojax.cli import main
from grpojax.logs import jsonl_header

N = 120

WRITER = textwrap.dedent("""
    import json, sys, time
    rows, path, chunk, pause = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    with open(path, "a") as f:
        for i, row in enumerate(rows):
            f.write(json.dumps(row) + "\\n")
            if (i + 1) % chunk == 0:
                f.flush()
                time.sleep(pause)
""")


@pytest.fixture(scope="module")
def rows():
    cfg = with_fixed_point(BanditConfig(0.05, 0.9, 2, 16, beta=0.1, p_ref=0.5, p_init=0.2), 0.8)
    log = rollout_log(cfg, N, key=jax.random.key(0))
    cols = {k: np.asarray(v) for k, v in log.items() if np.asarray(v).ndim == 1}
    return [{"step": int(s), **{k: float(cols[k][i]) for k in ("reward_mean", "eval_reward", "frac_zero_std", "kl",
                                                             "entropy", "grad_norm")}}
            for i, s in enumerate(cols["step"])]


def _start_writer(tmp_path, rows, chunk=20, pause=1.5):
    log = tmp_path / "run.jsonl"
    meta = dict(eta=0.05, mu=0.9, k_ref=2, lag="constant", curvature=0.2, max_steps=N)
    log.write_text(json.dumps(jsonl_header("bandit", meta=meta)) + "\n")
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "rows.json"), str(log), str(chunk), str(pause)])
    return log, proc


def test_watch_follows_a_growing_log_and_stops_on_idle(tmp_path, rows, capsys):
    log, proc = _start_writer(tmp_path, rows)
    out = tmp_path / "watch" / "report.json"
    t0 = time.monotonic()
    try:
        rc = main(["watch", str(log), "--every", "20", "--idle-timeout", "3", "--poll", "0.2", "--method", "persistence",
                   "--json", str(out), "--no-live"])
    finally:
        proc.wait(timeout=60)
    assert rc == 0 and proc.returncode == 0
    assert time.monotonic() - t0 >= 3.0
    rep = json.loads(out.read_text())
    assert rep["status"] == "stopped (idle)"
    assert rep["n_points"] == N and rep["step"] == N
    assert rep["updates"] >= 3  # the log was read while it grew, not only at the end
    assert rep["forecast"]["method"] == "persistence" and rep["forecast"]["lo"] < rep["forecast"]["hi"]
    assert rep["stability"]["curvature_source"] == "log meta"
    assert 0 < rep["stability"]["margin"] < 1
    assert rep["best"]["metric"] == "eval_reward"
    printed = capsys.readouterr().out
    assert printed.count("forecast") >= 2 and "log idle for 3 s" in printed


def test_watch_live_panel_renders(tmp_path, rows, capsys):
    log, proc = _start_writer(tmp_path, rows[:40], chunk=40, pause=0.0)
    proc.wait(timeout=60)
    out = tmp_path / "r.json"
    rc = main(["watch", str(log), "--every", "10", "--idle-timeout", "1", "--poll", "0.2", "--method", "persistence",
               "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "grpojax watch" in text and "forecast" in text and "best so far" in text
    assert json.loads(out.read_text())["n_points"] == 40


def test_watch_errors_are_one_line(tmp_path, capsys):
    assert main(["watch", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nope.jsonl" in err
    (tmp_path / "a.jsonl").write_text("")
    assert main(["watch", str(tmp_path / "a.jsonl"), "--every", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--every" in err
    assert main(["watch", str(tmp_path / "a.jsonl"), "--bounds", "0", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--bounds" in err


def test_watch_help_has_example(capsys):
    with pytest.raises(SystemExit):
        main(["watch", "--help"])
    assert "Example:" in capsys.readouterr().out
