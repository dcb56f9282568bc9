"""Training hooks: MonitorHook (any loop, grpojax's trainer) and the TRL TrainerCallback."""

import importlib.util
import os
import pathlib

import numpy as np
import pytest

import grpojax.dynamics as dyn
from grpojax.monitor import MonitorConfig, MonitorHook, attach, trl_callback
from grpojax.monitor._hooks import canonical_metrics


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _curve(n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    return t, 0.8 - 0.6 * np.exp(-t / 15) + 0.01 * rng.standard_normal(n)


def test_canonical_metrics_maps_trl_names():
    m = canonical_metrics({"reward": 0.5, "frac_reward_zero_std": 0.2, "learning_rate": 1e-6,
                           "train/kl": 0.1, "eval/reward": 0.4, "completions/mean_length": 30, "note": "x",
                           "flag": True})
    assert m == {"reward_mean": 0.5, "frac_zero_std": 0.2, "lr": 1e-6, "kl": 0.1, "eval_reward": 0.4,
                 "response_length": 30.0}


def test_instability_rule_fires_with_exact_threshold_reason():
    star = float(dyn.exact_critical_eta(0.9, 4, 0.5, lag="periodic"))
    meta = dict(eta=1.2 * star, mu=0.9, k_ref=4, lag="periodic", curvature=0.5)
    hook = MonitorHook(config=MonitorConfig(every=5, method="persistence"), stop_on=("instability",), meta=meta)
    t, y = _curve(30)
    reasons = [hook(int(s), {"reward": v}) for s, v in zip(t, y)]
    first = next(i for i, r in enumerate(reasons) if r is not None)
    assert first == 4  # the first refresh (every=5 points): the margin needs no forecast
    assert "instability predicted" in reasons[first] and "1.20×" in reasons[first]
    # a rule that is not enabled never stops
    quiet = MonitorHook(config=MonitorConfig(every=5, method="persistence"), meta=meta)
    assert all(quiet(int(s), {"reward": v}) is None for s, v in zip(t, y))
    assert quiet.report.stability["margin"] == pytest.approx(1 - 1.2, rel=1e-9)


def test_plateau_rule_needs_detector_and_forecast():
    t, y = _curve(300)
    hook = MonitorHook(config=MonitorConfig(every=20, method="persistence"), stop_on="plateau", plateau_tol=0.02,
                       max_overhead=1.0)  # no training time here: the budget would postpone every refresh
    stop = None
    for s, v in zip(t, y):
        stop = hook(int(s), {"reward": v})
        if stop:
            break
    assert stop is not None and "plateau reached" in stop
    r = hook.report
    assert "learning_plateau" in {f["mode"] for f in r.findings}
    assert r.forecast["hi"] <= r.best["value"] + 0.02
    # a run still rising steeply does not stop on the plateau rule
    rising = MonitorHook(config=MonitorConfig(every=20, method="persistence"), stop_on="plateau", max_overhead=1.0)
    assert all(rising(s, {"reward": 0.001 * s}) is None for s in range(1, 200))


def test_overhead_budget_postpones_refreshes():
    clock = FakeClock()
    hook = MonitorHook(config=MonitorConfig(every=1, method="persistence", diagnose=False), max_overhead=0.05,
                       clock=clock)
    real_update = hook.__class__.__call__
    t, y = _curve(60)
    import grpojax.monitor._hooks as hk

    calls = []

    def slow_update(state, run, config):  # every refresh "takes" 1 s of the fake clock
        clock.t += 1.0
        calls.append(run.steps.size)
        return orig(state, run, config)

    orig = hk.update
    hk.update = slow_update
    try:
        for s, v in zip(t, y):
            hook(int(s), {"reward": v})
            clock.t += 0.1  # a 0.1 s training step
    finally:
        hk.update = orig
    assert real_update is hook.__class__.__call__
    # 60 steps x 0.1 s + refreshes: the budget allows about 5% of the elapsed time
    assert hook.overhead <= 0.05 + 1.0 / hook.elapsed_s
    assert hook.postponed > 0 and len(calls) < 10


def test_hook_merges_rows_of_one_step_and_rewinds():
    hook = MonitorHook(config=MonitorConfig(every=100, method="persistence"))
    hook(1, {"reward": 0.1})
    hook(2, {"reward": 0.2})
    hook(2, {"eval_reward": 0.3})
    hook(3, {"reward": 0.4})
    hook(2, {"reward": 0.25})  # resumed from step 1
    run = hook.run_log()
    assert run.steps.tolist() == [1, 2]
    assert run.columns["reward_mean"].tolist() == [0.1, 0.25]
    assert np.isnan(run.columns["eval_reward"]).all()


def test_bad_hook_arguments():
    with pytest.raises(ValueError, match="stop rule"):
        MonitorHook(stop_on=("boredom",))
    with pytest.raises(ValueError, match="max_overhead"):
        MonitorHook(max_overhead=0)


def test_trl_callback_with_fake_trainer_state():
    pytest.importorskip("transformers")
    from transformers import TrainerControl, TrainerState

    star = float(dyn.exact_critical_eta(0.9, 2, 0.5, lag="periodic"))
    args = type("Args", (), dict(learning_rate=1.5 * star / 0.1, adam_beta1=0.9, num_generations=8,
                                 num_iterations=2))()
    cb = trl_callback(config=MonitorConfig(every=8, method="persistence"), stop_on=("instability",),
                      meta={"curvature": 0.5, "lag": "periodic"}, max_overhead=1.0)
    cb.ahead_of_reporters = True  # driven directly: no reporter to miss its values
    state, control = TrainerState(max_steps=100), TrainerControl()
    cb.on_train_begin(args, state, control)
    assert cb.hook.meta["beta1"] == 0.9 and cb.hook.meta["k_ref"] == 2 and cb.hook.meta["max_steps"] == 100
    t, y = _curve(20)
    for s, v in zip(t, y):
        state.global_step = int(s)
        logs = {"loss": 0.0, "reward": float(v), "learning_rate": args.learning_rate}
        cb.on_log(args, state, control, logs=logs)
        if control.should_training_stop:
            break
    assert control.should_training_stop and state.global_step == 8
    assert "monitor/margin" in logs and logs["monitor/margin"] == pytest.approx(1 - 1.5, rel=1e-6)
    assert "monitor/forecast" in logs
    assert "instability predicted" in state.log_history[-1]["monitor/stop_reason"]


@pytest.mark.torch
def test_tiny_trl_grpo_trainer_runs_with_the_callback(tmp_path):
    if importlib.util.find_spec("trl") is None or importlib.util.find_spec("torch") is None:
        pytest.skip("trl and torch are not installed (the bench extra: make parity)")
    import pathlib

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    lm = pathlib.Path(__file__).parent / "fixtures" / "lm" / "qwen2"
    model = AutoModelForCausalLM.from_pretrained(lm)
    tok = AutoTokenizer.from_pretrained(lm)
    data = Dataset.from_dict({"prompt": ["1 + 1 ="] * 16})

    def reward(completions, **kw):
        return [float(len(c) % 3 == 0) for c in completions]

    cfg = GRPOConfig(output_dir=str(tmp_path), max_steps=12, per_device_train_batch_size=4, num_generations=4,
                     max_completion_length=6, logging_steps=1, report_to=["tensorboard"], save_strategy="no",
                     use_cpu=True)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=cfg, train_dataset=data, processing_class=tok)
    cb = attach(trainer, config=MonitorConfig(every=4, method="persistence"), stop_on=("plateau",))
    trainer.train()
    assert any(k.startswith("train/monitor/") for k in _tensorboard_scalars(tmp_path))
    assert cb.hook.run_log().count("reward_mean") >= 8
    assert cb.hook.report is not None
    assert any("monitor/findings" in row for row in trainer.state.log_history)


