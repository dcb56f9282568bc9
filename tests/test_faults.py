"""Fault injection for `grpojax train` and the GRPO trainer: every fault users found, reproduced.

Each CLI case asserts the exit status, that stderr is exactly one line without a traceback, and that
nothing outside the run's own output changed (the user's config and any other run folder are hashed
before and after). Checkpoint faults are injected on disk: truncated files, flipped bits, a save cut
short, a kill -9 during training. The fast cases train at most a few steps of a tiny model (one
compiled update shared by all); the kill -9 and concurrent-run cases are ``slow``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import jax.numpy as jnp
import numpy as np
import pytest
import yaml

import grpojax.grpo._trainer as trainer_mod
from grpojax.cli import main
from grpojax.grpo import CheckpointStore, RunLock, read_jsonl_metrics, save_config
from grpojax.grpo._checkpoint import CheckpointError
from grpojax.logs import read_log

from test_grpo_trainer import _length_parity_score, _metrics, tiny_config  # noqa: E402

TESTS = pathlib.Path(__file__).resolve().parent
REPO = TESTS.parent
# a tiny run: 2 GRPO steps, a checkpoint after each, small eval; one compiled update for every fast case
FAST = ("steps=2", "warmstart.steps=0", "grpo.k_ref=1", "eval.n=4", "eval.every=2", "checkpoint.every=1",
        "checkpoint.keep=2")


# ---------------------------------------------------------------------------------------------- helpers
def tree_hash(path: pathlib.Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``path`` (or of ``path`` itself)."""
    path = pathlib.Path(path)
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["train", *argv, "--quiet"])
    return rc, capsys.readouterr().err


def one_line(err: str) -> str:
    """The one line of ``err`` (a progress bar the command drew before failing does not count)."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip() and "━" not in ln]
    assert len(lines) == 1, err
    return lines[0]


def user_config(tmp_path: pathlib.Path, *extra: str, name: str = "user.yaml") -> pathlib.Path:
    """A user's config file (with a comment, which a rewrite would lose)."""
    path = tmp_path / name
    save_config(tiny_config(*FAST, *extra), path)
    path.write_text("# my tiny run: keep this comment\n" + path.read_text())
    return path


@pytest.fixture
def parity(monkeypatch):
    """Reward completion-length parity (an untrained model is never correct: all advantages would be 0)."""
    monkeypatch.setattr(trainer_mod, "score_completions", _length_parity_score)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-step run made by the CLI (checkpoints at steps 1 and 2) and its user config."""
    base = tmp_path_factory.mktemp("finished")
    cfg = user_config(base)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trainer_mod, "score_completions", _length_parity_score)
        assert main(["train", "--config", str(cfg), "--out", str(base / "run"), "--quiet"]) == 0
    return base / "run", cfg


@pytest.fixture
def run_copy(finished, tmp_path):
    """A private copy of the finished run (with the user's config next to it), plus a bystander run."""
    src, cfg = finished
    run = tmp_path / "run"
    shutil.copytree(src, run)
    (run / ".lock").unlink(missing_ok=True)
    shutil.copy(cfg, tmp_path / "user.yaml")
    other = tmp_path / "other-run"
    shutil.copytree(src, other)
    return run, tmp_path / "user.yaml", other


def _data_file(folder: pathlib.Path) -> pathlib.Path:
    """The largest array data file of a checkpoint (what a restore reads)."""
    files = [f for f in (folder / "state" / "d").iterdir() if f.is_file()]
    return max(files, key=lambda f: f.stat().st_size)


# ------------------------------------------------------------------------- output folder and lock faults
def test_out_is_an_existing_file(tmp_path, capsys):
    cfg = user_config(tmp_path)
    target = tmp_path / "results.txt"
    target.write_text("precious\n")
    before = tree_hash(tmp_path)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(target))
    assert rc == 2 and "is a file, not a folder" in one_line(err) and str(target) in err
    assert tree_hash(tmp_path) == before


def test_out_is_dev_null(tmp_path, capsys):
    cfg = user_config(tmp_path)
    before = tree_hash(tmp_path)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", "/dev/null")
    assert rc == 2 and "/dev/null is a character device, not a folder" in one_line(err)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", "/dev/null/run")
    assert rc == 2 and "not a folder" in one_line(err)
    assert tree_hash(tmp_path) == before


def test_second_run_into_a_locked_folder_fails_at_once(tmp_path, capsys):
    cfg = user_config(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, f'{os.getpid()}\\n'.encode())\n"
         "print('locked', flush=True); time.sleep(60)", str(out / ".lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = tree_hash(tmp_path)
        t0 = time.perf_counter()
        rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(out))
        assert time.perf_counter() - t0 < 10  # at once: before building a model
        line = one_line(err)
        assert rc == 2 and f"{out} is in use by another run (pid {holder.pid})" in line
        assert tree_hash(tmp_path) == before
    finally:
        holder.kill()
        holder.wait()


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".lock").write_text(f"{dead.pid}\n")
    with RunLock(tmp_path):
        assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
        with RunLock(tmp_path):  # re-entrant in one process
            pass
    # and released: another process can take it now
    proc = subprocess.run([sys.executable, "-c", "import fcntl, os, sys\n"
                           "fd = os.open(sys.argv[1], os.O_RDWR)\n"
                           "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)", str(tmp_path / ".lock")])
    assert proc.returncode == 0


def test_folder_holding_another_run_is_refused(run_copy, capsys):
    run, cfg, other = run_copy
    before = {"run": tree_hash(run), "cfg": tree_hash(cfg), "other": tree_hash(other)}
    new_cfg = user_config(cfg.parent, "optim.lr=0.02", "grpo.group_size=2", name="new.yaml")
    rc, err = run_cli(capsys, "--config", str(new_cfg), "--out", str(run))
    line = one_line(err)
    assert rc == 2 and "holds a run with a different config" in line
    assert "optim.lr: 0.01 -> 0.02" in line and "grpo.group_size: 4 -> 2" in line and "--overwrite" in line
    rc, err = run_cli(capsys, "--config", str(new_cfg), "--out", str(run), "--resume")
    assert rc == 2 and "optim.lr: 0.01 -> 0.02" in one_line(err)
    after = {"run": tree_hash(run), "cfg": tree_hash(cfg), "other": tree_hash(other)}
    assert after == before


