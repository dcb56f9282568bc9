"""``grpojax curvature``: K_0, K_d, the gradient noise σ² and the pass rate of a GRPO update, measured on a
Hugging Face checkpoint with the user's prompts and reward; writes ``curvature.json`` for ``predict``,
``advise``, ``watch`` and the TRL callback (``--from curvature.json``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib

from grpojax.cli._common import console, out_dir, progress

EXAMPLE = """\
Example:
  grpojax curvature --model models/smollm2-135m-instruct --prompts gsm8k.jsonl \\
      --reward examples.curvature_reward:closeness --group-size 2 --prompts-per-step 8 --holdout-prompts 96 \\
      --direction update --max-new-tokens 32 --out out/curvature
  grpojax curvature --model MODEL_DIR --prompts prompts.jsonl --reward my_rewards:score --group-size 8 --out out/k
  grpojax curvature --config runs/my-run/config.yaml --direction update --holdout-prompts 200 --out out/k
  grpojax predict --from out/curvature/curvature.json --eta 1e-6 --k-ref 2

--reward is a built-in name (correctness, format) or a module:function import path; the function is called
as fn(completions, answers) and returns one reward per completion. --prompts: JSONL with question/answer
(GSM8K), problem/solution (MATH) or prompt/answer records.
"""


def register(sub) -> None:
    from grpojax.cli._types import Int, Real  # noqa: PLC0415

    p = sub.add_parser(
        "curvature",
        help="measure K_0, K_d, gradient noise and pass rate of a GRPO update on a checkpoint (curvature.json)",
        description="Sample G completions per prompt from a Hugging Face checkpoint (Qwen2 / Llama), score them "
        "with the reward, and measure the instant and stale stiffness K_0, K_d (Lanczos on Jacobian-vector "
        "products), the per-completion gradient noise σ² and the pass rate, with bootstrap intervals over "
        "prompts. Writes OUT/curvature.json.\n\n" + EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", default=None, metavar="NAME|FILE",
                   help="a training configuration (a shipped name, a YAML file, or a run folder's config.yaml): "
                        "measure on its training prompts (with its template), its reward and answer parsing, its G, "
                        "temperature, completion length and advantage, and its model.pretrained checkpoint; "
                        "flags given override")
    p.add_argument("--model", default=None, metavar="DIR",
                   help="Hugging Face folder (config.json, weights, tokenizer); required without --config")
    p.add_argument("--prompts", default=None, metavar="FILE", help="JSONL prompts with answers (required without --config)")
    p.add_argument("--reward", default=None, metavar="NAME|module:function",
                   help="built-in reward (correctness, format) or an import path module:function (required "
                        "without --config)")
    p.add_argument("--group-size", type=Int(2, what="completions per prompt"), default=None,
                   help="completions per prompt G >= 2 (required without --config)")
    p.add_argument("--prompts-per-step", type=Int(1, what="prompts measured"), default=8,
                   help="prompts drawn from the file (default 8, or all when fewer)")
    p.add_argument("--holdout-prompts", type=Int(0, what="held-out prompts"), default=0,
                   help="further prompts, apart from the Lanczos ones, on which K_0, K_d, σ² and the pass rate are "
                        "measured along the direction found (default 0: on the Lanczos prompts)")
    p.add_argument("--direction", choices=("stiffest", "update"), default="stiffest",
                   help="measure K_0, K_d and σ² along the stiffest direction of K_0 + K_d (Lanczos, default) or "
                        "along the mean GRPO update of the prompts (one gradient, no Lanczos)")
    p.add_argument("--temperature", type=Real(0, lo_open=True, what="the sampling temperature"), default=None,
                   help="sampling temperature (default 1, or the --config's)")
    p.add_argument("--max-new-tokens", type=Int(1, what="tokens per completion"), default=None,
                   help="completion length limit (default 64, or the --config's)")
    p.add_argument("--iters", type=Int(1, what="Lanczos iterations"), default=20, help="Lanczos dimension (default 20)")
    p.add_argument("--advantage", default=None, help="group advantage: grpo (default, or the --config's), dr_grpo, ...")
    p.add_argument("--level", type=Real(0, 1, lo_open=True, hi_open=True, what="an interval level"), default=0.9,
                   help="interval level (default 0.9)")
    p.add_argument("--seed", type=int, default=0, help="sampling, prompt draw, Lanczos and bootstrap seed")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (curvature.json)")
    p.set_defaults(func=run)


def run(args) -> int:
    import time  # noqa: PLC0415

    from grpojax.cli._common import CLIError  # noqa: PLC0415
    from grpojax.grpo import config_task, load_config, load_jsonl, load_reward, measure_curvature  # noqa: PLC0415

    cfg = load_config(args.config) if args.config is not None else None
    if cfg is None:
        missing = [flag for flag, v in (("--model", args.model), ("--prompts", args.prompts),
                                        ("--reward", args.reward), ("--group-size", args.group_size)) if v is None]
        if missing:
            raise CLIError(f"{', '.join(missing)} missing; expected them, or --config with a training configuration")
    elif args.model is None and not cfg.model.pretrained:
        raise CLIError(f"--config {args.config} trains a model from scratch (no model.pretrained); expected --model")
    model_dir = pathlib.Path(args.model if args.model is not None else cfg.model.pretrained)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(2, "not a Hugging Face model folder (no config.json)", str(model_dir))
    problems = load_jsonl(args.prompts) if args.prompts is not None else None
    reward = load_reward(args.reward) if args.reward is not None else None  # refused before loading the model
    t0 = time.perf_counter()
    from grpojax.lm import load_pretrained, load_tokenizer  # noqa: PLC0415

    model = load_pretrained(model_dir)
    tokenizer = load_tokenizer(model_dir)
    load_s = time.perf_counter() - t0
    task = {"temperature": 1.0, "max_new_tokens": 64, "advantage": "grpo",
            **(config_task(cfg, tokenizer) if cfg is not None else {})}
    given = {"problems": problems, "reward": reward, "group_size": args.group_size, "temperature": args.temperature,
             "max_new_tokens": args.max_new_tokens, "advantage": args.advantage}
    task.update({k: v for k, v in given.items() if v is not None})  # flags given override the configuration
    with phase_bar(args.direction) as step:
        res = measure_curvature(model, tokenizer, **task,
                                prompts_per_step=min(args.prompts_per_step, len(task["problems"])),
                                holdout_prompts=args.holdout_prompts, direction=args.direction, iters=args.iters,
                                level=args.level, seed=args.seed, progress=step)
    doc = res.to_dict(model=str(model_dir))
    doc["settings"]["reward"] = args.reward if args.reward is not None else task["reward"].__name__
    doc["settings"]["prompts"] = str(args.prompts) if args.prompts is not None else f"{args.config}: training prompts"
    if args.config is not None:
        doc["settings"]["config"] = str(args.config)
    doc["timings"] = {"load_s": load_s, **doc["timings"], "total_s": load_s + doc["timings"]["total_s"]}
    folder = out_dir(args.out)
    path = folder / "curvature.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    console.print(str(res), markup=False, highlight=False)
    console.print(f"wrote {path} ({doc['timings']['total_s']:.1f} s)", markup=False, highlight=False)
    return 0


@contextlib.contextmanager
def phase_bar(direction: str):
    """A progress bar over the phases of :func:`grpojax.grpo.measure_curvature`; yields its ``progress``
    callback. On an error the bar is removed, so the error is the one line left on stderr."""
    phases = ("sampling", "scoring", "Lanczos" if direction == "stiffest" else "update", "held-out prompts",
              "intervals")
    bar = progress()
    task = bar.add_task("curvature", total=len(phases))

    def step(name: str, fraction: float = 0.0) -> None:
        bar.update(task, completed=phases.index(name) + fraction, description=name)

    bar.start()
    try:
        yield step
    except BaseException:
        bar.live.transient = True
        bar.remove_task(task)
        bar.stop()
        raise
    bar.update(task, completed=len(phases), description="done")
    bar.stop()


FROM_HELP = ("a curvature.json written by `grpojax curvature`: its K_d, K_0, gradient noise σ² and group size "
             "(flags given override)")
_FROM_KEYS = ("curvature", "k_instant", "noise", "group_size")


def add_from_arg(p, keys: tuple[str, ...] = _FROM_KEYS) -> None:
    """``--from curvature.json`` on a parser that has some of ``--curvature``, ``--k-instant``, ``--noise``,
    ``--group-size``: they become optional, and :func:`apply_from` fills those not given from the file."""
    p.add_argument("--from", dest="from_curvature", default=None, metavar="CURVATURE_JSON", help=FROM_HELP)
    defaults = {}
    for action in p._actions:
        if action.dest in keys:
            defaults[action.dest] = action.default
            action.default, action.required = None, False
    p.set_defaults(from_defaults=defaults)


@contextlib.contextmanager
def naming_from_flag():
    """A missing or unreadable ``--from`` file: its one-line error names the flag."""
    from grpojax._errors import DataError  # noqa: PLC0415

    try:
        yield
    except OSError as exc:  # no such file, a name too long, no permission
        raise type(exc)(exc.errno, exc.strerror, f"--from {exc.filename}") from None
    except DataError as exc:
        raise DataError(f"--from {exc}") from None


def apply_from(args) -> dict | None:
    """Fill the flags :func:`add_from_arg` left unset from ``--from`` (else their usual defaults); returns the
    values read (None without ``--from``). A missing ``--curvature`` without ``--from`` is refused."""
    from grpojax._curvature_file import read_curvature  # noqa: PLC0415

    with naming_from_flag():
        values = read_curvature(args.from_curvature) if args.from_curvature is not None else None
    for name, default in getattr(args, "from_defaults", {}).items():
        if getattr(args, name) is None:
            setattr(args, name, values[name] if values is not None else default)
    return values
