"""The noise-aware escape model on the policy network of the stability atlas, pre-registered.

The stability atlas (``network_stability_atlas.py``) measured where GRPO runs of a 197-parameter policy
network leave their plateau, against the exact threshold η* of the mean update. With momentum 0.9 and 72
samples per step the runs escape far below η*. This experiment predicts, for every run, the probability that
it escapes within its length from the escape model (``grpojax.dynamics.escape_probability``: the noisy
linearised update along the stiffest direction), writes every prediction to ``predictions.json`` (to be
committed before the runs), then runs the cells and scores the predictions against the η*-only rule.

Inputs of the model, every one measured on the network before any run, none fitted to a run:

- K_0, K_d, η* and the stiffest direction v: the atlas's committed predictions
  (``results/network_stability_atlas.predictions.json``, as written before the atlas's runs).
- the noise: the variance of the trainer's sampled gradient at θ* (θ_b = θ*) projected on v, over
  ``NOISE_DRAWS`` independent steps of 72 samples (``grpojax.dynamics.noise_from_gradients``); a step with
  R × 72 samples has 1/R of it (independent groups).
- the basin: the atlas's regime rule calls a run unstable once the policy's mean total-variation distance
  from the plateau exceeds 0.15 (late window), so w is the smallest |x| at which the policy at θ* + x v
  (either sign) is 0.15 away in total variation.
- T: the runs' length.

Cells: rules (no ratio, unclipped, clipped ratio) × SGD momentum (0, 0.9) × K_ref (1, 2, 4, 8, 16) × samples
per step (72, 288, 1152: 1, 4, 16 groups per prompt) × 12 learning rates (0.1-10 η*) × 2 seeds, 400 steps,
each started at θ* — the atlas's runs (same seeds, same program) for 72 samples, new runs for 288 and 1152.
``--quick``: rules none and clipped, K_ref 1 and 4, 8 learning rates, one seed, 200 steps.

Scores: the Brier score of P(escape) against the measured label (unstable = not stable, the atlas's rule)
beside the η*-only rule (P = 1 above η*, 0 below); agreement of the predicted regime (unstable iff
P ≥ 1/2) with the measured one outside ±25% of the predicted onset, per cell and overall; a reliability
diagram.

Stages: ``--stage predict`` writes predictions.json and stops; ``--stage run`` runs against an existing
predictions.json (the committed one); ``all`` (default) does both. Heavy: run it under the shared lock.
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
import network_stability_atlas as atlas  # noqa: E402

from grpojax._experiment import (Claim, committed_predictions, experiment_parser, load_average, parse_args,  # noqa: E402
                                 print_claims, write_summary)

NAME = "escape_validation"
ATLAS_PREDICTIONS = pathlib.Path(__file__).resolve().parent / "results" / "network_stability_atlas.predictions.json"
NOISE_DRAWS = 4000
TV_RULE = 0.15  # the atlas's regime rule: unstable once the late mean TV distance exceeds this
REPEATS = (1, 4, 16)
PRUNE_SD = 7.0


def cells(pred, quick: bool):
    rules = ("none", "clipped") if quick else atlas.RULES
    ks = (1, 4) if quick else (1, 2, 4, 8, 16)
    return [t for t in pred["thresholds"] if t["rule"] in rules and t["k_ref"] in ks and t["optimizer"] != "adam"]


def step_gradients(ctx, rule, n, key, theta=None):
    """The trainer's sampled update direction at θ = θ_b = θ* (or ``theta``) for ``n`` independent steps of 72
    samples."""
    from grpojax.grpo import grpo_loss, group_advantages

    with jax.enable_x64(True):
        x, correct = jnp.asarray(ctx["x"]), ctx["correct"]
        ref, un = jnp.asarray(ctx["ref_logp"]), ctx["unravel"]
        ts = jnp.asarray(ctx["theta_star"] if theta is None else theta)
        onehot = jax.nn.one_hot(correct, atlas.NANS)
        eps = jnp.inf if rule == "unclipped" else atlas.CLIP

        def sampled(k):
            def loss(t):
                lq, lb = atlas.logp_all(un(t), x), atlas.logp_all(un(ts), x)
                ans = jax.random.categorical(k, lb[:, None, :], axis=-1, shape=(x.shape[0], atlas.G))
                adv = group_advantages(jnp.take_along_axis(onehot, ans, axis=1), "grpo", eps=atlas.ADV_EPS).reshape(-1)
                pick = lambda a: jnp.take_along_axis(a, ans, axis=1).reshape(-1, 1)  # noqa: E731
                lq_s, lb_s, rs = pick(lq), pick(lb), pick(ref)
                old = jax.lax.stop_gradient(lq_s) if rule == "none" else lb_s
                t_ = grpo_loss(lq_s, jnp.zeros_like(lq_s), old, rs, adv, jnp.ones_like(lq_s, bool), beta=0.0,
                               eps_low=eps, eps_high=eps)
                return t_.loss + atlas.BETA * (jnp.exp(rs - lq_s) - (rs - lq_s) - 1.0).mean()
            return -jax.grad(loss)(ts)

        return np.asarray(jax.lax.map(sampled, jax.random.split(key, n)))


def basin_width(ctx, direction):
    """Smallest |x| with mean TV(π(θ* + x v), π(θ*)) = TV_RULE, either sign (bisection on a bracketing grid)."""
    with jax.enable_x64(True):
        x, un, ts = jnp.asarray(ctx["x"]), ctx["unravel"], jnp.asarray(ctx["theta_star"])
        v = jnp.asarray(direction) / jnp.linalg.norm(jnp.asarray(direction))
        p0 = jnp.exp(atlas.logp_all(un(ts), x))

        def tv(s):
            return float(0.5 * jnp.abs(jnp.exp(atlas.logp_all(un(ts + s * v), x)) - p0).sum(-1).mean())

        out = []
        for sign in (1.0, -1.0):
            grid = np.geomspace(1e-3, 1e3, 121)
            vals = np.array([tv(sign * g) for g in grid])
            i = int(np.argmax(vals >= TV_RULE))
            if vals[i] < TV_RULE:
                out.append(math.inf)
                continue
            lo, hi = grid[max(i - 1, 0)], grid[i]
            for _ in range(50):
                mid = math.sqrt(lo * hi)
                lo, hi = (lo, mid) if tv(sign * mid) >= TV_RULE else (mid, hi)
            out.append(0.5 * (lo + hi))
    return min(out), out


def dense_stiffness(ctx, rule):
    """K_0 = −∂u/∂θ and K_d = −∂u/∂θ_b at θ* (dense Jacobians of the exact mean update)."""
    from jax.flatten_util import ravel_pytree

    with jax.enable_x64(True):
        x, un, ts = jnp.asarray(ctx["x"]), ctx["unravel"], jnp.asarray(ctx["theta_star"])
        u = atlas.mean_update(rule, x, ctx["correct"], jnp.asarray(ctx["ref_logp"]))
        flat = lambda a, b: ravel_pytree(u(un(a), un(b)))[0]  # noqa: E731
        J0 = np.asarray(jax.jacfwd(lambda a: flat(a, ts))(ts))
        Jd = np.asarray(jax.jacfwd(lambda b: flat(ts, b))(ts))
    return -J0, -Jd


def mode_basis(K0, Kd, v):
    """An orthonormal basis: the stiffest direction v first, then the eigenvectors of the symmetric part of
    K = K_0 + K_d restricted to the complement of v (largest first)."""
    n = v.size
    v = v / np.linalg.norm(v)
    Pr = np.eye(n) - np.outer(v, v)
    K = K0 + Kd
    S = Pr @ (0.5 * (K + K.T)) @ Pr
    vals, vecs = np.linalg.eigh(S)
    order = np.argsort(-vals)
    vecs = vecs[:, order]
    keep = [i for i in range(n) if abs(vecs[:, i] @ v) < 0.5][: n - 1]
    return np.column_stack([v, vecs[:, keep]])


def basin_widths(ctx, V):
    """Per column v of V: the smallest |x| (either sign) with mean TV(π(θ* + x v), π(θ*)) = TV_RULE (inf if never)."""
    with jax.enable_x64(True):
        x, un, ts = jnp.asarray(ctx["x"]), ctx["unravel"], jnp.asarray(ctx["theta_star"])
        p0 = jnp.exp(atlas.logp_all(un(ts), x))
        Vj = jnp.asarray(V)

        @jax.jit
        def tv(s):  # s: (n_modes,) displacement along each column
            th = ts[None, :] + (Vj * s[None, :]).T
            pol = jax.vmap(lambda t: jnp.exp(atlas.logp_all(un(t), x)))(th)
            return 0.5 * jnp.abs(pol - p0[None]).sum(-1).mean(-1)

        grid = np.geomspace(1e-3, 1e3, 121)
        out = np.full(V.shape[1], np.inf)
        for sign in (1.0, -1.0):
            vals = np.stack([np.asarray(tv(jnp.full(V.shape[1], sign * g))) for g in grid], 1)  # (modes, grid)
            hit = vals >= TV_RULE
            found = hit.any(1)
            i = np.argmax(hit, 1)
            lo, hi = grid[np.maximum(i - 1, 0)], grid[i]
            for _ in range(50):
                mid = np.sqrt(lo * hi)
                up = np.asarray(tv(jnp.asarray(sign * mid))) >= TV_RULE
                lo, hi = np.where(up, lo, mid), np.where(up, mid, hi)
            out = np.where(found, np.minimum(out, 0.5 * (lo + hi)), out)
    return out


def combined_probability(etas, mu, K, modes, R, steps):
    """P(escape) = 1 − Π_i (1 − P_i) over the modes (independent), each mode the one-direction model."""
    from grpojax.dynamics._escape import escape_probability

    k0, kd, nz, w = (np.asarray(modes[k]) for k in ("k_instant", "k_stale", "noise", "basin"))
    # numerical pruning: a mode that is stable at the largest η of the call with its basin more than PRUNE_SD
    # stationary standard deviations wide contributes P < 1e-9 at any of these η (its variance grows with η)
    top = escape_probability(float(np.max(etas)), mu, K, kd, k_instant=k0, noise=nz * 72, samples_per_step=72 * R,
                             basin=w, steps=1, lag="periodic")
    keep = ~top.stable | (w < PRUNE_SD * np.sqrt(np.where(top.stable, top.stationary_variance, 0.0)))
    k0, kd, nz, w = k0[keep], kd[keep], nz[keep], w[keep]
    if not keep.any():
        return np.zeros(np.shape(etas)), None
    E = np.asarray(etas)[:, None]
    est = escape_probability(E, mu, K, kd[None, :], k_instant=k0[None, :], noise=nz[None, :] * 72,
                             samples_per_step=72 * R, basin=w[None, :], steps=steps, lag="periodic")
    with np.errstate(divide="ignore"):
        return -np.expm1(np.sum(np.log1p(-est.probability), axis=1)), est


def modes_onset(mu, K, modes, R, steps, eta_exact, rounds=3, points=8):
    """η where the combined P(escape) reaches 1/2: a 13-point log grid on [0.01, 10] η*, then ``rounds`` of
    ``points`` log-spaced points inside the bracketing pair (inf: never on the grid; 0: already at 0.01 η*)."""
    grid = np.geomspace(0.01, 10.0, 13)
    pf, _ = combined_probability(grid * eta_exact, mu, K, modes, R, steps)
    if pf[-1] < 0.5:
        return math.inf
    i = int(np.argmax(pf >= 0.5))
    if i == 0:
        return 0.0
    lo, hi = math.log(grid[i - 1]), math.log(grid[i])
    for _ in range(rounds):
        pts = np.linspace(lo, hi, points + 2)[1:-1]
        pp, _ = combined_probability(np.exp(pts) * eta_exact, mu, K, modes, R, steps)
        j = int(np.argmax(pp >= 0.5)) if (pp >= 0.5).any() else points
        lo, hi = (pts[j - 1] if j > 0 else lo), (pts[j] if j < points else hi)
    return float(math.exp(0.5 * (lo + hi))) * eta_exact


def predict(out: pathlib.Path, quick: bool, log=print):
    from grpojax.dynamics._escape import escape_onset, escape_probability, noise_from_gradients

    t0 = time.perf_counter()
    apred = json.loads(ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    steps = 200 if quick else 400
    rels = np.geomspace(0.1, 10.0, 8 if quick else 12)
    noise, basin, modes = {}, {}, {}
    for rule in sorted({c["rule"] for c in cells(apred, quick)}):
        v = np.asarray(apred["stiffness"][rule]["direction"])
        g = step_gradients(ctx, rule, NOISE_DRAWS // (4 if quick else 1), jax.random.key(7))
        var_step = noise_from_gradients(g, v)  # one step of 72 samples
        w, both = basin_width(ctx, v)
        noise[rule] = dict(per_step_variance_72=var_step, draws=int(g.shape[0]),
                           total_per_step_variance_72=noise_from_gradients(g))
        basin[rule] = dict(w=w, w_plus=both[0], w_minus=both[1])
        K0, Kd = dense_stiffness(ctx, rule)
        V = mode_basis(K0, Kd, v)
        ws = basin_widths(ctx, V)
        nz = np.var(g @ V, axis=0, ddof=1)
        keep = np.isfinite(ws) & (nz > 1e-12 * nz.max())
        modes[rule] = dict(k_instant=np.einsum("ij,ik,kj->j", V, K0, V)[keep].tolist(),
                           k_stale=np.einsum("ij,ik,kj->j", V, Kd, V)[keep].tolist(),
                           noise=nz[keep].tolist(), basin=ws[keep].tolist(), n_dropped=int((~keep).sum()))
        log(f"{rule:>9}: per-step gradient variance along v {var_step:.4g} (72 samples, {g.shape[0]} draws; "
            f"total over all parameters {noise[rule]['total_per_step_variance_72']:.4g}); basin w = {w:.4g}; "
            f"{int(keep.sum())} modes with noise and a finite basin (K_0 + K_d from "
            f"{min(np.array(modes[rule]['k_instant']) + np.array(modes[rule]['k_stale'])):.3g} to "
            f"{max(np.array(modes[rule]['k_instant']) + np.array(modes[rule]['k_stale'])):.3g})")
    rows, onsets = [], []
    for c in cells(apred, quick):
        mu, K, rule = c["mu"], c["k_ref"], c["rule"]
        for R in REPEATS:
            kw = dict(noise=noise[rule]["per_step_variance_72"] * 72, samples_per_step=72 * R,
                      basin=basin[rule]["w"], steps=steps, lag="periodic", k_instant=c["k_instant"])
            etas = rels * c["eta_exact"]
            est = escape_probability(etas, mu, K, c["k_stale"], **kw)
            on1 = float(escape_onset(mu, K, c["k_stale"], eta_max=c["eta_exact"] * 10.0, **kw))
            pm, _ = combined_probability(etas, mu, K, modes[rule], R, steps)
            on_m = modes_onset(mu, K, modes[rule], R, steps, c["eta_exact"])
            onsets.append(dict(rule=rule, optimizer=c["optimizer"], mu=mu, k_ref=K, repeats=R,
                               samples_per_step=72 * R, eta_exact=c["eta_exact"], onset=on_m,
                               onset_rel=on_m / c["eta_exact"], onset_one_direction=on1,
                               onset_one_direction_rel=on1 / c["eta_exact"]))
            for rel, eta, p1, p in zip(rels, etas, est.probability, pm):
                rows.append(dict(rule=rule, optimizer=c["optimizer"], mu=mu, k_ref=K, repeats=R, eta_rel=float(rel),
                                 eta=float(eta), eta_exact=c["eta_exact"], p_escape=float(p), onset=on_m,
                                 p_escape_one_direction=float(p1), onset_one_direction=on1))
            log(f"  {rule:>9} mu={mu} K_ref={K:>2} x{R:>2}: onset {on_m / c['eta_exact']:.3g} eta* "
                f"(one direction: {on1 / c['eta_exact']:.3g})")
    pred = dict(experiment=NAME, quick=quick, steps=steps, written_before_runs=True, git_head=atlas.git_head(),
                atlas_predictions=str(ATLAS_PREDICTIONS.name), noise=noise, basin=basin, modes=modes,
                model="primary (p_escape, onset): every direction of an orthonormal basis (the stiffest direction v, "
                      "then the eigenvectors of the symmetric part of K_0 + K_d on the complement of v), each the "
                      "one-direction escape model (grpojax.dynamics.escape_probability, periodic refresh, heavy ball) "
                      "with its Rayleigh quotients K_0, K_d, its per-step noise Var(v_i . g_step)/R and its basin "
                      "(TV 0.15 along v_i), combined as independent: P = 1 - prod(1 - P_i). Secondary "
                      "(p_escape_one_direction, onset_one_direction): the stiffest direction alone.",
                label_rule=atlas.RULE_TEXT, onsets=onsets, predictions=rows, seconds=time.perf_counter() - t0)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    return pred


def run(pred, out: pathlib.Path, quick: bool, log=print):
    apred = json.loads(ATLAS_PREDICTIONS.read_text())
    ctx = atlas.context_from(apred)
    measured = []
    walls = {}
    sel_cells = {(c["rule"], c["optimizer"], c["k_ref"]) for c in cells(apred, quick)}
    seeds = {0} if quick else {0, 1}
    for R in REPEATS:
        rows, outs, steps, wall = atlas.run_atlas(
            apred, ctx, out, quick, log=log, repeats=R,
            select=lambda r: (r["rule"], r["optimizer"], r["k_ref"]) in sel_cells and r["seed"] in seeds)
        walls[R] = wall
        for r in rows:
            measured.append(dict(rule=r["rule"], optimizer=r["optimizer"], mu=r["mu"], k_ref=r["k_ref"], repeats=R,
                                 eta_rel=r["eta_rel"], seed=r["seed"], measured=r["measured"],
                                 unstable=bool(r["measured"] != "stable")))
    return measured, walls


def score(pred, measured):
    key = lambda r: (r["rule"], r["optimizer"], r["k_ref"], r["repeats"], round(r["eta_rel"], 6))  # noqa: E731
    p_of = {key(r): r for r in pred["predictions"]}
    y, p_model, p_star, far_model, far_star, agree_model, agree_star, cellkey = [], [], [], [], [], [], [], []
    p_one = []
    for m in measured:
        pr = p_of[key(m)]
        yy = m["unstable"]
        y.append(yy)
        p_model.append(pr["p_escape"])
        p_one.append(pr["p_escape_one_direction"])
        p_star.append(1.0 if m["eta_rel"] >= 1.0 else 0.0)
        on_rel = pr["onset"] / pr["eta_exact"]
        far_model.append(abs(math.log(m["eta_rel"] / on_rel)) > math.log(1.25) if on_rel > 0 else True)
        far_star.append(abs(math.log(m["eta_rel"])) > math.log(1.25))
        agree_model.append((pr["p_escape"] >= 0.5) == yy)
        agree_star.append((m["eta_rel"] >= 1.0) == yy)
        cellkey.append((m["rule"], m["optimizer"], m["k_ref"], m["repeats"]))
    y, p_model, p_star = np.array(y, float), np.array(p_model), np.array(p_star)
    far_model, far_star = np.array(far_model), np.array(far_star)
    agree_model, agree_star = np.array(agree_model), np.array(agree_star)
    p_one = np.array(p_one)
    res = dict(n=int(y.size), brier_model=float(np.mean((p_model - y) ** 2)),
               brier_one_direction=float(np.mean((p_one - y) ** 2)),
               brier_eta_star=float(np.mean((p_star - y) ** 2)),
               agreement_far_model=float(agree_model[far_model].mean()), n_far_model=int(far_model.sum()),
               agreement_far_eta_star=float(agree_star[far_star].mean()), n_far_eta_star=int(far_star.sum()),
               agreement_all_model=float(agree_model.mean()), agreement_all_eta_star=float(agree_star.mean()))
    per = {}
    for k in sorted(set(cellkey)):
        idx = np.array([c == k for c in cellkey])
        fm, fs = idx & far_model, idx & far_star
        per["/".join(map(str, k))] = dict(
            n=int(idx.sum()), brier_model=float(np.mean((p_model[idx] - y[idx]) ** 2)),
            brier_eta_star=float(np.mean((p_star[idx] - y[idx]) ** 2)),
            agreement_far_model=float(agree_model[fm].mean()) if fm.any() else None,
            agreement_far_eta_star=float(agree_star[fs].mean()) if fs.any() else None,
            measured_unstable=int(y[idx].sum()))
    res["cells"] = per
    by_rep = {}
    for R in REPEATS:
        idx = np.array([c[3] == R for c in cellkey])
        if idx.any():
            by_rep[str(R)] = dict(n=int(idx.sum()), brier_model=float(np.mean((p_model[idx] - y[idx]) ** 2)),
                                  brier_eta_star=float(np.mean((p_star[idx] - y[idx]) ** 2)),
                                  agreement_far_model=float(agree_model[idx & far_model].mean())
                                  if (idx & far_model).any() else None,
                                  agreement_far_eta_star=float(agree_star[idx & far_star].mean())
                                  if (idx & far_star).any() else None)
    res["by_samples"] = by_rep
    bins = np.linspace(0, 1, 11)
    which = np.clip(np.digitize(p_model, bins) - 1, 0, 9)
    res["reliability"] = [dict(lo=float(bins[i]), hi=float(bins[i + 1]), n=int((which == i).sum()),
                               mean_p=float(p_model[which == i].mean()) if (which == i).any() else None,
                               observed=float(y[which == i].mean()) if (which == i).any() else None)
                          for i in range(10)]
    return res, p_model, y


def figure(res, p_model, y, out: pathlib.Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpojax._io import save_figure

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.8))
    rel = [b for b in res["reliability"] if b["n"]]
    ax[0].plot([0, 1], [0, 1], ":", color="0.5")
    ax[0].plot([b["mean_p"] for b in rel], [b["observed"] for b in rel], "o-", color="tab:blue")
    for b in rel:
        ax[0].annotate(str(b["n"]), (b["mean_p"], b["observed"]), fontsize=7, xytext=(3, -9), textcoords="offset points")
    ax[0].set_xlabel("predicted P(escape within the run)")
    ax[0].set_ylabel("measured fraction unstable")
    ax[0].set_title("reliability (runs per bin annotated)", fontsize=9)
    reps = sorted(res["by_samples"], key=int)
    xs = np.arange(len(reps))
    ax[1].bar(xs - 0.2, [res["by_samples"][r]["brier_model"] for r in reps], 0.4, label="escape model")
    ax[1].bar(xs + 0.2, [res["by_samples"][r]["brier_eta_star"] for r in reps], 0.4, label="η*-only rule")
    ax[1].set_xticks(xs, [f"{72 * int(r)}" for r in reps])
    ax[1].set_xlabel("samples per step")
    ax[1].set_ylabel("Brier score (lower is better)")
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / f"{NAME}.png", dpi=110)
    plt.close(fig)
    return f"{NAME}.png"


def write_markdown(out, pred, res, walls, total_s, load0, cmd):
    L = [f"# Escape model on the policy network ({'quick' if pred['quick'] else 'full'})", "",
         f"Command: `{cmd}`; {res['n']} runs x {pred['steps']} steps; whole experiment {total_s:.0f} s; "
         f"vmapped programs {', '.join(f'x{k}: {v:.0f} s' for k, v in walls.items())}. Load before: {load0}.",
         "Predictions: `predictions.json`, written and committed before the runs.", "",
         "## Inputs (measured before the runs, nothing fitted to a run)", "",
         "| rule | per-step variance along v (72 samples) | basin w (TV 0.15 along v) |", "|---|---|---|"]
    for r in pred["noise"]:
        L.append(f"| {r} | {pred['noise'][r]['per_step_variance_72']:.4g} | {pred['basin'][r]['w']:.4g} |")
    L += ["", "## Scores", "",
          "| | escape model | eta*-only rule |", "|---|---|---|",
          f"| Brier score (all runs) | {res['brier_model']:.4f} | {res['brier_eta_star']:.4f} |",
          f"| Brier score, stiffest direction alone (secondary) | {res['brier_one_direction']:.4f} | |",
          f"| agreement outside +-25% of the predicted onset / of eta* | {res['agreement_far_model']:.1%} "
          f"({res['n_far_model']} runs) | {res['agreement_far_eta_star']:.1%} ({res['n_far_eta_star']} runs) |",
          f"| agreement, all runs | {res['agreement_all_model']:.1%} | {res['agreement_all_eta_star']:.1%} |", "",
          "| samples per step | runs | Brier model | Brier eta* | agreement far model | agreement far eta* |",
          "|---|---|---|---|---|---|"]
    f = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    for R, b in sorted(res["by_samples"].items(), key=lambda kv: int(kv[0])):
        L.append(f"| {72 * int(R)} | {b['n']} | {b['brier_model']:.4f} | {b['brier_eta_star']:.4f} | "
                 f"{f(b['agreement_far_model'])} | {f(b['agreement_far_eta_star'])} |")
    L += ["", "## Per cell (rule/optimizer/K_ref/groups per prompt)", "",
          "| cell | predicted onset / eta* | runs | unstable | Brier model | Brier eta* | agree far model | agree far eta* |",
          "|---|---|---|---|---|---|---|---|"]
    on = {f"{o['rule']}/{o['optimizer']}/{o['k_ref']}/{o['repeats']}": o["onset_rel"] for o in pred["onsets"]}
    for k, c in res["cells"].items():
        L.append(f"| {k} | {on.get(k, float('nan')):.3g} | {c['n']} | {c['measured_unstable']} | {c['brier_model']:.3f} | "
                 f"{c['brier_eta_star']:.3f} | {f(c['agreement_far_model'])} | {f(c['agreement_far_eta_star'])} |")
    L += ["", "## Reliability", "", "| P bin | runs | mean P | measured fraction unstable |", "|---|---|---|---|"]
    for b in res["reliability"]:
        if b["n"]:
            L.append(f"| {b['lo']:.1f}-{b['hi']:.1f} | {b['n']} | {b['mean_p']:.3f} | {b['observed']:.3f} |")
    (out / f"{NAME}.md").write_text("\n".join(L) + "\n")


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="rules none and clipped, K_ref 1 and 4, 8 learning rates, "
                                                     "one seed, 200 steps (a few minutes on 2 cores)")
    ap.add_argument("--stage", choices=("all", "predict", "run"), default="all",
                    help="predict: write predictions.json and stop; run: score against an existing predictions.json")
    args = parse_args(ap, argv)
    out = args.out
    t0 = time.perf_counter()
    load0 = load_average()
    if args.stage == "run":
        pred = committed_predictions(out, args.quick)
    else:
        pred = predict(out, args.quick)
        print(f"wrote {out / 'predictions.json'}")
        if args.stage == "predict":
            return 0
    measured, walls = run(pred, out, args.quick)
    res, p_model, y = score(pred, measured)
    fig = figure(res, p_model, y, out)
    total_s = time.perf_counter() - t0
    cmd = "python experiments/escape_validation.py" + (" --quick" if args.quick else "")
    better = 1.0 - res["brier_model"] / res["brier_eta_star"] if res["brier_eta_star"] > 0 else float("nan")
    claims = [
        Claim("The escape model's P(escape within the run) has a Brier score at least 30% below the eta*-only "
              "rule's on the policy network (pre-registered predictions)",
              f"Brier {res['brier_model']:.4f} vs {res['brier_eta_star']:.4f} ({better:.0%} lower) over {res['n']} runs",
              "confirmed" if better >= 0.3 else ("partial" if better > 0 else "refuted")),
        Claim("Outside +-25% of the predicted onset (P = 1/2) the predicted regime agrees with the measured one "
              "in at least 90% of the runs",
              f"{res['agreement_far_model']:.1%} of {res['n_far_model']} runs (eta*-only rule outside +-25% of "
              f"eta*: {res['agreement_far_eta_star']:.1%} of {res['n_far_eta_star']})",
              "confirmed" if res["agreement_far_model"] >= 0.9 else
              ("partial" if res["agreement_far_model"] > res["agreement_far_eta_star"] else "refuted")),
    ]
    write_summary(out, NAME, quick=args.quick, claims=claims, figures=[fig], scores=res, program_wall_s=walls,
                  total_wall_s=total_s, load_before=load0, load_after=load_average(), command=cmd)
    (out / "runs.json").write_text(json.dumps(measured, indent=0))
    write_markdown(out, pred, res, walls, total_s, load0, cmd)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
