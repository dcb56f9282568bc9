"""A checkpoint that cannot be written, in a process of its own: the whole stderr is one line.

A failed orbax save leaves writer threads and asyncio loops behind; what they report after the error (up to
the interpreter's exit) is part of what a user sees, so each case runs in a subprocess and compares its
entire stderr: the checkpoint store alone (fast), and `grpojax train` (slow). The file systems are real: a size-limited tmpfs (full from the start, or filling
during the second checkpoint) and a read-only bind mount of the checkpoint folder; each case is skipped where
mounting is not allowed. After the disk that filled gets room again, the same command resumes from the last
good checkpoint and logs what an uninterrupted run logs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from grpojax.cli import main
from test_faults import _child, tmpfs, user_config  # noqa: E402
from test_grpo_trainer import _length_parity_score, _metrics  # noqa: E402

import grpojax.grpo._trainer as trainer_mod


def _mount(*args: str) -> None:
    """``mount ARGS``; the test is skipped where mounting is not allowed (not root, no mount)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only bind mount needs root")
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount {args} here ({r.stderr.strip() or r.returncode})")

STORE = """
import sys
import jax.numpy as jnp
import numpy as np
from grpojax import StorageError
from grpojax.grpo import CheckpointStore

store = CheckpointStore(sys.argv[1], keep=2)
try:
    if sys.argv[2] == "small-then-big":
        store.save(1, {"w": jnp.arange(1000, dtype=jnp.float32)}, {"phase": "grpo"})
        store.wait()
    big = np.random.default_rng(0).normal(size=1_000_000).astype(np.float32)  # 4 MB, hardly compressible
    store.save(2, {"w": jnp.asarray(big)}, {"phase": "grpo"})
    store.wait()
except StorageError as exc:
    sys.stderr.write(f"{exc}\\n")
store.close()
"""


def _store_process(folder, how: str) -> tuple[int, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", STORE, str(folder), how], capture_output=True, text=True, env=env,
                       timeout=300)
    return r.returncode, r.stderr


def test_store_on_a_disk_full_from_the_start_is_one_line(tmp_path):
    """Not even the checkpoint's folders fit: orbax fails before its save returns."""
    with tmpfs(tmp_path / "disk", "64k") as disk:
        (disk / "checkpoints").mkdir()
        (disk / "filler").write_bytes(b"\0" * (64 * 1024))  # as much as fits
        rc, err = _store_process(disk / "checkpoints", "big")
        left = sorted(p.name for p in (disk / "checkpoints").iterdir())
    assert rc == 0 and err == (f"could not write checkpoint 2 in {disk / 'checkpoints'}: no space left on the device; "
                               "no earlier checkpoint exists\n"), err
    assert left == []