def test_folder_with_run_files_but_no_config_is_refused(tmp_path, capsys):
    cfg = user_config(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"step": 0, "reward_mean": 0.5}\n')
    (out / "notes.txt").write_text("mine\n")
    before = tree_hash(tmp_path)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(out))
    assert rc == 2 and "no readable config.yaml" in one_line(err)
    assert tree_hash(tmp_path) == before


def test_resume_of_nothing_is_refused(tmp_path, capsys):
    cfg = user_config(tmp_path)
    before = tree_hash(tmp_path)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(tmp_path / "empty"), "--resume")
    assert rc == 2 and "holds no run to resume" in one_line(err)
    assert tree_hash(tmp_path) == before and not (tmp_path / "empty").exists()


def test_config_inside_out_is_never_rewritten(run_copy, capsys, parity):
    run, _, other = run_copy
    own = run / "config.yaml"
    own.write_text("# my comments\n" + own.read_text())  # the user keeps the config in the run folder
    before = {"own": tree_hash(own), "other": tree_hash(other)}
    rc, err = run_cli(capsys, "--config", str(own), "--out", str(run), "--set", "optim.lr=0.02")
    assert rc == 2 and "is the run's own config.yaml" in one_line(err)
    rc, err = run_cli(capsys, "--config", str(own), "--out", str(run))  # finished: nothing to do
    assert rc == 0 and "Traceback" not in err
    assert {"own": tree_hash(own), "other": tree_hash(other)} == before


def test_overwrite_deletes_only_the_runs_own_files(run_copy, capsys, parity):
    run, cfg, other = run_copy
    (run / "notes.txt").write_text("mine\n")
    (run / "data").mkdir()
    (run / "data" / "x.jsonl").write_text("{}\n")
    (run / "checkpoints-corrupt" / "7").mkdir(parents=True)
    before = {"cfg": tree_hash(cfg), "other": tree_hash(other), "notes": tree_hash(run / "notes.txt"),
              "data": tree_hash(run / "data")}
    new_cfg = user_config(cfg.parent, "seed=1", name="new.yaml")  # (same compiled update: a fast test)
    rc, err = run_cli(capsys, "--config", str(new_cfg), "--out", str(run), "--overwrite")
    assert rc == 0, err
    assert {"cfg": tree_hash(cfg), "other": tree_hash(other), "notes": tree_hash(run / "notes.txt"),
            "data": tree_hash(run / "data")} == before
    assert not (run / "checkpoints-corrupt").exists()
    assert [r["step"] for r in read_jsonl_metrics(run / "metrics.jsonl")] == [0, 1, 2]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["last_step"] == 2 and "resumed_from" not in summary
    assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == 1


# ------------------------------------------------------------------------------------ config faults
@pytest.mark.parametrize(
    "override, status, expected",
    [
        ("steps=", 2, "steps has no value"),
        ("steps=[1,", 2, "the value of steps is invalid YAML"),
        ("grpo.k_ref: 2", 2, "expected KEY=VALUE"),
        ("model.hidden_size=0", 2, "model.hidden_size=0; expected >= 1"),
        ("model.hidden_size=15", 2, "model.hidden_size=15 is not divisible by model.num_attention_heads=2"),
        ("optim.lr=.inf", 2, "optim.lr=inf; expected a finite number"),
        ("optim.lr=.nan", 2, "optim.lr=nan; expected a finite number"),
        ("optim.lr=0", 2, "optim.lr=0.0; expected a finite number > 0"),
        ('model.tie_word_embeddings="no"', 2, "model.tie_word_embeddings='no'; expected a YAML boolean"),
        ("checkpoint.keep=0", 2, "checkpoint.keep=0; expected >= 1"),
        ("steps=2.5", 2, "steps=2.5; expected an integer"),
    ],
)
def test_bad_set_values_are_one_line_errors(tmp_path, capsys, override, status, expected):
    cfg = user_config(tmp_path)
    before = tree_hash(tmp_path)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(tmp_path / "run"), "--set", override)
    assert rc == status and expected in one_line(err)
    assert tree_hash(tmp_path) == before  # nothing written, not even the run folder


