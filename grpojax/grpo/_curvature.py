"""Curvature of a GRPO update on the user's own checkpoint, prompts and reward: K_0, K_d, σ² and the pass rate.

The update measured is the expected GRPO step at the loaded parameters θ, with completions drawn from the
behaviour policy θ_b (the same parameters at the start: the plateau of the model, θ = θ_b):

    u(θ, θ_b) = ∇_θ Σ_i c_i w_i(θ_b) ℓ_i(θ),    c_i = A_i / T,   w_i(θ_b) = exp(ℓ_i(θ_b) − ℓ_i(θ_start)),

where ℓ_i is the sequence log-probability of completion i under ``softmax(logits / temperature)``, A_i its
group advantage (held fixed: its dependence on θ_b multiplies the mean update, ≈ 0 at a plateau) and T the
number of completion tokens (token-mean aggregation). The weight w_i equals 1 at θ_b = θ_start; its
derivative is the score function of the sampling distribution, so the θ_b-dependence of the sample sum is the
score-function estimate of how the expected update moves with the stale policy that draws the samples.

Then K_0 = −∂u/∂θ (a Hessian: symmetric) and K_d = −∂u/∂θ_b = −Σ_i c_i ∇ℓ_i ∇ℓ_iᵀ (symmetric at θ = θ_b),
measured by :func:`grpojax.grpo._stiffness.stiffness` (Lanczos on Jacobian-vector products). The numbers the
oscillator model takes are the Rayleigh quotients along the stiffest direction v of K_0 + K_d.

The direction may be searched on one batch of prompts and the quotients measured on another
(``holdout_prompts``): a direction picked as the stiffest of a few completions is partly stiff by chance for
those completions, and fresh prompts measure the curvature along it without that selection, with as many
prompts as the interval needs (only forward-mode derivatives along one direction: the memory of a forward
pass, a chunk at a time).

Intervals: along that fixed direction, both quotients are sums over completions (vᵀK_0v = −Σ c_i ∂²_v ℓ_i,
vᵀK_d v = −Σ c_i (∂_v ℓ_i)²), so they are resampled over prompts (a percentile bootstrap of the ratio of the
per-prompt sums to the per-prompt token counts). The interval covers the sampling of prompts and completions
at that direction; it does not cover the direction's own uncertainty, and the Lanczos (Ritz) residual is
reported beside it. The gradient noise σ² is the per-completion variance of the update along v (the model's
``noise``: a group of G completions carries σ²/G), and the pass rate the fraction of completions with a
positive reward; both are bootstrapped over prompts the same way.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.flatten_util import ravel_pytree

from grpojax._curvature_file import SCHEMA_VERSION
from grpojax._errors import InvalidValueError
from grpojax.grpo._advantages import ADVANTAGE_MODES, group_advantages
from grpojax.grpo._data import Problem, chat_prompt_ids, format_prompt, sample_batch
from grpojax.grpo._logprobs import completion_logprobs
from grpojax.grpo._rewards import REWARD_FUNCTIONS
from grpojax.grpo._stiffness import stiffness
from grpojax.lm import generate

__all__ = ["DIRECTIONS", "SCHEMA_VERSION", "Curvature", "Estimate", "config_task", "load_reward", "measure_curvature"]

DIRECTIONS = ("stiffest", "update")
"""Directions the quotients are measured along: the stiffest direction of K_0 + K_d (Lanczos), or the mean update."""

_CHUNK_PROMPTS = 4  # prompts per derivative batch outside Lanczos (forward-mode derivatives, mean-update gradient)

INTERVAL_METHOD = ("percentile bootstrap over the measured prompts of the Rayleigh quotients along the measured "
                   "direction (direction held fixed; the Lanczos Ritz residual is reported separately)")


class Estimate(NamedTuple):
    """A measured value with its interval: ``value``, ``low``, ``high`` at ``level``."""

    value: float
    low: float
    high: float
    level: float

    def to_dict(self) -> dict:
        return {"value": self.value, "interval": [self.low, self.high], "level": self.level}


class Curvature(NamedTuple):
    """What :func:`measure_curvature` measured (see the module notes for the definitions).

    Attributes:
      k_instant: K_0 along the measured direction (the stiffest direction of K_0 + K_d, or the mean update),
        with its interval.
      k_stale: K_d along the same direction, with its interval.
      k_total: K_0 + K_d along the same direction, with its own interval (the two resampled together).
      k_instant_leading, k_stale_leading, total: leading eigenvalues of K_0, K_d and K_0 + K_d (Lanczos;
        None along the mean update).
      ritz_residual: relative Ritz residuals ``{"total", "k_instant", "k_stale"}``; ``converged`` all ≤ rtol
        (``{}`` and None along the mean update).
      sigma2: per-completion gradient noise variance along the measured direction (σ²; σ²/G per group).
      pass_rate: fraction of completions with a positive reward; ``mean_reward`` the mean reward.
      group_size: G; ``n_prompts``: prompts measured; ``n_params``: parameters.
      settings: the settings measured with; ``timings``: seconds per phase.
      samples: the Lanczos batch (``prompt``, ``prompt_mask``, ``completion``, ``completion_mask``,
        ``rewards``, ``advantages``; NumPy arrays, one row per completion), the ``direction`` (the flattened
        unit vector v) and the ``holdout`` batch (same keys; None without held-out prompts); not written to
        the JSON.
    """

    k_instant: Estimate
    k_stale: Estimate
    k_instant_leading: float | None
    k_stale_leading: float | None
    total: float | None
    ritz_residual: dict
    converged: bool | None
    sigma2: Estimate
    pass_rate: Estimate
    mean_reward: float
    group_size: int
    n_prompts: int
    n_params: int
    settings: dict
    timings: dict
    samples: dict
    k_total: Estimate | None = None

    def to_dict(self, model: str | None = None) -> dict:
        """The ``curvature.json`` document (``model``: how the checkpoint is named there)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "model": {"path": model, "n_params": self.n_params},
            "settings": self.settings,
            "K_0": {**self.k_instant.to_dict(), "leading_eigenvalue": self.k_instant_leading,
                    "ritz_residual": self.ritz_residual.get("k_instant")},
            "K_d": {**self.k_stale.to_dict(), "leading_eigenvalue": self.k_stale_leading,
                    "ritz_residual": self.ritz_residual.get("k_stale")},
            "K_total": {**(self.k_total.to_dict() if self.k_total is not None else {}),
                        "leading_eigenvalue": self.total, "ritz_residual": self.ritz_residual.get("total")},
            "converged": self.converged,
            "sigma2": {**self.sigma2.to_dict(), "per_group": self.sigma2.value / self.group_size,
                       "group_size": self.group_size},
            "pass_rate": self.pass_rate.to_dict(),
            "mean_reward": self.mean_reward,
            "n_prompts": self.n_prompts,
            "interval_method": INTERVAL_METHOD,
            "timings": self.timings,
        }

    def __str__(self) -> str:
        def fmt(e: Estimate) -> str:
            return f"{e.value:.4g} [{e.low:.4g}, {e.high:.4g}]"

        lvl = round(100 * self.k_stale.level)
        along_update = self.settings.get("direction") == "update"

        def leading(x):
            return "" if x is None else f"; leading eigenvalue {x:.4g}"

        where = (f"along the mean update of the {self.settings['prompts_per_step']} direction prompts (no Lanczos)"
                 if along_update else
                 f"Lanczos {'converged' if self.converged else 'NOT converged'} (Ritz residuals "
                 + ", ".join(f"{k} {v:.2g}" for k, v in self.ritz_residual.items()) + ")")
        return "\n".join([
            f"K_d   {fmt(self.k_stale)}  ({lvl}% interval{leading(self.k_stale_leading)})",
            f"K_0   {fmt(self.k_instant)}  "
            f"({leading(self.k_instant_leading).removeprefix('; ') or 'along the same direction'})",
            *([f"K_0 + K_d  {fmt(self.k_total)}"] if self.k_total is not None else []),
            f"σ²    {fmt(self.sigma2)}  (σ²/G = {self.sigma2.value / self.group_size:.4g} at G = {self.group_size})",
            f"pass  {fmt(self.pass_rate)}  over {self.n_prompts} prompts × {self.group_size}"
            + (f" (held out from the {self.settings['prompts_per_step']} prompts the direction was found on)"
               if self.settings.get("holdout_prompts") else ""),
            where,
        ])