def test_store_on_a_disk_filling_while_writing_is_one_line(tmp_path):
    """Checkpoint 1 fits in 1 MiB, checkpoint 2 (4 MB) fails in orbax's background writers."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        rc, err = _store_process(disk / "checkpoints", "small-then-big")
        left = sorted(p.name for p in (disk / "checkpoints").iterdir())
    assert rc == 0 and err == (f"could not write checkpoint 2 in {disk / 'checkpoints'}: no space left on the device; "
                               "the last good checkpoint is step 1\n"), err
    assert left == ["1"]


def test_store_in_a_read_only_folder_is_one_line(tmp_path):
    folder = tmp_path / "checkpoints"
    rc, err = _store_process(folder, "small-then-big")
    assert rc == 0 and err == "", err
    shutil.rmtree(folder / "2")
    _mount("--bind", str(folder), str(folder))
    try:
        _mount("-o", "remount,bind,ro", str(folder))
        rc, err = _store_process(folder, "big")
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
    assert rc == 0 and err == (f"could not write checkpoint 2 in {folder}: read-only file system; "
                               "the last good checkpoint is step 1\n"), err
    assert sorted(p.name for p in folder.iterdir()) == ["1"]


def _train(cfg, out, *extra: str, timeout: float = 600, **child) -> tuple[int, str]:
    """``grpojax train --config cfg --out out --quiet`` in a fresh process (length-parity reward); (status, stderr)."""
    child = _child(["--config", str(cfg), "--out", str(out), *extra], **child)
    _, err = child.communicate(timeout=timeout)
    return child.returncode, err


@pytest.mark.slow  # starts Python, JAX and a compile in a fresh process
def test_full_disk_stderr_is_one_line(tmp_path):
    """The run folder on a 64 KiB tmpfs: the first checkpoint does not fit."""
    cfg = user_config(tmp_path)
    with tmpfs(tmp_path / "disk", "64k") as disk:
        rc, err = _train(cfg, disk / "run")
        left = sorted(p.name for p in (disk / "run" / "checkpoints").iterdir())
    assert rc == 1 and err == (f"grpojax train: error: could not write checkpoint 1 in {disk / 'run' / 'checkpoints'}: "
                               "no space left on the device; no earlier checkpoint exists\n"), err
    assert left == []  # the failed save's temporary folder is gone


@pytest.mark.slow  # starts Python, JAX and a compile in a fresh process
def test_read_only_checkpoint_folder_stderr_is_one_line(tmp_path):
    """A finished run continued for one more step while its checkpoint folder is mounted read-only: the
    restore works, the new checkpoint cannot be written, and the old ones are untouched."""
    cfg = user_config(tmp_path)
    with tmpfs(tmp_path / "disk", "4m") as disk:
        run = disk / "run"
        rc, err = _train(cfg, run)
        assert rc == 0, err
        ckpt = run / "checkpoints"
        _mount("--bind", str(ckpt), str(ckpt))
        try:
            _mount("-o", "remount,bind,ro", str(ckpt))
            rc, err = _train(cfg, run, "--set", "steps=3")
            steps = sorted(int(p.name) for p in ckpt.iterdir())
        finally:
            subprocess.run(["umount", "-l", str(ckpt)], capture_output=True)
        summary = json.loads((run / "summary.json").read_text())
    assert rc == 1 and err == (f"grpojax train: error: could not write checkpoint 3 in {ckpt}: read-only file system; "
                               "the last good checkpoint is step 2\n"), err
    assert steps == [1, 2] and summary["status"] == "interrupted"


@pytest.mark.slow  # starts Python, JAX and a compile in a fresh process
def test_disk_filling_during_a_checkpoint_is_one_line_and_resume_is_exact(tmp_path, monkeypatch):
    """The disk is filled to all but 16 KiB once checkpoint 1 is on it, so it fills while checkpoint 2 is written
    (in the background). With room again, the same command resumes from step 1 and its log equals an
    uninterrupted run's."""
    cfg = user_config(tmp_path)
    monkeypatch.setattr(trainer_mod, "score_completions", _length_parity_score)
    assert main(["train", "--config", str(cfg), "--out", str(tmp_path / "reference"), "--quiet"]) == 0
    with tmpfs(tmp_path / "disk", "8m") as disk:
        run = disk / "run"
        rc, err = _train(cfg, run, fill_before=2, ballast=disk / "ballast")
        assert rc == 1 and err == (f"grpojax train: error: could not write checkpoint 2 in {run / 'checkpoints'}: "
                                   "no space left on the device; the last good checkpoint is step 1\n"), err
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["1"]
        (disk / "ballast").unlink()
        rc, err = _train(cfg, run)
        assert rc == 0, err
        summary = json.loads((run / "summary.json").read_text())
        got = _metrics(run / "metrics.jsonl")
    assert summary["status"] == "done" and summary["resumed_from"] == 1 and summary["last_step"] == 2
    want = _metrics(tmp_path / "reference" / "metrics.jsonl")
    assert [r["step"] for r in got] == [r["step"] for r in want] == [0, 1, 2]
    for rg, rw in zip(got, want):
        assert rg.keys() == rw.keys()
        for k in rw:
            np.testing.assert_allclose(rg[k], rw[k], rtol=1e-6, atol=1e-7, err_msg=f"step {rw['step']} {k}")
    assert all(r["grad_norm"] > 0 for r in want[1:])  # the steps compared carry information


def test_orbax_reports_through_asyncio_are_held_back_and_others_pass():
    """asyncio's reports of orbax's abandoned work (the coroutine in the message, the failed OCDBT write in the
    future's exception, or orbax in the traceback) are dropped; any other asyncio record passes."""
    import logging

    from grpojax.grpo._orbax_failure import HoldBackLog

    def record(msg, exc=None):
        exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
        return logging.LogRecord("asyncio", logging.ERROR, "/usr/lib/python3.11/asyncio/base_events.py", 1, msg,
                                 None, exc_info)

    write = ValueError('RESOURCE_EXHAUSTED: Error writing "leaves.60/0" in OCDBT database at local file '
                       '"/tmp/run/checkpoints/2.orbax-checkpoint-tmp/state.orbax-checkpoint-tmp/ocdbt.process_0/"')
    hold = HoldBackLog()
    assert not hold.filter(record("_GatheringFuture exception was never retrieved\n"
                                  f"future: <_GatheringFuture finished exception={write!r}>"))
    assert not hold.filter(record("Future exception was never retrieved", write))
    assert not hold.filter(record("Task exception was never retrieved\nfuture: <Task finished "
                                  "coro=<f() done, defined at /site-packages/orbax/checkpoint/x.py:1>>"))
    assert hold.filter(record("Task exception was never retrieved", ValueError("a user's own coroutine")))
    assert hold.filter(logging.LogRecord("grpojax", logging.ERROR, "/x.py", 1, "OCDBT database", None, None))
