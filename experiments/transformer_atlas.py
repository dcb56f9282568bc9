"""The stability map of a small transformer LM trained by GRPO, against η* and the escape model, pre-registered.

The network atlas (``network_stability_atlas.py``) tests the exact threshold on a 197-parameter policy; this
experiment does the same on the tiny-arith transformer LM of the population trainer (a Qwen2-style decoder,
hidden size 32, one layer: 13,536 parameters) answering arithmetic word problems token by token. Every run is a
member of :func:`grpojax.grpo.train_population` (one vmapped program), GRPO with the clipped ratio, the k3 KL
to the warm-started model (``kl_reference="initial"``, β = ``BETA``), std-normalised group advantages,
periodic refresh every K_ref updates, heavy-ball SGD.

Steps (``--stage predict`` writes ``predictions.json`` / ``predictions.npz`` and stops; they are committed
before ``--stage run``; ``all`` does both). Per prompt set (arithmetic difficulty 1 and 2: two tasks with
their own warm start, plateau and stiffness):

1. θ*: the warm start, then a pilot population (``PILOT_MEMBERS`` seeds, plain SGD at ``PILOT_LR`` with a
   cosine decay to 0 over ``PILOT_STEPS`` steps: the reward rises and flattens where the reward's pull and the
   KL's pull balance); θ* is the mean of the pilot members' final parameters. The flatness (slope of the
   reward over the last third of the pilot) and the residual mean update at θ* are reported.
2. The mean update u(θ, θ_b): the trainer's GRPO loss (``grpo_loss`` on ``completion_logprobs``, the
   population's per-member loss) on a fixed set of ``STIFF_GROUPS`` groups sampled at θ*, each group weighted
   by its likelihood ratio under the behaviour policy θ_b (Π π_θb(y)/π_θ*(y) over its G completions), so that
   u and its derivatives in θ_b are those of the expectation over groups sampled from π_θb (the score-function
   identity). K_0 = −∂u/∂θ and K_d = −∂u/∂θ_b at θ* by Arnoldi on Jacobian-vector products
   (:func:`grpojax.grpo.stiffness`); the one-number reduction takes the Rayleigh quotients along the stiffest
   direction v of K_0 + K_d. A split-half check repeats the quotients on two halves of the groups.
3. η* per (μ, K_ref): :func:`grpojax.dynamics.exact_critical_eta` (periodic lag). The noise σ²: the variance of
   the per-group gradient at θ* projected on v (:func:`grpojax.dynamics.noise_from_gradients`), B groups per
   step. The basin: w = the smallest |x| with KL(π_θ* ‖ π_{θ*+xv}) = ``KAPPA`` (sequence level, on completions
   drawn at θ*). P(escape within T) per planned run from :func:`grpojax.dynamics.escape_probability`, the
   predicted onset (P = 1/2) from :func:`grpojax.dynamics.escape_onset`. The cosine cell: the critical peak lr
   and P(escape) along the schedule from :func:`grpojax.dynamics.schedule_margin`.
4. The runs: every (η/η*, μ, K_ref, seed) a member of one population started at θ* (``start=``), logging the
   projection e_t = ⟨θ_t − θ*, v⟩ every step (``direction=``); the cosine cell is a second population of the
   same program with ``schedule="cosine"``; prompt set 2 a third.
5. Measured regime by the rule fixed in ``predictions.json``; per cell the measured onset (logistic fit of
   P(escaped) in log η, bootstrap 95% interval over runs) against η* and the escape-model onset; agreement of
   predicted and measured regimes outside ±25% of the predicted onset and the Brier score, for the escape model
   and for the η*-only rule; the figure.

``--quick``: one prompt set, a short pilot, fewer groups, 24 runs of 40 steps (a check that the pieces run).
"""

from __future__ import annotations

import json
import math
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import network_stability_atlas as atlas  # noqa: E402  (logistic_onset, git_head)

from grpojax._experiment import Claim, experiment_parser, load_average, parse_args, print_claims, write_summary  # noqa: E402

NAME = "transformer_atlas"
OVERRIDES = ["eval.n=0", "grpo.prompts_per_step=4", "grpo.group_size=4", "data.n_train=2000",
             "rewards.weights={correctness: 1.0, format: 0.5}", "sampling.max_new_tokens=8",
             "model.hidden_size=32", "model.intermediate_size=64", "model.num_hidden_layers=1",
             "model.num_attention_heads=2", "model.num_key_value_heads=1"]
BETA = 0.5           # k3 KL to the warm-started model
CLIP = 0.2
KAPPA = 0.1          # basin: sequence-level KL from the plateau policy along v (nats)
PILOT_LR, PILOT_MEMBERS = 0.1, 8
MUS, K_REFS = (0.0, 0.9), (1, 4)
COSINE = dict(mu=0.9, k_ref=4, warmup_frac=0.1)


def settings(quick: bool) -> dict:
    if quick:
        return dict(sets={"difficulty1": 1}, warmstart=30, pilot_steps=40, pilot_members=2, groups=64, iters=12,
                    noise_groups=64, steps=40, rels=6, seeds=2, k_refs=(1,), cos_rels=0, cos_seeds=0, set2_rels=0,
                    set2_seeds=0)
    return dict(sets={"difficulty1": 1, "difficulty2": 2}, warmstart=60, pilot_steps=300,
                pilot_members=PILOT_MEMBERS, groups=1024, iters=40, noise_groups=1024, steps=160,
                rels=16, seeds=8, k_refs=K_REFS, cos_rels=12, cos_seeds=8, set2_rels=8, set2_seeds=4)


def lr_grid(escape_onset_rel: float, n: int) -> np.ndarray:
    """The cell's eta/eta* values: n log-spaced points from min(0.1, escape-model onset / 4) to 10 (so that the grid
    covers both eta* and the escape model's onset)."""
    lo = min(0.1, escape_onset_rel / 4) if escape_onset_rel > 0 else 0.1
    return np.geomspace(lo, 10.0, n)


