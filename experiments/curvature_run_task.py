"""curvature_run_task: ``measure_curvature`` on a ``grpojax train`` run's own task, at its starting checkpoint.

``grpojax curvature`` takes a prompt file and a reward; a run of this project's trainer states its prompts
(the arithmetic generator or its JSONL files), their template, the reward and its answer parsing, the
sampling temperature and length in its ``config.yaml``. This script reads that file and measures K_0, K_d,
σ² and the pass rate with those settings (the training prompts, the first ``--direction-prompts`` of a
seeded draw for the direction and the next ``--holdout-prompts`` for the quotients), so that the measurement
and ``advise --probe`` on the same run's log share the task, the temperature and the reward. It writes a
``curvature.json`` that ``experiments/curvature_vs_probe.py`` and ``predict --from`` read.

Usage:
  python experiments/curvature_run_task.py --run out/smollm2-arith-cpu --direction-prompts 8 \\
      --holdout-prompts 200 --group-size 8 --out out/curvature-arith-run
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=pathlib.Path, required=True, help="a grpojax train run folder (config.yaml)")
    ap.add_argument("--direction-prompts", type=int, default=8, help="prompts of the mean update (default 8)")
    ap.add_argument("--holdout-prompts", type=int, default=200, help="prompts the quotients are measured on")
    ap.add_argument("--group-size", type=int, default=None, help="G (default: the run's grpo.group_size)")
    ap.add_argument("--direction", choices=("stiffest", "update"), default="update")
    ap.add_argument("--iters", type=int, default=4, help="Lanczos steps with --direction stiffest")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for curvature.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from grpojax.cli._curvature import phase_bar
    from grpojax.grpo import config_task, load_config, measure_curvature
    from grpojax.lm import load_pretrained, load_tokenizer

    cfg = load_config(args.run / "config.yaml")
    folder = pathlib.Path(cfg.model.pretrained)
    t0 = time.perf_counter()
    model, tok = load_pretrained(folder), load_tokenizer(folder)
    load_s = time.perf_counter() - t0
    task = config_task(cfg, tok)
    task["problems"] = task["problems"][: args.direction_prompts + args.holdout_prompts]
    if args.group_size:
        task["group_size"] = args.group_size
    with phase_bar(args.direction) as say:
        res = measure_curvature(model, tok, **task, prompts_per_step=args.direction_prompts,
                                holdout_prompts=args.holdout_prompts, direction=args.direction, iters=args.iters,
                                seed=args.seed, progress=say)
    doc = res.to_dict(model=str(cfg.model.pretrained))
    doc["settings"]["reward"] = task["reward"].__name__ + " (the run's answer parsing)"
    doc["settings"]["prompts"] = f"{args.run}/config.yaml training prompts"
    doc["timings"] = {"load_s": load_s, **doc["timings"], "total_s": load_s + doc["timings"]["total_s"]}
    doc["command"] = "python experiments/curvature_run_task.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "curvature.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(res)
    print(f"wrote {args.out / 'curvature.json'} ({doc['timings']['total_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
