"""Jitted pure functions of the trainer: teacher-forced log-probs, the GRPO update, the SFT update.

All operate on the layout ``[prompt (P, left-padded) | completion (N, right-padded)]``: the
completion token ``t`` is predicted by the logits at column ``P - 1 + t``. Parameters are an
``nnx.State`` (a pytree of arrays) merged with the model's graph inside the jit boundary, so the
optimiser, checkpointing and sharding all see plain pytrees.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax import Array

from grpojax.grpo._loss import LossTerms, grpo_loss, token_logprobs

__all__ = ["RolloutBatch", "completion_logprobs", "make_grpo_update", "make_logprob_fn", "make_sft_update"]


class RolloutBatch(NamedTuple):
    """One rollout batch of ``S = B * G`` sequences.

    Attributes:
      prompt: ``(S, P)`` int32 left-padded prompt tokens.
      prompt_mask: ``(S, P)`` bool.
      completion: ``(S, N)`` int32 sampled tokens.
      completion_mask: ``(S, N)`` bool (up to and including EOS).
      old_logp: ``(S, N)`` float32 behaviour (sampling) log-probs.
      ref_logp: ``(S, N)`` float32 reference log-probs (zeros when ``beta == 0``).
      adv: ``(S,)`` float32 advantages.
    """

    prompt: Array
    prompt_mask: Array
    completion: Array
    completion_mask: Array
    old_logp: Array
    ref_logp: Array
    adv: Array


def completion_logprobs(model, prompt, prompt_mask, completion) -> tuple[Array, Array]:
    """Teacher-forced ``(logp, entropy)`` of the completion tokens, each ``(S, N)`` float32.

    Only the ``N`` positions that predict completion tokens go through the final norm and the output
    projection (the prompt's logits are never formed): the same values as slicing the full logits.
    """
    P = prompt.shape[1]
    N = completion.shape[1]
    tokens = jnp.concatenate([prompt, completion], axis=1).astype(jnp.int32)
    attn = jnp.concatenate([prompt_mask, jnp.ones(completion.shape, jnp.bool_)], axis=1)
    positions = jnp.maximum(jnp.cumsum(attn.astype(jnp.int32), axis=1) - 1, 0).astype(jnp.int32)
    h = model.hidden_states(tokens, positions, attn)
    return token_logprobs(model.logits_from_hidden(h[:, P - 1 : P - 1 + N]), completion)


def make_logprob_fn(graphdef):
    """Jitted ``(params, rest, prompt, prompt_mask, completion) -> logp (S, N)``."""

    @jax.jit
    def fn(params, rest, prompt, prompt_mask, completion):
        model = nnx.merge(graphdef, params, rest)
        return completion_logprobs(model, prompt, prompt_mask, completion)[0]

    return fn


class UpdateMetrics(NamedTuple):
    terms: LossTerms
    grad_norm: Array
    finite: Array


def make_grpo_update(graphdef, tx: optax.GradientTransformation, *, beta, eps_low, eps_high, aggregation,
                     use_ref=None, param_sharding=None, opt_sharding=None):
    """The jitted GRPO optimiser step ``(params, opt_state, rest, batch, fresh) -> (params, opt_state, metrics)``.

    ``rest`` is the model's non-parameter state (``nnx.split(model, nnx.Param, ...)``).

    ``fresh`` (traced bool) marks the first step after a rollout: the policy equals the behaviour
    policy, so the behaviour log-probs are taken as ``stop_gradient(logp)`` (ratio exactly 1; the
    sampler's log-probs agree only to rounding). Later steps use ``batch.old_logp``.

    A non-finite loss or gradient norm leaves ``params`` and ``opt_state`` unchanged and reports
    ``finite = False`` (the host stops the run and checkpoints the last good state). ``params`` and
    ``opt_state`` are donated. ``use_ref`` (default ``beta > 0``) feeds ``batch.ref_logp`` to the
    loss: the k3 KL is then reported (and enters the loss only with weight ``beta``).
    """
    use_ref = beta > 0 if use_ref is None else bool(use_ref)

    def loss_fn(params, rest, batch: RolloutBatch, fresh):
        model = nnx.merge(graphdef, params, rest)
        logp, ent = completion_logprobs(model, batch.prompt, batch.prompt_mask, batch.completion)
        old = jnp.where(fresh, jax.lax.stop_gradient(logp), batch.old_logp)
        terms = grpo_loss(
            logp, ent, old, batch.ref_logp if use_ref else None, batch.adv, batch.completion_mask,
            beta=beta, eps_low=eps_low, eps_high=eps_high, aggregation=aggregation,
        )
        return terms.loss, terms

    def apply(operands):
        grads, opt_state, params = operands
        # optax is not clean under strict dtype promotion (adam's bias correction raises a Python float
        # to the int32 step count): only the optimiser call runs under standard promotion.
        with jax.numpy_dtype_promotion("standard"):
            updates, new_opt = tx.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
        # the optimiser may hand back other dtypes / weak types (a Python-float schedule): cast to the state's
        return (jax.tree.map(lambda new, old: new.astype(old.dtype), new_params, params),
                jax.tree.map(lambda new, old: jnp.asarray(new, old.dtype), new_opt, opt_state))

    def keep(operands):
        _, opt_state, params = operands
        return params, opt_state

    def step(params, opt_state, rest, batch: RolloutBatch, fresh):
        (_, terms), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, rest, batch, fresh)
        gnorm = optax.tree.norm(grads)
        finite = jnp.isfinite(terms.loss) & jnp.isfinite(gnorm)
        # a branch, not a select over every parameter and moment: the guard costs no pass over the state
        new_params, new_opt = jax.lax.cond(finite, apply, keep, (grads, opt_state, params))
        return new_params, new_opt, UpdateMetrics(terms, gnorm, finite)

    out_sh = None if param_sharding is None else (param_sharding, opt_sharding, None)
    return jax.jit(step, donate_argnums=(0, 1), out_shardings=out_sh)


def make_sft_update(graphdef, tx: optax.GradientTransformation, *, param_sharding=None, opt_sharding=None):
    """Jitted supervised step ``(params, opt_state, rest, prompt, prompt_mask, target, target_mask)``
    on ``[prompt | target]``: mean token NLL of the target tokens."""

    def loss_fn(params, rest, prompt, prompt_mask, target, target_mask):
        model = nnx.merge(graphdef, params, rest)
        logp, _ = completion_logprobs(model, prompt, prompt_mask, target)
        m = target_mask.astype(jnp.float32)
        return -(logp * m).sum() / jnp.maximum(m.sum(), 1.0)

    def step(params, opt_state, rest, prompt, prompt_mask, target, target_mask):
        loss, grads = jax.value_and_grad(loss_fn)(params, rest, prompt, prompt_mask, target, target_mask)
        # optax under standard promotion only (see make_grpo_update)
        with jax.numpy_dtype_promotion("standard"):
            updates, opt_state = tx.update(grads, opt_state, params)
            new_params = optax.apply_updates(params, updates)
        return new_params, opt_state, loss

    out_sh = None if param_sharding is None else (param_sharding, opt_sharding, None)
    return jax.jit(step, donate_argnums=(0, 1), out_shardings=out_sh)
