"""OpenRLHF console output: the status its PPO/GRPO trainer shows on the episode progress bar.

OpenRLHF's trainer sets the step's status dict (``policy_loss``, ``actor_lr``, ``reward``,
``return``, ``response_length``, ``total_length``, ``kl``, ``ppo_clip_ratio``,
``policy_entropy``, ...) as the postfix of its tqdm bar, so a captured console holds redraws like::

    Episode [1/1]:  10%|#         | 10/100 [05:00<45:00, 30.0s/it, policy_loss=0.01, actor_lr=5e-07, reward=0.5, kl=0.001]

The step is the bar's counter (the global rollout step). tqdm redraws the same step several times;
the last redraw of each step is kept silently (that is tqdm's semantics, not a duplicated log).
Bars without the full status (e.g. the inner ``Train epoch`` bar showing ``pg``/``rm``/``glen``
per micro-batch) are ignored. OpenRLHF's W&B/TensorBoard output (``train/<name>``,
``eval/<name>``) is read by the ``wandb_csv``/``tensorboard`` readers, and JSONL dumps of its
``logs_dict`` by the JSONL reader, all with the same name mapping (:mod:`grpojax.logs._names`).
"""

from __future__ import annotations

import os
import re

from grpojax.logs._runlog import LogFormatError
from grpojax.logs._table import TableBuilder
from grpojax.logs._text import load_text, run_name

__all__ = ["read_openrlhf_console", "looks_like_openrlhf_console"]

_BAR = re.compile(r"(\d+)/(\d+) \[[^\[\]\r\n]*?(?:it/s|s/it|\?)\]?,? ?([^\[\]\r\n]*=[^\[\]\r\n]*)\]")
_KV = re.compile(r"([A-Za-z_][\w/.@-]*)=([^,\]]+)")
_FULL = ("reward=", "policy_loss=", "return=")


def looks_like_openrlhf_console(head: str) -> bool:
    """True if ``head`` shows a tqdm bar whose postfix carries OpenRLHF's step status."""
    for m in _BAR.finditer(head):
        if any(k in m.group(3) for k in _FULL):
            return True
    return False


def read_openrlhf_console(path: str | os.PathLike, text: str | None = None):
    """Read OpenRLHF console output (episode progress-bar status).

    Returns:
        One :class:`RunLog` (format ``"openrlhf_console"``).
    """
    path, text = load_text(path, text)
    last: dict[int, dict] = {}
    order: list[int] = []
    prev = None
    for m in _BAR.finditer(text):
        post = m.group(3)
        if not any(k in post for k in _FULL):
            continue
        step = int(m.group(1))
        d = dict(_KV.findall(post))
        if step != prev:
            order.append(step)
            prev = step
        last[(len(order), step)] = d
    if not last:
        raise LogFormatError(path, "no OpenRLHF progress-bar status (reward=..., policy_loss=...) found")
    tb = TableBuilder(path)
    for (_, step), d in last.items():
        tb.add(step, {k: v.strip() for k, v in d.items()})
    return tb.finish_runs(name=run_name(path), format="openrlhf_console", meta={"group_size": None})