def rule_text(steps: int) -> str:
    return (
        "Regime rule (fixed before the runs). e_t = <theta_t - theta*, v> (v the unit stiffest direction of "
        "K_0 + K_d in predictions.npz), logged at every step t = 1..T (T = %d). A run ESCAPED if it diverged "
        "(a non-finite loss or gradient: the member is frozen) or max_t |e_t| > w, w the basin width of its "
        "prompt set in predictions.json (the smallest |x| with sequence-level KL(pi_theta* || pi_theta*+xv) = "
        "%.2f nats on completions drawn at theta*); STABLE otherwise. Predicted (escape model): escaped iff "
        "P(escape within T) >= 1/2; predicted (eta*-only rule): escaped iff eta >= eta*. Cosine cell: the member's "
        "lr is its peak; eta* of the cell is the critical peak lr. Learning rates per cell: log-spaced eta/eta* from "
        "min(0.1, escape-model onset / 4) to 10." % (steps, KAPPA))


def make_config(difficulty: int, steps: int, warmstart: int):
    from grpojax.grpo import apply_overrides, load_config

    return apply_overrides(load_config("tiny-arith"), OVERRIDES + [
        f"steps={steps}", f"warmstart.steps={warmstart}", f"data.difficulty={difficulty}"])


# ------------------------------------------------------------------------------ the mean update at θ*
def sample_groups(warm, cfg, theta, n_groups: int, seed: int):
    """``n_groups`` groups of G completions drawn at ``theta`` (prompts uniformly from the training set),
    scored and given advantages exactly as the population's rollout does."""
    from flax import nnx

    from grpojax.grpo import group_advantages
    from grpojax.grpo._population import _build_task
    from grpojax.grpo._rollout import sample_completions
    from grpojax.grpo._token_reward import hash_answer_rewards, token_classes

    graphdef, _, rest, trainer = warm
    task = _build_task(trainer, 1)
    cls = token_classes(trainer.codec.tokenizer)
    G = cfg.grpo.group_size
    w = {str(k): float(v) for k, v in cfg.rewards.weights.items()}
    k_p, k_s = jax.random.split(jax.random.key(seed))
    rows = jnp.repeat(jax.random.randint(k_p, (n_groups,), 0, task.prompts.shape[0]), G)
    prompts, pmask, answers = task.prompts[rows], task.prompt_mask[rows], task.answers[rows]

    @jax.jit
    def draw(params, key):
        model = nnx.merge(graphdef, params, rest)
        return sample_completions(model, prompts, pmask, key, max_new_tokens=cfg.sampling.max_new_tokens,
                                  temperature=cfg.sampling.temperature, eos_ids=tuple(trainer.stop_ids),
                                  pad_id=int(trainer.codec.pad_id))

    comp, _, cmask = draw(theta, k_s)
    correct, stated = hash_answer_rewards(comp, cmask, answers, cls)
    reward = w.get("correctness", 0.0) * correct + w.get("format", 0.0) * stated
    adv = group_advantages(reward.reshape(n_groups, G), cfg.grpo.advantage, eps=float(cfg.grpo.adv_eps))
    return dict(prompts=prompts, pmask=pmask, comp=comp, cmask=cmask, adv=adv.reshape(-1), reward=reward)


def update_fns(warm, cfg, groups, theta_star):
    """``(u, seq_logp, group_loss)``: the mean update u(θ, θ_b) on the fixed groups (module notes, step 2),
    the sequence log-probabilities and the per-group losses at θ with θ_b = θ (the trainer's sampled update)."""
    from flax import nnx

    from grpojax.grpo._logprobs import completion_logprobs
    from grpojax.grpo._loss import grpo_loss

    graphdef, ws_params, rest, _ = warm
    G, T = cfg.grpo.group_size, cfg.sampling.temperature
    agg = cfg.grpo.aggregation
    pr, pm, comp, cm, adv = (groups[k] for k in ("prompts", "pmask", "comp", "cmask", "adv"))
    cmf = cm.astype(jnp.float32)

    def logp(params, sl=slice(None)):
        return completion_logprobs(nnx.merge(graphdef, params, rest), pr[sl], pm[sl], comp[sl], temperature=T)

    ref = jax.lax.stop_gradient(logp(ws_params)[0])
    base = jax.lax.stop_gradient(logp(theta_star)[0])

    def per_group_loss(lp, ent, old):
        def one(lp_g, ent_g, old_g, ref_g, adv_g, m_g):
            return grpo_loss(lp_g, ent_g, old_g, ref_g, adv_g, m_g, beta=BETA, eps_low=CLIP, eps_high=CLIP,
                             aggregation=agg).loss
        shp = lambda a: a.reshape((-1, G) + a.shape[1:])  # noqa: E731
        return jax.vmap(one)(shp(lp), shp(ent), shp(old), shp(ref), shp(adv), shp(cm))

    def u(theta, theta_b, idx=None):
        sel = slice(None) if idx is None else idx
        old = logp(theta_b)[0]
        lw = ((old - base) * cmf).sum(-1).reshape(-1, G).sum(-1)  # log Π π_θb(y)/π_θ*(y) per group

        def objective(th):
            lp, ent = logp(th)
            return (jnp.exp(lw) * per_group_loss(lp, ent, old))[sel].mean()

        return jax.tree.map(lambda g: -g, jax.grad(objective)(theta))

    def group_grads(theta):
        """(groups, n): the gradient of each group's loss at θ = θ_b (one group per row, flat)."""
        from jax.flatten_util import ravel_pytree

        shp = lambda a: a.reshape((-1, G) + a.shape[1:])  # noqa: E731

        def one(pr_g, pm_g, c_g, m_g, adv_g, ref_g):
            def loss(th):
                lp, ent = completion_logprobs(nnx.merge(graphdef, th, rest), pr_g, pm_g, c_g, temperature=T)
                return grpo_loss(lp, ent, jax.lax.stop_gradient(lp), ref_g, adv_g, m_g, beta=BETA, eps_low=CLIP,
                                 eps_high=CLIP, aggregation=agg).loss
            return ravel_pytree(jax.grad(loss)(theta))[0]

        return jax.jit(jax.vmap(one))(shp(pr), shp(pm), shp(comp), shp(cm), shp(adv), shp(ref))

    return u, lambda th: (logp(th)[0] * cmf).sum(-1), group_grads


