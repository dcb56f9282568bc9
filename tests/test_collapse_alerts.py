"""Collapse-risk alerts (grpojax.monitor._alerts): causal precursor alerts in the watch engine, the hook and
``grpojax watch --alert-file / --on-alert``."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from grpojax.diagnose import DEFAULT_CONFIG
from grpojax.diagnose._events import detect_events
from grpojax.logs import RunLog, jsonl_header
from grpojax.monitor import AlertConfig, MonitorConfig, MonitorHook, collapse_risk, init_state, update


def _run(n=300, onset=240, jump_at=None, metric="entropy", seed=0, fall=4):
    """Reward rising 0.1 -> 0.7 (time constant n/8), collapsing to 0.05 over ``fall`` points at ``onset``
    (None: no collapse); ``metric`` jumps (entropy /3, length x0.4, KL +0.2, grad norm x20) at ``jump_at``."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=float)
    r = 0.1 + 0.6 * (1 - np.exp(-t / (n / 8)))
    if onset is not None:
        ramp = np.clip((t - onset + 1) / fall, 0, 1)
        r = r * (1 - ramp) + 0.05 * ramp
    cols = {"reward_mean": r + 0.03 * rng.standard_normal(n),
            "entropy": 0.6 + 0.01 * rng.standard_normal(n),
            "response_length": 300 + 5 * rng.standard_normal(n),
            "kl": 0.02 + 0.002 * rng.standard_normal(n),
            "grad_norm": 0.3 * np.exp(0.1 * rng.standard_normal(n))}
    if jump_at is not None:
        k = jump_at
        if metric == "entropy":
            cols[metric][k:] /= 3
        elif metric == "response_length":
            cols[metric][k:] *= 0.4
        elif metric == "kl":
            cols[metric][k:] += 0.2
        else:
            cols[metric][k:] *= 20
    return RunLog.from_columns(cols, name=f"sim-{seed}")


def _prefix(run, i):
    return RunLog(run.name, run.source, run.format, run.steps[:i], {k: v[:i] for k, v in run.columns.items()},
                  dict(run.meta))


@pytest.mark.parametrize("metric", ["entropy", "response_length", "grad_norm"])
def test_a_precursor_jump_while_the_reward_holds_is_a_warning_naming_it(metric):
    run = _run(onset=None, jump_at=250, metric=metric)
    cut = _prefix(run, 262)  # 12 points after the jump, the reward still at its plateau
    risk = collapse_risk(cut, detect_events(cut, DEFAULT_CONFIG))
    assert risk is not None and risk["level"] == "warning"
    assert [p["metric"] for p in risk["precursors"]] == [metric]
    assert abs(risk["precursors"][0]["step"] - 250) <= 2
    # the same run before the jump and a healthy run at the same length: no risk
    before = _prefix(run, 249)
    assert collapse_risk(before, detect_events(before, DEFAULT_CONFIG)) is None
    healthy = _prefix(_run(onset=None, seed=1), 262)
    assert collapse_risk(healthy, detect_events(healthy, DEFAULT_CONFIG)) is None


def test_a_kl_jump_alone_is_info_until_the_reward_falls():
    """The KL rises through healthy runs: its jump alone is info (named in the chain), a warning once the
    reward has lost ``falling_fraction`` of its rise, and a warning again with ``info_only=()``."""
    run = _run(onset=None, jump_at=250, metric="kl")
    cut = _prefix(run, 262)
    ev = detect_events(cut, DEFAULT_CONFIG)
    risk = collapse_risk(cut, ev)
    assert risk["level"] == "info" and [p["metric"] for p in risk["precursors"]] == ["kl"]
    assert collapse_risk(cut, ev, config=AlertConfig(info_only=()))["level"] == "warning"
    # the reward has started to fall (a third of its rise lost, not yet half) when the KL jumps: a warning
    falling = _run(onset=255, jump_at=250, metric="kl", fall=30)
    risk = None
    for i in range(258, 290):
        cut = _prefix(falling, i)
        risk = collapse_risk(cut, detect_events(cut, DEFAULT_CONFIG))
        lost = risk["reward"]["lost"] if risk else 0.0
        if AlertConfig().falling_fraction <= lost < AlertConfig().fallen_fraction:
            break
    else:
        pytest.fail("the reward never stood between falling and fallen")
    assert risk["level"] == "warning" and [p["metric"] for p in risk["precursors"]] == ["kl"], risk
    with pytest.raises(Exception, match="unknown: kll"):
        AlertConfig(info_only=("kll",))


def test_two_precursors_are_critical_and_a_fallen_reward_is_no_longer_a_warning():
    run = _run(onset=None, jump_at=250, metric="entropy")
    cols = {k: np.array(v) for k, v in run.columns.items()}
    cols["kl"][252:] += 0.2
    both = RunLog.from_columns(cols, name="two")
    cut = _prefix(both, 265)
    risk = collapse_risk(cut, detect_events(cut, DEFAULT_CONFIG))
    assert risk["level"] == "critical" and {p["metric"] for p in risk["precursors"]} == {"entropy", "kl"}
    # the collapse already happened (reward at its floor): the collapse finding's business, not an alert
    fallen = _prefix(_run(onset=200, jump_at=195, metric="entropy"), 215)
    assert collapse_risk(fallen, detect_events(fallen, DEFAULT_CONFIG)) is None


