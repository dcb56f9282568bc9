"""``grpojax train``: run the GRPO trainer from a config file (or a shipped config name)."""

from __future__ import annotations

import argparse

from grpojax.cli._common import console, out_dir, write_json

EXAMPLE = """\
Example:
  grpojax train --config tiny-arith --out out/tiny-arith
  grpojax train --config my_run.yaml --out out/run1 --set grpo.k_ref=4 --set optim.lr=5e-4

The run folder gets metrics.jsonl (the canonical run log, readable by `grpojax fit/diagnose`),
warmstart.jsonl, config.yaml, tokenizer.json, checkpoints/ and summary.json. Re-running the same
command resumes from the latest checkpoint (use --no-resume to start over).
"""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="GRPO-train a small causal LM on verifiable math rewards",
        description="GRPO-train a causal LM (Flax NNX) on verifiable math rewards, logging every step.\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", required=True, help="YAML config file or shipped config name (e.g. tiny-arith)")
    p.add_argument("--out", required=True, help="run folder (created; resumed if it holds checkpoints)")
    p.add_argument("--steps", type=int, default=None, help="override the number of GRPO steps")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. grpo.k_ref=2 (repeatable)")
    p.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints and start over")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from grpojax.grpo import apply_overrides, load_config, train

    cfg = load_config(args.config)
    overrides = list(args.set) + ([f"steps={args.steps}"] if args.steps is not None else [])
    if overrides:
        cfg = apply_overrides(cfg, overrides)
    out = out_dir(args.out)
    summary = train(cfg, out, resume=not args.no_resume, show_progress=not args.quiet)
    write_json(out, "summary.json", summary)
    evals = summary.get("evals", [])
    if evals:
        console.print(f"eval_reward: {evals[0][1]:.3f} (step {evals[0][0]}) -> {evals[-1][1]:.3f} (step {evals[-1][0]})")
    console.print(f"run log: {summary['log']}")
    return 0