def _tensorboard_scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """Scalars of every event file under ``folder``, read back with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for ev in sorted(pathlib.Path(folder).rglob("events.out.tfevents.*")):
        acc = EventAccumulator(str(ev.parent))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def _drive_handler(handler, args, state, control, steps, values):
    handler.on_train_begin(args, state, control)
    for s, v in zip(steps, values):
        state.global_step = int(s)
        logs = {"loss": 0.0, "reward": float(v)}
        state.log_history.append({**logs, "step": state.global_step})
        handler.on_log(args, state, control, logs)
    handler.on_train_end(args, state, control)


def _tensorboard_handler(tmp_path):
    pytest.importorskip("tensorboardX", reason="transformers' TensorBoard reporter needs torch or tensorboardX")
    from transformers import TrainerControl, TrainerState
    from transformers.integrations import TensorBoardCallback
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

    args = type("Args", (), dict(learning_rate=1e-3, adam_beta1=0.9, num_generations=8, num_iterations=1,
                                 output_dir=str(tmp_path), logging_dir=str(tmp_path / "tb"),
                                 to_json_string=lambda self: "{}"))()
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(tmp_path / "tb")
    try:
        tb = TensorBoardCallback()
    finally:
        del os.environ["TENSORBOARD_LOGGING_DIR"]
    # what a Trainer built with report_to=["tensorboard"] holds: the flow callback, then the reporter
    handler = CallbackHandler([DefaultFlowCallback, tb], None, None, None, None)
    trainer = type("FakeTrainer", (), {})()
    trainer.callback_handler = handler
    return trainer, args, TrainerState(max_steps=40), TrainerControl()


def test_attached_callback_values_reach_the_tensorboard_reporter(tmp_path):
    """With transformers' real callback handler and TensorBoard reporter, ``monitor/*`` lands in the event file,
    each value stamped with the step its report was computed at."""
    pytest.importorskip("transformers")
    trainer, args, state, control = _tensorboard_handler(tmp_path)
    cb = attach(trainer, config=MonitorConfig(every=8, method="persistence"), max_overhead=1.0)
    assert trainer.callback_handler.callbacks[0] is cb
    t, y = _curve(40)
    _drive_handler(trainer.callback_handler, args, state, control, t, y)
    scalars = _tensorboard_scalars(tmp_path / "tb")
    forecast = scalars.get("train/monitor/forecast", [])
    stamps = scalars.get("train/monitor/report_step", [])
    assert len(forecast) == cb.hook.refreshes >= 3, sorted(scalars)
    # one value per refresh, written at the step it was computed at (never re-stamped between refreshes)
    assert [s for s, _ in stamps] == [int(v) for _, v in stamps]
    assert [s for s, _ in forecast] == [s for s, _ in stamps]
    assert "train/reward" in scalars and len(scalars["train/reward"]) == 40
    with pytest.raises(ValueError, match="already attached"):
        attach(trainer)


def test_callback_passed_after_the_reporters_warns_that_they_miss_its_values(tmp_path):
    pytest.importorskip("transformers")
    trainer, args, state, control = _tensorboard_handler(tmp_path)
    cb = trl_callback(config=MonitorConfig(every=8, method="persistence"), max_overhead=1.0)
    trainer.callback_handler.add_callback(cb)  # what callbacks=[cb] does: after the reporters
    t, y = _curve(16)
    with pytest.warns(UserWarning, match="attach"):
        _drive_handler(trainer.callback_handler, args, state, control, t, y)
    scalars = _tensorboard_scalars(tmp_path / "tb")
    assert not any(k.startswith("train/monitor/") for k in scalars)  # the documented failure the warning names
    assert any("monitor/forecast" in row for row in state.log_history)
    with pytest.raises(TypeError, match="Trainer"):
        attach(object())