def test_the_stability_margin_raises_info_and_warning():
    run = _prefix(_run(onset=None), 100)
    ev = detect_events(run, DEFAULT_CONFIG)
    cfg = AlertConfig()
    assert collapse_risk(run, ev, stability={"margin": 0.5}) is None
    assert collapse_risk(run, ev, stability={"margin": cfg.margin_info / 2})["level"] == "info"
    assert collapse_risk(run, ev, stability={"margin": -0.1})["level"] == "warning"
    assert collapse_risk(run, ev, escape=cfg.escape_warning)["level"] == "warning"


def test_the_engine_alerts_before_the_collapse_from_the_points_so_far_only():
    """Replayed row by row, the engine raises a warning after the entropy jump and before the reward has lost
    half its rise; each alert is what collapse_risk gives on the prefix the engine had seen."""
    run = _run(n=300, onset=270, jump_at=240, metric="entropy")
    config = MonitorConfig(forecast=False, every=5)
    state, raised = init_state(), []
    for i in range(1, 301):
        state, rep = update(state, _prefix(run, i), config)
        raised += [(i, a) for a in rep.new_alerts]
    assert raised, "no alert"
    i, first = raised[0]
    assert first["level"] in ("warning", "critical") and first["precursors"][0]["metric"] == "entropy"
    assert 240 < first["step"] < 271  # after the jump, before the collapse
    cut = _prefix(run, i)
    again = collapse_risk(cut, detect_events(cut, DEFAULT_CONFIG))
    assert again["level"] == first["level"] and again["precursors"] == first["precursors"]
    assert rep.alerts == tuple(a for _, a in raised)  # the report lists every alert so far


def test_the_engine_raises_nothing_on_a_healthy_run_and_only_when_the_level_goes_up():
    config = MonitorConfig(forecast=False, every=5)
    state = init_state()
    for i in range(1, 301):
        state, rep = update(state, _prefix(_run(onset=None, seed=3), i), config)
    assert rep.alerts == ()
    run = _run(onset=None, jump_at=200, metric="grad_norm")
    state, levels = init_state(), []
    for i in range(1, 301):
        state, rep = update(state, _prefix(run, i), config)
        levels += [a["level"] for a in rep.new_alerts]
    assert levels == ["warning"]  # the risk holds (or flickers) over many updates: raised once


def test_the_hook_reports_the_alerts():
    run = _run(n=300, onset=270, jump_at=240, metric="grad_norm")
    seen = []
    hook = MonitorHook(config=MonitorConfig(forecast=False, every=5), max_overhead=1.0,
                       on_report=lambda r: seen.extend(r.new_alerts))
    for i, s in enumerate(run.steps):
        hook(int(s), {k: float(v[i]) for k, v in run.columns.items()})
    assert seen and seen[0]["precursors"][0]["metric"] == "grad_norm" and 240 < seen[0]["step"] < 271
    assert hook.report.alerts[0] == seen[0]
    logged = hook.log_entries()  # what the TRL callback hands the trainer's reporters
    assert logged["monitor/alerts"] == len(hook.report.alerts)
    assert logged["monitor/alert_level"] == ("info", "warning", "critical").index(hook.report.alerts[-1]["level"]) + 1


def test_watch_writes_alert_lines_and_runs_the_alert_command(tmp_path, capsys):
    from grpojax.cli import main

    run = _run(n=300, onset=None, jump_at=200, metric="grad_norm")
    log = tmp_path / "run.jsonl"
    lines = [json.dumps(jsonl_header("sim"))]
    lines += [json.dumps({"step": int(s), **{k: float(v[i]) for k, v in run.columns.items()}})
              for i, s in enumerate(run.steps[:215])]
    log.write_text("\n".join(lines) + "\n")
    alert_file = tmp_path / "alerts.jsonl"
    got = tmp_path / "cmd.txt"
    cmd = (f"{sys.executable} -c \"import os,sys; open({str(got)!r}, 'a').write(sys.stdin.read() + '|' + "
           f"os.environ['GRPOJAX_ALERT_LEVEL'] + '|' + os.environ['GRPOJAX_ALERT_STEP'] + '\\n')\"")
    rc = main(["watch", str(log), "--every", "10", "--idle-timeout", "0.3", "--poll", "0.1", "--method", "persistence",
               "--no-live", "--alert-file", str(alert_file), "--on-alert", cmd])
    assert rc == 0
    recs = [json.loads(x) for x in alert_file.read_text().splitlines()]
    assert recs and recs[0]["kind"] == "collapse-risk" and recs[0]["precursors"][0]["metric"] == "grad_norm"
    # the watch read the log once (it was complete): its one refresh saw all 215 rows
    assert recs[0]["step"] == 214
    body, level, step = got.read_text().splitlines()[0].split("|")
    assert json.loads(body)["reason"] == recs[0]["reason"] and level == recs[0]["level"] and float(step) == 214
    assert "alert warning at step 214" in capsys.readouterr().err


def test_the_diagnosis_segments_the_precursors_as_the_alerts_do():
    """The engine takes a refresh's precursor events from its diagnosis instead of segmenting the series again:
    they are the ones precursor_events computes (same series, same thresholds)."""
    from grpojax.diagnose import diagnose
    from grpojax.monitor._alerts import PRECURSOR_DIRECTIONS, precursor_events

    for metric in ("entropy", "kl", "grad_norm"):
        run = _run(n=300, onset=270, jump_at=240, metric=metric)
        want = precursor_events(run)
        assert set(want) == {m for m in PRECURSOR_DIRECTIONS if run.count(m)} and any(
            se.events for se in want.values())
        events = diagnose(run, validity=False).events
        assert {m: events[m] for m in want} == want
