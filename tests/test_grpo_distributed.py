"""The GRPO trainer over several processes (2 local processes × 1 CPU device, through ``grpojax launch``).

A two-process run is one data-parallel program on a 2-device global mesh: each process holds half of every
rollout batch, the completions are gathered for scoring, process 0 alone writes the run folder, and the
checkpoints hold global arrays. Its log and parameters must equal those of the same run in one process (to
float rounding: the reductions run in another order), and a checkpoint written by either resumes in the other.

The tiny model of these tests never answers an arithmetic problem right, so the scripts score completions by
their text (a deterministic function of the sampled tokens) to give the groups non-zero advantages.

The tests that train start several Python processes that compile the trainer (about 40 s each on 2 CPU
cores): ``slow``.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from grpojax.grpo import RunLock

from _procs import GRPOJAX, REPO
from _procs import clean_env as _clean_env
from _procs import run_bounded as _run

_TRAIN = textwrap.dedent("""
    import sys
    from grpojax._distributed import initialize_distributed, to_host
    initialize_distributed("auto")            # before any JAX computation
    import jax
    import numpy as np
    import grpojax.grpo._trainer as trainer_module
    from grpojax.grpo import GRPOTrainer, apply_overrides, load_config

    real_score = trainer_module.score_completions

    def text_score(texts, answers, weights, options=None):
        s = real_score(texts, answers, weights, options=options)
        r = np.asarray([(sum(map(ord, t)) % 7) / 6.0 for t in texts], np.float32)
        return s._replace(rewards=r)

    trainer_module.score_completions = text_score
    out, steps, stop_after = sys.argv[1], int(sys.argv[2]), (None if sys.argv[3] == "-" else int(sys.argv[3]))
    cfg = apply_overrides(load_config("tiny-arith"), [
        f"steps={steps}", "warmstart.steps=2", "eval.n=8", "eval.every=2", "checkpoint.every=1",
        "grpo.prompts_per_step=4", "grpo.group_size=4", "sampling.max_new_tokens=6", "grpo.k_ref=2",
        "grpo.beta=0.02", "optim.warmup_steps=0", "optim.lr=0.003", "model.hidden_size=32",
        "model.intermediate_size=64", "model.num_hidden_layers=1", "model.num_attention_heads=2",
        "model.num_key_value_heads=2"])
    tr = GRPOTrainer(cfg, out)
    flat = lambda tree: {jax.tree_util.keystr(p): to_host(x) for p, x in jax.tree_util.tree_leaves_with_path(tree)}
    before = flat(tr.params)
    summary = tr.train(show_progress=False, stop_after=stop_after)
    after = flat(tr.params)                   # every process gathers (a collective); process 0 saves
    if jax.process_index() == 0:
        np.savez(out + "-before.npz", **before)
        np.savez(out + "-after.npz", **after)
    print("process", jax.process_index(), "of", jax.process_count(), "on", jax.device_count(), "devices:",
          summary["status"], "at step", summary["last_step"])
    """)


def _train(tmp: pathlib.Path, name: str, processes: int, steps: int, stop_after: int | None = None) -> str:
    script = tmp / "train.py"
    if not script.is_file():
        script.write_text(_TRAIN)
    args = [sys.executable, str(script), str(tmp / name), str(steps), "-" if stop_after is None else str(stop_after)]
    if processes > 1:
        args = [*GRPOJAX, "launch", "-n", str(processes), "--timeout", "280", "--", *args]
    done = _run(args, 300, env=_clean_env(), cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout


def _records(run: pathlib.Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(x) for x in lines[1:]]


def _assert_same_log(a: list[dict], b: list[dict], tol: float = 1e-5) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b]
    for ra, rb in zip(a, b):
        keys = {k for k in ra if not k.startswith("timing_s/")}
        assert keys == {k for k in rb if not k.startswith("timing_s/")}, ra["step"]
        for k in keys:
            if isinstance(ra[k], float):
                assert rb[k] == pytest.approx(ra[k], abs=tol, rel=tol), (ra["step"], k)
            else:
                assert rb[k] == ra[k], (ra["step"], k)


def _params(path: pathlib.Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.slow
def test_two_processes_train_like_one(tmp_path):
    """Two GRPO steps (one rollout, K_ref = 2) in 2 processes equal the 1-process run within 1e-5."""
    one = _train(tmp_path, "one", 1, 2)
    two = _train(tmp_path, "two", 2, 2)
    assert "process 0 of 1 on 1 devices: done at step 2" in one
    assert "process 0 of 2 on 2 devices: done" in two and "process 1 of 2 on 2 devices: done" in two
    a, b = _records(tmp_path / "one"), _records(tmp_path / "two")
    _assert_same_log(a, b)
    step1 = next(r for r in a if r["step"] == 1)
    assert step1["reward_std"] > 0 and step1["grad_norm"] > 1e-3
    p0, p1, p2 = (_params(tmp_path / f) for f in ("one-before.npz", "one-after.npz", "two-after.npz"))
    moved = max(float(np.max(np.abs(p1[k] - p0[k]))) for k in p0)
    assert moved > 1e-3  # the step did change the parameters ...
    for k in p1:  # ... and the same way in both runs
        np.testing.assert_allclose(p2[k], p1[k], atol=1e-5, rtol=0, err_msg=k)
    # the run folder is written once: one log header, one summary
    lines = (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()
    assert sum('"_grpojax"' in x for x in lines) == 1 and len(lines) == len(a) + 1
    summary = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert summary["status"] == "done" and summary["last_step"] == 2


@pytest.mark.slow
@pytest.mark.parametrize(("first", "then"), [(2, 1), (1, 2)])
def test_checkpoint_resumes_across_process_counts(tmp_path, first, then):
    """A run stopped after step 1 in ``first`` processes and resumed in ``then`` ends as the unbroken run."""
    _train(tmp_path, "whole", 1, 2)
    _train(tmp_path, "split", first, 2, stop_after=1)
    assert json.loads((tmp_path / "split" / "summary.json").read_text())["last_step"] == 1
    _train(tmp_path, "split", then, 2)
    summary = json.loads((tmp_path / "split" / "summary.json").read_text())
    assert summary["status"] == "done" and summary["resumed_from"] == 1
    _assert_same_log(_records(tmp_path / "whole"), _records(tmp_path / "split"))
    whole, split = _params(tmp_path / "whole-after.npz"), _params(tmp_path / "split-after.npz")
    for k in whole:
        np.testing.assert_allclose(split[k], whole[k], atol=1e-5, rtol=0, err_msg=k)


@pytest.mark.slow
def test_cli_train_two_processes_writes_once(tmp_path):
    """``grpojax launch -n 2 -- grpojax train`` runs, prints once and leaves one run folder."""
    args = ["train", "--config", "tiny-arith", "--out", str(tmp_path / "run"), "--quiet", "--steps", "1",
            "--set", "warmstart.steps=1", "--set", "eval.n=4", "--set", "grpo.prompts_per_step=2",
            "--set", "grpo.group_size=2", "--set", "sampling.max_new_tokens=4", "--set", "model.hidden_size=32",
            "--set", "model.intermediate_size=64", "--set", "model.num_hidden_layers=1"]
    done = _run([*GRPOJAX, "launch", "-n", "2", "--timeout", "280", "--", "grpojax", *args], 300,
                env=_clean_env(), cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:]
    assert done.stdout.count("run log:") == 1, done.stdout[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "done" and summary["last_step"] == 1
    with RunLock(tmp_path / "run"):  # process 0 released the folder
        pass


def test_train_refuses_a_half_started_runtime(tmp_path):
    """The environment of a 2-process run without the runtime (a process started by hand) is refused."""
    env = _clean_env(GRPOJAX_COORDINATOR_ADDRESS="127.0.0.1:1", GRPOJAX_NUM_PROCESSES="2", GRPOJAX_PROCESS_ID="1")
    done = subprocess.run([*GRPOJAX, "train", "--config", "tiny-arith", "--out", str(tmp_path / "r"),
                           "--distributed", "off", "--steps", "1"], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "GRPOJAX_NUM_PROCESSES=2" in done.stderr