@pytest.mark.parametrize(
    "text, expected",
    [
        ("model:\n  tie_word_embeddings: \"no\"\n", "model.tie_word_embeddings='no'; expected a YAML boolean"),
        ("steps: [1, 2\nname: x\n", "invalid YAML at line 2"),
        ("checkpoint:\n  keep: 0\n", "checkpoint.keep=0; expected >= 1"),
        ("optim:\n  lr: .inf\n", "optim.lr=inf; expected a finite number"),
        ("model:\n  hidden_size: 0\n", "model.hidden_size=0; expected >= 1"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
def test_bad_config_files_are_one_line_errors(tmp_path, capsys, text, expected):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    before = tree_hash(tmp_path)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(tmp_path / "run"))
    line = one_line(err)
    assert rc == 2 and expected in line and str(cfg) in line
    assert tree_hash(tmp_path) == before


# ---------------------------------------------------------------------------------- checkpoint faults
def _state(k: float) -> dict:
    return {"w": jnp.arange(64, dtype=jnp.float32) * k, "m": jnp.ones((4, 4), jnp.float32) * k,
            "count": jnp.asarray(int(k), jnp.int32)}


@pytest.fixture
def store3(tmp_path):
    store = CheckpointStore(tmp_path / "checkpoints", keep=3)
    for k in (1, 2, 3):
        store.save(k, _state(k), {"phase": "grpo"})
    store.wait()
    yield store
    store.close()


def _truncate(store, step):
    f = _data_file(store.path(step))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    return "orbax cannot read it"


def _flip_bit(store, step):
    f = _data_file(store.path(step))
    b = bytearray(f.read_bytes())
    b[len(b) // 2] ^= 0x10
    f.write_bytes(bytes(b))
    return "orbax cannot read it"


def _record_altered(store, step):
    f = store.path(step) / "meta" / "metadata"
    f.write_text(f.read_text().replace('"crc32"', '"crc"'))
    return "its record (meta) is missing or unreadable"


def _missing(store, step):
    _data_file(store.path(step)).unlink()
    return "orbax cannot read it"


def _array_altered(store, step):
    """Arrays that read back fine but differ from what was saved (written over by another state)."""
    other = CheckpointStore(store.directory.with_name("other"), keep=None, background=False)
    other.save(step, _state(step + 10), {"phase": "grpo"})
    other.close()
    shutil.rmtree(store.path(step) / "state")
    shutil.copytree(other.path(step) / "state", store.path(step) / "state")
    return "fails its CRC-32"


@pytest.mark.parametrize("damage", [_truncate, _flip_bit, _record_altered, _missing, _array_altered])
def test_corrupt_latest_checkpoint_falls_back(store3, damage):
    reason = damage(store3, 3)
    state, meta, skipped = store3.restore_valid(_state(0))
    assert meta["step"] == 2
    np.testing.assert_array_equal(np.asarray(state["w"]), np.arange(64) * 2.0)
    assert [s.step for s in skipped] == [3] and reason in skipped[0].reason
    assert skipped[0].moved_to.is_dir() and store3.all_steps() == [1, 2]
    with pytest.raises(CheckpointError, match="is corrupt"):
        damage(store3, 2)
        store3.restore(_state(0), 2)


def test_all_checkpoints_corrupt_is_an_error_that_moves_nothing(store3):
    for s in (1, 2, 3):
        _flip_bit(store3, s)
    with pytest.raises(CheckpointError, match=r"no valid checkpoint .*step 3: .*step 2: .*step 1: "):
        store3.restore_valid(_state(0))
    assert store3.all_steps() == [1, 2, 3]


def test_checkpoint_of_another_model_is_not_a_fallback(store3):
    with pytest.raises(CheckpointError, match="different model"):
        store3.restore_valid({"w": jnp.zeros(64, jnp.float32)})
    assert store3.all_steps() == [1, 2, 3]


def test_a_save_cut_short_leaves_no_checkpoint(store3):
    """A process killed while orbax writes leaves its temporary folder: never a checkpoint, removed on reopening."""
    tmp = store3.directory / "4.orbax-checkpoint-tmp-1234"
    shutil.copytree(store3.path(3), tmp)
    reopened = CheckpointStore(store3.directory, keep=3)
    assert reopened.all_steps() == [1, 2, 3]
    _, meta, skipped = reopened.restore_valid(_state(0))
    assert meta["step"] == 3 and not skipped
    reopened.save(4, _state(4), {"phase": "grpo"})  # orbax's clean-up of the leftovers is done by then
    reopened.close()
    assert not tmp.exists() and reopened.all_steps() == [2, 3, 4]


def test_nonfinite_save_never_evicts_the_newest_clean_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path / "checkpoints", keep=1)
    store.save(2, _state(2), {"phase": "grpo"})
    store.save(3, _state(3), {"phase": "nonfinite", "bad_step": 4})
    store.save(5, _state(5), {"phase": "nonfinite", "bad_step": 6})
    store.wait()
    assert store.all_steps() == [2, 5]
    store.save(6, _state(6), {"phase": "grpo"})
    store.wait()
    assert store.all_steps() == [6]
    store.close()
    # the policy holds for a store reopened on the folder (the ranking is read back from the checkpoints)
    store = CheckpointStore(tmp_path / "checkpoints", keep=1)
    store.save(7, _state(7), {"phase": "nonfinite", "bad_step": 8})
    store.close()
    assert CheckpointStore(tmp_path / "checkpoints", keep=1).all_steps() == [6, 7]


def test_keep_zero_is_refused(tmp_path):
    with pytest.raises(ValueError, match="keep=0; expected an integer >= 1"):
        CheckpointStore(tmp_path, keep=0)


# --------------------------------------------------------------------------- faults of a real run
def test_rerun_of_a_finished_run_keeps_its_summary(run_copy, capsys, parity):
    run, cfg, other = run_copy
    summary0 = json.loads((run / "summary.json").read_text())
    assert summary0["last_step"] == 2 and summary0["status"] == "done" and len(summary0["evals"]) == 2
    before = {"cfg": tree_hash(cfg), "other": tree_hash(other), "metrics": tree_hash(run / "metrics.jsonl"),
              "ckpt": tree_hash(run / "checkpoints")}
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(run))
    assert rc == 0 and "Traceback" not in err
    after = {"cfg": tree_hash(cfg), "other": tree_hash(other), "metrics": tree_hash(run / "metrics.jsonl"),
             "ckpt": tree_hash(run / "checkpoints")}
    assert after == before
    summary = json.loads((run / "summary.json").read_text())
    assert summary["evals"] == summary0["evals"] and summary["last_step"] == 2 and summary["resumed_from"] == 2
    assert summary["warmstart"] == summary0["warmstart"]


def test_truncated_checkpoint_of_a_run_falls_back_with_a_warning(run_copy, capsys, parity):
    run, cfg, other = run_copy
    f = _data_file(run / "checkpoints" / "2")
    f.write_bytes(f.read_bytes()[:10])
    before = {"cfg": tree_hash(cfg), "other": tree_hash(other)}
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(run))
    assert rc == 0, err
    line = one_line(err)
    assert "warning: checkpoint step 2 skipped" in line and "truncated" in line
    assert "resuming from checkpoint step 1" in line
    assert {"cfg": tree_hash(cfg), "other": tree_hash(other)} == before
    assert (run / "checkpoints-corrupt" / "2").is_dir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from"] == 1 and summary["last_step"] == 2
    assert [r["step"] for r in read_jsonl_metrics(run / "metrics.jsonl")] == [0, 1, 2]


def test_nonfinite_loss_is_a_one_line_error_naming_the_last_good_checkpoint(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(trainer_mod, "group_advantages", lambda r, mode, eps: np.full(r.shape, np.nan, np.float32))
    cfg = user_config(tmp_path)
    before = tree_hash(cfg)
    out = tmp_path / "run"
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(out))
    line = one_line(err)
    assert rc == 1
    assert "non-finite loss or gradient at step 1" in line and f"{out / 'checkpoints' / '0'}" in line
    assert tree_hash(cfg) == before
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "nonfinite" and summary["nonfinite_step"] == 1


