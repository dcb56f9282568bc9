"""A training run's own settings (lr, schedule, warmup, β, clip ε, G, K_ref, temperature, prompts per
optimizer step), from its files.

:func:`run_settings` gathers them from what the log readers attached (the hyperparameter files of
:mod:`grpojax.logs._hparams`), the ``TrainingArguments`` a Hugging Face ``Trainer`` writes into
TensorBoard, the config dict a verl console log prints at start, an ``argparse.Namespace(...)``
line (OpenRLHF), and the logged learning rate; ``grpojax advise --from-run`` reads a run through it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

from grpojax.logs._hparams import FACT_KEYS, _number, hparam_files_in, hparams_of, read_hparams
from grpojax.logs._read import read_log
from grpojax.logs._text import read_head

__all__ = ["RunSettings", "run_settings", "settings_of", "SETTING_KEYS"]



#: setting -> the key names (last part of a dotted key, lower case) that state it, in order of preference.
SETTING_KEYS: dict[str, tuple[str, ...]] = {
    "lr": FACT_KEYS["lr"],
    "schedule": ("lr_scheduler_type", "lr_scheduler", "warmup_style", "lr_schedule", "scheduler_type", "schedule"),
    "warmup_steps": ("warmup_steps", "lr_warmup_steps", "num_warmup_steps"),
    "warmup_ratio": ("warmup_ratio", "lr_warmup_steps_ratio", "lr_warmup_ratio"),
    "beta": ("beta", "kl_loss_coef", "init_kl_coef", "kl_coef", "kl_beta"),
    "clip_eps": ("epsilon", "clip_eps", "clip_ratio_low", "clip_ratio", "eps_clip", "cliprange", "clip_range",
                 "clip_epsilon", "eps_low"),
    "group_size": FACT_KEYS["group_size"],
    "epochs_per_rollout": FACT_KEYS["epochs_per_rollout"] + ("max_epochs",),
    "k_ref": ("k_ref",),  # stated outright (grpojax's own config: grpo.k_ref)
    "temperature": ("temperature",),
    "beta1": ("adam_beta1", "beta1", "b1"),  # b1: optax's name (grpojax's optim.b1)
}
#: a dotted key with one of these parts belongs to another model or to evaluation, not to the policy's training.
_OTHER_PARTS = {"critic", "ref", "reward_model", "rm", "val_kwargs", "eval", "validation", "val", "reward",
                "teacher", "judge", "warmstart"}  # warmstart: grpojax's supervised phase before GRPO


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """The optimiser and GRPO settings of a training run, as its own files state them.

    Attributes:
        lr: peak learning rate (the schedule's maximum).
        schedule: the learning-rate schedule's name as the trainer calls it (``linear``, ``cosine``,
            ``constant``, ``constant_with_warmup``, ...), or None.
        warmup_steps: warmup in optimizer steps (a ratio is converted with the planned steps), or None.
        beta: KL coefficient β, or None.
        clip_eps: the ratio clip ε (the lower one where two are given), or None.
        group_size: completions per prompt G, or None.
        epochs_per_rollout: passes over each rollout (TRL ``num_iterations``, verl ``ppo_epochs``, OpenRLHF
            ``max_epochs``), or None.
        mini_batches: optimizer steps per pass over a rollout, or None.
        k_ref: optimizer steps per rollout, ``epochs_per_rollout × mini_batches`` (factors not stated count
            as 1 when the other is stated), or None.
        temperature: sampling temperature of the training rollouts, or None.
        prompts_per_step: prompts (groups of G completions) whose gradients one optimizer step averages, or
            None (the rules per framework are those of :func:`run_settings`).
        prompts_per_device: True when ``prompts_per_step`` is one device's share: a TRL run whose files do
            not state the number of processes (the run's figure is this × the number of processes).
        beta1: Adam's β₁, or None.
        max_steps: planned optimizer steps, or None.
        sources: ``{setting: where it was read}`` (a file and key, or the logged learning rate).
        notes: what could not be read and how to supply it (a pickled ``training_args.bin``).
    """

    lr: float | None = None
    schedule: str | None = None
    warmup_steps: int | None = None
    beta: float | None = None
    clip_eps: float | None = None
    group_size: int | None = None
    epochs_per_rollout: int | None = None
    mini_batches: int | None = None
    k_ref: int | None = None
    temperature: float | None = None
    prompts_per_step: int | None = None
    prompts_per_device: bool = False
    beta1: float | None = None
    max_steps: int | None = None
    sources: dict = dataclasses.field(default_factory=dict)
    notes: tuple = ()

    NAMES = ("lr", "schedule", "warmup_steps", "beta", "clip_eps", "group_size", "k_ref", "temperature",
             "prompts_per_step")
    """The settings a report lists, in order."""

    def missing(self) -> list[str]:
        """The settings of :data:`NAMES` no file stated."""
        return [n for n in self.NAMES if getattr(self, n) is None]

    def __str__(self) -> str:
        width = max(len(n) for n in self.NAMES)
        out = []
        for n in self.NAMES:
            v = getattr(self, n)
            shown = "not found" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))
            out.append(f"{n:<{width}}  {shown}" + (f"  ({self.sources[n]})" if n in self.sources else ""))
        return "\n".join(out + [f"note: {n}" for n in self.notes])


def _policy_key(key: str) -> bool:
    return not any(p in _OTHER_PARTS for p in key.lower().split(".")[:-1])


def _setting(scalars: dict, names: tuple[str, ...], *, text: bool = False, prefer=None):
    """(value, key) of the first key (in order of ``names``, then of the file) that states a setting; with
    ``prefer`` (a predicate), the first value it accepts, else the first value."""
    lower = [(k.lower(), k) for k in scalars if _policy_key(k)]
    first = (None, None)
    for n in names:
        for lk, k in lower:
            if lk == n or lk.endswith("." + n):
                v = scalars[k]
                if text:
                    if isinstance(v, str) and v.strip():
                        return v.strip(), k
                    continue
                v = _number(v)
                if v is None:
                    continue
                if prefer is None or prefer(v):
                    return v, k
                if first[0] is None:
                    first = (v, k)
    return first


def settings_of(scalars: dict[str, Any], label: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings stated by a flat ``{dotted key: scalar}`` map: ``(values, {setting: "label: key"})``."""
    vals: dict[str, Any] = {}
    src: dict[str, str] = {}

    def put(name, v, k):
        if v is not None and name not in vals:
            vals[name] = v
            src[name] = f"{k} in {label}"

    for name, keys in SETTING_KEYS.items():
        # G = 1 is no group (verl-agent states G as env.rollout.n and leaves actor_rollout_ref.rollout.n at 1)
        prefer = (lambda x: x >= 2) if name == "group_size" else (lambda x: x >= 0) if name == "warmup_steps" else None
        v, k = _setting(scalars, keys, text=name == "schedule", prefer=prefer)
        if name == "group_size" and v is not None and not (v >= 1 and v == int(v)):
            v = None
        if name == "beta" and k is not None and k.lower().endswith("kl_loss_coef"):
            use = next((scalars[x] for x in scalars if x.lower().endswith(".use_kl_loss")), None)
            if use is False:  # verl: the KL loss is off, so β is 0 whatever its coefficient says
                v, k = 0.0, k.rsplit(".", 1)[0] + ".use_kl_loss=False"
        put(name, v, k)
    if "epochs_per_rollout" not in vals and any(k.lower().endswith("num_generations") for k in scalars):
        put("epochs_per_rollout", 1, "num_iterations (not set: TRL's default 1)")  # a TRL GRPOConfig
    mb = _mini_batches(scalars)
    if mb is not None:
        put("mini_batches", mb[0], mb[1])
    if vals.get("epochs_per_rollout") is not None or mb is not None:  # K_ref = epochs × mini-batches per rollout
        keys = " × ".join(k for k in (src.get("epochs_per_rollout", "").split(" in ", 1)[0],
                                       mb[1] if mb else "") if k)
        put("k_ref", int((vals.get("epochs_per_rollout") or 1) * (mb[0] if mb else 1)), keys)
    pp = _prompts_per_step(scalars, vals.get("group_size"), src.get("group_size", "").split(" in ", 1)[0])
    if pp is not None:  # (prompts or None, per device, note): kept together, from the first file that states them
        vals["prompts"], src["prompts"] = pp[:3], f"{pp[3]} in {label}"
    steps, k = _setting(scalars, ("total_training_steps", "max_steps", "num_train_steps", "total_steps"),
                        prefer=lambda x: x > 0)  # -1: not set (TRL, verl)
    put("max_steps", steps if steps is not None and steps > 0 else None, k)
    return vals, src


def _mini_batches(scalars: dict) -> tuple[int, str] | None:
    """Optimizer steps per pass over one rollout, from the batch sizes where the config states them."""
    def get(*names):
        return _setting(scalars, names)

    train, kt = get("train_batch_size")
    mini, km = get("ppo_mini_batch_size")
    if train and mini and kt and km and "data." in kt.lower():  # verl: both in prompts
        return max(int(train // mini), 1), f"{kt} / {km}"
    spg, ks = get("steps_per_generation")
    ga, kg = get("gradient_accumulation_steps")
    if spg and ga:  # TRL: a generation batch spans steps_per_generation micro-steps
        return max(int(spg // ga), 1), f"{ks} / {kg}"
    rollout, kr = get("rollout_batch_size")
    n, kn = get("n_samples_per_prompt")
    if rollout and train and n:  # OpenRLHF: rollout_batch_size prompts × n samples, train_batch_size samples
        return max(int(rollout * n // train), 1), f"{kr} × {kn} / {kt}"
    return None


#: keys TRL's GRPOConfig gained in 0.15 and kept since; a full dump of a GRPOConfig without any of them is TRL 0.14's
_TRL_SINCE_015 = ("ds3_gather_for_generation", "reward_weights", "sync_ref_model", "log_completions")


def _has(scalars: dict, name: str) -> bool:
    return any(k.lower() == name or k.lower().endswith("." + name) for k in scalars)


def _prompts_per_step(scalars: dict, g, kg: str) -> tuple[int | None, bool, str | None, str] | None:
    """``(prompts per optimizer step or None, per device, note or None, keys)`` where the config states its
    batch sizes; None where it does not. ``g`` and ``kg``: the group size read and its key."""
    def get(*names):
        return _setting(scalars, names, prefer=lambda x: x > 0)

    own, ko = get("grpo.prompts_per_step")  # grpojax: every update of a refresh period takes the whole batch
    if own and own == int(own):
        return int(own), False, None, ko
    train, kt = get("train_batch_size")
    mini, km = get("ppo_mini_batch_size")
    if train and mini and kt and km and "data." in kt.lower():  # verl: both in prompts, mini = one update
        if kg.lower().endswith("env.rollout.n"):  # verl-agent: G is env.rollout.n, the actor's is 1
            return (None, False, f"{km} {int(mini)} counts the samples of one update (verl-agent: "
                    "actor_rollout_ref.rollout.n is 1 and each turn of a trajectory is a sample), not prompts: the "
                    "prompts per optimizer step are not read from the run's files", km)
        if mini == int(mini):
            return int(min(mini, train)), False, None, km + (f" (capped at {kt})" if mini > train else "")
    rollout, kr = get("rollout_batch_size")
    n, kn = get("n_samples_per_prompt")
    if rollout and train and n and kr and kn:  # OpenRLHF: train_batch_size samples per update, n per prompt
        q = train / n
        if q == int(q):
            return int(q), False, None, f"{kt} / {kn}"
        return (None, False, f"{kt} {train:g} is not a whole number of groups of {kn} {n:g}: the prompts per "
                "optimizer step are not read", f"{kt} / {kn}")
    pd, kp = get("per_device_train_batch_size")
    ga, ka = get("gradient_accumulation_steps")
    if pd and ga and g and kg.lower().endswith("num_generations"):  # TRL's GRPOConfig
        world, kw = get("world_size", "num_processes", "n_gpus")
        v014 = (_has(scalars, "max_completion_length") and _has(scalars, "vllm_gpu_memory_utilization")
                and not any(_has(scalars, k) for k in _TRL_SINCE_015))
        per = pd * ga if v014 else pd * ga / g  # TRL 0.14 counted per_device_train_batch_size in prompts
        keys = f"{kp} × {ka}" + ("" if v014 else f" / {kg}") + (f" × {kw}" if world else ", per device")
        if v014:
            keys += " (TRL 0.14: per_device_train_batch_size counts prompts)"
        total = per * world if world else per
        if not (total >= 1 and total == int(total)):
            return (None, False, f"{keys} = {total:g} is not a whole number of prompts"
                    + ("" if world else " (the number of processes is not in the run's files)")
                    + ": the prompts per optimizer step are not read", keys)
        return (int(total), not world, None if world else
                f"prompts_per_step {int(total)} is one device's share: the run's figure is {int(total)} × the number "
                "of processes, which its files do not state (--prompts-per-step to give it)", keys)
    return None


def _schedule_from_lr(steps, lr) -> tuple[dict[str, Any], str] | None:
    """Peak lr, warmup and the decay's shape read off a logged learning-rate series."""
    import numpy as np  # noqa: PLC0415

    s, y = np.asarray(steps, float), np.asarray(lr, float)
    ok = np.isfinite(s) & np.isfinite(y)
    s, y = s[ok], y[ok]
    if s.size < 3 or not np.max(y) > 0:
        return None
    peak = float(np.max(y))
    i = int(np.argmax(y))
    out: dict[str, Any] = {"lr": peak}
    rising = i > 0 and y[0] < 0.99 * peak
    out["warmup_steps"] = int(round(s[i])) if rising else 0
    tail_s, tail_y = s[i:], y[i:] / peak
    if tail_y.size < 3 or np.min(tail_y) > 0.98:
        out["schedule"] = "constant_with_warmup" if rising else "constant"
    else:
        x = (tail_s - tail_s[0]) / max(tail_s[-1] - tail_s[0], 1.0)
        end = float(tail_y[-1])  # the schedule ends at (about) 0: the shapes are compared on their own ends
        lin = 1.0 - (1.0 - end) * x
        cos = end + (1.0 - end) * 0.5 * (1.0 + np.cos(np.pi * x))
        out["schedule"] = "linear" if np.mean((tail_y - lin) ** 2) <= np.mean((tail_y - cos) ** 2) else "cosine"
    return out, "the logged learning rate"


def _warmup_from_slope(steps, lr, peak: float) -> int | None:
    """The length of a linear warmup to ``peak`` (lr = peak · step / warmup) from the logged rising part."""
    import numpy as np  # noqa: PLC0415

    s, y = np.asarray(steps, float), np.asarray(lr, float)
    ok = np.isfinite(s) & np.isfinite(y)
    s, y = s[ok], y[ok]
    if s.size < 2:
        return None
    slope = float(np.polyfit(s, y, 1)[0])
    return int(round(peak / slope)) if slope > 0 else None


def _verl_config_dump(text: str) -> dict | None:
    """The config dict verl prints at start (``pprint`` of the hydra config, behind Ray's prefixes)."""
    import ast  # noqa: PLC0415

    ansi = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
    prefix = re.compile(r"^\s*\((?:TaskRunner|main_task|\w+) pid=\d+(?:, ip=[^)]*)?\)\s?")
    lines = []
    started = False
    depth = 0
    mine = ""  # the Ray prefix of the dump's first line: lines of other processes interleave with the dump
    for raw in text.splitlines():
        clean = ansi.sub("", raw)
        m = prefix.match(clean)
        if started and (m.group(0).strip() if m else "") != mine:
            continue
        line = clean[m.end():] if m else clean
        if started and not line[:1].isspace():  # pprint indents every continuation line; other output is not
            continue
        if not started:
            j = line.find("{'")
            if j < 0 or ("'actor_rollout_ref'" not in line and "'algorithm'" not in line and "'data'" not in line):
                continue
            line, started, mine = line[j:], True, (m.group(0).strip() if m else "")
        lines.append(line)
        depth += line.count("{") - line.count("}")
        if depth <= 0:
            break
        if len(lines) > 5000:
            return None
    if not lines:
        return None
    try:
        doc = ast.literal_eval("\n".join(lines))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _args_line(text: str) -> dict | None:
    """An ``argparse.Namespace(...)`` line (OpenRLHF prints its arguments so) as a dict of literals."""
    import ast  # noqa: PLC0415

    m = re.search(r"Namespace\((.*)\)\s*$", text[:2_000_000], re.M)
    if m is None:
        return None
    try:
        call = ast.parse(f"f({m.group(1)})", mode="eval").body
    except SyntaxError:
        return None
    out = {}
    for kw in getattr(call, "keywords", []):
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            continue
    return out or None


def _tensorboard_args(folder: str) -> dict | None:
    """The ``TrainingArguments`` a Hugging Face ``Trainer`` writes as the text summary ``args``."""
    files = []
    for root, _, names in os.walk(folder):
        files += [os.path.join(root, n) for n in names if "tfevents" in n]
    if not files:
        return None
    try:
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader  # noqa: PLC0415
    except ImportError:  # pragma: no cover - tensorboard ships with the environment
        return None
    for f in sorted(files):
        try:
            for ev in LegacyEventFileLoader(f).Load():
                for v in ev.summary.value:
                    if not v.tag.startswith("args") or not v.tensor.string_val:
                        continue
                    try:
                        doc = json.loads(v.tensor.string_val[0].decode("utf-8", "replace"))
                    except json.JSONDecodeError:
                        continue
                    if isinstance(doc, dict):
                        return doc
        except Exception:  # noqa: BLE001 - a damaged event file holds no settings we can trust
            continue
    return None


def run_settings(run_or_path) -> RunSettings:
    """The run's own settings: lr, schedule, warmup, β, clip ε, G, K_ref, temperature, prompts per step.

    Read, first source first, from: the hyperparameter files beside the log (TRL/transformers
    ``training_args.json``, a hydra ``config.yaml``, ``args.json``, ...; a W&B config or MLflow
    params) as the log reader attached them; the ``TrainingArguments`` a Hugging Face ``Trainer``
    writes into TensorBoard (the text summary ``args``); the config dict a verl console log prints
    at start; an ``argparse.Namespace(...)`` line (OpenRLHF); and, for the learning rate, its
    schedule and warmup when no file states them, the logged learning rate itself.
    ``training_args.bin`` is a pickle and is never loaded.

    K_ref (optimizer steps per rollout) is ``epochs_per_rollout × mini_batches``: TRL's
    ``num_iterations × steps_per_generation / gradient_accumulation_steps``, verl's ``ppo_epochs ×
    data.train_batch_size / ppo_mini_batch_size``, OpenRLHF's ``max_epochs × rollout_batch_size ×
    n_samples_per_prompt / train_batch_size``.

    The prompts per optimizer step (the groups whose gradients one update averages; the escape model's
    noise is σ²/B with B = G × prompts) are read where the config states the batch sizes:

    - grpojax: ``grpo.prompts_per_step`` (every update of a refresh period takes the whole rollout batch);
      a grpojax run log's header states it too;
    - verl: ``actor_rollout_ref.actor.ppo_mini_batch_size``, in prompts across all devices (verl multiplies
      it by ``rollout.n`` for the samples of one update), at most ``data.train_batch_size``. Not read for
      verl-agent (G in ``env.rollout.n``, the actor's ``rollout.n`` 1), whose mini-batch counts samples;
    - OpenRLHF: ``train_batch_size / n_samples_per_prompt`` (``train_batch_size`` counts the samples of one
      update), where that is a whole number;
    - TRL: ``per_device_train_batch_size × gradient_accumulation_steps × world size / num_generations``
      completions per update over G; the world size (``world_size``, ``num_processes`` or ``n_gpus``) is
      not among ``TrainingArguments``' saved fields, so without it the figure is one device's share
      (``prompts_per_device`` True, with a note) and is kept only when it is a whole number. TRL 0.14
      (a full ``GRPOConfig`` without the keys 0.15 added) counted ``per_device_train_batch_size`` in
      prompts: there it is ``per_device_train_batch_size × gradient_accumulation_steps`` per device.
      ``steps_per_generation`` sets how many updates one generation batch feeds, not the size of one.

    Args:
        run_or_path: a :class:`grpojax.logs.RunLog` or a log file or folder (read by ``read_log``).
    """
    run = read_log(run_or_path) if isinstance(run_or_path, (str, os.PathLike)) else run_or_path
    vals: dict[str, Any] = {}
    src: dict[str, str] = {}

    def merge(v, s):
        for k, x in v.items():
            if k not in vals:
                vals[k], src[k] = x, s[k]

    hp = run.meta.get("hyperparams") or {}
    if hp:
        label = ", ".join(run.meta.get("hyperparameters_from") or []) or "the run's settings"
        merge(*settings_of(hp, label))
    source = str(run.source)
    folder = source if os.path.isdir(source) else os.path.dirname(source)
    folders = [folder]
    if os.path.basename(folder.rstrip(os.sep)).startswith("checkpoint-"):  # a TRL checkpoint: its output folder too
        folders.append(os.path.dirname(folder.rstrip(os.sep)))
    read = set(run.meta.get("hyperparameters_from") or [])
    for f in folders[1:]:  # settings files of the output folder (those beside the log were attached by the reader)
        for path in hparam_files_in(f):
            if os.path.basename(path) not in read:
                merge(*settings_of(read_hparams(path)[0], os.path.basename(path)))
    if run.format in ("tensorboard", "trl_state", "trl_console"):  # a HF Trainer's TensorBoard folder (runs/...)
        for f in folders if run.format != "tensorboard" else folders[:1]:
            tb = _tensorboard_args(f)
            if tb:
                merge(*settings_of(hparams_of(tb)[0], "TensorBoard text summary 'args'"))
                break
    pickled = [f for f in folders if os.path.isfile(os.path.join(f, "training_args.bin"))]
    if os.path.isfile(source) and run.format == "trl_state":  # a log_history dump may carry its settings beside it
        try:
            with open(source, "rb") as fh:
                doc = json.loads(fh.read(64 << 20))
        except (OSError, ValueError, RecursionError):
            doc = None
        for key in ("args", "training_args", "config", "hyperparameters"):
            if isinstance(doc, dict) and isinstance(doc.get(key), dict):
                merge(*settings_of(hparams_of(doc[key])[0], f"'{key}' of {os.path.basename(source)}"))
    if os.path.isfile(source) and run.format in ("verl_console", "openrlhf_console", "trl_console"):
        _, text, _ = read_head(source, 4 << 20)
        for doc, label in ((_verl_config_dump(text), "the config printed at the top of the log"),
                           (_args_line(text), "the arguments line of the log")):
            if doc:
                merge(*settings_of(hparams_of(doc)[0], f"{os.path.basename(source)}, {label}"))
    for fact, name in (("group_size", "group_size"), ("lr", "lr"), ("epochs_per_rollout", "epochs_per_rollout"),
                       ("kl_coef", "beta"), ("max_steps", "max_steps")):
        if name not in vals and run.meta.get(fact) is not None:
            vals[name], src[name] = run.meta[fact], "the log"
    logged = _schedule_from_lr(*run.series("lr")) if run.has("lr") else None
    if logged is not None and not {"lr", "schedule"} <= set(vals):
        for k, v in logged[0].items():
            if k not in vals or (k == "lr" and "schedule" not in vals):
                vals[k], src[k] = v, logged[1]
    ratio = vals.get("warmup_ratio")
    if ratio and vals.get("warmup_steps", 0) <= 0:  # transformers and verl: the ratio applies when no steps are set
        if vals.get("max_steps"):
            vals["warmup_steps"] = int(round(ratio * vals["max_steps"]))
            src["warmup_steps"] = f"{src['warmup_ratio']} × {src['max_steps'].split(' in ', 1)[0]}"
        elif logged is not None:
            steps_lr, lr_logged = run.series("lr")
            w = logged[0]["warmup_steps"]
            if vals.get("lr") and logged[0]["lr"] < 0.98 * vals["lr"]:  # the log ends inside the warmup:
                w = _warmup_from_slope(steps_lr, lr_logged, vals["lr"])   # lr × step / warmup, extrapolated
            if w is not None:
                vals["warmup_steps"] = w
                src["warmup_steps"] = f"{src['warmup_ratio']}, its length read off {logged[1]}"
        else:
            vals.pop("warmup_steps", None)
            src.pop("warmup_steps", None)
    elif vals.get("warmup_steps") is not None and vals["warmup_steps"] < 0:  # verl: -1 = not set
        vals.pop("warmup_steps")
        src.pop("warmup_steps")
    elif "warmup_steps" not in vals and ratio == 0:
        vals["warmup_steps"], src["warmup_steps"] = 0, src["warmup_ratio"]
    if "k_ref" not in vals and vals.get("epochs_per_rollout") is not None:  # stated by the log itself
        vals["k_ref"], src["k_ref"] = vals["epochs_per_rollout"], src["epochs_per_rollout"]
    notes = []
    prompts, where = vals.pop("prompts", None), src.pop("prompts", None)
    if prompts is not None:  # the first file that states the batch sizes: its count, or why there is none
        if prompts[0] is not None:
            vals["prompts_per_step"], src["prompts_per_step"] = prompts[0], where
            vals["prompts_per_device"] = prompts[1]
        if prompts[2]:
            notes.append(prompts[2])
    elif run.meta.get("trainer") == "grpojax" and isinstance(run.meta.get("prompts_per_step"), int):
        vals["prompts_per_step"], src["prompts_per_step"] = run.meta["prompts_per_step"], "the log's header"
    ints = ("warmup_steps", "group_size", "epochs_per_rollout", "mini_batches", "k_ref", "max_steps",
            "prompts_per_step")
    kw = {k: (int(v) if k in ints else (str(v) if k == "schedule" else bool(v) if k == "prompts_per_device"
                                        else float(v)))
          for k, v in vals.items() if k in RunSettings.__dataclass_fields__ and v is not None}
    if pickled and not {"lr", "group_size"} <= set(kw):
        notes.insert(0, f"{os.path.join(pickled[0], 'training_args.bin')} is a pickle and is not loaded (it can run "
                     "code); write the arguments as JSON beside it, e.g. open('training_args.json', 'w')"
                     ".write(trainer.args.to_json_string()), or give the missing settings as flags")
    return RunSettings(**kw, sources={k: v for k, v in src.items() if k in kw}, notes=tuple(notes))
