"""Run folders: one writer at a time, and a run never replaced or mixed with another without being asked.

A run folder holds the files of one run (:data:`RUN_FILES`, :data:`RUN_DIRS`). :class:`RunLock` is an
exclusive ``flock`` on ``<folder>/.lock`` (which records the holder's pid) held while a run writes the
folder; the kernel drops it when the process dies, so a lock left by a killed run is simply taken over.
:func:`plan_run` decides, before anything is written, whether a run may start in a folder:

- an empty folder (or one with unrelated files only) starts a fresh run;
- a folder holding a run with the same configuration resumes it (``steps`` may change when the
  learning-rate schedule is constant: extending a run does not change any step already taken);
- a folder holding a run with a different configuration is refused, listing the differing keys, unless
  the change is allowed (then it is recorded) or the old run is to be replaced (``overwrite``: only the
  run's own files are deleted).
"""

from __future__ import annotations

import errno
import fcntl
import os
import pathlib
import shutil
import stat
from typing import Any, NamedTuple

from grpojax._errors import UserError

__all__ = ["RUN_DIRS", "RUN_FILES", "RunFolderError", "RunLock", "RunPlan", "check_run_folder", "clear_run",
           "config_diff", "plan_run", "run_markers"]

RUN_FILES = ("metrics.jsonl", "warmstart.jsonl", "summary.json", "tokenizer.json", "config.yaml")
RUN_DIRS = ("checkpoints", "checkpoints-corrupt", "tensorboard")
_HISTORY_GLOB = "config.before-step-*.yaml"


class RunFolderError(UserError, ValueError):
    """The run folder cannot be used as asked: not a folder, in use by another process, or holding
    another run (the message says what to do)."""


class RunPlan(NamedTuple):
    """What :func:`plan_run` decided: start ``fresh`` (after deleting the old run's files when ``clear``)
    or continue the run in the folder, with the config ``changes`` (``{key: (old, new)}``) allowed."""

    fresh: bool
    clear: bool
    changes: dict


