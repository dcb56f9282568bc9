"""Population training: N copies of a small causal LM trained by GRPO in one compiled program.

After one shared supervised warm start (the trainer's, :meth:`GRPOTrainer.warmstart`), every member starts
from the same parameters and trains with its own hyperparameters (:class:`Member`): learning rate,
heavy-ball momentum or Adam betas, ``K_ref`` (updates per rollout batch: the behaviour policy, and with
``kl_reference="behaviour"`` the KL reference too, is refreshed every ``K_ref`` updates), KL coefficient
``beta``, clip range ``clip_eps``, update rule (clipped / unclipped importance ratio, or none) and seed
(prompt draws and sampling). Shapes (prompts per rollout ``B``, group size ``G``, lengths, the model), the
optimiser family and the learning-rate schedule's shape (``schedule``, ``warmup_steps``: the single-run trainer's
:func:`grpojax.grpo._optim.build_schedule`) are the same for every member of one program; a member's learning
rate at optimiser step ``t`` is its peak ``lr`` times that shape at ``t``.

Every piece is the trainer's (:mod:`grpojax.grpo._rollout`, :mod:`grpojax.grpo._token_reward`,
:func:`grpojax.grpo.group_advantages`, :func:`grpojax.grpo._update.grpo_step`): a member's step is a pure
function of its state, its hyperparameters and the step number. The population program is that function
``jax.vmap``-ed over members, ``lax.scan``-ned over a chunk of steps and sharded over the devices on a
``population`` mesh axis; ``batched=False`` runs the very same member function unbatched, one member after
another (the sequential reference the tests and the throughput benchmark compare against).

A member whose loss or gradient becomes non-finite is frozen (its update is not applied from then on) and
flagged (``diverged``, ``diverged_step``); the others are computed exactly as without it. Each member writes a
canonical grpojax run log (``members/<name>/metrics.jsonl``) that ``grpojax fit``, ``diagnose`` and ``watch``
read.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import time
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from optax.tree_utils import tree_set
from pydantic import Field, field_validator

from grpojax._checks import check_choice, check_int
from grpojax._config import Config, Finite, Int
from grpojax._errors import ConfigError, InvalidValueError
from grpojax._io import write_json
from grpojax._progress import progress as make_progress
from grpojax.grpo._logprobs import completion_logprobs
from grpojax.grpo._optim import SCHEDULES, build_schedule
from grpojax.grpo._rollout import make_batch, sample_completions
from grpojax.grpo._step import RolloutBatch
from grpojax.grpo._token_reward import TokenClasses, hash_answer_correct, hash_answer_rewards, token_classes
from grpojax.grpo._train_config import TrainConfig
from grpojax.grpo._update import LossSettings, grpo_step, rollout_due
from grpojax.logs import JsonlLogger, jsonl_header

__all__ = ["Member", "PopulationResult", "WarmStart", "train_population"]

OPTIMIZERS = ("sgd", "adam")
RULES = ("clipped", "unclipped", "none")
KL_REFERENCES = ("behaviour", "initial")


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class Member(Config):
    """One member's hyperparameters (a :class:`grpojax._config.Config`: validated when built, frozen,
    hashable; a bad field is one :class:`grpojax.ConfigError` line naming it).

    Attributes:
      lr: peak learning rate (the program's schedule scales it step by step; constant by default), > 0.
      momentum: heavy-ball momentum ``mu`` (optimizer ``sgd``), in ``[0, 1)``.
      b1, b2: Adam's betas (optimizer ``adam``), in ``[0, 1)``.
      k_ref: optimiser updates per rollout batch (refresh period of the behaviour policy / reference), >= 1.
      beta: k3 KL coefficient, >= 0.
      clip_eps: clip range ``[1 - eps, 1 + eps]`` of the importance ratio (rule ``clipped``), > 0.
      rule: ``clipped`` (PPO-style ratio), ``unclipped`` (ratio, no clip) or ``none`` (no ratio).
      seed: prompt draws and sampling, >= 0.
      name: the member's folder name: letters, digits, ``-``, ``_``, ``.`` (default ``m0000``, ``m0001``, ...).
    """

    lr: Finite = Field(gt=0)
    momentum: Finite = Field(0.0, ge=0, lt=1)
    b1: Finite = Field(0.9, ge=0, lt=1)
    b2: Finite = Field(0.999, ge=0, lt=1)
    k_ref: Int = Field(1, ge=1)
    beta: Finite = Field(0.0, ge=0)
    clip_eps: Finite = Field(0.2, gt=0)
    rule: Literal[RULES] = "clipped"
    seed: Int = Field(0, ge=0)
    name: str | None = None

    @field_validator("name")
    @classmethod
    def _folder_name(cls, v: str | None) -> str | None:
        if v is not None and not (v and set(v) <= _NAME_CHARS and v not in (".", "..")):
            raise ValueError("expected letters, digits, '-', '_', '.' (a folder name)")
        return v


class PopulationResult(NamedTuple):
    """What :func:`train_population` returns.

    Attributes:
      members: the members (names filled in).
      metrics: name -> ``(steps, N)`` float array (row ``t`` is optimiser step ``t + 1``; NaN where a member
        did not log the value at that step, e.g. rollout metrics between rollouts).
      eval0: ``(N,)`` eval reward after the warm start (NaN when ``eval.n == 0``).
      diverged: ``(N,)`` bool, the member was frozen after a non-finite loss or gradient.
      diverged_step: ``(N,)`` int, the first non-finite step (0 when none).
      params: the members' final parameters, stacked on a leading axis of length ``N`` (host arrays).
      init_params: the shared warm-started parameters.
      graphdef, rest: the model's graph and non-parameter state (``nnx.merge(graphdef, params, rest)``).
      out_dir: the population folder (None when nothing was written).
      wall_s: seconds of the GRPO phase (compilation included), and ``warmstart_s`` of the warm start.
      warmstart_s: see ``wall_s``.
      warm: the shared warm start (pass it as ``warm=`` to train another population from the same start).
      chunk_s: wall seconds of each compiled call, in order (one list for the population; member after member
        when ``batched=False``); the first call of each compiled program includes its compilation.
      member_state_bytes: bytes of one member's training state (parameters, optimiser state, rollout batch).
      chunk_cpu_s: process CPU seconds of each compiled call (all threads), beside ``chunk_s``.
    """

    members: tuple
    metrics: dict
    eval0: np.ndarray
    diverged: np.ndarray
    diverged_step: np.ndarray
    params: Any
    init_params: Any
    graphdef: Any
    rest: Any
    out_dir: pathlib.Path | None
    wall_s: float
    warmstart_s: float
    warm: Any
    chunk_s: list
    member_state_bytes: int
    chunk_cpu_s: list


class WarmStart(NamedTuple):
    """The shared warm start of a population: the model's graph, parameters and non-parameter state, and the
    trainer that built it (tokenizer, data)."""

    graphdef: Any
    params: Any
    rest: Any
    trainer: Any


class _HP(NamedTuple):
    """Per-member hyperparameters as arrays (leading member axis in the population program)."""

    lr: jax.Array
    mom: jax.Array  # sgd momentum or adam b1
    b2: jax.Array
    k_ref: jax.Array
    beta: jax.Array
    eps: jax.Array
    ratio: jax.Array
    key: jax.Array


class _State(NamedTuple):
    params: Any
    opt_state: Any
    batch: Any
    alive: jax.Array
    diverged_step: jax.Array


class _Task(NamedTuple):
    """The arithmetic task as arrays: training prompts / answers and the fixed eval prompts / answers."""

    prompts: jax.Array
    prompt_mask: jax.Array
    answers: jax.Array
    eval_prompts: jax.Array
    eval_mask: jax.Array
    eval_answers: jax.Array


@dataclasses.dataclass(frozen=True)
class _Static:
    """Everything that is static in a population program (hashable)."""

    B: int
    G: int
    N: int
    optimizer: str
    grad_clip: float
    aggregation: str
    advantage: str
    adv_eps: float
    temperature: float
    eos_ids: tuple
    pad_id: int
    kl_reference: str
    eval_every: int
    eval_samples: int
    steps: int
    w_correct: float
    w_format: float
    schedule: str = "constant"
    warmup_steps: int = 0


ROLLOUT_METRICS = ("reward_mean", "reward_std", "frac_zero_std", "accuracy", "response_length",
                   "response_clip_frac")
STEP_METRICS = ("loss", "kl", "entropy", "grad_norm", "is_ratio_mean", "is_ratio_max", "clip_frac", "update_norm",
                "param_dist", "refresh_lag", "lr", "diverged")


def _make_tx(optimizer: str, grad_clip: float, lr, mom, b2):
    if optimizer == "sgd":
        core = optax.inject_hyperparams(optax.sgd)(learning_rate=lr, momentum=mom)
    else:
        core = optax.inject_hyperparams(optax.adam)(learning_rate=lr, b1=mom, b2=b2)
    return optax.chain(optax.clip_by_global_norm(grad_clip), core) if grad_clip > 0 else core


def _tree_dist(a, b):
    return jnp.sqrt(sum(jnp.sum(jnp.square((x - y).astype(jnp.float32))) for x, y in
                        zip(jax.tree.leaves(a), jax.tree.leaves(b))))


class _MemberFns(NamedTuple):
    init: Any
    rollout: Any
    update: Any
    evaluate: Any


def _member_fns(graphdef, rest, init_params, task: _Task, cls: TokenClasses, st: _Static, start_params=None,
                direction=None) -> _MemberFns:
    """The pure per-member pieces: init, rollout (sample, score, advantage, refresh), update, evaluate.

    ``start_params`` (default ``init_params``): where every member starts and ``param_dist`` is measured from;
    ``init_params`` stays the ``initial`` KL reference. ``direction``: a parameter tree; each step then logs
    ``param_proj``, the projection of ``params - start_params`` on it."""
    start_params = init_params if start_params is None else start_params
    tx = _make_tx(st.optimizer, st.grad_clip, 0.0, 0.0, 0.0)  # the update reads each member's values from its state
    step_fn = grpo_step(graphdef, tx, aggregation=st.aggregation, use_ref=True, temperature=st.temperature)
    n_train = task.prompts.shape[0]

    def init(hp: _HP) -> _State:
        opt = _make_tx(st.optimizer, st.grad_clip, hp.lr, hp.mom, hp.b2).init(init_params)
        S, Pn = st.B * st.G, task.prompts.shape[1]
        z = lambda shape, dt: jnp.zeros(shape, dt)  # noqa: E731
        batch = RolloutBatch(z((S, Pn), jnp.int32), z((S, Pn), jnp.bool_), z((S, st.N), jnp.int32),
                             z((S, st.N), jnp.bool_), z((S, st.N), jnp.float32), z((S, st.N), jnp.float32),
                             z((S,), jnp.float32))
        return _State(start_params, opt, batch, jnp.asarray(True), jnp.asarray(0, jnp.int32))

    def sample(params, prompts, mask, key):
        model = nnx.merge(graphdef, params, rest)
        return sample_completions(model, prompts, mask, key, max_new_tokens=st.N, temperature=st.temperature,
                                  eos_ids=st.eos_ids, pad_id=st.pad_id)

    def rollout(state: _State, hp: _HP, step):
        """Rollout ``(step - 1) // k_ref`` of this member: the batch it trains on and its rollout metrics."""
        index = (step - 1) // hp.k_ref
        k = jax.random.fold_in(jax.random.fold_in(hp.key, 1), index)
        k_prompt, k_sample = jax.random.split(k)
        rows = jnp.repeat(jax.random.randint(k_prompt, (st.B,), 0, n_train), st.G)
        prompts, pmask, answers = task.prompts[rows], task.prompt_mask[rows], task.answers[rows]
        comp, logp, cmask = sample(state.params, prompts, pmask, k_sample)
        correct, stated = hash_answer_rewards(comp, cmask, answers, cls)
        reward = st.w_correct * correct + st.w_format * stated
        if st.kl_reference == "behaviour":
            ref = logp
        else:
            ref = completion_logprobs(nnx.merge(graphdef, init_params, rest), prompts, pmask, comp,
                                      temperature=st.temperature)[0]
        batch = make_batch(prompts, pmask, comp, cmask, logp, ref, reward, group_size=st.G, mode=st.advantage,
                           eps=st.adv_eps)
        r = reward.reshape(st.B, st.G)
        gstd = r.std(axis=1)
        lengths = cmask.sum(1).astype(jnp.float32)
        has_eos = (jnp.isin(comp, jnp.asarray(st.eos_ids, jnp.int32)) & cmask).any(1)
        stats = {"reward_mean": r.mean(), "reward_std": gstd.mean(), "frac_zero_std": (gstd == 0).mean(),
                 "accuracy": correct.mean(), "response_length": lengths.mean(),
                 "response_clip_frac": (~has_eos).mean().astype(jnp.float32)}
        return batch, stats

    def update(state: _State, hp: _HP, step):
        due, lag = rollout_due(step, hp.k_ref)
        settings = LossSettings(beta=hp.beta, eps_low=hp.eps, eps_high=hp.eps, ratio=hp.ratio)
        # step t is the optimiser's update number t - 1 (the count the single-run trainer's schedule reads)
        sched = build_schedule(hp.lr, st.steps, schedule=st.schedule, warmup_steps=st.warmup_steps)
        with jax.numpy_dtype_promotion("standard"):  # optax's schedules mix Python floats and the int32 count
            lr = jnp.asarray(sched(step - 1), jnp.float32)
        opt_in = tree_set(state.opt_state, learning_rate=lr)
        params, opt, m = step_fn(state.params, opt_in, rest, state.batch, due, settings, state.alive)
        newly = state.alive & ~m.finite
        new_state = _State(params, opt, state.batch, state.alive & m.finite,
                           jnp.where(newly, step, state.diverged_step).astype(jnp.int32))
        t = m.terms
        metrics = {"loss": t.loss, "kl": t.kl, "entropy": t.entropy, "grad_norm": m.grad_norm,
                   "is_ratio_mean": t.is_ratio_mean, "is_ratio_max": t.is_ratio_max, "clip_frac": t.clip_frac,
                   "update_norm": m.update_norm, "param_dist": _tree_dist(params, start_params),
                   "refresh_lag": lag.astype(jnp.float32), "lr": lr,
                   "diverged": (~new_state.alive).astype(jnp.float32)}
        if direction is not None:
            metrics["param_proj"] = sum(jnp.sum((p - s).astype(jnp.float32) * d) for p, s, d in
                                        zip(jax.tree.leaves(params), jax.tree.leaves(start_params),
                                            jax.tree.leaves(direction)))
        return new_state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    def evaluate(state: _State, hp: _HP, step):
        k = jax.random.fold_in(jax.random.fold_in(hp.key, 2), step)
        prompts = jnp.repeat(task.eval_prompts, st.eval_samples, axis=0)
        mask = jnp.repeat(task.eval_mask, st.eval_samples, axis=0)
        answers = jnp.repeat(task.eval_answers, st.eval_samples, axis=0)
        comp, _, cmask = sample(state.params, prompts, mask, k)
        return hash_answer_correct(comp, cmask, answers, cls).mean()

    return _MemberFns(init, rollout, update, evaluate)


def _nan_like(stats):
    return {k: jnp.full(jnp.shape(v), jnp.nan, jnp.float32) for k, v in stats.items()}


def _chunk_program(fns: _MemberFns, st: _Static, chunk: int, groups):
    """``(state, hp, first_step) -> (state, metrics)``: ``chunk`` steps from ``first_step`` (steps past
    ``st.steps`` are skipped).

    ``groups=None``: one member (the sequential reference). Otherwise members lie on a leading axis in
    contiguous groups of equal ``k_ref``, ``groups = ((k_ref, lo, hi), ...)`` (static): a group samples its
    rollouts (vmapped over its members) only at the steps where its refresh is due, and every member is
    updated at every step (vmapped over all)."""
    upd = fns.update if groups is None else jax.vmap(fns.update, in_axes=(0, 0, None))
    ev = fns.evaluate if groups is None else jax.vmap(fns.evaluate, in_axes=(0, 0, None))
    roll = jax.vmap(fns.rollout, in_axes=(0, 0, None))
    eval_every = st.eval_every

    def refresh(state: _State, hp: _HP, step):
        if groups is None:
            due, _ = rollout_due(step, hp.k_ref)
            skip = _nan_like(jax.eval_shape(fns.rollout, state, hp, step)[1])

            def do(s):
                batch, stats = fns.rollout(s, hp, step)
                return s._replace(batch=batch), stats

            return jax.lax.cond(due, do, lambda s: (s, skip), state)
        batches, stats = [], []
        for k, lo, hi in groups:
            part = jax.tree.map(lambda x: x[lo:hi], (state, hp))  # noqa: B023 - used right here
            skip = _nan_like(jax.eval_shape(roll, *part, step)[1])
            b, s = jax.lax.cond((step - 1) % k == 0, lambda ops: roll(*ops, step),
                                lambda ops, skip=skip: (ops[0].batch, skip), part)
            batches.append(b)
            stats.append(s)
        cat = lambda *xs: xs[0] if len(xs) == 1 else jnp.concatenate(xs)  # noqa: E731
        return state._replace(batch=jax.tree.map(cat, *batches)), jax.tree.map(cat, *stats)

    def one(state: _State, hp: _HP, step):
        state, rstats = refresh(state, hp, step)
        state, metrics = upd(state, hp, step)
        metrics.update(rstats)
        if eval_every > 0:
            n_shape = jnp.shape(hp.lr)
            metrics["eval_reward"] = jax.lax.cond(
                (step % eval_every == 0) | (step == st.steps), lambda s: ev(s, hp, step).astype(jnp.float32),
                lambda s: jnp.full(n_shape, jnp.nan, jnp.float32), state)
        return state, metrics

    def program(state, hp, first_step):
        def body(state, i):
            step = first_step + i
            shapes = jax.eval_shape(one, state, hp, step)
            skip = {k: jnp.full(v.shape, jnp.nan, jnp.float32) for k, v in shapes[1].items()}
            return jax.lax.cond(step <= st.steps, lambda s: one(s, hp, step), lambda s: (s, skip), state)

        return jax.lax.scan(body, state, jnp.arange(chunk, dtype=jnp.int32))

    return program


def _layout(members: Sequence[Member], n_dev: int):
    """Rows of the population program: on each device, the members of each ``k_ref`` in turn (each group padded
    to a multiple of the device count with copies of its last member, so that every device holds the same
    static groups). Returns ``(rows, local_groups, row_of)``: ``rows[r]`` is the member index of row ``r``;
    ``local_groups`` the ``(k_ref, lo, hi)`` of one device's block; ``row_of[i]`` the row of member ``i``."""
    by_k: dict[int, list[int]] = {}
    for i, m in enumerate(members):
        by_k.setdefault(m.k_ref, []).append(i)
    per_dev = {k: -(-len(ix) // n_dev) for k, ix in by_k.items()}
    rows: list[int] = []
    row_of = [-1] * len(members)
    for d in range(n_dev):
        for k, ix in sorted(by_k.items()):
            L = per_dev[k]
            chunk_ix = ix[d * L:(d + 1) * L]
            for i in chunk_ix:
                row_of[i] = len(rows)
                rows.append(i)
            rows.extend([ix[-1]] * (L - len(chunk_ix)))
    local, lo = [], 0
    for k in sorted(by_k):
        local.append((k, lo, lo + per_dev[k]))
        lo += per_dev[k]
    return rows, tuple(local), row_of


def _stack_hp(members: Sequence[Member], optimizer: str) -> _HP:
    f = lambda xs: jnp.asarray(np.asarray(xs, np.float32))  # noqa: E731
    return _HP(
        lr=f([m.lr for m in members]),
        mom=f([m.momentum if optimizer == "sgd" else m.b1 for m in members]),
        b2=f([m.b2 for m in members]),
        k_ref=jnp.asarray(np.asarray([m.k_ref for m in members], np.int32)),
        beta=f([m.beta for m in members]),
        eps=f([math.inf if m.rule == "unclipped" else m.clip_eps for m in members]),
        ratio=f([0.0 if m.rule == "none" else 1.0 for m in members]),
        key=jax.vmap(jax.random.key)(jnp.asarray(np.asarray([m.seed for m in members], np.uint32))),
    )


def _build_task(trainer, n_eval: int) -> _Task:
    """Training and eval prompts of the trainer's data as left-padded arrays (``data.max_prompt_len``)."""
    def arrays(problems):
        Pn = trainer.cfg.data.max_prompt_len
        toks = np.full((len(problems), Pn), trainer.codec.pad_id, np.int32)
        mask = np.zeros((len(problems), Pn), bool)
        answers = np.zeros(len(problems), np.int32)
        for i, p in enumerate(problems):
            ids = trainer.prompts.ids(p.question)
            if len(ids) > Pn:
                raise ConfigError(f"a prompt has {len(ids)} tokens, more than data.max_prompt_len={Pn}")
            toks[i, Pn - len(ids):] = ids
            mask[i, Pn - len(ids):] = True
            try:
                answers[i] = int(p.answer)
            except ValueError:
                raise ConfigError(f"answer {p.answer!r} is not a non-negative integer; the population trainer "
                                  "scores integer answers (data.source: arith)") from None
        return toks, mask, answers

    tr = arrays(trainer.train_set)
    ev = arrays(trainer.eval_set[: max(n_eval, 1)])
    return _Task(*(jnp.asarray(x) for x in tr + ev))


def _members_with_names(members: Sequence[Member]) -> tuple[Member, ...]:
    if not members:
        raise InvalidValueError("members is empty; expected at least one Member")
    out = []
    for i, m in enumerate(members):
        if not isinstance(m, Member):
            raise InvalidValueError(f"members[{i}] is a {type(m).__name__}; expected a grpojax.grpo.Member")
        out.append(m if m.name else m.replace(name=f"m{i:04d}"))
    names = [m.name for m in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidValueError(f"member names {dup} repeat; expected one folder per member")
    return tuple(out)


def _log_header(cfg: TrainConfig, m: Member, optimizer: str, kl_reference: str, schedule: str = "constant",
                warmup_steps: int = 0) -> dict:
    meta = {"trainer": "grpojax.population", "eta": m.lr, "schedule": schedule, "warmup_steps": warmup_steps,
            "mu": m.momentum if optimizer == "sgd" else None,
            "b1": m.b1 if optimizer == "adam" else None, "b2": m.b2 if optimizer == "adam" else None,
            "optimizer": optimizer, "k_ref": m.k_ref, "lag": "periodic", "group_size": cfg.grpo.group_size,
            "prompts_per_step": cfg.grpo.prompts_per_step, "beta": m.beta, "clip_eps": m.clip_eps, "rule": m.rule,
            "kl_reference": kl_reference, "advantage": cfg.grpo.advantage, "aggregation": cfg.grpo.aggregation,
            "eval_every": cfg.eval.every, "seed": m.seed}
    return jsonl_header(f"{cfg.name}/{m.name}", source="grpojax.grpo.train_population", meta=meta)


def train_population(
    cfg: TrainConfig,
    members: Sequence[Member],
    out_dir: str | pathlib.Path | None = None,
    *,
    optimizer: str = "sgd",
    kl_reference: str = "behaviour",
    grad_clip: float = 0.0,
    schedule: str = "constant",
    warmup_steps: int = 0,
    chunk: int = 10,
    batched: bool = True,
    devices=None,
    show_progress: bool = True,
    warm: WarmStart | None = None,
    start: Any = None,
    direction: Any = None,
) -> PopulationResult:
    """Train every member of a population by GRPO from one shared warm start, in one compiled program.

    Args:
      cfg: the run configuration: model, tokenizer (``word``), data (``arith``), sampling (``max_new_tokens``,
        ``temperature``), ``grpo`` (``prompts_per_step``, ``group_size``, ``advantage``, ``adv_eps``,
        ``aggregation``), ``warmstart``, ``eval`` (``every``, ``n``, ``samples``), ``steps`` and ``seed`` (of the
        model's initialisation and the warm start). ``optim`` and the per-run ``grpo`` coefficients are
        replaced by each member's.
      members: the members (:class:`Member`).
      out_dir: the population folder (``population.json``, ``members/<name>/metrics.jsonl`` and
        ``summary.json``, the warm start's ``warmstart/warmstart.jsonl``); ``None`` writes nothing.
      optimizer: ``sgd`` (heavy-ball momentum ``Member.momentum``) or ``adam`` (``Member.b1``, ``b2``).
      kl_reference: ``behaviour`` (the KL reference is the behaviour policy, refreshed with every rollout) or
        ``initial`` (the warm-started model, fixed).
      grad_clip: global-norm gradient clipping (0: none, the theory's setting).
      schedule: the learning-rate schedule of every member (the single-run trainer's ``optim.schedule``):
        ``constant``, ``cosine`` (to 0 at the last step) or ``linear`` (to 0); a member's rate at step ``t`` is
        its ``lr`` times the schedule's shape at optimiser update ``t - 1`` (logged as ``lr``).
      warmup_steps: linear warm-up from 0 over this many steps before the schedule (also with ``constant``).
      chunk: optimiser steps per compiled call (the progress bar and the logs advance per chunk).
      batched: ``True``: one program over all members (vmapped, sharded over ``devices``); ``False``: the
        same member program run for each member in turn (the sequential reference).
      devices: devices of the ``population`` mesh axis (default all). Members are grouped by ``k_ref`` (a group
        samples rollouts only at its refresh steps) and each group is padded to a multiple of the device count
        with copies of a member (computed and dropped).
      show_progress: show a progress bar over the steps.
      warm: the :class:`WarmStart` of an earlier call (``result.warm``) to start from instead of running the
        warm start again (it must come from the same ``model``, ``tokenizer``, ``data`` and ``warmstart``).
      start: parameters every member starts from (the tree of the warm start's parameters; default the warm
        start itself), e.g. a plateau reached by an earlier run. The ``initial`` KL reference stays the warm
        start; ``param_dist`` is measured from ``start``.
      direction: a parameter tree (same structure); each step then logs ``param_proj``, the projection
        ``<params - start, direction>`` (e.g. on the stiffest direction of the mean update).

    Returns:
      :class:`PopulationResult`.

    Raises:
      ConfigError: a bad member field (named), an unknown optimizer / KL reference / schedule, a bad
        ``warmup_steps``, or a task the in-program
        reward cannot score (no ``####`` token, non-integer answers).
    """
    from grpojax.grpo._trainer import GRPOTrainer  # noqa: PLC0415 - the trainer imports nothing from here

    members = _members_with_names(members)
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer={optimizer!r}; expected one of {'|'.join(OPTIMIZERS)}")
    if kl_reference not in KL_REFERENCES:
        raise ConfigError(f"kl_reference={kl_reference!r}; expected one of {'|'.join(KL_REFERENCES)}")
    if not (isinstance(chunk, int) and chunk >= 1):
        raise InvalidValueError(f"chunk={chunk!r}; expected an integer >= 1")
    if not (grad_clip >= 0 and math.isfinite(grad_clip)):
        raise InvalidValueError(f"grad_clip={grad_clip!r}; expected a number >= 0 (0: none)")
    try:
        schedule = check_choice("schedule", schedule, SCHEDULES)
        warmup_steps = check_int("warmup_steps", warmup_steps, 0)
    except (InvalidValueError, TypeError, ValueError) as exc:
        if not isinstance(exc, InvalidValueError):  # int() of a string
            exc = InvalidValueError(f"warmup_steps must be an integer >= 0 (static), got warmup_steps={warmup_steps!r}")
        raise ConfigError(str(exc)) from None
    cfg = cfg.validate()
    if cfg.data.source != "arith":
        raise ConfigError(f"data.source={cfg.data.source!r}; the population trainer scores the arith task (arith)")
    weights = {str(k): float(v) for k, v in cfg.rewards.weights.items()}
    unknown = sorted(set(weights) - {"correctness", "format"})
    if unknown:
        raise ConfigError(f"rewards.weights: {unknown} cannot be computed inside the population program; "
                          "expected correctness and/or format")
    out = pathlib.Path(out_dir) if out_dir is not None else None
    t_ws = time.perf_counter()
    if warm is None:
        import tempfile  # noqa: PLC0415

        with tempfile.TemporaryDirectory(prefix="grpojax-population-") as tmp:
            ws_dir = out / "warmstart" if out is not None else pathlib.Path(tmp)  # its log is kept with the output
            (ws_dir / "warmstart.jsonl").unlink(missing_ok=True)
            trainer = GRPOTrainer(cfg, ws_dir, devices=(devices or jax.devices())[:1])
            trainer.warmstart()
        graphdef, rest = trainer.graphdef, jax.device_get(trainer.rest)
        init_params = jax.device_get(trainer.params)
        warm = WarmStart(graphdef, init_params, rest, trainer)
    else:
        graphdef, init_params, rest, trainer = warm
    warmstart_s = time.perf_counter() - t_ws
    cls = token_classes(trainer.codec.tokenizer)
    task = _build_task(trainer, cfg.eval.n)
    s = cfg.sampling
    st = _Static(B=cfg.grpo.prompts_per_step, G=cfg.grpo.group_size, N=s.max_new_tokens, optimizer=optimizer,
                 grad_clip=float(grad_clip), aggregation=cfg.grpo.aggregation, advantage=cfg.grpo.advantage,
                 adv_eps=float(cfg.grpo.adv_eps), temperature=float(s.temperature),
                 eos_ids=tuple(trainer.stop_ids), pad_id=int(trainer.codec.pad_id), kl_reference=kl_reference,
                 eval_every=int(cfg.eval.every) if cfg.eval.n > 0 else 0, eval_samples=int(cfg.eval.samples),
                 steps=int(cfg.steps), w_correct=weights.get("correctness", 0.0), w_format=weights.get("format", 0.0),
                 schedule=schedule, warmup_steps=warmup_steps)
    for name, tree in (("start", start), ("direction", direction)):
        if tree is not None and (jax.tree.structure(tree) != jax.tree.structure(init_params) or any(
                np.shape(a) != np.shape(b) for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(init_params)))):
            raise InvalidValueError(f"{name} is not a tree of the model's parameters (its structure or shapes "
                                    "differ); expected the structure of the warm start's parameters")
    as_params = lambda t: None if t is None else jax.tree.map(  # noqa: E731
        lambda a, b: jnp.asarray(a, jnp.asarray(b).dtype), t, init_params)
    fns = _member_fns(graphdef, rest, init_params, task, cls, st, as_params(start), as_params(direction))
    chunk = min(chunk, cfg.steps)
    t0 = time.perf_counter()
    if batched:
        devs = list(devices or jax.devices())
        rows, local_groups, row_of = _layout(members, len(devs))
        hp = _stack_hp([members[i] for i in rows], optimizer)
        mesh = Mesh(np.asarray(devs), ("population",))
        pop = NamedSharding(mesh, P("population"))
        hp = jax.device_put(hp, pop)
        state = jax.jit(jax.vmap(fns.init), out_shardings=pop)(hp)
        local = _chunk_program(fns, st, chunk, local_groups)
        program = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P("population"), P("population"), P()),
                                        out_specs=(P("population"), P(None, "population")), check_vma=False),
                          donate_argnums=(0,))
        eval_all = jax.jit(jax.shard_map(jax.vmap(fns.evaluate, in_axes=(0, 0, None)), mesh=mesh,
                                         in_specs=(P("population"), P("population"), P()),
                                         out_specs=P("population"), check_vma=False))
        runs = [(state, hp, program, eval_all, np.asarray(row_of))]
    else:
        program = jax.jit(_chunk_program(fns, st, chunk, None), donate_argnums=(0,))
        init_one = jax.jit(fns.init)
        eval_one = jax.jit(fns.evaluate)
        runs = []
        for i, m in enumerate(members):
            hp = jax.tree.map(lambda x: x[0], _stack_hp([m], optimizer))
            runs.append((None, hp, program, eval_one, i))

    loggers = _open_logs(out, cfg, members, optimizer, kl_reference)
    n_chunks = -(-cfg.steps // chunk)
    per_run_metrics: list = []
    eval0_parts: list = []
    finals: list = []
    chunk_s: list = []
    chunk_cpu: list = []
    one = jax.eval_shape(fns.init, jax.tree.map(lambda x: x[0], _stack_hp(members[:1], optimizer)))
    state_bytes = int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(one)))
    bar = make_progress() if show_progress else None
    try:
        if bar is not None:
            bar.start()
        task_id = bar.add_task(f"GRPO population ({len(members)} members)", total=cfg.steps * len(runs)) \
            if bar else None
        for state, hp, prog, evaluate, sel in runs:
            if state is None:
                state = init_one(hp)
            e0 = np.asarray(evaluate(state, hp, jnp.int32(0))) if st.eval_every else \
                np.full(np.shape(hp.lr), np.nan, np.float32)
            eval0_parts.append(np.atleast_1d(e0)[sel] if batched else np.atleast_1d(e0))
            chunks = []
            for c in range(n_chunks):
                tc, cc = time.perf_counter(), time.process_time()
                state, met = prog(state, hp, jnp.int32(c * chunk + 1))
                met = {k: np.asarray(v) for k, v in met.items()}  # (chunk, N) or (chunk,)
                chunk_s.append(time.perf_counter() - tc)
                chunk_cpu.append(time.process_time() - cc)
                if not batched:
                    met = {k: v[:, None] for k, v in met.items()}
                met = {k: v[:, sel] if batched else v for k, v in met.items()}
                chunks.append(met)
                if bar is not None:
                    bar.update(task_id, advance=min(chunk, cfg.steps - c * chunk))
            finals.append(jax.tree.map(np.asarray, (state.params, state.alive, state.diverged_step)))
            per_run_metrics.append({k: np.concatenate([m[k] for m in chunks])[: cfg.steps] for k in chunks[0]})
    finally:
        if bar is not None:
            bar.stop()
    wall = time.perf_counter() - t0
    if batched:
        metrics = per_run_metrics[0]
        params, alive, dstep = finals[0]
        sel = runs[0][4]
        params = jax.tree.map(lambda x: x[sel], params)
        alive, dstep = alive[sel], dstep[sel]
        eval0 = eval0_parts[0]
    else:
        metrics = {k: np.concatenate([m[k] for m in per_run_metrics], axis=1) for k in per_run_metrics[0]}
        params = jax.tree.map(lambda *xs: np.stack(xs), *[f[0] for f in finals])
        alive = np.asarray([f[1] for f in finals])
        dstep = np.asarray([f[2] for f in finals])
        eval0 = np.concatenate(eval0_parts)
    result = PopulationResult(members, metrics, eval0.astype(np.float32), ~alive.astype(bool),
                              dstep.astype(np.int64), params, init_params, graphdef, rest, out, wall, warmstart_s,
                              warm, chunk_s, state_bytes, chunk_cpu)
    if loggers is not None:
        _write_logs(loggers, result, cfg, optimizer, kl_reference, schedule, warmup_steps)
    return result


