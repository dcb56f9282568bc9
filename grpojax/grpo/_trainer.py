"""The GRPO trainer: rollouts, rewards, advantages, K_ref updates, eval, logging, checkpoints.

One *rollout* draws ``B`` prompts (a pure function of ``(seed, rollout index)``), samples ``G``
completions each from the current (behaviour) policy, scores them and computes group advantages;
then ``K_ref`` optimiser steps are taken on that batch (step ``k`` of the cycle sees a policy ``k``
updates newer than the behaviour policy: the theory's periodic lag). Every optimiser step writes one
line of the run log (``metrics.jsonl``, canonical column names); rollout metrics (``reward_*``,
``response_*``, ``unparsed``) appear on the first step of each cycle, ``eval_reward`` every
``eval.every`` steps and at step 0 (after the warm start).

The pieces are shared with the population trainer (:func:`grpojax.grpo.train_population`) and the
experiments: the update is :func:`grpojax.grpo.grpo_step` (jitted once per model and optimiser by
:func:`grpojax.grpo.make_grpo_update`), the refresh schedule :func:`grpojax.grpo.rollout_due`, the advantages
:func:`grpojax.grpo.group_advantages`; rollouts here are sampled by :func:`grpojax.lm.generate` and scored on
their decoded text (:func:`grpojax.grpo.score_completions`), any reward and tokenizer.

Exact resume: all randomness is ``fold_in`` of the seed with the step / rollout index, and the
checkpoint holds the parameters, optimiser state, reference parameters and the current rollout
batch, so a resumed run reproduces the uninterrupted run's metrics.

Run folder safety: the folder is locked while the run writes it (:class:`RunLock`); a folder holding
another run is refused unless it is to be resumed (same config, or a change allowed and recorded) or
replaced (:func:`plan_run`); checkpoints are verified on restore and a corrupt newest checkpoint falls
back to the newest valid one (:meth:`CheckpointStore.restore_valid`); ``config.yaml``,
``tokenizer.json`` and ``summary.json`` are written atomically, and the summary of a resumed run is
merged with the earlier one.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from rich.console import Console

from grpojax._errors import GrpojaxError, InvalidValueError
from grpojax._distributed import broadcast_ints, check_started, is_primary, to_global, to_host
from grpojax._io import write_json, write_text_atomic
from grpojax._progress import progress as make_progress
from grpojax.grpo._advantages import group_advantages
from grpojax.grpo._arith import arith_problems
from grpojax.grpo._checkpoint import CheckpointStore
from grpojax.grpo._data import Problem, chat_prompt_ids, format_prompt, load_jsonl, sample_batch, split_heldout
from grpojax.grpo._hooks import StepHook, check_hooks, hook_stop
from grpojax.grpo._logging import NoLog, read_jsonl_metrics
from grpojax.grpo._optim import build_optimizer
from grpojax.grpo._rewards import score_completions
from grpojax.grpo._step import RolloutBatch, make_grpo_update, make_logprob_fn, make_sft_update
from grpojax.grpo._run_folder import RunFolderError, RunLock, RunPlan, check_run_folder, clear_run, plan_run
from grpojax.grpo._update import rollout_due
from grpojax.grpo._train_config import TrainConfig, config_to_dict, read_config_dict, save_config
from grpojax.logs import JsonlLogger, jsonl_header, truncate_jsonl
from grpojax.lm import (
    CausalLM,
    ModelConfig,
    TextCodec,
    Tokenizer,
    batch_sharding,
    char_tokenizer,
    check_vocab_fits,
    codec_from_tokenizer,
    generate,
    infer_tokenizer_kind,
    load_pretrained,
    load_tokenizer,
    make_mesh,
    param_shardings,
    word_tokenizer,
)

__all__ = ["GRPOTrainer", "NonFiniteLossError", "StepHook", "train"]

class _Programs:
    """The jitted programs of recent trainers, keyed on the values they are built from (the model's graph,
    the frozen config sections, the mesh), the least recently used evicted past ``size``: a resumed run or a
    second trainer of the same model and optimiser reuses the compiled update instead of compiling it again."""

    def __init__(self, size: int = 8):
        self.size = size
        self._items: collections.OrderedDict = collections.OrderedDict()

    def get(self, key: tuple, build):
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = self._items[key] = build()
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value


_PROGRAMS = _Programs()
_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "float16": jnp.float16}


class NonFiniteLossError(GrpojaxError, RuntimeError):
    """The loss or gradient became NaN/inf; the run stopped and the last good state was saved."""

    def __init__(self, step: int, checkpoint: pathlib.Path):
        self.step = step
        self.checkpoint = checkpoint
        super().__init__(
            f"non-finite loss or gradient at step {step}; run stopped, last good state (step {step - 1}) "
            f"saved to {checkpoint}"
        )


def _warn(message: str) -> None:
    """Default warning sink of :meth:`GRPOTrainer.train`: one line on stderr."""
    sys.stderr.write(f"grpojax: warning: {message}\n")
    sys.stderr.flush()


#: datasets shipped with the package (a GSM8K subset, see its README): ``data.path`` may name one of these files
DATA_DIR = pathlib.Path(__file__).parent / "data"


def _data_file(path: str) -> pathlib.Path:
    """``data.path`` / ``data.eval_path``: an existing file, else a file of that name in :data:`DATA_DIR`."""
    p = pathlib.Path(path)
    if not p.is_file() and p.name == str(path) and (DATA_DIR / p.name).is_file():
        return DATA_DIR / p.name
    return p


def _dtype(name: str):
    if name not in _DTYPES:
        raise InvalidValueError(f"dtype {name!r}; expected one of {sorted(_DTYPES)}")
    return _DTYPES[name]


class GRPOTrainer:
    """Builds everything a run needs from a :class:`TrainConfig` and runs it.

    Args:
      cfg: the run configuration (validated here).
      out_dir: run folder: ``metrics.jsonl``, ``warmstart.jsonl``, ``config.yaml``,
        ``tokenizer.json``, ``checkpoints/``, ``tensorboard/``.
      devices: devices of the ``('data', 'model')`` mesh (default: all).
    """

    def __init__(self, cfg: TrainConfig, out_dir: str | pathlib.Path, *, devices=None):
        check_started()  # a multi-process environment without JAX's runtime would train N separate copies
        self.cfg = cfg.validate()
        self.out = check_run_folder(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.mesh = make_mesh(model=cfg.mesh.model_axis, devices=devices)
        self.parse_options = cfg.rewards.parse_options()
        self.tokenizer_kind, self.tokenizer = self._build_tokenizer()
        self.codec = self.tokenizer.codec()
        self.chat = self._use_chat()
        self.train_set, self.eval_set = self._build_data()
        self._prompt_cache: dict[str, list[int]] = {}
        self._check_prompts(self.eval_set[: cfg.eval.n], "eval set")
        model = self._build_model()
        self.model_config = model.config
        check_vocab_fits(self.codec, model.config, pretrained=bool(cfg.model.pretrained), kind=self.tokenizer_kind)
        self.graphdef, params, self.rest = nnx.split(model, nnx.Param, ...)
        self.param_sh = param_shardings(params, self.mesh)
        self.params = to_global(params, self.param_sh)
        self.rest = to_global(self.rest, NamedSharding(self.mesh, P()))
        g = cfg.grpo
        self._use_ref = g.beta > 0 or g.log_kl

        def build():
            tx, schedule = build_optimizer(cfg.optim, cfg.steps)
            opt_sh = jax.tree.map(lambda x: x.sharding, self._init_opt(tx, self.params))
            update = make_grpo_update(
                self.graphdef, tx, beta=g.beta, eps_low=g.eps_low, eps_high=g.eps_high,
                aggregation=g.aggregation, use_ref=self._use_ref, param_sharding=self.param_sh, opt_sharding=opt_sh,
            )
            return tx, schedule, opt_sh, update, make_logprob_fn(self.graphdef)

        key = ("grpo", self.graphdef, cfg.optim, cfg.steps, g, self._use_ref, self.mesh)
        self.tx, self.schedule, self.opt_sh, self.update, self.logprob_fn = _PROGRAMS.get(key, build)
        self.opt_state = self._init_opt(self.tx, self.params)
        self.ref_params = jax.tree.map(jnp.copy, self.params) if self._use_ref else None
        self.batch = self._empty_batch()
        self.stop_ids = self.codec.stop_ids
        self.key = jax.random.key(cfg.seed)

    # ------------------------------------------------------------------ building
    def _build_tokenizer(self) -> tuple[str, Tokenizer]:
        """``(kind, tokenizer)``: ``tokenizer.kind`` resolved (``auto``: the file's own kind) and the tokenizer,
        its EOS / padding from ``model.eos`` / ``model.pad`` or else from the checkpoint's files."""
        t, m = self.cfg.tokenizer, self.cfg.model
        kind = t.kind
        if kind == "auto":
            kind = "file" if (t.path or m.pretrained) else "char"
        if kind in ("char", "word"):
            if kind == "char":
                backend = char_tokenizer()
            elif self.cfg.data.source == "arith":
                corpus = [p.question + "\n" + p.solution for d in range(1, 6) for p in arith_problems(300, difficulty=d)]
                backend = word_tokenizer(corpus)
            else:
                backend = word_tokenizer([p.question + "\n" + p.solution
                                          for p in load_jsonl(_data_file(self.cfg.data.path))])
            try:
                return kind, Tokenizer.from_codec(codec_from_tokenizer(backend, eos=m.eos, pad=m.pad))
            except ValueError as exc:
                raise InvalidValueError(f"model.eos={m.eos!r} / model.pad={m.pad!r}: {exc}") from None
        path = pathlib.Path(t.path or m.pretrained or "")
        if not (path / "tokenizer.json" if path.is_dir() else path).is_file():
            raise FileNotFoundError(f"tokenizer file {path} does not exist (tokenizer.path / model.pretrained)")
        tok = load_tokenizer(path, eos=m.eos, pad=m.pad)
        return (infer_tokenizer_kind(tok.backend) if t.kind == "auto" else kind), tok

    def _use_chat(self) -> bool:
        d = self.cfg.data
        has = self.tokenizer.chat_template is not None
        if d.chat_template and not has:
            raise InvalidValueError("data.chat_template=true but the tokenizer has no chat template "
                             "(tokenizer_config.json chat_template / chat_template.jinja); expected false")
        return has if d.chat_template is None else d.chat_template

    def _build_data(self) -> tuple[list[Problem], list[Problem]]:
        d = self.cfg.data
        if d.source == "arith":
            pool = arith_problems(d.n_train + max(4 * self.cfg.eval.n, 200), difficulty=d.difficulty, seed=self.cfg.seed)
            pool = list({p.question: p for p in pool}.values())
            train, held = split_heldout(pool, d.heldout_frac)
        else:
            data = load_jsonl(_data_file(d.path))
            if d.eval_path:
                train, held = data, load_jsonl(_data_file(d.eval_path))
            else:
                train, held = split_heldout(data, d.heldout_frac)
        if len(train) < self.cfg.grpo.prompts_per_step:
            raise InvalidValueError(f"training set has {len(train)} problems; need >= grpo.prompts_per_step")
        if self.cfg.eval.n > len(held):
            raise InvalidValueError(f"eval.n={self.cfg.eval.n} exceeds the {len(held)} held-out problems")
        return train, held

    def _build_model(self):
        m = self.cfg.model
        dtype, pdtype = _dtype(m.dtype), _dtype(m.param_dtype)
        if m.pretrained:
            return load_pretrained(m.pretrained, dtype=dtype)
        head_dim = m.hidden_size // m.num_attention_heads
        mc = ModelConfig(
            vocab_size=self.codec.vocab_size, hidden_size=m.hidden_size, intermediate_size=m.intermediate_size,
            num_hidden_layers=m.num_hidden_layers, num_attention_heads=m.num_attention_heads,
            num_key_value_heads=m.num_key_value_heads, head_dim=head_dim, rope_theta=m.rope_theta,
            tie_word_embeddings=m.tie_word_embeddings, attention_bias=True,
            max_position_embeddings=m.max_position_embeddings, eos_token_id=(self.codec.eos_id,),
            pad_token_id=self.codec.pad_id, model_type="qwen2",
        )
        return CausalLM(mc, rngs=nnx.Rngs(self.cfg.seed), dtype=dtype, param_dtype=pdtype)

    def _init_opt(self, tx, params):
        """Optimiser state on the mesh (moments follow the parameters; scalars replicated)."""
        rep = NamedSharding(self.mesh, P())

        def fix(x):
            sh = getattr(x, "sharding", None)
            return x if isinstance(sh, NamedSharding) and sh.mesh == self.mesh else to_global(x, rep)

        return jax.tree.map(fix, jax.jit(tx.init)(params))

    def _context(self) -> int:
        m = self.cfg.model
        return int(self.model_config.max_position_embeddings if m.pretrained else m.max_position_embeddings)

    def _empty_batch(self) -> RolloutBatch:
        S = self.cfg.grpo.prompts_per_step * self.cfg.grpo.group_size
        Pn, N = self.cfg.data.max_prompt_len, self.cfg.sampling.max_new_tokens
        sh = lambda shape: batch_sharding(self.mesh, shape)  # noqa: E731
        z = lambda shape, dt: to_global(np.zeros(shape, dt), sh(shape))  # noqa: E731
        return RolloutBatch(z((S, Pn), jnp.int32), z((S, Pn), jnp.bool_), z((S, N), jnp.int32),
                            z((S, N), jnp.bool_), z((S, N), jnp.float32), z((S, N), jnp.float32), z((S,), jnp.float32))

    # ------------------------------------------------------------------ prompts
    def _prompt_ids(self, question: str) -> list[int]:
        ids = self._prompt_cache.get(question)
        if ids is None:
            d = self.cfg.data
            if self.chat:
                ids = chat_prompt_ids(question, self.tokenizer, system_prompt=d.system_prompt,
                                      template=d.prompt_template)
            else:
                ids = self.codec.encode(format_prompt(question, d.prompt_template))
            self._prompt_cache[question] = ids
        return ids

    def _check_prompts(self, problems: list[Problem], where: str) -> None:
        limit = self.cfg.data.max_prompt_len
        for i, p in enumerate(problems):
            n = len(self._prompt_ids(p.question))
            if n > limit:
                raise InvalidValueError(
                    f"prompt {i} of the {where} has {n} tokens, longer than data.max_prompt_len={limit} "
                    f"(context {self._context()} = prompt {limit} + sampling.max_new_tokens "
                    f"{self.cfg.sampling.max_new_tokens}): {p.question[:60]!r}..."
                )

    def _pad_prompts(self, problems: list[Problem], repeat: int = 1) -> tuple[np.ndarray, np.ndarray]:
        self._check_prompts(problems, "batch")
        Pn = self.cfg.data.max_prompt_len
        toks = np.full((len(problems), Pn), self.codec.pad_id, np.int32)
        mask = np.zeros((len(problems), Pn), bool)
        for i, p in enumerate(problems):
            ids = self._prompt_ids(p.question)
            toks[i, Pn - len(ids):] = ids
            mask[i, Pn - len(ids):] = True
        w = self._prompt_width(mask)  # drop the all-padding columns on the left
        return np.repeat(toks[:, Pn - w:], repeat, 0), np.repeat(mask[:, Pn - w:], repeat, 0)

    def _prompt_width(self, mask: np.ndarray) -> int:
        """Columns a left-padded prompt batch keeps: its longest prompt, rounded up to a geometric bucket.

        A prompt of ``n`` tokens, ``2^k <= n < 2^(k+1)``, is padded to a multiple of ``2^(k-3)`` (at most an
        eighth of padding), so a run with varying prompt lengths compiles only a few batch shapes.
        """
        limit = self.cfg.data.max_prompt_len
        n = int(mask.sum(1).max()) if mask.size else 0
        if n == 0:
            return limit
        q = 1 << max(0, n.bit_length() - 4)
        return min(limit, -(-n // q) * q)

    def _full_width(self, batch: RolloutBatch) -> RolloutBatch:
        """``batch`` with its prompt left-padded back to ``data.max_prompt_len`` (the checkpointed shape)."""
        pad = self.cfg.data.max_prompt_len - batch.prompt.shape[1]
        if pad == 0:
            return batch
        prompt = np.pad(to_host(batch.prompt), ((0, 0), (pad, 0)), constant_values=self.codec.pad_id)
        mask = np.pad(to_host(batch.prompt_mask), ((0, 0), (pad, 0)), constant_values=False)
        return batch._replace(prompt=self._put(prompt), prompt_mask=self._put(mask))

    def _trimmed(self, batch: RolloutBatch) -> RolloutBatch:
        """``batch`` with the all-padding prompt columns dropped (see :meth:`_prompt_width`)."""
        mask = to_host(batch.prompt_mask)
        w = self._prompt_width(mask)
        if w == mask.shape[1]:
            return batch
        prompt = to_host(batch.prompt)[:, -w:]
        return batch._replace(prompt=self._put(prompt), prompt_mask=self._put(mask[:, -w:]))

    def _put(self, x):
        return to_global(x, batch_sharding(self.mesh, np.shape(x)))

    def _sample(self, params, prompt, mask, *, key, greedy=False):
        model = nnx.merge(self.graphdef, params, self.rest)
        s = self.cfg.sampling
        out = generate(
            model, self._put(prompt), self._put(mask), key=key, max_new_tokens=s.max_new_tokens,
            temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, greedy=greedy, eos_id=self.stop_ids,
            pad_id=self.codec.pad_id, buckets=(np.shape(prompt)[1],),
        )
        return out.completion, out.logprobs, out.completion_mask

    def _texts(self, completion: np.ndarray, cmask: np.ndarray) -> list[str]:
        return [self.codec.decode(row[m]) for row, m in zip(completion, cmask)]

    # ------------------------------------------------------------------ phases
    def warmstart(self, *, progress=None) -> dict:
        """Supervised phase on worked solutions (``warmstart.steps``); logs ``warmstart.jsonl``."""
        w = self.cfg.warmstart
        if w.steps <= 0:
            return {}

        def build():
            tx, _ = build_optimizer(w.optimizer(), w.steps)
            opt_sh = jax.tree.map(lambda x: x.sharding, self._init_opt(tx, self.params))
            return tx, make_sft_update(self.graphdef, tx, param_sharding=self.param_sh, opt_sharding=opt_sh)

        tx, sft = _PROGRAMS.get(("sft", self.graphdef, w, self.mesh), build)
        opt = self._init_opt(tx, self.params)
        N = self.cfg.sampling.max_new_tokens
        truncated = 0
        losses = []
        task = progress.add_task("warm start (SFT)", total=w.steps) if progress else None
        log_cm = JsonlLogger(self.out / "warmstart.jsonl", name=None, append=True) if is_primary() else NoLog()
        with log_cm as log:
            for i in range(w.steps):
                probs = sample_batch(self.train_set, w.batch_size, seed=self.cfg.seed + 1, index=i)
                prompt, pmask = self._pad_prompts(probs)
                target = np.full((len(probs), N), self.codec.pad_id, np.int32)
                tmask = np.zeros((len(probs), N), bool)
                for j, p in enumerate(probs):
                    ids = self.codec.encode(p.solution or f"#### {p.answer}") + [self.codec.eos_id]
                    truncated += len(ids) > N
                    ids = ids[:N]
                    target[j, : len(ids)] = ids
                    tmask[j, : len(ids)] = True
                self.params, opt, loss = sft(self.params, opt, self.rest, self._put(prompt), self._put(pmask),
                                             self._put(target), self._put(tmask))
                if i % 10 == 0 or i == w.steps - 1:
                    losses.append(float(loss))
                    log.write(i, {"sft_loss": float(loss), "truncated_targets": truncated})
                if task is not None:
                    progress.advance(task)
        if self.ref_params is not None:
            self.ref_params = jax.tree.map(jnp.copy, self.params)
        return {"sft_loss_first": losses[0], "sft_loss_last": losses[-1], "truncated_targets": truncated}

    def evaluate(self, step: int) -> dict:
        """Accuracy on the first ``eval.n`` held-out problems: sampled (``eval_reward``) and greedy."""
        e = self.cfg.eval
        if e.n <= 0:
            return {}
        probs = self.eval_set[: e.n]
        answers = [p.answer for p in probs for _ in range(e.samples)]
        prompt, mask = self._pad_prompts(probs, repeat=e.samples)
        t0 = time.perf_counter()
        key = jax.random.fold_in(jax.random.fold_in(self.key, 2), step)
        comp, _, cm = self._sample(self.params, prompt, mask, key=key)
        scored = score_completions(self._texts(to_host(comp), to_host(cm)), answers,
                                   self.cfg.rewards.weights, options=self.parse_options)
        out = {"eval_reward": float(scored.correct.mean()), "eval_unparsed": scored.unparsed}
        if e.greedy:
            prompt1, mask1 = self._pad_prompts(probs)
            comp, _, cm = self._sample(self.params, prompt1, mask1, key=key, greedy=True)
            g = score_completions(self._texts(to_host(comp), to_host(cm)), [p.answer for p in probs],
                                  self.cfg.rewards.weights, options=self.parse_options)
            out["eval_accuracy_greedy"] = float(g.correct.mean())
        out["timing_s/eval"] = time.perf_counter() - t0
        return out

    def rollout(self, index: int) -> dict:
        """Draw rollout ``index``: sample, score, advantages, reference log-probs -> ``self.batch``."""
        g, s = self.cfg.grpo, self.cfg.sampling
        B, G = g.prompts_per_step, g.group_size
        probs = sample_batch(self.train_set, B, seed=self.cfg.seed, index=index)
        prompt, pmask = self._pad_prompts(probs, repeat=G)
        t0 = time.perf_counter()
        key = jax.random.fold_in(jax.random.fold_in(self.key, 1), index)
        comp, logp, cmask = self._sample(self.params, prompt, pmask, key=key)
        comp_h, cmask_h = to_host(comp), to_host(cmask)
        t1 = time.perf_counter()
        answers = [p.answer for p in probs for _ in range(G)]
        scored = score_completions(self._texts(comp_h, cmask_h), answers, self.cfg.rewards.weights,
                                   options=self.parse_options)
        rewards = scored.rewards.reshape(B, G)
        adv = np.asarray(group_advantages(jnp.asarray(rewards, jnp.float32), g.advantage, eps=g.adv_eps))
        t2 = time.perf_counter()
        prompt_d, pmask_d = self._put(prompt), self._put(pmask)
        if self.ref_params is not None:
            ref = self.logprob_fn(self.ref_params, self.rest, prompt_d, pmask_d, comp)
        else:
            ref = jnp.zeros(comp.shape, jnp.float32)
        self.batch = RolloutBatch(prompt_d, pmask_d, self._put(comp), self._put(cmask),
                                  self._put(jnp.asarray(logp, jnp.float32)), self._put(ref),
                                  self._put(adv.reshape(-1).astype(np.float32)))
        jax.block_until_ready(self.batch)
        t3 = time.perf_counter()
        lengths = cmask_h.sum(1)
        has_eos = (np.isin(comp_h, self.stop_ids) & cmask_h).any(1)
        group_std = rewards.std(axis=1)
        out = {
            "reward_mean": float(rewards.mean()),
            "reward_std": float(group_std.mean()),
            "frac_zero_std": float((group_std == 0).mean()),
            "accuracy": float(scored.correct.mean()),
            "unparsed": scored.unparsed,
            "response_length": float(lengths.mean()),
            "response_clip_frac": float((~has_eos).mean()),
            "timing_s/rollout": t1 - t0,
            "timing_s/reward": t2 - t1,
            "timing_s/ref": t3 - t2,
        }
        for name, comp_r in scored.components.items():
            if len(scored.components) > 1:
                out[f"reward/{name}"] = float(comp_r.mean())
        return out

    # ------------------------------------------------------------------ state
    def state(self) -> dict:
        return {"params": self.params, "opt_state": self.opt_state, "ref_params": self.ref_params,
                "batch": self._full_width(self.batch)}

    def _set_state(self, st: dict) -> None:
        self.params = to_global(st["params"], self.param_sh)
        self.opt_state = to_global(st["opt_state"], self.opt_sh)
        self.ref_params = st["ref_params"]
        self.batch = self._trimmed(RolloutBatch(*st["batch"]))

    def log_header(self) -> dict:
        """The run log's header: ``{"_grpojax": {version, name, format, source, meta}}`` (grpojax.logs)."""
        c = self.cfg
        meta = {
            "trainer": "grpojax", "eta": c.optim.lr, "mu": c.optim.momentum if c.optim.name == "sgd" else None,
            "optimizer": c.optim.name, "k_ref": c.grpo.k_ref, "lag": "periodic", "group_size": c.grpo.group_size,
            "prompts_per_step": c.grpo.prompts_per_step, "beta": c.grpo.beta, "advantage": c.grpo.advantage,
            "aggregation": c.grpo.aggregation, "eval_every": c.eval.every, "seed": c.seed,
        }
        return jsonl_header(c.name, source="grpojax.grpo.train", meta=meta)

    def train(self, *, resume: bool = True, overwrite: bool = False, allow_config_change: bool = False,
              stop_after: int | None = None, show_progress: bool = True, warn=None,
              hooks: Sequence[StepHook] = ()) -> dict:
        """Run (or resume) the whole run; write ``summary.json`` and return the summary dict.

        The run folder is locked for the whole call. A folder holding a run with the same config is
        resumed from its newest valid checkpoint (corrupt newer ones are moved aside, with a warning);
        one holding a different run is refused (see :func:`plan_run`).

        Args:
          resume: continue a run found in ``out_dir`` (when ``False`` such a run is refused).
          overwrite: replace a run found in ``out_dir`` (only its own files are deleted).
          allow_config_change: resume a run whose config differs (the change is recorded in the summary
            and the old config is kept as ``config.before-step-N.yaml``).
          stop_after: stop (with a checkpoint) after this optimiser step, as if killed there.
          show_progress: show a rich progress bar.
          warn: called with each warning (default: one line on stderr).
          hooks: callables ``hook(step, metrics) -> stop reason or None`` (e.g. a
            :class:`grpojax.monitor.MonitorHook`), each called with a copy of every log record right after
            it is written to ``metrics.jsonl`` (step 0, the warm start's evaluation, included). When one
            returns a reason, the run saves a checkpoint at that step and stops: ``summary.json`` gets
            ``status: stopped`` and ``stopped_by_hook: <reason>`` (a later call resumes from there). An
            exception raised by a hook ends the run like any crash (resumable from the last checkpoint).

        ``summary.json``'s ``status``: ``running`` while the run (or a resumed run) is under way, ``done``
        at the last step, ``stopped`` (by ``stop_after`` or a hook), ``nonfinite`` (a NaN stop) or
        ``interrupted`` (Ctrl-C or an error such as a full disk stopped it; ``error`` says which). A run
        killed outright (``kill -9``) keeps ``running``.

        Raises:
          ValueError: ``hooks`` is not a sequence of callables, or a hook returned something other than a
            non-empty string or None.
          RunFolderError: the folder is in use by another process or holds a run that may not be used as asked.
          CheckpointError: every checkpoint of the run is corrupt, or they belong to a different model.
          NonFiniteLossError: the loss went NaN/inf (the last good state is checkpointed).
          StorageError: a checkpoint could not be written (full disk, read-only folder); the last good one
            is kept.
        """
        warn = _warn if warn is None else warn
        hooks = check_hooks(hooks)
        primary = is_primary()
        if not primary:  # process 0 alone warns, shows progress and writes the run folder's files
            warn, show_progress = (lambda message: None), False
        with contextlib.ExitStack() as stack:
            plan = failure = None
            if primary:
                try:
                    stack.enter_context(RunLock(self.out))
                    plan = plan_run(self.out, config_to_dict(self.cfg), resume=resume, overwrite=overwrite,
                                    allow_config_change=allow_config_change)
                    if plan.clear:
                        clear_run(self.out)
                except Exception as exc:  # noqa: BLE001 - re-raised below, once every process knows
                    failure = exc
            ok, fresh = broadcast_ints([failure is None, plan is not None and plan.fresh])
            if failure is not None:
                raise failure
            if not ok:
                raise RunFolderError(f"process 0 refused the run folder {self.out} (see its error)")
            if plan is None:
                plan = RunPlan(fresh=bool(fresh), clear=False, changes={})
            return self._train_locked(plan, stop_after=stop_after, show_progress=show_progress, warn=warn,
                                      hooks=hooks)

    def _write_config(self) -> None:
        """``config.yaml`` (atomically), unless it already holds this config (then it is left as it is)."""
        path = self.out / "config.yaml"
        if path.is_file():
            try:
                if read_config_dict(path) == config_to_dict(self.cfg):
                    return
            except ValueError:
                pass
        save_config(self.cfg, path)

    def _write_tokenizer(self) -> None:
        path = self.out / "tokenizer.json"
        tmp = self.out / f".tokenizer.json.{os.getpid()}.tmp"
        try:
            self.codec.save(tmp)
            if path.is_file() and path.read_bytes() == tmp.read_bytes():
                return
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def _old_summary(self, warn) -> dict:
        path = self.out / "summary.json"
        if not path.is_file():
            return {}
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            warn(f"{path} is unreadable ({exc}); it will be replaced")
            return {}
        return old if isinstance(old, dict) else {}

    def _warmstart_summary(self) -> dict:
        """The warm start's summary rebuilt from ``warmstart.jsonl`` (a run killed before writing its summary)."""
        path = self.out / "warmstart.jsonl"
        recs = [r for r in read_jsonl_metrics(path) if "sft_loss" in r] if path.is_file() else []
        if not recs:
            return {}
        return {"sft_loss_first": recs[0]["sft_loss"], "sft_loss_last": recs[-1]["sft_loss"],
                "truncated_targets": int(recs[-1].get("truncated_targets", 0))}

    def _train_locked(self, plan: RunPlan, *, stop_after, show_progress, warn, hooks: tuple = ()) -> dict:
        cfg = self.cfg
        primary = is_primary()
        log_path = self.out / "metrics.jsonl"
        old = {} if plan.fresh or not primary else self._old_summary(warn)
        store = CheckpointStore(self.out / "checkpoints", keep=cfg.checkpoint.keep)
        start, resumed = 0, False
        try:
            if not plan.fresh and store.all_steps():
                st, meta, skipped = store.restore_valid(self.state())
                self._set_state(st)
                start, resumed = int(meta["step"]), True
                for sk in skipped:
                    warn(f"checkpoint step {sk.step} skipped: {sk.reason}; moved to {sk.moved_to}; "
                         f"resuming from checkpoint step {start}")
            elif not plan.fresh:
                warn(f"{self.out} holds no checkpoint to resume from; starting the run over from step 0")
            if start > cfg.steps:
                raise InvalidValueError(f"steps={cfg.steps} is below the step {start} of the checkpoint to resume from; "
                                 f"expected steps >= {start}")
            if primary:
                if plan.changes:
                    write_text_atomic(self.out / f"config.before-step-{start}.yaml",
                                      (self.out / "config.yaml").read_text())
                self._write_config()
                self._write_tokenizer()
                if resumed:
                    truncate_jsonl(log_path, start)
                else:
                    for stale in (log_path, self.out / "warmstart.jsonl"):
                        stale.unlink(missing_ok=True)
        except BaseException:
            store.close()
            raise
        summary: dict[str, Any] = {"warmstart": {}}
        if resumed:
            summary = {k: v for k, v in old.items()
                       if k not in ("last_step", "status", "nonfinite_step", "last_good_checkpoint",
                                    "stopped_by_hook", "error")}
            # the log (cut back to the checkpoint) is the record of what happened, also for a killed run
            summary["evals"] = [[r["step"], r["eval_reward"]] for r in read_jsonl_metrics(log_path)
                                if "eval_reward" in r] if primary else []
            if primary and not summary.get("warmstart"):
                summary["warmstart"] = self._warmstart_summary()
            summary["resumed_from"] = start
            summary["resumes"] = list(old.get("resumes", [])) + [
                {"from_step": start, "config_changes": {k: [o, n] for k, (o, n) in plan.changes.items()}}
            ]
        evals: list = summary.setdefault("evals", [])
        summary["log"] = str(log_path)
        logger = JsonlLogger(log_path, header=self.log_header(), append=True,
                             tensorboard_dir=self.out / "tensorboard" if cfg.log.tensorboard else None) \
            if primary else NoLog()
        if resumed and plan.changes:  # the metrics log says from which step the config differs
            logger.record("resume", **summary["resumes"][-1])
        K = cfg.grpo.k_ref
        end = cfg.steps if stop_after is None else min(cfg.steps, stop_after)
        bar = make_progress(Console(stderr=True)) if show_progress else None
        last = start
        stop_reason = None
        try:
            if bar is not None:
                bar.start()
            if resumed and primary and start < end:  # a resumed run killed later must not still say "done"
                write_json(self.out, "summary.json", dict(summary, last_step=start, status="running"))
            if not resumed:
                summary["warmstart"] = self.warmstart(progress=bar)
                rec = self.evaluate(0)
                logger.write(0, rec)
                if rec:
                    evals.append((0, rec["eval_reward"]))
                stop_reason = hook_stop(hooks, 0, rec)
                if primary:
                    write_json(self.out, "summary.json", dict(summary, last_step=0, status="running"))
                if cfg.checkpoint.at_start:
                    store.save(0, self.state(), {"phase": "post_warmstart"})
            task = bar.add_task("GRPO", total=cfg.steps, completed=start) if bar else None
            for step in range(start + 1, end + 1):
                if stop_reason is not None:
                    break
                t0 = time.perf_counter()
                rec: dict[str, Any] = {}
                due, cycle = rollout_due(step, K)
                if due:
                    rec.update(self.rollout((step - 1) // K))
                t1 = time.perf_counter()
                self.params, self.opt_state, m = self.update(self.params, self.opt_state, self.rest, self.batch,
                                                             jnp.asarray(due))
                terms, grad_norm, finite = jax.tree.map(to_host, (m.terms, m.grad_norm, m.finite))
                finite = bool(finite)
                rec.update({
                    "loss": float(terms.loss), "kl": float(terms.kl) if self._use_ref else math.nan,
                    "entropy": float(terms.entropy),
                    "grad_norm": float(grad_norm), "lr": float(self.schedule(step - 1)),
                    "is_ratio_mean": float(terms.is_ratio_mean), "is_ratio_max": float(terms.is_ratio_max),
                    "clip_frac": float(terms.clip_frac), "refresh_lag": cycle,
                    "timing_s/update": time.perf_counter() - t1,
                })
                if not finite:
                    logger.write(step, rec)
                    # the state is still the one after step - 1 (a non-finite update is not applied)
                    if store.is_valid(step - 1):
                        path = store.path(step - 1)
                    else:
                        path = store.save(step - 1, self.state(), {"phase": "nonfinite", "bad_step": step})
                    summary.update({"last_step": step - 1, "status": "nonfinite", "nonfinite_step": step,
                                    "last_good_checkpoint": str(path)})
                    if primary:
                        write_json(self.out, "summary.json", summary)
                    raise NonFiniteLossError(step, path)
                if cfg.eval.every and (step % cfg.eval.every == 0 or step == cfg.steps):
                    ev = self.evaluate(step)
                    rec.update(ev)
                    if ev:
                        evals.append((step, ev["eval_reward"]))
                rec["timing_s/step"] = time.perf_counter() - t0
                logger.write(step, rec)
                last = step
                stop_reason = hook_stop(hooks, step, rec)
                if stop_reason is not None:  # the checkpoint at this step is saved below
                    if task is not None:
                        bar.update(task, completed=step)
                    break
                if cfg.checkpoint.every and step % cfg.checkpoint.every == 0 and step != end:
                    store.save(step, self.state(), {"phase": "grpo"})
                if task is not None:
                    bar.update(task, completed=step,
                               description=f"GRPO reward={rec.get('reward_mean', math.nan):.2f}")
            if last > start or not store.is_valid(last):
                phase = "stopped_by_hook" if stop_reason is not None else "grpo" if last < cfg.steps else "done"
                store.save(last, self.state(), {"phase": phase})
        except NonFiniteLossError:
            raise
        except BaseException as exc:  # Ctrl-C, a full disk, any error: the run did not finish
            if primary:
                with contextlib.suppress(Exception):  # best effort: the disk may be the reason
                    reason = next((ln for ln in str(exc).splitlines() if ln.strip()), None)
                    write_json(self.out, "summary.json", dict(summary, last_step=last, status="interrupted",
                                                              error=type(exc).__name__ + (f": {reason}" if reason else "")))
            raise
        finally:
            if bar is not None:
                bar.stop()
            logger.close()
            store.close()
        summary.update({"last_step": last, "status": "done" if last >= cfg.steps else "stopped"})
        if stop_reason is not None:
            summary["stopped_by_hook"] = stop_reason
        if primary:
            write_json(self.out, "summary.json", summary)
        return summary


def train(cfg: TrainConfig, out_dir: str | pathlib.Path, *, resume: bool = True, overwrite: bool = False,
          allow_config_change: bool = False, stop_after: int | None = None, show_progress: bool = True,
          devices=None, warn=None, hooks: Sequence[StepHook] = ()) -> dict:
    """Build a :class:`GRPOTrainer` and run it (see :meth:`GRPOTrainer.train`; ``hooks`` can stop it early)."""
    hooks = check_hooks(hooks)
    trainer = GRPOTrainer(cfg, out_dir, devices=devices)
    return trainer.train(resume=resume, overwrite=overwrite, allow_config_change=allow_config_change,
                         stop_after=stop_after, show_progress=show_progress, warn=warn, hooks=hooks)