def test_a_resumed_run_stopped_by_an_error_says_interrupted(run_copy, parity):
    """A finished run ("done") resumed for more steps and stopped by an error half-way no longer says "done"."""
    from grpojax.grpo import GRPOTrainer

    run, _, _ = run_copy
    assert json.loads((run / "summary.json").read_text())["status"] == "done"

    def ctrl_c(step, rec):
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        GRPOTrainer(tiny_config(*FAST, "steps=4"), run).train(show_progress=False, hooks=[ctrl_c])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["last_step"] == 3 and summary["error"] == "KeyboardInterrupt"


def test_resume_with_a_changed_config_is_recorded(run_copy, capsys, parity):
    run, cfg, other = run_copy
    shutil.rmtree(run / "checkpoints" / "2")  # as if stopped after step 1 (keeps the compiled update: fast)
    old_config = (run / "config.yaml").read_text()
    new_cfg = user_config(cfg.parent, "eval.every=1", name="new.yaml")
    before = {"cfg": tree_hash(cfg), "new": tree_hash(new_cfg), "other": tree_hash(other)}
    rc, err = run_cli(capsys, "--config", str(new_cfg), "--out", str(run), "--allow-config-change")
    assert rc == 0, err
    assert {"cfg": tree_hash(cfg), "new": tree_hash(new_cfg), "other": tree_hash(other)} == before
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumes"][-1] == {"from_step": 1, "config_changes": {"eval.every": [2, 1]}}
    assert (run / "config.before-step-1.yaml").read_text() == old_config
    assert yaml.safe_load((run / "config.yaml").read_text())["eval"]["every"] == 1
    recs = read_jsonl_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in recs] == [0, 1, 2] and "eval_reward" in recs[2]
    # the metrics log itself says from which step the config differs (a record line, not a step)
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    record = {"record": "resume", "from_step": 1, "config_changes": {"eval.every": [2, 1]}}
    assert [x["step"] if "step" in x else x["_grpojax"].get("record", "header") for x in lines] == \
        ["header", 0, 1, "resume", 2]
    assert lines[3] == {"_grpojax": record}
    assert read_log(run / "metrics.jsonl").meta["records"] == [record]


@pytest.mark.parametrize("override, named", [
    ("grpo.group_size=2", "grpo.group_size"),
    ("sampling.max_new_tokens=6", "sampling.max_new_tokens"),
    ("model.hidden_size=8", "model.hidden_size"),
    ("optim.grad_clip=0", "optim.grad_clip (on -> off)"),
])
def test_resume_with_a_changed_shape_is_refused_in_one_line(run_copy, capsys, override, named):
    """--allow-config-change cannot apply a setting that shapes the checkpoint: refused before anything is
    written, in one line naming the setting (not an array-shape message from the checkpoint)."""
    run, cfg, other = run_copy
    new_cfg = user_config(cfg.parent, override, name="new.yaml")
    before = tree_hash(run)
    rc, err = run_cli(capsys, "--config", str(new_cfg), "--out", str(run), "--allow-config-change")
    line = one_line(err)
    assert rc == 2 and f"{named} cannot change on resume" in line and "--overwrite" in line, line
    assert "int32" not in line and "array" not in line
    assert tree_hash(run) == before


# ----------------------------------------------------------------------------- slow: kills, races
CHILD = """
import os, sys, time
sys.path.insert(0, {tests!r})
import jax
jax.config.update("jax_enable_x64", True)
import grpojax.grpo._trainer as trainer_mod
from grpojax.grpo._checkpoint import CheckpointStore
from test_grpo_trainer import _length_parity_score
trainer_mod.score_completions = _length_parity_score
from test_faults import fill_disk
stall_after = int(os.environ.get("STALL_AFTER_CHECKPOINT", "-1"))
fill_before = int(os.environ.get("FILL_DISK_BEFORE_CHECKPOINT", "-1"))
save = CheckpointStore.save
def stalling_save(self, step, *a, **k):
    if step == fill_before:
        self.wait()  # the checkpoint before is on the disk
        fill_disk(os.environ["FILL_DISK_BALLAST"])
    path = save(self, step, *a, **k)
    if step == stall_after:
        self.wait()  # written: the kill below comes after checkpoint ``step``
        print("stalled", flush=True)
        time.sleep(600)
    return path
CheckpointStore.save = stalling_save
from grpojax.cli import main
sys.exit(main(sys.argv[1:]))
"""


def fill_disk(ballast: str | pathlib.Path, *, leave: int = 16 * 1024) -> None:
    """Fill the file system holding ``ballast`` with that file, to all but ``leave`` bytes.

    Tests fill the disk between two checkpoints rather than sizing a tmpfs to hold exactly one: how many files
    orbax's OCDBT writer splits a checkpoint into (each rounded up to a page) varies with thread timing."""
    st = os.statvfs(pathlib.Path(ballast).parent)
    pathlib.Path(ballast).write_bytes(b"\0" * max(st.f_bavail * st.f_frsize - leave, 0))