def check_run_folder(path: str | os.PathLike) -> pathlib.Path:
    """``path`` as a run folder: an existing folder or a path that can be created as one.

    Raises:
      RunFolderError: ``path`` (or a parent) exists and is not a folder (a file, ``/dev/null`` ...).
    """
    p = pathlib.Path(path)
    for q in [p, *p.parents]:
        try:
            mode = q.stat().st_mode
        except FileNotFoundError:
            continue
        except NotADirectoryError:
            continue
        if stat.S_ISDIR(mode):
            return p
        kind = ("a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode)
                else "a pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a file")
        if q == p:
            raise RunFolderError(f"{p} is {kind}, not a folder; expected a run folder (a new or existing folder)")
        raise RunFolderError(f"{p}: {q} is {kind}, not a folder; expected a run folder")
    return p


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_diff(old: dict, new: dict) -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (old, new)}`` for every value that differs between two config dicts.

    ``steps`` is left out when both use a constant learning-rate schedule: the number of steps then
    changes no step already taken, so extending (or shortening) a run is not a change of its config.
    """
    a, b = _flatten(old), _flatten(new)
    diff = {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    if "steps" in diff and a.get("optim.schedule") == b.get("optim.schedule") == "constant":
        del diff["steps"]
    return diff


FIXED_ON_RESUME = ("model.*", "tokenizer.*", "grpo.prompts_per_step", "grpo.group_size", "data.max_prompt_len",
                   "sampling.max_new_tokens", "optim.name")
"""Settings a resumed run cannot change: they set the shapes of the state in its checkpoints (the model's
parameters, the optimiser's moments, the rollout buffers). Besides these, whether gradient clipping
(``optim.grad_clip`` > 0), SGD's momentum and weight decay, and the frozen reference (``grpo.beta`` > 0 or
``grpo.log_kl``) are used at all cannot change either; their values can."""


def _on(x: Any) -> bool:
    return bool(x) and x != 0


def fixed_changes(old: dict, new: dict) -> list[str]:
    """The keys of :func:`config_diff` that a resume cannot apply (:data:`FIXED_ON_RESUME`), with why."""
    a, b = _flatten(old), _flatten(new)
    bad = []
    for k in config_diff(old, new):
        if any(k == p or (p.endswith(".*") and k.startswith(p[:-1])) for p in FIXED_ON_RESUME):
            bad.append(k)
    # settings whose use (not value) shapes the optimiser state or the reference parameters
    switches = {"optim.grad_clip": lambda c: _on(c.get("optim.grad_clip")),
                "grpo.beta / grpo.log_kl": lambda c: _on(c.get("grpo.beta")) or bool(c.get("grpo.log_kl"))}
    if a.get("optim.name") == b.get("optim.name") == "sgd":
        switches["optim.momentum"] = lambda c: _on(c.get("optim.momentum"))
        switches["optim.weight_decay"] = lambda c: _on(c.get("optim.weight_decay"))
    for name, used in switches.items():
        if used(a) != used(b):
            bad.append(f"{name} ({'on -> off' if used(a) else 'off -> on'})")
    return bad


def _describe(diff: dict, limit: int = 6) -> str:
    items = [f"{k}: {o!r} -> {n!r}" for k, (o, n) in diff.items()]
    more = f", and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def run_markers(folder: pathlib.Path) -> list[str]:
    """The run files present in ``folder`` (folders only when not empty)."""
    found = [n for n in RUN_FILES if (folder / n).exists()]
    found += [n for n in RUN_DIRS if (folder / n).is_dir() and any((folder / n).iterdir())]
    return found


def _stored_config(folder: pathlib.Path) -> dict | None:
    from grpojax.grpo._train_config import read_config_dict

    path = folder / "config.yaml"
    if not path.is_file():
        return None
    try:
        return read_config_dict(path)
    except (ValueError, OSError):
        return None


def plan_run(folder: str | os.PathLike, config: dict, *, resume: bool = True, overwrite: bool = False,
             allow_config_change: bool = False) -> RunPlan:
    """Decide how a run with ``config`` (a :func:`config_to_dict` dict) may use ``folder``; write nothing.

    Args:
      folder: the run folder.
      config: the new run's full config.
      resume: continue a run found in the folder (when ``False`` such a run is refused).
      overwrite: replace a run found in the folder (its own files are deleted by :func:`clear_run`).
      allow_config_change: resume even when the folder's run has a different config, as long as no
        setting of :data:`FIXED_ON_RESUME` changes.

    Raises:
      RunFolderError: the folder is not a folder or holds a run that may not be resumed as asked (a
        changed setting that a resume cannot apply is named).
    """
    folder = check_run_folder(folder)
    if not folder.is_dir():
        return RunPlan(True, False, {})
    markers = run_markers(folder)
    if not markers:
        return RunPlan(True, False, {})
    if overwrite:
        return RunPlan(True, True, {})
    stored = _stored_config(folder)
    if markers == ["config.yaml"]:  # a config file but no run: fine only when it is this very config
        if stored is not None and not config_diff(stored, config):
            return RunPlan(True, False, {})
        what = "a different config" if stored is not None else "a file that is not a run config"
        raise RunFolderError(f"{folder}/config.yaml holds {what} and would be replaced; pass --overwrite to "
                             "replace it or choose another --out")
    if stored is None:
        raise RunFolderError(f"{folder} holds run files ({', '.join(markers)}) but no readable config.yaml; "
                             "pass --overwrite to replace them or choose another --out")
    diff = config_diff(stored, config)
    if diff and not allow_config_change:
        raise RunFolderError(f"{folder} holds a run with a different config ({_describe(diff)}); pass "
                             "--allow-config-change to resume it with the new values, --overwrite to start over, "
                             "or choose another --out")
    fixed = fixed_changes(stored, config) if diff else []
    if fixed:
        raise RunFolderError(f"{folder}: {', '.join(fixed)} cannot change on resume (they set the shapes of the "
                             "checkpointed model, optimiser state or rollout buffers; fixed on resume: "
                             f"{', '.join(FIXED_ON_RESUME)}); pass --overwrite to start over or choose another --out")
    if not resume:
        raise RunFolderError(f"{folder} holds a run ({', '.join(markers)}); pass --resume to continue it or "
                             "--overwrite to start over")
    return RunPlan(False, False, diff)


def clear_run(folder: str | os.PathLike) -> None:
    """Delete the run files of ``folder`` (:data:`RUN_FILES`, :data:`RUN_DIRS`, config history) and nothing
    else. ``config.yaml`` stays: the new run replaces it (atomically) only if its config differs, so a
    config file the user keeps there is not rewritten needlessly."""
    folder = pathlib.Path(folder)
    for n in RUN_FILES:
        if n != "config.yaml":
            (folder / n).unlink(missing_ok=True)
    for f in folder.glob(_HISTORY_GLOB):
        f.unlink()
    for n in RUN_DIRS:
        if (folder / n).is_dir():
            shutil.rmtree(folder / n)


class RunLock:
    """Exclusive lock of a run folder (``<folder>/.lock`` with the holder's pid), re-entrant in a process.

    Use as a context manager. Acquiring creates the folder.

    Raises:
      RunFolderError: another process holds the lock (the message names the folder and its pid).
    """

    _held: dict[str, list] = {}  # resolved lock path -> [fd, depth] for this process

    def __init__(self, folder: str | os.PathLike):
        self.folder = check_run_folder(folder)
        self.path = self.folder / ".lock"

    def acquire(self) -> "RunLock":
        self.folder.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if key in RunLock._held:
            RunLock._held[key][1] += 1
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
            try:
                pid = os.read(fd, 64).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise RunFolderError(f"{self.folder} is in use by another run (pid {pid}); wait for it to finish or "
                                 "choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.fsync(fd)
        RunLock._held[key] = [fd, 1]
        return self

    def release(self) -> None:
        key = str(self.path.resolve())
        entry = RunLock._held.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del RunLock._held[key]
            fcntl.flock(entry[0], fcntl.LOCK_UN)
            os.close(entry[0])

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

