"""Step hooks of the GRPO trainer: callables that see every log record and may stop the run."""

from __future__ import annotations

from collections.abc import Callable

from grpojax._errors import InvalidValueError
from grpojax._distributed import broadcast_ints, is_primary

__all__ = ["StepHook", "check_hooks", "hook_stop", "run_hooks"]

StepHook = Callable[[int, dict], "str | None"]
"""A step hook: ``hook(step, record) -> stop reason or None``, called with each log record the trainer writes."""


def check_hooks(hooks) -> tuple:
    """``hooks`` as a tuple of callables; a single callable, a string or a non-callable entry is refused."""
    if callable(hooks) or isinstance(hooks, (str, bytes)):
        raise InvalidValueError(f"hooks={hooks!r}; expected a sequence of callables hook(step, metrics)")
    hooks = tuple(hooks)
    bad = [h for h in hooks if not callable(h)]
    if bad:
        raise InvalidValueError(f"hooks holds {bad[0]!r}, which is not callable; expected callables hook(step, metrics)")
    return hooks


def hook_stop(hooks: tuple, step: int, rec: dict) -> str | None:
    """:func:`run_hooks` on process 0; in a multi-process run its decision is shared with every process."""
    if not hooks:
        return None
    reason = run_hooks(hooks, step, rec) if is_primary() else None
    (stop,) = broadcast_ints([reason is not None])
    return reason if reason is not None or not stop else "a hook of process 0 stopped the run"


def run_hooks(hooks: tuple, step: int, rec: dict) -> str | None:
    """Every hook sees ``(step, copy of rec)``; the first stop reason (in hook order) is returned."""
    reason = None
    for hook in hooks:
        r = hook(step, dict(rec))
        if r is None:
            continue
        if not isinstance(r, str) or not r.strip():
            raise InvalidValueError(f"hook {hook!r} returned {r!r} at step {step}; expected a non-empty stop reason "
                             f"(str) or None")
        if reason is None:
            reason = r.strip()
    return reason