def _child(argv, *, stall_after: int = -1, fill_before: int = -1, ballast: str = "") -> subprocess.Popen:
    """``grpojax train ARGV --quiet`` in a fresh process (length-parity reward). It can stall after checkpoint
    ``stall_after`` (to be killed there), or fill the disk with ``ballast`` before checkpoint ``fill_before``."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", STALL_AFTER_CHECKPOINT=str(stall_after),
               FILL_DISK_BEFORE_CHECKPOINT=str(fill_before), FILL_DISK_BALLAST=str(ballast))
    return subprocess.Popen([sys.executable, "-c", CHILD.format(tests=str(TESTS)), "train", *argv, "--quiet"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


KILL = ("steps=5", "checkpoint.every=1", "checkpoint.keep=2", "eval.every=2")


@pytest.mark.slow
def test_kill9_then_corrupt_newest_checkpoint_then_resume_matches_uninterrupted(tmp_path, capsys, parity):
    cfg = user_config(tmp_path, *KILL)
    ref = tmp_path / "reference"
    assert main(["train", "--config", str(cfg), "--out", str(ref), "--quiet"]) == 0
    run = tmp_path / "run"
    child = _child(["--config", str(cfg), "--out", str(run)], stall_after=4)
    try:
        assert child.stdout.readline().strip() == "stalled", child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)  # kill -9 during training, after checkpoint 4
    finally:
        child.kill()
        child.wait()
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == [3, 4]
    assert (run / ".lock").read_text().strip() == str(child.pid)  # a stale lock of a dead process
    f = _data_file(run / "checkpoints" / "4")
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])  # the newest checkpoint is truncated
    before = tree_hash(cfg)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(run))
    assert rc == 0, err
    line = one_line(err)
    assert "checkpoint step 4 skipped" in line and "resuming from checkpoint step 3" in line
    assert tree_hash(cfg) == before
    a, b = _metrics(ref / "metrics.jsonl"), _metrics(run / "metrics.jsonl")
    assert [r["step"] for r in a] == [0, 1, 2, 3, 4, 5] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        for k in ra:
            np.testing.assert_allclose(rb[k], ra[k], rtol=1e-6, atol=1e-7, err_msg=f"step {ra['step']} {k}")
    assert all(r["grad_norm"] > 0 for r in a[1:])  # the run actually learns something to compare
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (ref, run))
    assert sb["evals"] == sa["evals"] and sb["last_step"] == 5 and sb["resumed_from"] == 3


@pytest.mark.slow
def test_two_real_runs_into_one_folder(tmp_path, parity):
    cfg = user_config(tmp_path, *KILL)
    run = tmp_path / "run"
    first = _child(["--config", str(cfg), "--out", str(run)], stall_after=2)
    try:
        assert first.stdout.readline().strip() == "stalled", first.stderr.read()
        second = _child(["--config", str(cfg), "--out", str(run)])
        _, err = second.communicate(timeout=300)
        assert second.returncode == 2
        assert one_line(err) == f"grpojax train: error: {run} is in use by another run (pid {first.pid}); wait " \
                                "for it to finish or choose another --out"
        assert CheckpointStore(run / "checkpoints", read_only=True).is_valid(2)
    finally:
        first.kill()
        first.wait()


def test_no_step0_checkpoint_unless_asked(tmp_path, parity):
    for at_start, expected in ((False, [2]), (True, [0, 2])):
        out = tmp_path / str(at_start)
        cfg = tiny_config(*FAST, "checkpoint.every=0", "checkpoint.keep=5",
                          f"checkpoint.at_start={str(at_start).lower()}")
        trainer_mod.GRPOTrainer(cfg, out).train(show_progress=False)
        store = CheckpointStore(out / "checkpoints")
        assert store.all_steps() == expected and all(store.is_valid(s) for s in expected)
        store.close()


# ---------------------------------------------------------- fit / diagnose / predict / simulate / sweep
def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``grpojax ARGV`` in-process; (status, stdout, stderr)."""
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _curve_jsonl(path: pathlib.Path, y) -> pathlib.Path:
    path.write_text("".join(json.dumps({"step": s + 1, "reward_mean": float(v)}) + "\n" for s, v in enumerate(y)))
    return path


def _tb_file(folder: pathlib.Path, n: int = 30) -> pathlib.Path:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir()
    w = EventFileWriter(str(folder))
    for s in range(1, n + 1):
        w.add_event(Event(step=s, wall_time=1.0 + s, summary=Summary(value=[
            Summary.Value(tag="reward", simple_value=0.8 - 0.5 * (1 - np.exp(-s / 8)))])))
    w.close()
    [path] = folder.glob("*tfevents*")
    return path


@pytest.fixture
def inputs(tmp_path):
    """Bad and good inputs of the log commands, and a bystander file; output goes to tmp_path/out."""
    d = tmp_path / "in"
    d.mkdir()
    s = np.arange(1, 41)
    files = {
        "decreasing": _curve_jsonl(d / "decreasing.jsonl", 0.8 - 0.5 * (1 - np.exp(-s / 8))
                                   + 0.01 * np.random.default_rng(0).standard_normal(s.size)),
        "unknown": d / "notes.txt",
        "mixed": d / "mixed.log",
        "mixed_jsonl": d / "mixed.jsonl",
        "deep": d / "deep.json",
        "tb_dead": d / "events.out.tfevents.1.dead",
        "existing": d / "results.txt",
    }
    files["unknown"].write_text("nothing a trainer wrote\n")
    files["mixed"].write_text("".join(f"{{'loss': 0.1, 'reward': {0.01 * k}, 'epoch': {k / 40:.2f}}}\n" for k in range(1, 21))
                              + "".join(f"step:{k} - critic/score/mean:{0.01 * k} - actor/entropy:0.3\n" for k in range(21, 41)))
    files["mixed_jsonl"].write_text("".join(json.dumps({"step": k, "reward_mean": 0.01 * k}) + "\n" for k in range(1, 21))
                                    + "".join(json.dumps({"step": k, "data": {"critic/score/mean": 0.01 * k}}) + "\n"
                                              for k in range(21, 41)))
    files["deep"].write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    files["tb_dead"].write_bytes(b"\x00" * 64)
    files["existing"].write_text("precious\n")
    (tmp_path / "bystander.txt").write_text("keep me\n")
    return tmp_path, files


def _outside(tmp_path):
    """Hashes of everything except the command's own output folder."""
    return {k: v for k, v in tree_hash(tmp_path).items() if not k.startswith("out/") and k != "out"}


@pytest.mark.parametrize("command", ["fit", "diagnose"])
@pytest.mark.parametrize(
    "key, expected",
    [
        ("missing", "no such file or folder"),
        ("unknown", "unknown log format"),
        ("mixed", "mixes two log formats: 20 verl_console entries (first at line 21) and 20 trl_console entries "
                  "(first at line 1)"),
        ("mixed_jsonl", "mixes two log formats: 20 jsonl line(s) (first at line 1) and 20 verl_jsonl line(s) "
                        "(first at line 21)"),
        ("deep", "JSON nested too deeply"),
        ("tb_dead", "not a readable TensorBoard event file"),
    ],
)
def test_bad_logs_are_one_line_errors(inputs, capsys, command, key, expected):
    tmp_path, files = inputs
    log = str(files.get(key, tmp_path / "in" / "missing.jsonl"))
    before = _outside(tmp_path)
    t0 = time.perf_counter()
    rc, _, err = cli(capsys, command, log, "--no-plot", "--out", str(tmp_path / "out"))
    line = one_line(err)
    assert rc == 2 and expected in line and line.startswith(f"grpojax {command}: error: {log}"), line
    assert time.perf_counter() - t0 < 20
    assert _outside(tmp_path) == before and not list((tmp_path / "out").glob("*.json"))