def load_reward(spec: str) -> Callable:
    """A reward function from a built-in name (:data:`REWARD_FUNCTIONS`) or a ``module:function`` import path.

    The function is called as ``fn(completions: list[str], answers: list[str]) -> (n,) rewards``. A module of
    the current folder is found too (``examples.curvature_reward:closeness`` from the repository root).
    """
    if not isinstance(spec, str) or not spec:
        raise InvalidValueError(f"reward {spec!r}; expected a built-in name {sorted(REWARD_FUNCTIONS)} or module:function")
    if spec in REWARD_FUNCTIONS:
        return REWARD_FUNCTIONS[spec]
    if ":" not in spec:
        raise InvalidValueError(f"reward {spec!r}; expected a built-in name {sorted(REWARD_FUNCTIONS)} or a "
                                "module:function import path")
    mod_name, _, fn_name = spec.partition(":")
    import os  # noqa: PLC0415
    import sys  # noqa: PLC0415

    if os.getcwd() not in sys.path and "" not in sys.path:  # a module of the folder the command runs in
        sys.path.append(os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise InvalidValueError(f"reward {spec!r}: cannot import module {mod_name!r} ({exc})") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise InvalidValueError(f"reward {spec!r}: module {mod_name!r} has no function {fn_name!r}")
    return fn


def config_task(cfg, tokenizer) -> dict:
    """The task of a training configuration as :func:`measure_curvature` keywords, so that the curvature is
    measured on what the run optimises: its training prompts (``problems``) and their ``template``, ``chat`` and
    ``system_prompt``, its ``reward`` (the weighted named rewards with the run's answer parsing), its
    ``group_size``, sampling ``temperature`` and ``max_new_tokens``, and its ``advantage``.

    Args:
      cfg: a :class:`grpojax.grpo.TrainConfig` (``grpojax.grpo.load_config(name_or_path)``; a run folder's
        ``config.yaml`` is one).
      tokenizer: the checkpoint's tokenizer (whether the chat template is used depends on it).
    """
    from grpojax.grpo._build import build_data, use_chat  # noqa: PLC0415
    from grpojax.grpo._rewards import score_completions  # noqa: PLC0415

    train, _ = build_data(cfg)
    weights, options = dict(cfg.rewards.weights), cfg.rewards.parse

    def reward(completions, answers):
        return score_completions(completions, answers, weights, options=options).rewards

    reward.__name__ = " + ".join(f"{w:g}·{name}" for name, w in weights.items())
    return {"problems": train, "reward": reward, "group_size": int(cfg.grpo.group_size),
            "temperature": float(cfg.sampling.temperature), "max_new_tokens": int(cfg.sampling.max_new_tokens),
            "template": cfg.data.prompt_template, "chat": use_chat(cfg, tokenizer),
            "system_prompt": cfg.data.system_prompt, "advantage": cfg.grpo.advantage}


def _rewards(fn: Callable, completions: list[str], answers: list[str]) -> np.ndarray:
    out = np.asarray(fn(completions, answers), np.float64).reshape(-1)
    if out.shape != (len(completions),):
        raise InvalidValueError(f"the reward function returned {out.size} values for {len(completions)} completions; "
                                "expected one reward per completion")
    if not np.all(np.isfinite(out)):
        raise InvalidValueError("the reward function returned non-finite rewards; expected finite numbers")
    return out


def _prompt_ids(problems: Sequence[Problem], tokenizer, chat: bool | None, template: str,
                system_prompt: str | None) -> list[list[int]]:
    use_chat = tokenizer.chat_template is not None if chat is None else bool(chat)
    if use_chat and tokenizer.chat_template is None:
        raise InvalidValueError("chat=True but the tokenizer has no chat template; expected chat=False")
    if use_chat:
        return [chat_prompt_ids(p.question, tokenizer, system_prompt=system_prompt, template=template) for p in problems]
    return [tokenizer.encode(format_prompt(p.question, template if "\n" in template else template + "\n"))
            for p in problems]


def _bootstrap(stat: Callable[[np.ndarray], float], n: int, *, n_boot: int, level: float, seed: int) -> tuple:
    rng = np.random.default_rng([seed, 0x6375])
    draws = np.array([stat(rng.integers(0, n, n)) for _ in range(n_boot)])
    a = (1 - level) / 2
    return float(np.quantile(draws, a)), float(np.quantile(draws, 1 - a))


def measure_curvature(model, tokenizer, problems: Sequence[Problem], reward: Callable | str, *, group_size: int,
                      prompts_per_step: int | None = None, holdout_prompts: int = 0, direction: str = "stiffest",
                      temperature: float = 1.0, max_new_tokens: int = 64,
                      iters: int = 20, rtol: float = 0.05, advantage: str = "grpo", chat: bool | None = None,
                      template: str = "{question}", system_prompt: str | None = None, level: float = 0.9,
                      n_boot: int = 2000, seed: int = 0, progress: Callable[..., None] | None = None) -> Curvature:
    """K_0, K_d, σ² and the pass rate of a GRPO update of ``model`` on ``problems`` with ``reward``.

    Args:
      model: a :class:`grpojax.lm.CausalLM` (e.g. ``grpojax.lm.load_pretrained(folder)``).
      tokenizer: its :class:`grpojax.lm.Tokenizer`.
      problems: the prompts (:func:`grpojax.grpo._data.load_jsonl`); ``prompts_per_step`` of them are drawn
        (default all) for the Lanczos search of the stiffest direction.
      holdout_prompts: further prompts, drawn apart from those, on which K_0, K_d, σ² and the pass rate are
        measured along the direction found (sampled and differentiated 4 prompts at a time); 0 (default)
        measures them on the direction's own prompts, which selection makes look stiffer and more precise
        than they are (see the module notes).
      direction: ``"stiffest"`` (default): the quotients along the stiffest direction of K_0 + K_d (Lanczos,
        ``iters`` steps); ``"update"``: along the mean GRPO update of the ``prompts_per_step`` prompts (one
        gradient, no Lanczos; the leading eigenvalues are then not measured and are None).
      reward: ``fn(completions, answers) -> rewards``, or a name / ``module:function`` (:func:`load_reward`).
      group_size: G completions per prompt (>= 2).
      temperature, max_new_tokens: sampling settings (the policy is ``softmax(logits / temperature)``).
      iters, rtol: Lanczos dimension and Ritz-residual tolerance.
      advantage: the group advantage (``grpo``, ``dr_grpo``, ...).
      chat, template, system_prompt: how a question becomes a prompt (chat template when the tokenizer has one).
      level, n_boot: interval level and bootstrap draws.
      seed: sampling, prompt draw, Lanczos start and bootstrap seed.
      progress: called as ``progress(phase)`` when each phase starts (``sampling``, ``scoring``, ``Lanczos``
        or ``update``, ``held-out prompts``, ``intervals``) and as ``progress(phase, fraction)`` as the
        held-out phase advances.

    Returns:
      :class:`Curvature`.
    """
    if not (isinstance(group_size, (int, np.integer)) and group_size >= 2):
        raise InvalidValueError(f"group_size={group_size!r}; expected an integer >= 2 (completions per prompt)")
    if not (isinstance(max_new_tokens, (int, np.integer)) and max_new_tokens >= 1):
        raise InvalidValueError(f"max_new_tokens={max_new_tokens!r}; expected an integer >= 1")
    if not (np.isfinite(temperature) and temperature > 0):
        raise InvalidValueError(f"temperature={temperature!r}; expected a finite number > 0")
    if not 0 < level < 1:
        raise InvalidValueError(f"level={level!r}; expected 0 < level < 1")
    if advantage not in ADVANTAGE_MODES:
        raise InvalidValueError(f"advantage={advantage!r}; expected one of {ADVANTAGE_MODES}")
    if direction not in DIRECTIONS:
        raise InvalidValueError(f"direction={direction!r}; expected one of {DIRECTIONS}")
    if not problems:
        raise InvalidValueError("no problems; expected at least one prompt")
    n = len(problems) if prompts_per_step is None else prompts_per_step
    if not (isinstance(n, (int, np.integer)) and 1 <= n <= len(problems)):
        raise InvalidValueError(f"prompts_per_step={prompts_per_step!r}; expected an integer in [1, {len(problems)}] "
                                "(the number of prompts given)")
    m = 0 if holdout_prompts is None else holdout_prompts
    if not (isinstance(m, (int, np.integer)) and 0 <= m <= len(problems) - n):
        raise InvalidValueError(f"holdout_prompts={holdout_prompts!r}; expected an integer in [0, {len(problems) - n}] "
                                f"(prompts left after the {n} Lanczos prompts)")
    reward_fn = load_reward(reward) if isinstance(reward, str) else reward
    say = progress or (lambda *_: None)
    timings: dict[str, float] = {}
    t_all = time.perf_counter()
    drawn = list(problems) if n + m == len(problems) else sample_batch(problems, n + m, seed=seed, index=0)
    chosen, held = drawn[:n], drawn[n:]
    G = int(group_size)
    key = jax.random.key(seed)

    def sample(prompt, pmask, key):
        out = generate(model, prompt, pmask, key=key, max_new_tokens=int(max_new_tokens),
                       temperature=float(temperature), eos_id=list(tokenizer.eos_ids), pad_id=tokenizer.pad_id)
        return np.asarray(out.completion), np.asarray(out.completion_mask)

    def score(completion, cmask, problems_: Sequence[Problem]):
        texts = tokenizer.batch_decode(completion, mask=cmask)
        answers = [p.answer for p in problems_ for _ in range(G)]
        r = _rewards(reward_fn, texts, answers)
        adv = np.asarray(group_advantages(jnp.asarray(r.reshape(-1, G), jnp.float32), advantage)).reshape(-1)
        return r, adv

    say("sampling")
    t = time.perf_counter()
    prompt, pmask = tokenizer.batch_encode(
        [r for r in _prompt_ids(chosen, tokenizer, chat, template, system_prompt) for _ in range(G)])
    completion, cmask = sample(prompt, pmask, key)
    timings["sample_s"] = time.perf_counter() - t

    say("scoring")
    t = time.perf_counter()
    r, adv = score(completion, cmask, chosen)
    timings["reward_s"] = time.perf_counter() - t

    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    params = jax.tree.map(lambda x: x.astype(jnp.float32), params)
    ntok = np.maximum(cmask.sum(1), 0).astype(np.float64)
    flat, unravel = ravel_pytree(params)
    chunk = min(n, _CHUNK_PROMPTS)  # prompts differentiated at a time outside Lanczos

    def seq_logp(p, batch):
        prompt_j, pmask_j, comp_j, cm = batch
        lp, _ = completion_logprobs(nnx.merge(graphdef, p, rest), prompt_j, pmask_j, comp_j,
                                    temperature=float(temperature))
        return (lp.astype(jnp.float32) * cm).sum(-1)

    def rows(lo, hi, *arrays):  # the batch of prompts lo..hi (G rows each), as JAX arrays
        sl = slice(lo * G, hi * G)
        return tuple(jnp.asarray(a[sl], jnp.float32 if a.dtype == np.float32 else None) for a in arrays)

    if direction == "stiffest":
        say("Lanczos")
        t = time.perf_counter()
        batch = (jnp.asarray(prompt), jnp.asarray(pmask), jnp.asarray(completion), jnp.asarray(cmask, jnp.float32))
        c = jnp.asarray(adv / max(ntok.sum(), 1.0), jnp.float32)
        ell0 = jax.lax.stop_gradient(jax.jit(seq_logp)(params, batch))

        def update(p, pb):
            w = jnp.exp(seq_logp(pb, batch) - ell0)
            return jax.grad(lambda q: jnp.sum(c * w * seq_logp(q, batch)))(p)

        st = stiffness(update, params, iters=int(iters), rtol=float(rtol), symmetric=True, seed=seed)
        timings["lanczos_s"] = time.perf_counter() - t
        v_flat = np.asarray(st.total_estimate.vector)
        leading = (st.instant.value, st.stale.value, st.total)
        residual = {"total": st.total_estimate.residual, "k_instant": st.instant.residual,
                    "k_stale": st.stale.residual}
        converged = st.converged
    else:  # the mean update u = ∇ Σ c_i ℓ_i itself, summed over chunks of prompts
        say("update")
        t = time.perf_counter()
        grad = jax.jit(jax.grad(lambda p, batch, c: jnp.sum(c * seq_logp(p, batch))))
        cw = (adv / max(ntok.sum(), 1.0)).astype(np.float32)
        u = np.zeros(flat.shape, np.float64)
        for lo in range(0, n, chunk):
            hi = min(lo + chunk, n)
            b = (*rows(lo, hi, prompt, pmask, completion), jnp.asarray(cmask[lo * G:hi * G], jnp.float32))
            u += np.asarray(ravel_pytree(grad(params, b, jnp.asarray(cw[lo * G:hi * G])))[0], np.float64)
        norm = float(np.linalg.norm(u))
        if not norm > 0:
            raise InvalidValueError("the mean update is 0 on the direction prompts (every group's completions got "
                                    "the same reward); expected a reward that separates completions: use more "
                                    "prompts, a larger group size or a reward with partial credit")
        v_flat = u / norm
        timings["update_s"] = time.perf_counter() - t
        leading, residual, converged = (None, None, None), {}, None

    v = unravel(jnp.asarray(v_flat, flat.dtype))

    @jax.jit
    def derivs(p0, d, batch):
        def along(s):
            return seq_logp(jax.tree.map(lambda x, y: x + s * y, p0, d), batch)

        # one forward-over-forward pass: its primal output is (ℓ, ∂_v ℓ), its tangent (∂_v ℓ, ∂²_v ℓ)
        (_, d1), (_, d2) = jax.jvp(lambda s: jax.jvp(along, (s,), (1.0,)), (0.0,), (1.0,))
        return d1, d2

    if m:  # the quotients on prompts the direction was not found on, a chunk at a time
        say("held-out prompts")
        t = time.perf_counter()
        hp, hm = tokenizer.batch_encode(  # one padded length: one compilation for every chunk
            [r for r in _prompt_ids(held, tokenizer, chat, template, system_prompt) for _ in range(G)])
        parts = []
        for i, lo in enumerate(range(0, m, chunk)):
            sl = slice(lo * G, min(lo + chunk, m) * G)
            comp_h, cm_h = sample(hp[sl], hm[sl], jax.random.fold_in(key, i + 1))
            r_h, adv_h = score(comp_h, cm_h, held[lo:lo + chunk])
            hb = (jnp.asarray(hp[sl]), jnp.asarray(hm[sl]), jnp.asarray(comp_h), jnp.asarray(cm_h, jnp.float32))
            d1_h, d2_h = derivs(params, v, hb)
            parts.append((r_h, adv_h, np.maximum(cm_h.sum(1), 0).astype(np.float64), np.asarray(d1_h, np.float64),
                          np.asarray(d2_h, np.float64), comp_h, cm_h))
            say("held-out prompts", min(lo + chunk, m) / m)
        r_m, adv_m, ntok_m, d1, d2, comp_m, cm_m = (np.concatenate(x) for x in zip(*parts))
        holdout = {"prompt": np.asarray(hp), "prompt_mask": np.asarray(hm), "completion": comp_m,
                   "completion_mask": cm_m, "rewards": r_m, "advantages": adv_m}
        timings["holdout_s"] = time.perf_counter() - t
    else:
        r_m, adv_m, ntok_m = r, adv, ntok
        got = [derivs(params, v, (*rows(lo, min(lo + chunk, n), prompt, pmask, completion),
                                  jnp.asarray(cmask[lo * G:min(lo + chunk, n) * G], jnp.float32)))
               for lo in range(0, n, chunk)]
        d1, d2 = (np.concatenate([np.asarray(g[k], np.float64) for g in got]) for k in (0, 1))

    say("intervals")
    t = time.perf_counter()
    nm = m or n  # prompts the quotients are measured on
    a = adv_m.astype(np.float64)
    k0_p = (-a * d2).reshape(nm, G).sum(1)  # per-prompt numerators; K = Σ numerators / Σ tokens
    kd_p = (-a * d1**2).reshape(nm, G).sum(1)
    tok_p = ntok_m.reshape(nm, G).sum(1)
    S = nm * G
    z = (S * a * d1 / max(ntok_m.sum(), 1.0)).reshape(nm, G)  # per-completion update along v (mean over S = u·v)
    passed = (r_m > 0).astype(np.float64).reshape(nm, G)

    def ratio(num):
        return lambda idx: float(num[idx].sum() / max(tok_p[idx].sum(), 1.0))

    def var(idx):
        return float(np.var(z[idx].reshape(-1), ddof=1))

    boot = dict(n_boot=int(n_boot), level=float(level), seed=seed)
    everyone = np.arange(nm)
    k0 = Estimate(ratio(k0_p)(everyone), *_bootstrap(ratio(k0_p), nm, **boot), float(level))
    kd = Estimate(ratio(kd_p)(everyone), *_bootstrap(ratio(kd_p), nm, **boot), float(level))
    kt = Estimate(ratio(k0_p + kd_p)(everyone), *_bootstrap(ratio(k0_p + kd_p), nm, **boot), float(level))
    s2 = Estimate(var(everyone), *_bootstrap(var, nm, **boot), float(level))
    pr = Estimate(float(passed.mean()), *_bootstrap(lambda idx: float(passed[idx].mean()), nm, **boot), float(level))
    timings["intervals_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t_all
    settings = {"group_size": G, "prompts_per_step": int(n), "holdout_prompts": int(m), "direction": direction,
                "temperature": float(temperature), "max_new_tokens": int(max_new_tokens), "iters": int(iters),
                "rtol": float(rtol), "advantage": advantage, "level": float(level), "n_boot": int(n_boot), "seed": int(seed),
                "reward": reward if isinstance(reward, str) else getattr(reward, "__name__", repr(reward))}
    return Curvature(k0, kd, *leading, residual, converged, s2, pr,
                     float(r_m.mean()), G, int(nm), int(flat.size), settings, timings,
                     {"prompt": np.asarray(prompt), "prompt_mask": np.asarray(pmask), "completion": completion,
                      "completion_mask": cmask, "rewards": r, "advantages": adv,
                      "direction": v_flat, "holdout": holdout if m else None}, k_total=kt)
