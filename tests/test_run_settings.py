"""A run's own settings (lr, schedule, warmup, β, clip ε, G, K_ref, temperature) read from its files, and
``grpojax advise --from-run`` built on them.

The expected values of the real runs were read by hand from the original files of the shared corpus
(the line or key is named at each value); those tests skip where the corpus is absent.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from grpojax.cli import main
from grpojax.logs import run_settings


# --- files written here: a TRL run folder, a verl console log, an OpenRLHF arguments line ----------------------


def _trl_folder(tmp_path, args: dict, lr_of_step=None):
    """A TRL output folder: trainer_state.json (log_history) and training_args.json."""
    lr_of_step = lr_of_step or (lambda s: 1e-6)
    hist = [{"step": s, "reward": 0.2 + 0.5 * (1 - np.exp(-s / 30)), "learning_rate": lr_of_step(s), "loss": 0.0}
            for s in range(1, 101)]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"global_step": 100, "max_steps": 100,
                                                             "log_history": hist}))
    (tmp_path / "training_args.json").write_text(json.dumps(args))
    return tmp_path


def test_trl_run_folder_with_training_args(tmp_path):
    args = {"learning_rate": 2e-6, "lr_scheduler_type": "cosine", "warmup_steps": 10, "beta": 0.04, "epsilon": 0.2,
            "num_generations": 8, "num_iterations": 2, "steps_per_generation": 8, "gradient_accumulation_steps": 4,
            "temperature": 0.7, "adam_beta1": 0.9, "max_steps": 100, "per_device_train_batch_size": 16,
            "world_size": 2}
    s = run_settings(_trl_folder(tmp_path, args))
    assert (s.lr, s.schedule, s.warmup_steps, s.beta, s.clip_eps, s.group_size, s.temperature) == (
        2e-6, "cosine", 10, 0.04, 0.2, 8, 0.7)
    # K_ref = num_iterations × steps_per_generation / gradient_accumulation_steps = 2 × 8 / 4
    assert s.epochs_per_rollout == 2 and s.mini_batches == 2 and s.k_ref == 4
    assert "training_args.json" in s.sources["lr"] and s.missing() == []
    assert s.prompts_per_step == 16 * 4 * 2 // 8  # completions of one update / G


def test_trl_without_num_iterations_is_one_step_per_rollout(tmp_path):
    s = run_settings(_trl_folder(tmp_path, {"learning_rate": 1e-6, "num_generations": 4}))
    assert s.k_ref == 1 and "default" in s.sources["k_ref"]


@pytest.mark.parametrize("shape", ["linear", "cosine", "constant"])
def test_schedule_read_off_the_logged_learning_rate(tmp_path, shape):
    """No settings file: peak lr, warmup and the decay's shape come from the logged learning rate."""
    peak, warm, end = 3e-6, 10, 100

    def lr(s):
        if s <= warm:
            return peak * s / warm
        x = (s - warm) / (end - warm)
        return {"linear": peak * (1 - x), "cosine": peak * 0.5 * (1 + np.cos(np.pi * x)), "constant": peak}[shape]

    _trl_folder(tmp_path, {}, lr)
    (tmp_path / "training_args.json").unlink()
    s = run_settings(tmp_path / "trainer_state.json")
    assert s.lr == pytest.approx(peak) and s.warmup_steps == warm
    assert s.schedule == (shape if shape != "constant" else "constant_with_warmup")
    assert s.sources["schedule"] == "the logged learning rate"