@pytest.mark.parametrize("command", ["fit", "diagnose"])
def test_out_is_an_existing_file_for_log_commands(inputs, capsys, command):
    tmp_path, files = inputs
    before = tree_hash(tmp_path)
    rc, _, err = cli(capsys, command, str(files["decreasing"]), "--no-plot", "--out", str(files["existing"]))
    assert rc == 2 and str(files["existing"]) in one_line(err)
    assert tree_hash(tmp_path) == before


def test_fit_of_a_decreasing_curve_says_so(inputs, capsys):
    tmp_path, files = inputs
    before = _outside(tmp_path)
    rc, out, err = cli(capsys, "fit", str(files["decreasing"]), "--law", "exponential", "--no-plot",
                       "--out", str(tmp_path / "out"))
    assert rc == 0 and "Traceback" not in err
    law = json.loads((tmp_path / "out" / "fit.json").read_text())["runs"]["decreasing"]["laws"]["exponential"]
    assert law["status"] == "decreasing" and "the curve falls" in law["reason"]
    assert law["params"]["r_inf"] is None  # no plateau reported for a law that cannot describe the curve
    assert "decreasing exponential: decreasing: the curve falls" in " ".join(out.split())
    assert _outside(tmp_path) == before


def test_fit_reads_a_corrupt_tensorboard_file_with_a_warning(inputs, capsys):
    tmp_path, _ = inputs
    tb = _tb_file(tmp_path / "in" / "tb")
    data = bytearray(tb.read_bytes())
    at = data.index(np.float32(0.8 - 0.5 * (1 - np.exp(-15 / 8))).tobytes())
    data[at + 3] ^= 0x40  # step 15's reward becomes ~1e38
    tb.write_bytes(bytes(data))
    before = _outside(tmp_path)
    rc, _, err = cli(capsys, "fit", str(tb), "--law", "exponential", "--no-plot", "--out", str(tmp_path / "out"))
    line = one_line(err)
    assert rc == 0 and line.startswith("warning: ") and "1 point(s) lost" in line and "step(s) 15" in line
    run = json.loads((tmp_path / "out" / "fit.json").read_text())["runs"]["tb"]
    assert run["n_points"] == 29 and run["laws"]["exponential"]["status"] == "decreasing"
    assert _outside(tmp_path) == before


def test_full_disk_leaves_no_partial_fit_json(inputs, capsys, monkeypatch):
    import errno

    import grpojax._io as io_mod

    tmp_path, files = inputs
    out = tmp_path / "out"
    out.mkdir()
    (out / "fit.json").write_text('{"old": "result"}\n')  # a previous result must survive a failed write

    def fsync_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io_mod.os, "fsync", fsync_full)
    before = _outside(tmp_path)
    rc, _, err = cli(capsys, "fit", str(files["decreasing"]), "--law", "exponential", "--no-plot", "--out", str(out))
    line = one_line(err)
    assert rc == 1 and f"no space left on the device while writing {out / 'fit.json'}" in line, line
    assert (out / "fit.json").read_text() == '{"old": "result"}\n'
    assert sorted(p.name for p in out.iterdir()) == ["fit.json"]  # no temporary file left behind
    assert _outside(tmp_path) == before


def test_diagnose_all_nan_and_one_inf(capsys, tmp_path):
    from grpojax.diagnose import diagnose
    from grpojax.logs import RunLog

    n = 120
    s = np.arange(1, n + 1)
    nan = {c: np.full(n, np.nan) for c in ("reward_mean", "reward_std", "kl", "grad_norm", "entropy", "response_length")}
    d = diagnose(RunLog.from_columns(nan, steps=s))
    assert {r.verdict for r in d.results.values()} == {"insufficient_data"} and not d.detected
    rng = np.random.default_rng(0)
    y = 0.2 + 0.6 * (1 - np.exp(-s / 30)) + 0.01 * rng.standard_normal(n)
    clean = diagnose(RunLog.from_columns({"reward_mean": y, "reward_std": np.full(n, 0.3)}, steps=s))
    assert not clean.results["dynamical_instability"].detected
    y[60] = np.inf
    d = diagnose(RunLog.from_columns({"reward_mean": y, "reward_std": np.full(n, 0.3)}, steps=s))
    res = d.results["dynamical_instability"]
    # a single +inf is reported, but never silently: the reason names the non-finite value and its step
    assert not res.detected or ("non-finite" in res.reason and "61" in res.reason), res.reason
    # through the command line: one line per problem at most, no traceback
    log = _curve_jsonl(tmp_path / "inf.jsonl", y)
    rc, out, err = cli(capsys, "diagnose", str(log), "--no-plot", "--no-validity", "--out", str(tmp_path / "out"))
    assert rc == 0 and "Traceback" not in err
    rep = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert "non-finite" in json.dumps(rep)


@pytest.mark.parametrize(
    "argv, status, expected",
    [
        (["predict", "--eta", "0.01", "--k-ref", "4", "--curvature", "-1"], 2, "argument --curvature: must be > 0"),
        (["predict", "--eta", "0.01", "--k-ref", "4", "--curvature", "0"], 2, "argument --curvature: must be > 0"),
        (["predict", "--eta", "0.01", "--k-ref", "4", "--curvature", "1", "--p0", "nan"], 2,
         "argument --p0: must be a finite number, got nan"),
        (["simulate", "--eta", "0.01", "--k-ref", "4", "--curvature", "1", "--paths", "2147483648"], 2,
         "argument --paths: must be an integer in [1, 10,000,000] (paths in the ensemble), got 2147483648"),
        (["simulate", "--eta", "0.01", "--k-ref", "4", "--curvature", "1", "--dt", "1e-6"], 2,
         "--dt 1e-06 over a horizon"),
        (["sweep", "--size", "-3"], 2, "argument --size: must be an integer in [2, 4,096]"),
        (["sweep", "--preset", "nope"], 2, "unknown sweep preset 'nope'"),
        (["sweep", "--steps", "0"], 2, "argument --steps: must be an integer in [8,"),
    ],
)
def test_bad_values_of_the_model_commands_are_one_line_errors(tmp_path, capsys, argv, status, expected):
    (tmp_path / "bystander.txt").write_text("keep me\n")
    before = tree_hash(tmp_path)
    t0 = time.perf_counter()
    rc, _, err = cli(capsys, *argv, "--out", str(tmp_path / "out"))
    assert rc == status and expected in one_line(err)
    assert time.perf_counter() - t0 < 10
    assert {k: v for k, v in tree_hash(tmp_path).items() if not k.startswith("out")} == before


