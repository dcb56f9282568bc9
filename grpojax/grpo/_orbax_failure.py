"""orbax after a failed save: one reason for the error line, and nothing else on stderr.

A save the environment refuses leaves orbax's writer threads, asyncio loops and tensorstore operations
behind, each of which reports the failure again (absl tracebacks from its threads, ``Task exception was
never retrieved``, ``RuntimeError: Event loop is closed`` from callbacks into loops already closed), up to
the interpreter's exit. :func:`shut_down` closes the manager and joins those threads; :class:`HoldBackLog`
drops orbax's absl records while a save is in flight (and for good once one failed);
:func:`drop_closed_loop_reports` keeps the late ``Event loop is closed`` reports off stderr.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import logging
import sys
import threading
import time
import traceback

import orbax.checkpoint as ocp

__all__ = ["HoldBackLog", "drop_closed_loop_reports", "shut_down", "write_failure"]


def write_failure(exc: BaseException) -> str:
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


class HoldBackLog(logging.Filter):
    """Drops what orbax's code logs through absl while a save is in flight, and for good once a save has
    failed (its writer threads report the failure too, until they end): a failed save is reported once,
    by the :class:`StorageError` it raises."""

    #: absl carries orbax's own records; asyncio reports orbax's abandoned tasks ("Task exception was never
    #: retrieved", naming the orbax coroutine in its message).
    LOGGERS = ("absl", "asyncio")

    #: what marks an asyncio report as orbax's: its code, its temporary folders, its tensorstore database
    MARKS = ("/orbax/", ".orbax-checkpoint-tmp", "OCDBT database")

    def filter(self, record: logging.LogRecord) -> bool:
        if "/orbax/" in record.pathname.replace("\\", "/"):
            return False
        if record.name != "asyncio":
            return True
        # "Task/_GatheringFuture exception was never retrieved": the message names the coroutine or the
        # failed write, the attached exception its traceback through orbax
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += "".join(traceback.format_exception(*record.exc_info))
        text = text.replace("\\", "/")
        return not any(mark in text for mark in self.MARKS)

    def __enter__(self):
        for name in self.LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeFilter(self)


def _close(mgr: ocp.CheckpointManager) -> None:
    """Close ``mgr`` after a failed save: its ``close`` re-raises the failure (already in hand) before it
    reaches its writers, so the parts it did not close are closed here (their threads joined)."""
    try:
        mgr.close()
        return
    except Exception:  # noqa: BLE001 - the failure being reported
        pass
    for part in ("_checkpointer", "_non_blocking_metadata_store", "_blocking_metadata_store", "_checkpoint_deleter"):
        with contextlib.suppress(Exception):
            getattr(mgr, part).close()


def _dropping(hook):
    """``sys.unraisablehook`` without the reports of orbax's abandoned reads and writes: after a failed save
    or restore, tensorstore completes the operations still pending and calls back into an asyncio loop that
    orbax has closed (``RuntimeError: Event loop is closed``); anything else goes to ``hook``."""

    def drop(unraisable) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
            return
        hook(unraisable)

    drop.grpojax_drops_closed_loop_reports = True
    return drop


def drop_closed_loop_reports() -> None:
    """Keep the late ``Event loop is closed`` reports of orbax's abandoned operations off stderr (installed
    once per process; any other unraisable exception is reported as before)."""
    if not getattr(sys.unraisablehook, "grpojax_drops_closed_loop_reports", False):
        sys.unraisablehook = _dropping(sys.unraisablehook)


def _join_writers(timeout_s: float = 30.0) -> None:
    """Wait (a bounded time) for orbax's writer threads of a failed save: they fail fast once the save has."""
    deadline = time.monotonic() + timeout_s
    for t in threading.enumerate():
        if t is not threading.current_thread() and type(t).__module__.startswith("orbax."):
            with contextlib.suppress(Exception):  # orbax's threads re-raise their failure on join
                t.join(max(0.0, deadline - time.monotonic()))


def shut_down(mgr: ocp.CheckpointManager | None) -> None:
    """Close ``mgr`` after a failed save, wait for its writer threads, and let the abandoned tasks already
    unreachable report (to the filters) now rather than at exit."""
    if mgr is not None:
        _close(mgr)
    _join_writers()
    gc.collect()
