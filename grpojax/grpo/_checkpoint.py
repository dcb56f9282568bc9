"""Orbax checkpoints of the trainer state for exact resume, verified by checksums.

The state is any pytree of arrays (policy parameters, optimiser state, frozen reference
parameters); it is saved leaf by leaf with :class:`orbax.checkpoint.args.StandardSave` next to a
small JSON record (step, phase, reason). Restoring needs a *target* pytree of the same structure
(e.g. the freshly initialised trainer state): leaves come back with the target's shapes, dtypes and
shardings, so a run resumed on a different mesh is re-sharded on load.

Integrity: after orbax has finished writing checkpoint ``step``, ``<step>/checksums.json`` records
the size and SHA-256 of every file orbax wrote and a CRC-32 of every saved array's bytes. A
checkpoint without that file (a save cut short), with a missing, truncated or altered file, or whose
restored arrays do not match their CRC-32 is *corrupt*. :meth:`CheckpointStore.restore_valid` takes
the newest checkpoint that passes and moves the corrupt newer ones aside (to ``<folder>-corrupt/``),
reporting each with its reason.

A save the environment refuses (a full disk, a read-only folder, any orbax error while writing) raises
:class:`grpojax.StorageError` with one line naming the folder and the reason: what the failed save
left behind is removed, a checkpoint of the same step that it was replacing is put back, and older
checkpoints are untouched, so the last good checkpoint stays restorable. Orbax's own error log of the
failure (a multi-line traceback from its writer threads) is held back; the error carries its first line.

Retention is done here, not by orbax: the newest ``keep`` checkpoints are kept, and the newest
checkpoint that is not a "last good state" of a non-finite stop is never evicted.

Several processes (JAX's multi-process runtime): every process calls every method, in the same order, on
the same folder (a file system they share); orbax writes each process's shards, process 0 alone writes
``checksums.json`` and moves corrupt checkpoints aside, and the processes wait for each other where one
reads what another wrote. A checkpoint holds global arrays, so a run saved by N processes resumes in M.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import pathlib
import shutil
import zlib
from typing import Any, NamedTuple

import jax
import numpy as np
import orbax.checkpoint as ocp

from grpojax._errors import DataError, InvalidValueError, StorageError
from grpojax._distributed import barrier, is_primary, to_host
from grpojax._io import write_json

__all__ = ["CHECKSUM_FILE", "CheckpointError", "CheckpointStore", "SkippedCheckpoint"]

CHECKSUM_FILE = "checksums.json"
_NONFINITE = "nonfinite"


class CheckpointError(DataError):
    """No checkpoint of a run can be restored (all corrupt), or one does not match the run's state."""


def _write_failure(exc: BaseException) -> str:
    """A short reason for a failed checkpoint write: a full disk, a read-only folder, or orbax's first line."""
    texts = []
    e: BaseException | None = exc
    while e is not None and len(texts) < 8:  # the cause chain: orbax wraps the OSError of its writer
        texts.append(str(e))
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return "no space left on the device"
        if isinstance(e, OSError) and e.errno == errno.EROFS:
            return "read-only file system"
        if isinstance(e, PermissionError):
            return "permission denied"
        e = e.__cause__ or e.__context__
    text = "\n".join(texts)
    if "RESOURCE_EXHAUSTED" in text or "No space left" in text or "Disk quota" in text:
        return "no space left on the device"
    if "Read-only file system" in text:
        return "read-only file system"
    if "Permission denied" in text or "PERMISSION_DENIED" in text:
        return "permission denied"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {first[:200]}"


_ORBAX_LOGGERS = ("absl", "asyncio", "concurrent.futures")