def test_predict_with_a_huge_k_ref_answers_quickly(tmp_path, capsys):
    t0 = time.perf_counter()
    rc, out, err = cli(capsys, "predict", "--eta", "0.01", "--k-ref", "1000000000", "--curvature", "1",
                       "--lag", "constant", "--out", str(tmp_path / "out"))
    assert rc == 0 and "Traceback" not in err and len([x for x in err.splitlines() if x.strip()]) <= 1
    assert time.perf_counter() - t0 < 60
    pred = json.loads((tmp_path / "out" / "prediction.json").read_text())
    assert "unstable" in json.dumps(pred)
    assert "exact thresholds not computed" in " ".join(out.split())


# ------------------------------------------------------------------ every writer: full disk, read-only folder
@contextlib.contextmanager
def tmpfs(path: pathlib.Path, size: str, *, readonly: bool = False):
    """A size-limited (or read-only) tmpfs at ``path``; skips the test where mounting is not allowed (not root)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if readonly else "")
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a size-limited file system needs a tmpfs mount, which needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fake_full_disk(monkeypatch):
    """The one atomic write of grpojax (grpojax._io.atomic_write) fails as a full disk does, half-way."""
    import errno

    import grpojax._io as io_mod

    real = io_mod.atomic_write

    def full(path, write):
        def half(tmp):
            with open(tmp, "w") as f:
                f.write("partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        return real(path, half)

    monkeypatch.setattr(io_mod, "atomic_write", full)


LOG = str(TESTS / "fixtures" / "quickstart" / "trainer_state.json")
# (command line with {out}, the files it writes under {out}); the fast writers of every command but train/export
WRITERS = {
    "predict": (["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5", "--out", "{out}"],
                ["prediction.json", "trajectory.png"]),
    "simulate": (["simulate", "--eta", "0.05", "--mu", "0.5", "--k-ref", "4", "--curvature", "1.2", "--paths", "16",
                  "--steps", "20", "--out", "{out}"], ["simulation.json", "ensemble.png"]),
    "advise": (["advise", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--group-size", "8", "--curvature", "0.5",
                "--json", "{out}/advice.json"], ["advice.json"]),
    "fit": (["fit", LOG, "--law", "exponential", "--out", "{out}"], ["fit.json", "fit_quickstart.png"]),
    "diagnose": (["diagnose", LOG, "--no-validity", "--out", "{out}"], ["diagnosis.json", "dashboard.svg"]),
    "watch": (["watch", LOG, "--no-live", "--idle-timeout", "0.05", "--poll", "0.01", "--json", "{out}/watch.json"],
              ["watch.json"]),
}


def _argv(command: str, out: pathlib.Path) -> list[str]:
    return [a.replace("{out}", str(out)) for a in WRITERS[command][0]]


@pytest.mark.parametrize("command", [c for c in WRITERS if c != "watch"])
def test_every_writer_under_a_full_disk(command, tmp_path, capsys, monkeypatch):
    """A full disk while writing: exit 1, one line naming the file, the previous results intact, no temporary file."""
    out = tmp_path / "out"
    out.mkdir()
    for name in WRITERS[command][1]:
        (out / name).write_text("previous result\n")
    (tmp_path / "bystander.txt").write_text("keep me\n")
    before = tree_hash(tmp_path)
    _fake_full_disk(monkeypatch)
    rc, _, err = cli(capsys, *_argv(command, out))
    line = one_line(err)
    assert rc == 1 and "no space left on the device while writing " + str(out) in line, line
    assert "internal error" not in line
    assert tree_hash(tmp_path) == before  # nothing half-written, nothing replaced, no temporary file


@pytest.mark.slow  # watch's first forecast fits a posterior: minutes on two busy cores
def test_watch_under_a_full_disk(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    _fake_full_disk(monkeypatch)
    rc, _, err = cli(capsys, *_argv("watch", out))
    line = one_line(err)
    assert rc == 1 and f"no space left on the device while writing {out / 'watch.json'}" in line, line
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize("command", [c for c in WRITERS if c != "watch"])
def test_every_writer_into_a_read_only_folder(command, tmp_path, capsys):
    """A read-only folder: exit 1, one line naming the path and saying why."""
    with tmpfs(tmp_path / "ro", "64k", readonly=True) as ro:
        rc, _, err = cli(capsys, *_argv(command, ro / "out"))
    line = one_line(err)
    assert rc == 1 and str(ro / "out") in line and "read-only file system" in line, line


def test_predict_into_a_small_file_system(tmp_path, capsys):
    """A real full disk (a 16 KiB tmpfs): the figure does not fit; one line, no partial file left."""
    with tmpfs(tmp_path / "small", "16k") as small:
        rc, _, err = cli(capsys, *_argv("predict", small / "out"))
        left = sorted(p.name for p in (small / "out").iterdir()) if (small / "out").exists() else []
    line = one_line(err)
    assert rc == 1 and "no space left on the device while writing" in line and str(small / "out") in line, line
    assert all(not n.endswith(".tmp") for n in left), left


def test_checkpoint_on_a_full_disk_keeps_the_last_good_one(tmp_path):
    """orbax's RESOURCE_EXHAUSTED on a full tmpfs: one StorageError line naming the folder; step 1 stays restorable."""
    from grpojax import StorageError

    with tmpfs(tmp_path / "disk", "1m") as disk:
        store = CheckpointStore(disk / "checkpoints", keep=2)
        small = {"w": jnp.arange(1000, dtype=jnp.float32)}
        store.save(1, small, {"phase": "grpo"})
        store.wait()
        (disk / "filler").write_bytes(b"\0" * (1024 * 1024 - 256 * 1024))
        big = {"w": jnp.asarray(np.random.default_rng(0).normal(size=400_000).astype(np.float32))}
        with pytest.raises(StorageError) as exc:  # written in the background: the failure comes with the wait
            store.save(2, big, {"phase": "grpo"})
            store.wait()
        msg = str(exc.value)
        assert len(msg.splitlines()) == 1 and str(disk / "checkpoints") in msg
        assert "no space left on the device" in msg and "the last good checkpoint is step 1" in msg
        (disk / "filler").unlink()
        assert store.all_steps() == [1] and not list((disk / "checkpoints").glob("*tmp*"))
        state, meta, skipped = store.restore_valid(small)
        assert meta["step"] == 1 and not skipped and np.array_equal(state["w"], small["w"])
        store.close()