VERL_DUMP = """\
(TaskRunner pid=11) {'actor_rollout_ref': {'actor': {'clip_ratio': 0.28,
(TaskRunner pid=11)                                  'kl_loss_coef': 0.01,
(TaskRunner pid=11)                                  'optim': {'lr': 1e-06,
(TaskRunner pid=11)                                            'lr_warmup_steps': -1,
(TaskRunner pid=11)                                            'lr_warmup_steps_ratio': 0.05,
(TaskRunner pid=11)                                            'warmup_style': 'cosine'},
(TaskRunner pid=11)                                  'ppo_epochs': 2,
(TaskRunner pid=11)                                  'ppo_mini_batch_size': 64,
(TaskRunner pid=11)                                  'use_kl_loss': True},
(WorkerDict pid=12) an interleaved line of another process
(TaskRunner pid=11) INFO an interleaved line of the same process
(TaskRunner pid=11)                        'rollout': {'n': 16,
(TaskRunner pid=11)                                    'temperature': 0.6,
(TaskRunner pid=11)                                    'val_kwargs': {'n': 1, 'temperature': 0}}},
(TaskRunner pid=11)  'critic': {'optim': {'lr': 1e-05}, 'ppo_epochs': 1},
(TaskRunner pid=11)  'data': {'train_batch_size': 256},
(TaskRunner pid=11)  'trainer': {'total_training_steps': 200}}
"""


def test_verl_console_config_dump(tmp_path):
    steps = "\n".join(f"(TaskRunner pid=11) step:{s} - critic/score/mean:{0.2 + s / 100:.3f} - actor/lr:1e-06"
                      for s in range(1, 21))
    log = tmp_path / "verl.log"
    log.write_text(VERL_DUMP + steps + "\n")
    s = run_settings(log)
    assert (s.lr, s.schedule, s.beta, s.clip_eps, s.group_size, s.temperature) == (1e-6, "cosine", 0.01, 0.28, 16, 0.6)
    assert s.warmup_steps == 10  # lr_warmup_steps -1: the ratio 0.05 × total_training_steps 200
    assert s.k_ref == 2 * 256 // 64  # ppo_epochs × train_batch_size / ppo_mini_batch_size (the critic's ignored)
    # verl counts ppo_mini_batch_size in prompts (× rollout.n samples): one update averages 64 groups
    assert s.prompts_per_step == 64 and not s.prompts_per_device
    assert s.sources["prompts_per_step"].startswith("actor_rollout_ref.actor.ppo_mini_batch_size in ")


def test_openrlhf_arguments_line(tmp_path):
    bar = "\n".join(f"Episode [1/1]:  {s}%|#| {s}/100 [00:10<00:10, 1.0s/it, policy_loss=0.01, actor_lr=5e-07, "
                    f"reward={0.1 + s / 200:.3f}, kl=0.001]" for s in range(1, 21))
    log = tmp_path / "openrlhf.log"
    log.write_text("Namespace(actor_learning_rate=5e-07, init_kl_coef=0.01, eps_clip=0.2, n_samples_per_prompt=8, "
                   "max_epochs=1, rollout_batch_size=128, train_batch_size=512, temperature=1.0, "
                   "lr_scheduler='cosine_with_min_lr', lr_warmup_ratio=0.03)\n" + bar + "\n")
    s = run_settings(log)
    assert (s.beta, s.clip_eps, s.group_size, s.temperature, s.schedule) == (0.01, 0.2, 8, 1.0, "cosine_with_min_lr")
    assert s.k_ref == 2  # max_epochs 1 × rollout_batch_size 128 × n_samples_per_prompt 8 / train_batch_size 512
    assert s.prompts_per_step == 512 // 8  # train_batch_size samples per update / n_samples_per_prompt
    assert s.sources["prompts_per_step"].startswith("train_batch_size / n_samples_per_prompt")


def test_pickled_training_args_are_not_loaded(tmp_path):
    folder = _trl_folder(tmp_path, {"learning_rate": 1e-6, "num_generations": 4})
    (folder / "training_args.bin").write_bytes(b"\x80\x04not a pickle anyone should load")
    assert run_settings(folder).group_size == 4


def _args_event(folder, args: dict):
    """A TensorBoard event file holding the text summary ``args`` a Hugging Face Trainer writes."""
    import time

    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    w = EventFileWriter(str(folder))
    w.add_event(event_pb2.Event(wall_time=time.time(), step=0, summary=text_pb("args/text_summary", json.dumps(args))))
    w.close()


