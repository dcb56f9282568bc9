"""TRL's GRPOTrainer with the grpojax monitor, reporting to TensorBoard.

    python examples/trl_grpo_with_monitor.py [OUT]

Needs torch, trl and datasets (``pip install -e '.[bench]'``). Trains the tiny Qwen2 model shipped with
the tests (random weights, a few kilobytes) for 12 steps on a toy reward, with the monitor attached
ahead of TRL's reporters: the ``monitor/...`` values (forecast, stability margin, findings, each with the
step its report was computed at) land in the TensorBoard event files under OUT/runs next to TRL's own
metrics. Under a minute on 2 CPU cores.
"""

from __future__ import annotations

import pathlib
import sys

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from grpojax.monitor import MonitorConfig, attach

MODEL = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "lm" / "qwen2"


def reward(completions, **kwargs):
    """A toy verifiable reward: 1 when the completion's length is a multiple of 3."""
    return [float(len(c) % 3 == 0) for c in completions]


def main(out: str = "out/examples/trl_grpo_with_monitor") -> GRPOTrainer:
    args = GRPOConfig(output_dir=out, max_steps=12, per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=6, logging_steps=1, report_to=["tensorboard"], save_strategy="no",
                      use_cpu=True)
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(MODEL), reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": ["1 + 1 ="] * 16}),
                          processing_class=AutoTokenizer.from_pretrained(MODEL))
    cb = attach(trainer, config=MonitorConfig(every=4, method="persistence"), stop_on=("instability",))
    trainer.train()
    print(f"monitor refreshed {cb.hook.refreshes} times; last report at step {cb.hook.report.step:g}")
    return trainer


if __name__ == "__main__":
    main(*sys.argv[1:])