@contextlib.contextmanager
def _quiet_orbax():
    """Hold back orbax's error log while a save runs (its absl logger, and the asyncio / futures loggers of
    its writer tasks); the exception carries what matters."""
    loggers = [logging.getLogger(n) for n in _ORBAX_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _silence_abandoned_writers() -> None:
    """After a failed save, orbax's writer tasks may still fail later ("Task exception was never retrieved",
    "Event loop is closed") and log a traceback each; the run is ending with one line that says why, so
    those loggers stay quiet from here on."""
    import gc  # noqa: PLC0415

    for name in _ORBAX_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    gc.collect()  # report (silently) the tasks already abandoned


class SkippedCheckpoint(NamedTuple):
    """A checkpoint that failed verification: its step, why, and where it was moved (or ``None``)."""

    step: int
    reason: str
    moved_to: pathlib.Path | None


def _array_crc(x: Any) -> dict:
    a = to_host(x)
    return {"shape": list(a.shape), "dtype": str(a.dtype), "crc32": zlib.crc32(a.tobytes(order="C")) & 0xFFFFFFFF}


def _file_sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class CheckpointStore:
    """Numbered, checksummed checkpoints in ``directory`` (keeps the newest ``keep``).

    Args:
      directory: checkpoint folder (created).
      keep: how many checkpoints to keep (>= 1; ``None`` keeps all). The newest checkpoint that is
        not the last good state of a non-finite stop is kept in addition.

    Raises:
      ValueError: ``keep`` < 1.
    """

    def __init__(self, directory: str | pathlib.Path, *, keep: int | None = 2):
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise InvalidValueError(f"checkpoint keep={keep!r}; expected an integer >= 1 (or None to keep all)")
        self.keep = keep
        self.directory = pathlib.Path(directory).absolute()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._mgr = self._manager()

    def _manager(self) -> ocp.CheckpointManager:
        options = ocp.CheckpointManagerOptions(max_to_keep=None, create=True, enable_async_checkpointing=False)
        return ocp.CheckpointManager(self.directory, options=options, item_names=("state", "meta"))

    def path(self, step: int) -> pathlib.Path:
        """The folder of checkpoint ``step``."""
        return self.directory / str(int(step))

    def latest_step(self) -> int | None:
        return self._mgr.latest_step()

    def all_steps(self) -> list[int]:
        return sorted(int(s) for s in self._mgr.all_steps())

    # ------------------------------------------------------------------ saving
    def save(self, step: int, state: Any, meta: dict | None = None, *, force: bool = True) -> pathlib.Path:
        """Save ``state`` (pytree of arrays) and ``meta`` (JSON-able dict) as checkpoint ``step``
        (replacing an existing checkpoint of that step), write its checksums, then drop old ones."""
        leaves = jax.tree.leaves(state)
        meta = dict(meta or {}, step=int(step))
        folder = self.path(step)
        arrays = [_array_crc(x) for x in leaves]  # every process: gathering a sharded array is collective
        previous = None
        if int(step) in self.all_steps():  # replaced: set aside until the new one is written
            previous = self.directory.with_name(f".{self.directory.name}-{int(step)}-replaced")
            if is_primary():
                shutil.rmtree(previous, ignore_errors=True)
                shutil.move(str(folder), str(previous))
            barrier(f"grpojax-checkpoint-{step}-set-aside")
            self._mgr.reload()
        try:
            with _quiet_orbax():
                self._mgr.save(
                    int(step),
                    args=ocp.args.Composite(
                        state=ocp.args.StandardSave({"leaves": leaves}),
                        meta=ocp.args.JsonSave(meta),
                    ),
                    force=force,
                )
                self._mgr.wait_until_finished()
            barrier(f"grpojax-checkpoint-{step}-written")
            if is_primary():
                files = {
                    str(f.relative_to(folder)): {"size": f.stat().st_size, "sha256": _file_sha256(f)}
                    for f in sorted(folder.rglob("*"))
                    if f.is_file() and f.name != CHECKSUM_FILE
                }
                write_json(folder, CHECKSUM_FILE, {"version": 1, "step": int(step), "meta": meta,
                                                   "arrays": arrays, "files": files})
            barrier(f"grpojax-checkpoint-{step}-checksummed")
        except Exception as exc:  # noqa: BLE001 - any failure to write is reported as one line naming the folder
            _silence_abandoned_writers()
            self._discard_failed_save(int(step), previous)
            good = [s for s in self.all_steps() if s != int(step) or previous is not None]
            last = f"the last good checkpoint is step {max(good)}" if good else "no earlier checkpoint exists"
            raise StorageError(f"could not write checkpoint {int(step)} in {self.directory}: {_write_failure(exc)}; "
                               f"{last}") from exc
        if previous is not None and is_primary():
            shutil.rmtree(previous, ignore_errors=True)
        self._prune()
        return folder

    def _discard_failed_save(self, step: int, previous: pathlib.Path | None) -> None:
        """Remove what a failed save of ``step`` left (its folder, orbax's temporary folders); put back
        the checkpoint it was replacing."""
        with _quiet_orbax(), contextlib.suppress(Exception):
            self._mgr.wait_until_finished()
        if is_primary():
            for leftover in [self.path(step), *self.directory.glob(f"{step}.orbax-checkpoint-tmp*")]:
                shutil.rmtree(leftover, ignore_errors=True)
            if previous is not None and previous.exists():
                shutil.move(str(previous), str(self.path(step)))
        with contextlib.suppress(Exception):
            barrier(f"grpojax-checkpoint-{step}-discarded")
        self._mgr.reload()

    def _record(self, step: int) -> dict | None:
        try:
            rec = json.loads((self.path(step) / CHECKSUM_FILE).read_text())
        except (OSError, ValueError):
            return None
        return rec if isinstance(rec, dict) else None

    def _prune(self) -> None:
        if self.keep is None:
            return
        steps = sorted(self.all_steps(), reverse=True)
        kept = set(steps[: self.keep])
        for s in steps:  # the newest checkpoint that is not the state of a non-finite stop
            rec = self._record(s)
            if rec is not None and rec.get("meta", {}).get("phase") != _NONFINITE:
                kept.add(s)
                break
        for s in steps:
            if s not in kept:
                self._mgr.delete(s)

    # ------------------------------------------------------------------ checking
    def verify_files(self, step: int) -> str | None:
        """Why checkpoint ``step``'s files are not intact (``None`` when they are)."""
        folder = self.path(step)
        rec = self._record(step)
        if rec is None:
            return f"it has no readable {CHECKSUM_FILE} (the save did not finish)"
        files = rec.get("files")
        if not isinstance(files, dict) or not files:
            return f"its {CHECKSUM_FILE} lists no files"
        for name, want in files.items():
            f = folder / name
            if not f.is_file():
                return f"file {name} is missing"
            size = f.stat().st_size
            if size != want.get("size"):
                return f"file {name} has {size} bytes, expected {want.get('size')} (truncated or altered)"
            if _file_sha256(f) != want.get("sha256"):
                return f"file {name} fails its SHA-256 checksum (altered on disk)"
        return None

    def is_valid(self, step: int) -> bool:
        """Whether checkpoint ``step`` exists and its files pass their checksums."""
        return step in self.all_steps() and self.verify_files(step) is None

    def restore(self, target: Any, step: int | None = None) -> tuple[Any, dict]:
        """Restore checkpoint ``step`` (default: latest) into the structure of ``target``, verified.

        Raises:
          FileNotFoundError: no checkpoint exists.
          CheckpointError: the checkpoint is corrupt (the message says why) or does not match
            ``target`` (different model/optimiser).
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        bad = self.verify_files(step)
        if bad is not None:
            raise CheckpointError(f"checkpoint {self.path(step)} is corrupt: {bad}")
        leaves, treedef = jax.tree.flatten(target)
        rec = self._record(step) or {}
        arrays = rec.get("arrays", [])
        if len(arrays) != len(leaves):
            raise CheckpointError(
                f"checkpoint {self.path(step)} has {len(arrays)} arrays; this run's state has {len(leaves)} "
                "(a different model or optimiser)"
            )
        for i, (a, x) in enumerate(zip(arrays, leaves)):
            if list(a["shape"]) != list(np.shape(x)) or a["dtype"] != str(np.dtype(x.dtype)):
                raise CheckpointError(
                    f"checkpoint {self.path(step)} array {i} is {a['dtype']}{a['shape']}; this run's state has "
                    f"{np.dtype(x.dtype)}{list(np.shape(x))} (a different model or optimiser)"
                )
        abstract = [ocp.utils.to_shape_dtype_struct(x) for x in leaves]
        try:
            got = self._mgr.restore(
                int(step),
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore({"leaves": abstract}),
                    meta=ocp.args.JsonRestore(),
                ),
            )
        except Exception as exc:  # noqa: BLE001 - files verified: any failure to read is a corrupt checkpoint
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise CheckpointError(f"checkpoint {self.path(step)} is corrupt: orbax cannot read it ({first})") from exc
        restored = got["state"]["leaves"]
        for i, (a, x) in enumerate(zip(arrays, restored)):
            if _array_crc(x)["crc32"] != a["crc32"]:
                raise CheckpointError(f"checkpoint {self.path(step)} is corrupt: array {i} fails its CRC-32")
        return jax.tree.unflatten(treedef, restored), dict(got["meta"])

    def restore_valid(self, target: Any) -> tuple[Any, dict, list[SkippedCheckpoint]]:
        """Restore the newest checkpoint that passes verification; move the corrupt newer ones aside.

        Returns:
          ``(state, meta, skipped)``: ``skipped`` lists the newer checkpoints that failed (newest first),
          each moved to ``<directory>-corrupt/<step>``.

        Raises:
          FileNotFoundError: no checkpoint exists.
          CheckpointError: every checkpoint is corrupt (nothing is moved) or a checkpoint does not match
            ``target``.
        """
        steps = sorted(self.all_steps(), reverse=True)
        if not steps:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        failures: list[tuple[int, str]] = []
        for step in steps:
            bad = self.verify_files(step)
            if bad is None:
                try:
                    state, meta = self.restore(target, step)
                except CheckpointError as exc:
                    if "is corrupt" not in str(exc):
                        raise  # a different model/optimiser: not a reason to fall back
                    bad = str(exc).split("is corrupt: ", 1)[1]
                else:
                    return state, meta, [SkippedCheckpoint(s, why, self._quarantine(s)) for s, why in failures]
            failures.append((step, bad))
        listing = "; ".join(f"step {s}: {why}" for s, why in failures)
        raise CheckpointError(f"no valid checkpoint in {self.directory} ({listing})")

    def _quarantine(self, step: int) -> pathlib.Path:
        dest_dir = self.directory.with_name(self.directory.name + "-corrupt")
        dest, k = dest_dir / str(step), 2
        while dest.exists():
            dest, k = dest_dir / f"{step}.{k}", k + 1
        if is_primary():
            dest_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(str(self.path(step)), str(dest))
        barrier(f"grpojax-checkpoint-{step}-moved-aside")
        self._mgr.reload()
        return dest

    def close(self) -> None:
        self._mgr.close()