def test_trl_output_folder_with_checkpoints_and_tensorboard(tmp_path):
    """TRL's output folder: checkpoint-N/trainer_state.json and a pickled training_args.bin (not loaded); the
    arguments come from the TensorBoard text summary under runs/."""
    ckpt = tmp_path / "checkpoint-100"
    ckpt.mkdir()
    _trl_folder(ckpt, {})
    (ckpt / "training_args.json").unlink()
    (ckpt / "training_args.bin").write_bytes(b"\x80\x04not loaded")
    bare = run_settings(tmp_path)
    assert bare.group_size is None and "training_args.bin" in bare.notes[0] and "to_json_string" in bare.notes[0]
    (tmp_path / "runs" / "Dec04").mkdir(parents=True)
    _args_event(tmp_path / "runs" / "Dec04", {"learning_rate": 3e-6, "num_generations": 6, "num_iterations": 2,
                                              "beta": 0.0, "temperature": 1.0, "lr_scheduler_type": "linear"})
    s = run_settings(tmp_path)
    assert (s.lr, s.group_size, s.k_ref, s.beta, s.temperature, s.schedule) == (3e-6, 6, 2, 0.0, 1.0, "linear")
    assert s.sources["group_size"] == "num_generations in TensorBoard text summary 'args'" and not s.notes


# --- the shared corpus ------------------------------------------------------------------------------------------


def test_real_trl_tensorboard_run(real_runs):
    # tb-llama32-1b-gsm8k-grpo: the TrainingArguments TRL's Trainer wrote as the TensorBoard text summary "args"
    # ("learning_rate": 5e-07, "lr_scheduler_type": "cosine", "warmup_ratio": 0.1, "warmup_steps": 0,
    # "beta": 0.04, "num_generations": 4, "temperature": 0.9; no num_iterations key: TRL's default 1)
    (ev,) = (real_runs / "tb-llama32-1b-gsm8k-grpo").glob("events.out.tfevents.*")
    s = run_settings(ev)
    assert (s.lr, s.schedule, s.beta, s.group_size, s.k_ref, s.temperature) == (5e-7, "cosine", 0.04, 4, 1, 0.9)
    # the run stops inside the warmup: train/learning_rate is 8.9127e-10 at step 1 = 5e-7 / 561
    assert s.warmup_steps == 561
    # its GRPO arguments are exactly TRL 0.14's GRPOConfig fields (max_completion_length, use_vllm, vllm_device,
    # vllm_gpu_memory_utilization, ...; none of log_completions, sync_ref_model, ... that 0.15 added), where
    # per_device_train_batch_size (1) counts prompts: 1 × gradient_accumulation_steps 4 per device; the number
    # of processes is not among the saved arguments
    assert s.prompts_per_step == 1 * 4 and s.prompts_per_device
    assert "TRL 0.14" in s.sources["prompts_per_step"] and any("number of processes" in n for n in s.notes)


def test_real_trl_trainer_state(real_runs):
    # text2sql-grpo-3b: only log_history; learning_rate 2.988e-06 at step 5 falling linearly to 3e-09 at step 1000
    s = run_settings(real_runs / "text2sql-grpo-3b" / "trainer_state_1000steps.json")
    assert s.lr == pytest.approx(3e-6, rel=0.01) and s.schedule == "linear" and s.warmup_steps == 0


def test_real_verl_console_log(real_runs):
    # searchr1-grpo-resume-wxh/train_v2.pre_resume_step100.log, the config verl-agent prints at start:
    # actor optim lr 5e-06, warmup_style 'constant', lr_warmup_steps -1, lr_warmup_steps_ratio 0.1,
    # trainer.total_training_steps 300, kl_loss_coef 0.001 with use_kl_loss True, clip_ratio_low 0.2,
    # env.rollout.n 4 (actor_rollout_ref.rollout.n is 1 in verl-agent), ppo_epochs 1,
    # data.train_batch_size 4 / ppo_mini_batch_size 4, rollout temperature 1.0 (val_kwargs temperature 0)
    s = run_settings(real_runs / "searchr1-grpo-resume-wxh" / "train_v2.pre_resume_step100.log")
    assert (s.lr, s.schedule, s.warmup_steps, s.beta, s.clip_eps) == (5e-6, "constant", 30, 0.001, 0.2)
    assert (s.group_size, s.k_ref, s.temperature) == (4, 1, 1.0)
    # verl-agent: ppo_mini_batch_size 4 × actor_rollout_ref.rollout.n 1 counts samples, not prompt groups
    assert s.prompts_per_step is None and any("verl-agent" in n for n in s.notes)


