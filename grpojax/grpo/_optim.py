"""The trainer's optax optimiser: SGD with heavy-ball momentum (the theory's) or AdamW.

``sgd``: ``v <- mu v + g``, ``theta <- theta - eta_t v`` (optax ``sgd(momentum=mu, nesterov=False)``).
Both are chained after global-norm gradient clipping (when ``grad_clip > 0``) and use the schedule
``eta_t``: ``constant``, ``cosine`` (to 0 at the last step) or ``linear`` (to 0), with an optional
linear warm-up.
"""

from __future__ import annotations

import optax

from grpojax._errors import InvalidValueError

__all__ = ["OPTIMIZERS", "SCHEDULES", "build_optimizer", "build_schedule"]

OPTIMIZERS = ("adamw", "sgd")
"""Optimizer names (``optim.name``)."""
SCHEDULES = ("constant", "cosine", "linear")
"""Learning-rate schedules (``optim.schedule``)."""


def build_schedule(lr: float, steps: int, *, schedule: str = "constant", warmup_steps: int = 0) -> optax.Schedule:
    """Learning rate as a function of the optimiser step count."""
    decay = max(steps - warmup_steps, 1)
    if schedule == "constant":
        main = optax.constant_schedule(lr)
    elif schedule == "cosine":
        main = optax.cosine_decay_schedule(lr, decay)
    elif schedule == "linear":
        main = optax.linear_schedule(lr, 0.0, decay)
    else:
        raise InvalidValueError(f"schedule {schedule!r}; expected one of {'|'.join(SCHEDULES)}")
    if warmup_steps > 0:
        return optax.join_schedules([optax.linear_schedule(0.0, lr, warmup_steps), main], [warmup_steps])
    return main


def build_optimizer(cfg, steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """``(optimizer, schedule)`` from an ``OptimSection``-like object."""
    sched = build_schedule(cfg.lr, steps, schedule=cfg.schedule, warmup_steps=cfg.warmup_steps)
    if cfg.name == "sgd":
        core = optax.sgd(sched, momentum=cfg.momentum if cfg.momentum > 0 else None)
        if cfg.weight_decay:
            core = optax.chain(optax.add_decayed_weights(cfg.weight_decay), core)
    elif cfg.name == "adamw":
        core = optax.adamw(sched, b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay)
    else:
        raise InvalidValueError(f"optimizer {cfg.name!r}; expected one of {'|'.join(OPTIMIZERS)}")
    tx = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), core) if cfg.grad_clip > 0 else core
    return tx, sched