def _open_logs(out, cfg, members, optimizer, kl_reference):
    if out is None:
        return None
    return [(m, out / "members" / m.name) for m in members]


def _write_logs(loggers, res: PopulationResult, cfg: TrainConfig, optimizer: str, kl_reference: str,
                schedule: str = "constant", warmup_steps: int = 0) -> None:
    """One canonical run log per member (step 0: the eval after the warm start), its summary, the table."""
    out = res.out_dir
    names = list(res.metrics)
    table = []
    for j, (m, folder) in enumerate(loggers):
        folder.mkdir(parents=True, exist_ok=True)
        header = _log_header(cfg, m, optimizer, kl_reference, schedule, warmup_steps)
        with JsonlLogger(folder / "metrics.jsonl", header=header) as log:
            if math.isfinite(float(res.eval0[j])):
                log.write(0, {"eval_reward": float(res.eval0[j])})
            for t in range(res.metrics[names[0]].shape[0]):
                rec = {k: float(res.metrics[k][t, j]) for k in names}
                rec = {k: v for k, v in rec.items() if math.isfinite(v) or k in ("loss", "grad_norm", "kl")}
                log.write(t + 1, rec)
        rewards = res.metrics["reward_mean"][:, j]
        finite = rewards[np.isfinite(rewards)]
        evals = res.metrics.get("eval_reward", np.full((0, 1), np.nan))[:, j] if "eval_reward" in res.metrics \
            else np.zeros(0)
        evals = evals[np.isfinite(evals)]
        summary = {"member": m.to_dict(), "diverged": bool(res.diverged[j]),
                   "diverged_step": int(res.diverged_step[j]) or None, "steps": int(cfg.steps),
                   "reward_first": float(finite[0]) if finite.size else None,
                   "reward_last": float(finite[-1]) if finite.size else None,
                   "eval_reward_start": float(res.eval0[j]) if math.isfinite(float(res.eval0[j])) else None,
                   "eval_reward_last": float(evals[-1]) if evals.size else None,
                   "status": "diverged" if res.diverged[j] else "done", "log": str(folder / "metrics.jsonl")}
        write_json(folder, "summary.json", summary)
        table.append(summary)
    write_json(out, "population.json", {"name": cfg.name, "optimizer": optimizer, "kl_reference": kl_reference,
                                        "schedule": schedule, "warmup_steps": warmup_steps,
                                        "steps": int(cfg.steps), "n_members": len(loggers),
                                        "wall_s": res.wall_s, "warmstart_s": res.warmstart_s, "members": table})