def test_failed_resave_of_a_step_puts_the_old_checkpoint_back(tmp_path, monkeypatch):
    """Any orbax error while replacing checkpoint N: StorageError, and the old checkpoint N is restored intact."""
    import orbax.checkpoint as ocp

    from grpojax import StorageError

    store = CheckpointStore(tmp_path / "checkpoints", keep=2)
    old = {"w": jnp.arange(10, dtype=jnp.float32)}
    store.save(3, old, {"phase": "grpo"})
    store.wait()
    before = tree_hash(store.path(3))

    def broken(self, *a, **k):
        raise ValueError("INTERNAL: something orbax did not expect\nmore lines of its log")

    monkeypatch.setattr(ocp.CheckpointManager, "save", broken)
    with pytest.raises(StorageError, match=r"could not write checkpoint 3 in .*: ValueError: INTERNAL"):
        store.save(3, {"w": jnp.ones(10, dtype=jnp.float32)}, {"phase": "grpo"})
    monkeypatch.undo()
    assert store.all_steps() == [3] and tree_hash(store.path(3)) == before and store.is_valid(3)
    store.close()


def test_train_on_a_full_disk_is_one_line(tmp_path, capsys, parity):
    """A run folder on a 64 KiB tmpfs: the first checkpoint does not fit; one line naming the folder, no orbax log."""
    cfg = user_config(tmp_path)
    with tmpfs(tmp_path / "disk", "64k") as disk:
        rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(disk / "run"))
        line = one_line(err)
        summary = json.loads((disk / "run" / "summary.json").read_text())
        left = [p.name for p in (disk / "run" / "checkpoints").iterdir()]
    assert rc == 1 and line == (f"grpojax train: error: could not write checkpoint 1 in {disk / 'run' / 'checkpoints'}: "
                                "no space left on the device; no earlier checkpoint exists"), line
    assert "RESOURCE_EXHAUSTED" not in err and not left
    assert summary["status"] == "interrupted" and "no space left" in summary["error"]


@pytest.mark.slow
def test_disk_full_mid_run_keeps_the_last_checkpoint_and_resumes(tmp_path, capsys, parity, monkeypatch):
    """The disk fills at the second checkpoint: one line naming step 1 as the last good one; with room again
    (the ballast removed), the same command resumes from step 1 and finishes.

    The disk is filled once checkpoint 1 is on it (``fill_disk``)."""
    cfg = user_config(tmp_path)
    real_save = CheckpointStore.save

    def save_on_a_filling_disk(self, step, state, meta=None):
        if step == 2:
            self.wait()  # checkpoint 1 committed
            fill_disk(disk / "ballast")
        return real_save(self, step, state, meta)

    with tmpfs(tmp_path / "disk", "8m") as disk:
        monkeypatch.setattr(CheckpointStore, "save", save_on_a_filling_disk)
        rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(disk / "run"))
        line = one_line(err)
        assert rc == 1 and "could not write checkpoint 2" in line and "the last good checkpoint is step 1" in line, line
        assert json.loads((disk / "run" / "summary.json").read_text())["status"] == "interrupted"
        monkeypatch.setattr(CheckpointStore, "save", real_save)
        (disk / "ballast").unlink()
        rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(disk / "run"))
        assert rc == 0, err
        summary = json.loads((disk / "run" / "summary.json").read_text())
    assert summary["status"] == "done" and summary["resumed_from"] == 1 and summary["last_step"] == 2


@pytest.mark.parametrize("fault", ["full", "read_only"])
def test_export_under_a_full_disk_or_read_only_folder(finished, tmp_path, capsys, fault):
    """export writes into a temporary folder then moves the files: a full disk leaves no partial files."""
    run, _ = finished
    with tmpfs(tmp_path / "disk", "8k", readonly=fault == "read_only") as disk:
        rc, _, err = cli(capsys, "export", str(run), str(disk / "hf"))
        left = sorted(p.name for p in disk.iterdir())
        exported = sorted(p.name for p in (disk / "hf").iterdir()) if (disk / "hf").is_dir() else []
    line = one_line(err)
    why = "no space left on the device while writing" if fault == "full" else "read-only file system"
    assert rc == 1 and why in line and str(disk / "hf") in line, line
    assert left in ([], ["hf"]) and exported == []  # no temporary folder, no half-exported files


@pytest.mark.slow  # a sweep compiles for a minute on two busy cores
@pytest.mark.parametrize("fault", ["full", "read_only"])
def test_sweep_under_a_full_disk_or_read_only_folder(tmp_path, capsys, monkeypatch, fault):
    argv = ["sweep", "--preset", "transition", "--size", "2", "--steps", "8"]
    if fault == "full":
        _fake_full_disk(monkeypatch)
        rc, _, err = cli(capsys, *argv, "--out", str(tmp_path / "out"))
        assert rc == 1 and "no space left on the device while writing " + str(tmp_path / "out") in one_line(err)
        assert not list((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else True
    else:
        with tmpfs(tmp_path / "ro", "64k", readonly=True) as ro:
            rc, _, err = cli(capsys, *argv, "--out", str(ro / "out"))
        assert rc == 1 and "read-only file system" in one_line(err)


def test_train_run_folder_writers_under_a_full_disk(tmp_path, capsys, monkeypatch, parity):
    """Every run-folder file goes through the one atomic write: a full disk there is one line naming the file
    (config.yaml is the first), and the user's config is untouched."""
    cfg = user_config(tmp_path)
    before = tree_hash(cfg)
    _fake_full_disk(monkeypatch)
    rc, err = run_cli(capsys, "--config", str(cfg), "--out", str(tmp_path / "run"))
    line = one_line(err)
    assert rc == 1 and f"no space left on the device while writing {tmp_path / 'run'}" in line, line
    assert tree_hash(cfg) == before
    assert not [p for p in (tmp_path / "run").rglob("*.tmp")]