def test_advise_from_real_run_needs_no_other_flag(real_runs, tmp_path, capsys):
    from grpojax.monitor import advise

    log = real_runs / "searchr1-grpo-resume-wxh" / "train_v2.pre_resume_step100.log"
    out = tmp_path / "advice.json"
    assert main(["advise", "--from-run", str(log), "--curvature", "0.5", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    got = json.loads(out.read_text())
    assert got["inputs"]["eta"] == 5e-6 and got["inputs"]["k_ref"] == 1 and got["inputs"]["group_size"] == 4
    assert got["run_settings"]["temperature"] == 1.0 and "group_size" in got["run_settings"]["sources"]
    a = advise(eta=5e-6, beta1=0.9, k_ref=1, group_size=4, curvature=0.5)  # AdamW's β₁ when none is stated
    assert got["damping_ratio"] == pytest.approx(a.damping_ratio, rel=1e-9)
    assert "env.rollout.n" in printed.out + printed.err  # where each setting was read is shown


def test_advise_from_run_says_what_is_missing(tmp_path, capsys):
    folder = _trl_folder(tmp_path, {"learning_rate": 1e-6})
    assert main(["advise", "--from-run", str(folder), "--curvature", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "group size" in err and "--group-size" in err
    assert main(["advise", "--eta", "0.01", "--group-size", "8", "--curvature", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--k-ref" in err and "--from-run" in err and len(err.splitlines()) == 1


def test_advise_from_run_without_a_curvature_fits_the_run(tmp_path, capsys):
    """No --curvature: the run's own reward curve is the probe; a rise that gives no rate ends in one line."""
    folder = _trl_folder(tmp_path, {"learning_rate": 0.01, "num_generations": 8})
    rc = main(["advise", "--from-run", str(folder), "--json", str(tmp_path / "a.json")])
    err = capsys.readouterr().err
    if rc == 0:
        got = json.loads((tmp_path / "a.json").read_text())
        assert got["probe"]["curvature"] > 0 and got["curvature_source"].startswith("fitted from")
    else:
        assert rc == 2 and "the curvature is missing" in err and "--curvature" in err and len(err.strip().splitlines()) == 1


def test_grpojax_run_folder_states_its_own_settings(tmp_path):
    """A run folder of grpojax's own trainer: config.yaml beside metrics.jsonl gives K_ref (grpo.k_ref), β₁
    (optim.b1) and the clip ε (grpo.eps_low); the supervised warm start's lr and warm-up are not the policy's."""
    from grpojax.grpo import apply_overrides, load_config, save_config

    cfg = apply_overrides(load_config("tiny-arith"), ["grpo.k_ref=4", "optim.b1=0.8", "optim.lr=2e-4",
                                                      "optim.warmup_steps=5", "warmstart.warmup_steps=20",
                                                      "warmstart.lr=3e-3", "grpo.eps_low=0.25"])
    save_config(cfg, tmp_path / "config.yaml")
    rows = [{"step": s, "reward_mean": 0.2 + 0.5 * (1 - np.exp(-s / 30)), "lr": 2e-4} for s in range(1, 61)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = run_settings(tmp_path / "metrics.jsonl")
    assert (s.k_ref, s.beta1, s.lr, s.warmup_steps, s.clip_eps) == (4, 0.8, 2e-4, 5, 0.25)
    assert s.sources["k_ref"].startswith("grpo.k_ref") and s.sources["beta1"].startswith("optim.b1")


# --- prompts per optimizer step ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spg", [4, 8])
def test_trl_prompts_per_step_is_per_device_without_a_world_size(tmp_path, spg):
    """TRL ≥ 0.15: per_device_train_batch_size × gradient_accumulation_steps completions per device and update,
    over num_generations; steps_per_generation changes K_ref, not the size of one update."""
    args = {"learning_rate": 1e-6, "num_generations": 8, "per_device_train_batch_size": 16,
            "gradient_accumulation_steps": 4, "steps_per_generation": spg}
    s = run_settings(_trl_folder(tmp_path, args))
    assert s.prompts_per_step == 16 * 4 // 8 and s.prompts_per_device
    assert s.k_ref == spg // 4
    assert s.sources["prompts_per_step"] == ("per_device_train_batch_size × gradient_accumulation_steps / "
                                             "num_generations, per device in training_args.json")
    assert len(s.notes) == 1 and "8 × the number of processes" in s.notes[0] and "--prompts-per-step" in s.notes[0]


def test_trl_prompts_per_step_with_a_world_size(tmp_path):
    args = {"learning_rate": 1e-6, "num_generations": 8, "per_device_train_batch_size": 2,
            "gradient_accumulation_steps": 4, "world_size": 4}
    s = run_settings(_trl_folder(tmp_path, args))
    assert s.prompts_per_step == 2 * 4 * 4 // 8 and not s.prompts_per_device and not s.notes
    assert s.sources["prompts_per_step"].endswith("× world_size in training_args.json")


def test_trl_prompts_per_step_not_whole_is_not_read(tmp_path):
    """1 × 4 completions per device with G = 16: a quarter of a group per device, so the devices (not stated)
    share groups: no count is made up."""
    args = {"learning_rate": 1e-6, "num_generations": 16, "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4, "log_completions": False}
    s = run_settings(_trl_folder(tmp_path, args))
    assert s.prompts_per_step is None and "prompts_per_step" not in s.sources
    assert len(s.notes) == 1 and "0.25 is not a whole number" in s.notes[0]


def test_trl_014_counts_prompts_per_device(tmp_path):
    """A full TRL 0.14 GRPOConfig (no key of those 0.15 added): per_device_train_batch_size counts prompts."""
    v014 = {"learning_rate": 1e-6, "num_generations": 16, "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 4, "max_completion_length": 256, "use_vllm": False,
            "vllm_gpu_memory_utilization": 0.9, "max_prompt_length": 512, "beta": 0.04}
    s = run_settings(_trl_folder(tmp_path, v014))
    assert s.prompts_per_step == 1 * 4 and s.prompts_per_device and "TRL 0.14" in s.sources["prompts_per_step"]
    later = run_settings(_trl_folder(tmp_path, {**v014, "sync_ref_model": False}))  # 0.15 or later: completions
    assert later.prompts_per_step is None  # 1 × 4 / 16 per device


def test_verl_mini_batch_larger_than_the_batch_is_capped(tmp_path):
    log = tmp_path / "verl.log"
    log.write_text(VERL_DUMP.replace("'ppo_mini_batch_size': 64", "'ppo_mini_batch_size': 512")
                   + "(TaskRunner pid=11) step:1 - critic/score/mean:0.2 - actor/lr:1e-06\n")
    s = run_settings(log)
    assert s.prompts_per_step == 256 and "capped at data.train_batch_size" in s.sources["prompts_per_step"]


def test_openrlhf_train_batch_not_whole_groups(tmp_path):
    log = tmp_path / "openrlhf.log"
    log.write_text("Namespace(actor_learning_rate=5e-07, n_samples_per_prompt=8, rollout_batch_size=128, "
                   "train_batch_size=100)\nEpisode [1/1]:  1%|#| 1/100 [00:10<00:10, 1.0s/it, reward=0.1]\n")
    s = run_settings(log)
    assert s.prompts_per_step is None and any("not a whole number of groups" in n for n in s.notes)


def test_grpojax_run_states_prompts_per_step(tmp_path):
    """grpojax's own run: grpo.prompts_per_step of config.yaml, else the trainer's log header; another header's
    prompts_per_step (a converted run, whose meaning is not known) is not read."""
    from grpojax.grpo import apply_overrides, load_config, save_config
    from grpojax.logs import jsonl_header

    rows = "".join(json.dumps({"step": s, "reward_mean": 0.2 + s / 200, "lr": 1e-4}) + "\n" for s in range(1, 31))
    cfg = apply_overrides(load_config("tiny-arith"), ["grpo.prompts_per_step=6", "warmstart.batch_size=32"])
    save_config(cfg, tmp_path / "config.yaml")
    (tmp_path / "metrics.jsonl").write_text(rows)
    s = run_settings(tmp_path / "metrics.jsonl")
    assert s.prompts_per_step == 6 and s.sources["prompts_per_step"].startswith("grpo.prompts_per_step in ")
    for trainer, want in (("grpojax", 12), ("other", None)):
        run = tmp_path / trainer
        run.mkdir()
        head = jsonl_header("r", source="x", meta={"trainer": trainer, "prompts_per_step": 12, "group_size": 4})
        (run / "metrics.jsonl").write_text(json.dumps(head) + "\n" + rows)
        got = run_settings(run / "metrics.jsonl")
        assert got.prompts_per_step == want
        assert want is None or got.sources["prompts_per_step"] == "the log's header"


def _escape_of(**kw):
    from grpojax._defaults import PLANNED_STEPS
    from grpojax.monitor import advise

    return advise(beta1=0.9, curvature=0.5, steps=PLANNED_STEPS, **kw)  # advise's defaults: T and AdamW's β₁


def test_advise_from_run_takes_the_prompts_per_step(tmp_path, capsys):
    """advise --from-run uses the run's prompts per step for B = G × prompts (σ²/B of P(escape)); a flag given
    overrides it; the settings block shows it and the per-device note."""
    args = {"learning_rate": 1e-6, "num_generations": 8, "per_device_train_batch_size": 16,
            "gradient_accumulation_steps": 4, "num_iterations": 1}
    folder = _trl_folder(tmp_path, args)
    base = ["advise", "--from-run", str(folder), "--curvature", "0.5", "--pass-rate", "0.5"]
    for extra, prompts in (([], 8), (["--prompts-per-step", "3"], 3)):
        out = tmp_path / f"a{prompts}.json"
        assert main([*base, *extra, "--json", str(out)]) == 0
        printed = capsys.readouterr()
        got = json.loads(out.read_text())
        assert got["samples_per_step"] == 8 * prompts
        a = _escape_of(eta=1e-6, k_ref=1, group_size=8, pass_rate=0.5, prompts_per_step=prompts)
        assert got["escape_probability"] == pytest.approx(a.escape_probability, rel=1e-9)
        assert got["run_settings"]["prompts_per_step"] == 8 and got["run_settings"]["prompts_per_device"] is True
        text = printed.out + printed.err
        assert "prompts_per_step  8  (per_device_train_batch_size × gradient_accumulation_steps" in text
        assert "one device's share" in text
    (tmp_path / "bare").mkdir()
    bare = _trl_folder(tmp_path / "bare", {"learning_rate": 1e-6, "num_generations": 8})
    assert main([*base[:2], str(bare), *base[3:], "--json", str(tmp_path / "none.json")]) == 0
    none = json.loads((tmp_path / "none.json").read_text())
    printed = capsys.readouterr()
    assert none["samples_per_step"] == 8 and "prompts per optimizer step are not stated" in printed.out + printed.err


def test_advise_from_real_verl_run_takes_its_prompts_per_step(real_logs, tmp_path, capsys):
    # verl-qwen2-7b-math-gpg.log, the config verl prints at start: data.train_batch_size 1024,
    # actor_rollout_ref.actor.ppo_mini_batch_size 256, actor_rollout_ref.rollout.n 5, ppo_epochs 1
    log = real_logs / "verl-qwen2-7b-math-gpg.log"
    s = run_settings(log)
    assert (s.prompts_per_step, s.group_size, s.k_ref) == (256, 5, 1024 // 256) and not s.prompts_per_device
    out = tmp_path / "a.json"
    assert main(["advise", "--from-run", str(log), "--curvature", "0.5", "--pass-rate", "0.5",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr()
    got = json.loads(out.read_text())
    assert got["samples_per_step"] == 5 * 256
    a = _escape_of(eta=s.lr, k_ref=4, group_size=5, pass_rate=0.5, prompts_per_step=256)
    assert got["escape_probability"] == pytest.approx(a.escape_probability, rel=1e-9)
    assert "prompts_per_step  256  (actor_rollout_ref.actor.ppo_mini_batch_size in" in printed.out + printed.err