def basin_width(seq_logp, theta_star, v_tree, kappa=KAPPA):
    """Smallest |x| (either sign) with mean k3 KL(π_θ* ‖ π_θ*+xv) = kappa over the completions drawn at θ*
    (sequence level: r = π_θ(y)/π_θ*(y), KL ≈ mean(r − 1 − log r)); log grid, then bisection."""
    base = seq_logp(theta_star)
    f = jax.jit(lambda s: (lambda d: jnp.mean(jnp.exp(d) - 1 - d))(
        seq_logp(jax.tree.map(lambda a, b: a + s * b, theta_star, v_tree)) - base))
    out = []
    for sign in (1.0, -1.0):
        grid = np.geomspace(1e-3, 1e3, 61)
        vals = np.array([float(f(sign * g)) for g in grid])
        i = int(np.argmax(vals >= kappa))
        if vals[i] < kappa:
            out.append(math.inf)
            continue
        lo, hi = grid[max(i - 1, 0)], grid[i]
        for _ in range(30):
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if float(f(sign * mid)) >= kappa else (mid, hi)
        out.append(0.5 * (lo + hi))
    return min(out), out


def plateau(cfg, s, log):
    """Warm start + pilot population; θ* = mean of the pilot members' final parameters."""
    from grpojax.grpo import Member, train_population

    from grpojax.grpo import apply_overrides

    cfg_p = apply_overrides(cfg, [f"steps={s['pilot_steps']}"])
    members = [Member(lr=PILOT_LR, beta=BETA, clip_eps=CLIP, seed=10_000 + i) for i in range(s["pilot_members"])]
    res = train_population(cfg_p, members, None, kl_reference="initial", schedule="cosine", chunk=20,
                           show_progress=False)
    theta_star = jax.tree.map(lambda a: jnp.asarray(a.mean(0)), res.params)
    r = np.nanmean(res.metrics["reward_mean"], axis=1)
    t = np.arange(r.size)
    third = t >= 2 * r.size // 3
    slope, icept = np.polyfit(t[third], r[third], 1)
    resid = r[third] - (slope * t[third] + icept)
    se = float(np.std(resid, ddof=2) / np.sqrt(np.sum((t[third] - t[third].mean()) ** 2)))
    first = float(np.mean(r[: max(r.size // 10, 1)]))
    last = float(np.mean(r[third]))
    log(f"  pilot: {len(members)} members x {cfg_p.steps} steps ({res.wall_s:.0f} s); reward {first:.3f} -> "
        f"{last:.3f} (last third); slope there {slope * cfg_p.steps:.3f} per pilot length (s.e. "
        f"{se * cfg_p.steps:.3f})")
    info = dict(members=len(members), steps=int(cfg_p.steps), lr=PILOT_LR, schedule="cosine",
                reward_first_tenth=first, reward_last_third=last, slope_last_third_per_run=float(slope * cfg_p.steps),
                slope_se_per_run=se * cfg_p.steps, spread=float(np.sqrt(sum(
                    float(np.sum(np.var(a, axis=0))) for a in jax.tree.leaves(res.params)))),
                wall_s=res.wall_s)
    return res.warm, theta_star, info


def predict_set(name, difficulty, s, log):
    from jax.flatten_util import ravel_pytree

    from grpojax.dynamics import escape_onset, escape_probability, exact_critical_eta, noise_from_gradients
    from grpojax.dynamics import schedule_margin
    from grpojax.grpo import stiffness

    t0 = time.perf_counter()
    cfg = make_config(difficulty, s["steps"], s["warmstart"])
    log(f"{name} (difficulty {difficulty}):")
    warm, theta_star, pilot = plateau(cfg, s, log)
    n_par = int(sum(a.size for a in jax.tree.leaves(theta_star)))
    groups = sample_groups(warm, cfg, theta_star, s["groups"], seed=7)
    u, seq_logp, _ = update_fns(warm, cfg, groups, theta_star)
    flat_star, unravel = ravel_pytree(theta_star)
    u_flat = jax.jit(lambda a, b: ravel_pytree(u(unravel(a), unravel(b)))[0])
    resid = float(jnp.linalg.norm(u_flat(flat_star, flat_star)))
    t1 = time.perf_counter()
    st = stiffness(lambda a, b: u(a, b), theta_star, iters=s["iters"], rtol=0.05)
    v = np.asarray(st.total_estimate.vector, np.float64)
    v /= np.linalg.norm(v)
    log(f"  stiffness ({time.perf_counter() - t1:.0f} s): K_0 = {st.k_instant:.4g}, K_d = {st.k_stale:.4g} along v "
        f"(total {st.total:.4g}, residual {st.total_estimate.residual:.2g}, {st.total_estimate.iterations} steps; "
        f"lead. eig K_0 {st.instant.value:.4g}, K_d {st.stale.value:.4g})")
    # split halves: the Rayleigh quotients along v on each half of the groups
    half = s["groups"] // 2
    vj = jnp.asarray(v, flat_star.dtype)
    halves = []
    for idx in (jnp.arange(half), jnp.arange(half, s["groups"])):
        uh = lambda a, b, idx=idx: ravel_pytree(u(unravel(a), unravel(b), idx))[0]  # noqa: E731
        k0 = -float(vj @ jax.jvp(lambda a: uh(a, flat_star), (flat_star,), (vj,))[1])
        kd = -float(vj @ jax.jvp(lambda b: uh(flat_star, b), (flat_star,), (vj,))[1])
        halves.append(dict(k_instant=k0, k_stale=kd))
    log(f"  split halves: K_0 {halves[0]['k_instant']:.4g} / {halves[1]['k_instant']:.4g}, "
        f"K_d {halves[0]['k_stale']:.4g} / {halves[1]['k_stale']:.4g}")
    # the noise: per-group gradients at θ* on fresh groups, projected on v
    ng = sample_groups(warm, cfg, theta_star, s["noise_groups"], seed=8)
    grads = update_fns(warm, cfg, ng, theta_star)[2](theta_star)  # (groups, n): one gradient per group
    sigma2 = noise_from_gradients(np.asarray(grads, np.float64), v)
    B = cfg.grpo.prompts_per_step
    w, w_both = basin_width(seq_logp, theta_star, unravel(vj))
    log(f"  noise sigma^2 along v {sigma2:.4g} per group ({B} groups per step); basin w = {w:.4g} "
        f"(+v {w_both[0]:.4g}, -v {w_both[1]:.4g}); |u(theta*, theta*)| = {resid:.3g}, along v "
        f"{float(vj @ u_flat(flat_star, flat_star)):.3g}")
    k0, kd, T = st.k_instant, st.k_stale, s["steps"]
    cells, runs = [], []
    for mu in MUS:
        for K in s["k_refs"]:
            eta = float(exact_critical_eta(mu, K, kd, lag="periodic", k_instant=k0))
            onset = float(escape_onset(mu, K, kd, noise=sigma2, basin=w, steps=T, lag="periodic", k_instant=k0,
                                       samples_per_step=B))
            cells.append(dict(prompt_set=name, schedule="constant", mu=mu, k_ref=K, eta_star=eta,
                              escape_onset=onset, escape_onset_rel=onset / eta))
            log(f"  mu={mu} K_ref={K}: eta* {eta:.4g}; escape-model onset {onset:.4g} ({onset / eta:.3f} eta*)")
    cos_cell = None
    if s["cos_rels"] and name == next(iter(s["sets"])):  # the cosine cell: first prompt set only
        mu, K = COSINE["mu"], COSINE["k_ref"]
        wu = int(COSINE["warmup_frac"] * T)
        sm = lambda peak: schedule_margin(peak, K, kd, schedule="cosine", steps=T, warmup_steps=wu, mu=mu,  # noqa: E731
                                          lag="periodic", k_instant=k0, noise=sigma2, basin=w, samples_per_step=B)
        crit = sm(1e-6).critical_lr
        lo, hi = 1e-3 * crit, 10 * crit  # bisection of the schedule's P(escape) = 1/2 in log peak
        for _ in range(40):
            mid = math.sqrt(lo * hi)
            lo, hi = (lo, mid) if sm(mid).escape_probability >= 0.5 else (mid, hi)
        onset = math.sqrt(lo * hi)
        cos_cell = dict(prompt_set=name, schedule="cosine", warmup_steps=wu, mu=mu, k_ref=K, eta_star=crit,
                        escape_onset=onset, escape_onset_rel=onset / crit, min_margin_step=sm(crit).min_margin_step)
        cells.append(cos_cell)
        log(f"  cosine (warmup {wu}) mu={mu} K_ref={K}: critical peak lr {crit:.4g}; escape onset peak "
            f"{onset:.4g} ({onset / crit:.3f})")
    # the planned runs and their predictions
    main_set = name == next(iter(s["sets"]))
    rels, seeds = (s["rels"], s["seeds"]) if main_set else (s["set2_rels"], s["set2_seeds"])
    plan = [(c, rel, sd) for c in cells if c["schedule"] == "constant"
            for rel in lr_grid(c["escape_onset_rel"], rels) for sd in range(seeds)]
    if cos_cell is not None:
        plan += [(cos_cell, rel, sd) for rel in lr_grid(cos_cell["escape_onset_rel"], s["cos_rels"])
                 for sd in range(s["cos_seeds"])]
    for c, rel, sd in plan:
        eta = float(rel * c["eta_star"])
        if c["schedule"] == "cosine":
            p = schedule_margin(eta, c["k_ref"], kd, schedule="cosine", steps=T, warmup_steps=c["warmup_steps"],
                                mu=c["mu"], lag="periodic", k_instant=k0, noise=sigma2, basin=w,
                                samples_per_step=B).escape_probability
        else:
            p = float(escape_probability(eta, c["mu"], c["k_ref"], kd, noise=sigma2, basin=w, steps=T,
                                         lag="periodic", k_instant=k0, samples_per_step=B).probability)
        runs.append(dict(prompt_set=name, schedule=c["schedule"], mu=c["mu"], k_ref=c["k_ref"], eta_rel=float(rel),
                         eta=eta, eta_star=c["eta_star"], seed=int(sd), p_escape=float(p),
                         escape_onset=c["escape_onset"]))
    pred = dict(difficulty=difficulty, parameters=n_par, pilot=pilot, groups=s["groups"],
                stiffness=dict(k_instant=k0, k_stale=kd, total=st.total, converged=st.converged,
                               total_residual=st.total_estimate.residual, iterations=st.total_estimate.iterations,
                               history=list(st.total_estimate.history), lead_k_instant=st.instant.value,
                               lead_k_stale=st.stale.value, split_halves=halves),
                plateau_residual=resid, noise_per_group=sigma2, groups_per_step=B, group_size=cfg.grpo.group_size,
                basin=w, basin_both_signs=w_both, kappa=KAPPA, cells=cells, seconds=time.perf_counter() - t0)
    arrays = {f"{name}/theta_star": np.asarray(flat_star), f"{name}/direction": v.astype(np.float32),
              f"{name}/warm_params": np.asarray(ravel_pytree(warm.params)[0])}
    return pred, runs, arrays


def predict(out: pathlib.Path, quick: bool, log=print):
    s = settings(quick)
    t0 = time.perf_counter()
    sets, runs, arrays = {}, [], {}
    for name, d in s["sets"].items():
        p, r, a = predict_set(name, d, s, log)
        sets[name], runs, arrays = p, runs + r, {**arrays, **a}
    pred = dict(experiment=NAME, quick=quick, commit=atlas.git_head(), written_before_runs=True,
                model=dict(overrides=OVERRIDES, beta=BETA, clip_eps=CLIP, rule="clipped", kl_reference="initial",
                           optimizer="sgd (heavy ball)", lag="periodic (behaviour policy refreshed every K_ref)"),
                steps=s["steps"], regime_rule=rule_text(s["steps"]), prompt_sets=sets, runs=runs,
                seconds=time.perf_counter() - t0)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    np.savez(out / "predictions.npz", **arrays)
    log(f"{len(runs)} planned runs; predictions written in {pred['seconds']:.0f} s")
    return pred


# ------------------------------------------------------------------------------------------ the runs
def classify(proj, diverged, w) -> str:
    """The pre-registered rule (``rule_text``) on one run: ``escaped`` or ``stable``."""
    proj = np.asarray(proj, np.float64)
    if bool(diverged) or not np.all(np.isfinite(proj)):
        return "escaped"
    return "escaped" if float(np.max(np.abs(proj))) > w else "stable"


def plateau_start(pred, arrays, name, steps):
    """``(cfg, warm, start, direction)`` of prompt set ``name`` from the committed predictions: the trainer's config
    for ``steps`` steps, its warm start, θ* (where every member starts) and the stiffest direction."""
    from jax.flatten_util import ravel_pytree

    from grpojax.grpo._population import WarmStart
    from grpojax.grpo._trainer import GRPOTrainer

    cfg = make_config(pred["prompt_sets"][name]["difficulty"], steps, 0)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="transformer-atlas-") as tmp:
        trainer = GRPOTrainer(cfg, tmp, devices=jax.devices()[:1])
    _, unravel = ravel_pytree(jax.device_get(trainer.params))
    warm = WarmStart(trainer.graphdef, unravel(jnp.asarray(arrays[f"{name}/warm_params"])),
                     jax.device_get(trainer.rest), trainer)
    return (cfg, warm, unravel(jnp.asarray(arrays[f"{name}/theta_star"])),
            unravel(jnp.asarray(arrays[f"{name}/direction"])))


def measure_runs(res, runs, w) -> None:
    """Each run's measured regime (``classify``) and what the rule read, from a population's result, in place."""
    for j, r in enumerate(runs):
        proj = res.metrics["param_proj"][:, j]
        r["measured"] = classify(proj, res.diverged[j], w)
        r["escaped"] = r["measured"] == "escaped"
        r["diverged"] = bool(res.diverged[j])
        r["max_abs_proj_over_w"] = float(np.nanmax(np.abs(proj)) / w) if np.isfinite(proj).any() else math.inf
        fin = np.isfinite(proj)
        r["first_exit_step"] = int(np.argmax(np.abs(np.where(fin, proj, np.inf)) > w)) + 1 if r["escaped"] else None


def run_population(pred, arrays, name, runs, schedule, log=print, seed_offset=0):
    from grpojax.grpo import Member, train_population

    cfg, warm, start, direction = plateau_start(pred, arrays, name, pred["steps"])
    members = [Member(lr=r["eta"], momentum=r["mu"], k_ref=r["k_ref"], beta=BETA, clip_eps=CLIP, seed=seed_offset + i,
                      name=f"{name}-{schedule}-{i:04d}") for i, r in enumerate(runs)]
    wu = int(COSINE["warmup_frac"] * pred["steps"]) if schedule == "cosine" else 0
    res = train_population(cfg, members, None, kl_reference="initial", schedule=schedule, warmup_steps=wu,
                           chunk=20, show_progress=False, warm=warm, start=start, direction=direction)
    measure_runs(res, runs, pred["prompt_sets"][name]["basin"])
    for j, r in enumerate(runs):
        rw = res.metrics["reward_mean"][:, j]
        r["reward_late"] = float(np.nanmean(rw[int(0.75 * rw.size):]))
        r["param_dist_final"] = float(res.metrics["param_dist"][-1, j])
    log(f"{name} {schedule}: {len(runs)} members x {pred['steps']} steps in one program: {res.wall_s:.0f} s "
        f"(first call, with compilation, {res.chunk_s[0]:.0f} s); escaped {sum(r['escaped'] for r in runs)}")
    return dict(wall_s=res.wall_s, first_call_s=res.chunk_s[0], cpu_s=float(sum(res.chunk_cpu_s)), n=len(runs),
                run_steps_per_s=len(runs) * pred["steps"] / res.wall_s)


def logistic_onset(logx, y, n_boot=300, seed=0):
    """η/η* where a logistic fit of P(escaped) in log η crosses 1/2, and a bootstrap 95% interval over runs.

    Maximum likelihood with a small ridge (1e-3, which keeps the slope finite when the classes separate), by
    ``scipy.optimize.minimize`` (BFGS, analytic gradient) from the midpoint of the data; ``inf`` when no run
    escaped, ``0`` when every run did."""
    from scipy.optimize import minimize

    def fit(lx, yy):
        if yy.all():
            return -np.inf
        if not yy.any():
            return np.inf

        def nll(p):
            z = p[0] + p[1] * lx
            q = 1 / (1 + np.exp(-z))
            return (np.sum(np.logaddexp(0, z) - yy * z) + 5e-4 * (p @ p),
                    np.array([np.sum(q - yy), np.sum((q - yy) * lx)]) + 1e-3 * p)

        m = 0.5 * (lx[yy].min() + lx[~yy].max())  # start at the boundary between the classes, slope 1
        res = minimize(nll, np.array([-m, 1.0]), jac=True, method="BFGS")
        a, b = res.x
        return -a / b if b > 0 else np.nan

    y = np.asarray(y, bool)
    est = fit(logx, y)
    rng = np.random.default_rng(seed)
    boots = np.array([fit(logx[i], y[i]) for i in (rng.integers(0, len(y), len(y)) for _ in range(n_boot))], float)
    lo, hi = np.nanpercentile(boots, [2.5, 97.5]) if np.isfinite(boots).any() else (np.nan, np.nan)
    return float(np.exp(est)), float(np.exp(lo)), float(np.exp(hi))


def summarise(runs):
    cells = {}
    for r in runs:
        cells.setdefault((r["prompt_set"], r["schedule"], r["mu"], r["k_ref"]), []).append(r)
    table = []
    for (ps, sch, mu, K), rs in cells.items():
        rel = np.array([r["eta_rel"] for r in rs])
        y = np.array([r["escaped"] for r in rs], bool)
        onset, lo, hi = logistic_onset(np.log(rel), y)
        y = y.astype(float)
        eo = rs[0]["escape_onset"] / rs[0]["eta_star"]
        far_e = np.abs(np.log(rel / eo)) > np.log(1.25)
        far_s = np.abs(np.log(rel)) > np.log(1.25)
        p = np.array([r["p_escape"] for r in rs])
        table.append(dict(prompt_set=ps, schedule=sch, mu=mu, k_ref=K, n=len(rs), eta_star=rs[0]["eta_star"],
                          escape_onset_rel=eo, onset_rel=onset, onset_lo=lo, onset_hi=hi,
                          agree_escape=float(np.mean((p[far_e] >= 0.5) == y[far_e])) if far_e.any() else math.nan,
                          agree_eta_star=float(np.mean((rel[far_s] >= 1) == y[far_s])) if far_s.any() else math.nan,
                          brier_escape=float(np.mean((p - y) ** 2)), brier_eta_star=float(np.mean(((rel >= 1) - y) ** 2)),
                          escaped=int(y.sum()), diverged=int(sum(r["diverged"] for r in rs))))
    return table


def scores(runs):
    y = np.array([r["escaped"] for r in runs], float)
    p = np.array([r["p_escape"] for r in runs])
    rel = np.array([r["eta_rel"] for r in runs])
    eo = np.array([r["escape_onset"] / r["eta_star"] for r in runs])
    far_e = np.abs(np.log(rel / eo)) > np.log(1.25)
    far_s = np.abs(np.log(rel)) > np.log(1.25)
    div = np.array([r["diverged"] for r in runs])
    bands = {"below 0.75 eta*": rel < 0.75, "0.75-1.33 eta*": (rel >= 0.75) & (rel <= 4 / 3),
             "above 1.33 eta*": rel > 4 / 3}
    return dict(diverged_by_band={k: [int(div[m].sum()), int(m.sum())] for k, m in bands.items()},
                n=len(runs), brier_escape=float(np.mean((p - y) ** 2)), brier_eta_star=float(np.mean(((rel >= 1) - y) ** 2)),
                agree_escape=float(np.mean((p[far_e] >= 0.5) == y[far_e])), n_far_escape=int(far_e.sum()),
                agree_eta_star=float(np.mean((rel[far_s] >= 1) == y[far_s])), n_far_eta_star=int(far_s.sum()),
                escaped=int(y.sum()))


def figure(runs, table, pred, out: pathlib.Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpojax._io import save_figure
    from grpojax.dynamics import escape_probability

    ncol = min(len(table), 5)
    nrow = -(-len(table) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.3 * ncol, 3.0 * nrow + 0.6), squeeze=False, sharey=True)
    for ax in axes.ravel()[len(table):]:
        ax.axis("off")
    for ax, t in zip(axes.ravel(), table):
        rs = [r for r in runs if (r["prompt_set"], r["schedule"], r["mu"], r["k_ref"]) ==
              (t["prompt_set"], t["schedule"], t["mu"], t["k_ref"])]
        rels = np.array(sorted({r["eta_rel"] for r in rs}))
        frac = [np.mean([r["escaped"] for r in rs if r["eta_rel"] == x]) for x in rels]
        pp = [np.mean([r["p_escape"] for r in rs if r["eta_rel"] == x]) for x in rels]
        ax.plot(rels, frac, "o", color="tab:red", label="measured escape fraction")
        ps = pred["prompt_sets"][t["prompt_set"]]
        if t["schedule"] == "constant":
            xs = np.geomspace(rels.min(), rels.max(), 80)
            est = escape_probability(xs * t["eta_star"], t["mu"], t["k_ref"], ps["stiffness"]["k_stale"],
                                     noise=ps["noise_per_group"], basin=ps["basin"], steps=pred["steps"],
                                     lag="periodic", k_instant=ps["stiffness"]["k_instant"],
                                     samples_per_step=ps["groups_per_step"])
            ax.plot(xs, est.probability, "-", color="k", lw=1.5, label="predicted P(escape within T)")
        else:
            ax.plot(rels, pp, "-", color="k", lw=1.5, label="predicted P(escape within T)")
        ax.axvline(1.0, color="tab:blue", ls="--", lw=1.2, label="eta* (mean update)")
        ax.axvline(t["escape_onset_rel"], color="k", ls=":", lw=1.2, label="escape-model onset")
        if np.isfinite(t["onset_rel"]) and t["onset_rel"] > 0:
            lo = t["onset_lo"] if np.isfinite(t["onset_lo"]) else t["onset_rel"]
            hi = t["onset_hi"] if np.isfinite(t["onset_hi"]) else t["onset_rel"]
            ax.errorbar([t["onset_rel"]], [0.5], xerr=[[t["onset_rel"] - lo], [hi - t["onset_rel"]]], fmt="D",
                        color="tab:green", capsize=3, label="measured onset (95% CI)")
        ax.set_xscale("log")
        ax.set_title(f"{t['prompt_set']}, {t['schedule']}\nmu={t['mu']}, K_ref={t['k_ref']}", fontsize=8)
        ax.set_xlabel("eta / eta*  (peak lr / critical, cosine)", fontsize=8)
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("P(escape within T)")
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=5, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.6 / (3.0 * nrow + 0.6), 1, 1))
    save_figure(fig, out / f"{NAME}.png", dpi=100)
    plt.close(fig)
    return f"{NAME}.png"


def with_seeds(pred, seeds: int):
    """The predictions with every planned (prompt set, schedule, cell, lr) run by ``seeds`` seeds (the
    predicted P(escape) of a run does not depend on its seed)."""
    plan = {}
    for r in pred["runs"]:
        plan.setdefault((r["prompt_set"], r["schedule"], r["mu"], r["k_ref"], r["eta_rel"]), r)
    runs = [dict(r, seed=sd) for r in plan.values() for sd in range(seeds)]
    return dict(pred, runs=runs)


def committed(folder: pathlib.Path) -> tuple[dict, dict]:
    """The atlas's committed predictions in ``folder``: ``predictions.json`` and the arrays of ``predictions.npz``."""
    return json.loads((folder / "predictions.json").read_text()), dict(np.load(folder / "predictions.npz"))


def run_all(pred, out: pathlib.Path, log=print):
    arrays = dict(np.load(out / "predictions.npz"))
    runs = [dict(r) for r in pred["runs"]]
    walls = {}
    for name in pred["prompt_sets"]:
        for sch in ("constant", "cosine"):
            sel = [r for r in runs if r["prompt_set"] == name and r["schedule"] == sch]
            if sel:
                walls[f"{name}/{sch}"] = run_population(pred, arrays, name, sel, sch, log)
    return runs, walls


def predictions_commit(out: pathlib.Path) -> str:
    """The commit that added ``out/predictions.json`` (``not committed`` when git has none)."""
    import subprocess

    try:
        h = subprocess.run(["git", "log", "--diff-filter=A", "--format=%h", "-1", "--", "predictions.json"],
                           capture_output=True, text=True, cwd=out).stdout.strip()
    except OSError:
        h = ""
    return h or "not committed"


def write_markdown(out, pred, table, sc, sc_first, walls, total_s, load0, load1, cmd, committed):
    L = [f"# Stability map of a transformer LM ({'quick' if pred['quick'] else 'full'})", "",
         f"Command: `{cmd}` (`--stage predict`, then `--stage run`). Predictions written before any run (the "
         f"repository head was {pred['commit']}) and committed in {committed}. Whole run stage "
         f"{total_s:.0f} s; load before: {load0}; after: {load1}.", "",
         "Populations (one vmapped program each): " + "; ".join(
             f"{k}: {v['n']} members, {v['wall_s']:.0f} s wall ({v['run_steps_per_s']:.0f} run-steps/s, first call "
             f"with compilation {v['first_call_s']:.0f} s)" for k, v in walls.items()) + ".", "",
         "## Plateau, stiffness, noise, basin (predictions.json)", "",
         "| prompt set | params | pilot reward first / last third (slope per run, s.e.) | K_0 | K_d | Arnoldi residual "
         "| split halves K_0; K_d | sigma^2 per group | basin w | residual mean update |", "|---|---|---|---|---|---|---|---|---|---|"]
    for n, p in pred["prompt_sets"].items():
        st, pl = p["stiffness"], p["pilot"]
        h = st["split_halves"]
        L.append(f"| {n} | {p['parameters']} | {pl['reward_first_tenth']:.3f} / {pl['reward_last_third']:.3f} "
                 f"({pl['slope_last_third_per_run']:+.3f}, {pl['slope_se_per_run']:.3f}) | {st['k_instant']:.4g} | "
                 f"{st['k_stale']:.4g} | {st['total_residual']:.2g} | {h[0]['k_instant']:.3g}, {h[1]['k_instant']:.3g}; "
                 f"{h[0]['k_stale']:.3g}, {h[1]['k_stale']:.3g} | {p['noise_per_group']:.4g} | {p['basin']:.4g} | "
                 f"{p['plateau_residual']:.3g} |")
    L += ["", "## Per cell: measured onset vs predicted", "",
          "Onsets as eta/eta* (cosine: peak lr / critical peak lr); measured = maximum-likelihood logistic fit of "
          "P(escaped) in log eta (ridge 1e-3, scipy BFGS), 95% bootstrap interval over runs (inf: no run escaped; 0: "
          "all escaped).", "",
          "| prompt set | schedule | mu | K_ref | runs | eta* | escape-model onset | measured onset [95% CI] | escaped | "
          "diverged | agreement (escape model / eta*-only, outside +-25%) | Brier (escape model / eta*-only) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        L.append(f"| {t['prompt_set']} | {t['schedule']} | {t['mu']} | {t['k_ref']} | {t['n']} | {t['eta_star']:.4g} | "
                 f"{t['escape_onset_rel']:.3f} | {t['onset_rel']:.3g} [{t['onset_lo']:.3g}, {t['onset_hi']:.3g}] | "
                 f"{t['escaped']} | {t['diverged']} | {t['agree_escape']:.2f} / {t['agree_eta_star']:.2f} | "
                 f"{t['brier_escape']:.3f} / {t['brier_eta_star']:.3f} |")
    L += ["", f"All runs: Brier {sc['brier_escape']:.3f} (escape model) vs {sc['brier_eta_star']:.3f} (eta*-only); "
          f"agreement outside +-25% {sc['agree_escape']:.1%} of {sc['n_far_escape']} runs (escape model) vs "
          f"{sc['agree_eta_star']:.1%} of {sc['n_far_eta_star']} (eta*-only); {sc['escaped']} of {sc['n']} escaped.",
          "", f"The first prompt set's constant-lr population alone ({sc_first['n']} runs): Brier "
          f"{sc_first['brier_escape']:.3f} vs {sc_first['brier_eta_star']:.3f}; agreement {sc_first['agree_escape']:.1%} "
          f"vs {sc_first['agree_eta_star']:.1%}.", "", "Runs that diverged (non-finite loss or gradient), by eta/eta*: "
          + ", ".join(f"{k}: {v[0]} of {v[1]}" for k, v in sc["diverged_by_band"].items()) + ".", "",
          "![stability map](transformer_atlas.png)", "",
          "## Regime rule (fixed before the runs)", "", pred["regime_rule"], ""]
    (out / f"{NAME}.md").write_text("\n".join(L))


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="one prompt set, a short pilot, 24 runs of 40 steps")
    ap.add_argument("--stage", choices=("all", "predict", "run", "score"), default="all",
                    help="predict: write predictions.json/.npz and stop; run: run against the existing ones; score: "
                         "score the runs of an earlier run stage again (runs.json, summary.json) without running")
    ap.add_argument("--seeds", type=int, default=None,
                    help="run stage: replicate every planned (cell, lr) of the predictions with this many seeds "
                         "(e.g. 64: a population of 4,096 on an accelerator); the predictions themselves are unchanged")
    args = parse_args(ap, argv)
    out = args.out
    if args.seeds is not None and args.seeds < 1:
        ap.error(f"--seeds must be an integer >= 1, got {args.seeds}")
    if args.stage in ("run", "score"):
        pred = json.loads((out / "predictions.json").read_text())
    else:
        pred = predict(out, args.quick)
        if args.stage == "predict":
            print(f"wrote {out / 'predictions.json'}")
            return 0
    if args.stage == "score":
        runs = json.loads((out / "runs.json").read_text())
        old = json.loads((out / "summary.json").read_text())
        walls, total_s, load0, load1 = (old[k] for k in ("populations", "total_wall_s", "load_before", "load_after"))
    else:
        if args.seeds is not None:
            pred = with_seeds(pred, args.seeds)
        t0, load0 = time.perf_counter(), load_average()
        runs, walls = run_all(pred, out)
        total_s, load1 = time.perf_counter() - t0, load_average()
    table = summarise(runs)
    sc = scores(runs)
    first = next(iter(pred["prompt_sets"]))
    sc_first = scores([r for r in runs if r["prompt_set"] == first and r["schedule"] == "constant"])
    fig = figure(runs, table, pred, out)
    cmd = "python experiments/transformer_atlas.py" + (" --quick" if args.quick else "")
    claims = [
        Claim("On a transformer LM (>= 10k parameters) trained by GRPO, the exact threshold eta* of the mean update "
              "(stiffness by Arnoldi on the trainer's update, before the runs) separates runs that stay on the plateau "
              "from runs that leave it, outside +-25% of eta*",
              f"{sc['n_far_eta_star']} runs: agreement {sc['agree_eta_star']:.1%}",
              "confirmed" if sc["agree_eta_star"] >= 0.9 else ("partial" if sc["agree_eta_star"] >= 0.7 else "refuted"),
              paper="instability sets in at K eta K_ref = 1 - mu"),
        Claim("The noise-aware escape model's P(escape within T) (noise from per-group gradients at the plateau, "
              "basin from a KL radius) predicts which runs leave the plateau better than the eta*-only rule",
              f"Brier {sc['brier_escape']:.3f} vs {sc['brier_eta_star']:.3f}; agreement outside +-25% of the "
              f"predicted onset {sc['agree_escape']:.1%} vs {sc['agree_eta_star']:.1%}",
              "confirmed" if sc["brier_escape"] <= 0.7 * sc["brier_eta_star"] and sc["agree_escape"] >= 0.9 else
              ("partial" if sc["brier_escape"] < sc["brier_eta_star"] else "refuted"))]
    cos = [t for t in table if t["schedule"] == "cosine"]
    if cos:
        t = cos[0]
        inside = t["onset_lo"] <= t["escape_onset_rel"] <= t["onset_hi"]
        within = abs(math.log(max(t["onset_rel"], 1e-300) / t["escape_onset_rel"])) <= math.log(1.25)
        claims.append(Claim(
            "Along a cosine schedule (warm-up, decay to 0) the escape model's critical peak lr predicts the measured "
            "onset of the population runs within +-25%",
            f"measured onset {t['onset_rel']:.3g} [{t['onset_lo']:.3g}, {t['onset_hi']:.3g}] x critical peak lr; "
            f"predicted {t['escape_onset_rel']:.3g} (escape model), 1 (eta*)",
            "confirmed" if within else ("partial" if inside else "refuted")))
    committed = predictions_commit(out)
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=[fig], cells=table, scores=sc,
                  scores_first_constant=sc_first, populations=walls, total_wall_s=total_s, load_before=load0,
                  load_after=load1, command=cmd, head_at_predictions=pred["commit"], predictions_commit=committed)
    (out / "runs.json").write_text(json.dumps(runs, indent=0))
    write_markdown(out, pred, table, sc, sc_first, walls, total_s, load0, load1, cmd, committed)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
