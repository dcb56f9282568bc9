"""The grpojax GRPO trainer with the watch engine as a step hook.

    python examples/trainer_with_monitor.py [OUT]

Trains the tiny arithmetic model (a word-level tokenizer and a 2-layer decoder built in code; no
download) for a short run into OUT (default ``out/examples/trainer_with_monitor``), with a
:class:`grpojax.monitor.MonitorHook` that refreshes its forecast and stability margin every 10 steps and
stops the run if the exact stability margin is crossed or the instability detector fires. A few minutes
on 2 CPU cores.
"""

from __future__ import annotations

import sys

from grpojax.grpo import apply_overrides, load_config, train
from grpojax.monitor import MonitorConfig, MonitorHook


def main(out: str = "out/examples/trainer_with_monitor") -> dict:
    cfg = apply_overrides(load_config("tiny-arith"),
                          ["steps=40", "warmstart.steps=100", "eval.every=20", "eval.n=32", "checkpoint.every=20"])
    hook = MonitorHook(config=MonitorConfig(every=10, method="persistence"), stop_on=("instability",),
                       meta={"eta": cfg.optim.lr, "beta1": 0.9, "k_ref": cfg.grpo.k_ref, "lag": "periodic",
                             "group_size": cfg.grpo.group_size, "max_steps": cfg.steps},
                       max_overhead=1.0, on_report=lambda r: print(f"monitor at step {r.step:g}: "
                                                                     f"{len(r.findings)} finding(s)"))
    summary = train(cfg, out, overwrite=True, hooks=[hook])
    print(f"status {summary['status']}; stopped by the monitor: {summary.get('stopped_by_hook')}")
    for name, value in hook.log_entries().items():
        print(f"  {name} = {value:.4g}")
    return summary


if __name__ == "__main__":
    main(*sys.argv[1:])
