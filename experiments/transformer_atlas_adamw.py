"""AdamW with a cosine schedule: the Adam reduction against a transformer population, pre-registered.

The transformer atlas (``transformer_atlas.py``) checked the escape model with heavy ball; this experiment checks
Adam's reduction (:func:`grpojax.dynamics.adam_to_heavy_ball`, the gain law and :func:`adam_escape_along` through
:func:`grpojax.dynamics.schedule_margin` with ``adam=``) on the same tiny transformer at the same plateau θ*, with
the atlas's committed inputs (K_0, K_d, σ² along v, basin w, groups per step, run length in
``../predictions.json``; θ*, the stiffest direction v and the warm start in ``../predictions.npz``).

Cell: difficulty 1, K_ref = 1 (a fresh batch every step, so the per-step and held-noise models coincide),
Adam (β₁ 0.9, β₂ 0.999, ε 1e-8, weight decay 0: AdamW with λ = 0), cosine schedule with the atlas's warmup
(10% of the 160 steps), no gradient clipping; members start at θ*.

The gradient's scale (``--grad-rms`` of ``predict``): Adam divides each parameter's step by its own sqrt(v̂_i).
For a gradient along v the step along v is then lr (1 − β₁) Σ_i v_i² / (sqrt(v_i) + ε) times the gradient, so
the scalar reduction's sqrt(v₀) along v is the harmonic form

    1 / (sqrt(v₀) + ε) = Σ_i v_i² / (sqrt(E[g_i²]) + ε)         (the preconditioner's Rayleigh quotient on v)

with E[g_i²] = ḡ_i² + Var_i / B the per-step second moment of parameter i at θ* (the trainer's step gradient
is the mean of its B group gradients: ``seq_mean_token_mean``), from per-group gradients at θ* on fresh groups.
This choice is fixed before any run; the arithmetic form sqrt(Σ v_i² E[g_i²]) is reported beside it.

Stages (``--stage predict`` writes ``predictions.json`` and stops; it is committed before ``--stage run``):

1. predict: sqrt(v₀) as above; the critical peak lr (the gain law's knee, margin 0 at the peak); the escape
   onset peak lr (P(escape within T) = 1/2 along the schedule, ``schedule_margin(..., adam=, noise=, basin=)``);
   a frozen-preconditioner variant (v̂ held at its noise floor: heavy ball μ = β₁ at lr (1 − β₁)/sqrt(v₀)) for
   comparison only; a log grid of peak lrs around the predicted onset, seeds from ``SEED_OFFSET``.
2. run: one population program; the atlas's regime rule unchanged (escaped if diverged or max_t |e_t| > w).
3. score: measured onset (the atlas's logistic fit, bootstrap 95% interval) against the predicted one, stated
   band ±25%; Brier score of P(escape) against the η*-only rule (escaped iff peak ≥ critical peak lr).
"""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import transformer_atlas as ta  # noqa: E402

from grpojax._experiment import Claim, experiment_parser, load_average, parse_args, print_claims, write_summary  # noqa: E402

NAME = "transformer_atlas_adamw"
ATLAS = pathlib.Path(__file__).resolve().parent / "results" / "transformer_atlas"
SEED_OFFSET = 3_000_000
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
K_REF, SET = 1, "difficulty1"
NOISE_GROUPS = 512
BAND = 0.25
RELS, SEEDS = 12, 8


def preconditioner_along(second_moment, direction, eps: float = EPS) -> tuple[float, float]:
    """(harmonic, arithmetic) sqrt(v₀) along a unit ``direction`` v from per-parameter second moments E[g_i²].

    harmonic: 1 / (Σ v_i² / (sqrt(E[g_i²]) + ε)) − ε, the scale that Adam's diagonal preconditioner applies to a
    step along v (its Rayleigh quotient on v); arithmetic: sqrt(Σ v_i² E[g_i²])."""
    from grpojax._errors import InvalidValueError

    m = np.asarray(second_moment, np.float64)
    v = np.asarray(direction, np.float64)
    if m.shape != v.shape or m.ndim != 1 or not np.all(np.isfinite(m) & (m >= 0)):
        raise InvalidValueError(f"second_moment must be finite, >= 0 and of the direction's shape {v.shape}, got {m.shape}")
    w = v * v / np.sum(v * v)
    return float(1.0 / np.sum(w / (np.sqrt(m) + eps)) - eps), float(math.sqrt(np.sum(w * m)))


def _margin(peak, p, pred_or_cell, sqrt_v0, steps, frozen=False):
    from grpojax.dynamics import adam_to_heavy_ball, schedule_margin

    kd, k0 = p["stiffness"]["k_stale"], p["stiffness"]["k_instant"]
    red = adam_to_heavy_ball(beta1=BETA1, beta2=BETA2, eps=EPS, grad_rms=sqrt_v0)
    kw = dict(schedule="cosine", steps=steps, warmup_steps=pred_or_cell["warmup_steps"], lag="periodic", k_instant=k0,
              noise=p["noise_per_group"], basin=p["basin"], samples_per_step=p["groups_per_step"])
    if frozen:  # v̂ held at its floor: heavy ball at lr × step_scale
        return schedule_margin(peak * red.step_scale, K_REF, kd, mu=BETA1, **kw)
    return schedule_margin(peak, K_REF, kd, adam=red, beta2=BETA2, **kw)


def _onset(prob, crit):
    lo, hi = 1e-3 * crit, 100 * crit
    if prob(hi) < 0.5:
        return math.inf
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if prob(mid) >= 0.5 else (mid, hi)
    return math.sqrt(lo * hi)


def measure_second_moment(atlas, arrays, log=print):
    """Per-parameter E[g_i²] of the trainer's step gradient at θ* (B groups per step), on fresh groups."""
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    from grpojax.dynamics import noise_from_gradients
    from grpojax.grpo._population import WarmStart
    from grpojax.grpo._trainer import GRPOTrainer

    p = atlas["prompt_sets"][SET]
    cfg = ta.make_config(p["difficulty"], atlas["steps"], 0)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="transformer-atlas-adamw-") as tmp:
        trainer = GRPOTrainer(cfg, tmp, devices=jax.devices()[:1])
    _, unravel = ravel_pytree(jax.device_get(trainer.params))
    warm = WarmStart(trainer.graphdef, unravel(jnp.asarray(arrays[f"{SET}/warm_params"])),
                     jax.device_get(trainer.rest), trainer)
    theta = unravel(jnp.asarray(arrays[f"{SET}/theta_star"]))
    v = np.asarray(arrays[f"{SET}/direction"], np.float64)
    t0 = time.perf_counter()
    groups = ta.sample_groups(warm, cfg, theta, NOISE_GROUPS, seed=11)
    g = np.asarray(ta.update_fns(warm, cfg, groups, theta)[2](theta), np.float64)  # (groups, n)
    B = p["groups_per_step"]
    mean, var = g.mean(0), g.var(0, ddof=1)
    m2 = mean**2 + var / B
    sigma2 = noise_from_gradients(g, v / np.linalg.norm(v))
    log(f"  per-group gradients at theta*: {g.shape[0]} groups in {time.perf_counter() - t0:.0f} s; sigma^2 along v "
        f"{sigma2:.4g} (atlas: {p['noise_per_group']:.4g})")
    w = v * v / np.sum(v * v)
    q = w / (np.sqrt(m2) + EPS)
    top = np.sort(q)[::-1]
    return dict(second_moment=m2, sigma2_along_v=sigma2, groups=int(g.shape[0]),
                mean_sq_over_m2=float(np.sum(w * mean**2) / np.sum(w * m2)),
                top10_share_of_harmonic=float(top[:10].sum() / q.sum()),
                top100_share_of_harmonic=float(top[:100].sum() / q.sum()),
                # cosine between v and Adam's preconditioned step for a gradient along v (1: not rotated)
                step_cosine_with_v=float(q.sum() / math.sqrt(np.sum((v / (np.sqrt(m2) + EPS)) ** 2))
                                         * math.sqrt(np.sum(v * v))),
                # the gain law's coupling: d(1/sqrt v_i)/dQ summed with v_i^4 (oscillation's gradient along v),
                # over the harmonic weight; the scalar model has 1 / (sigma^2/B)
                gain_coupling_over_scalar=float((np.sum(w**2 / m2**1.5) / np.sum(w / np.sqrt(m2)))
                                                * sigma2 / B))


def predict(out: pathlib.Path, log=print, seed_offset: int = SEED_OFFSET):
    from grpojax.grpo._population import WarmStart  # noqa: F401  (fail early without the trainer)

    atlas, arrays = ta.committed(ATLAS)
    p = atlas["prompt_sets"][SET]
    T = atlas["steps"]
    wu = int(ta.COSINE["warmup_frac"] * T)
    t0 = time.perf_counter()
    meas = measure_second_moment(atlas, arrays, log)
    harm, arith = preconditioner_along(meas.pop("second_moment"), arrays[f"{SET}/direction"])
    cell = dict(prompt_set=SET, schedule="cosine", warmup_steps=wu, optimizer="adam", beta1=BETA1, beta2=BETA2,
                eps=EPS, weight_decay=0.0, k_ref=K_REF, grad_rms=harm, grad_rms_arithmetic=arith)
    rules = {}
    for key, sv, frozen in (("adam", harm, False), ("adam_arithmetic", arith, False), ("frozen", harm, True)):
        crit = _margin(1e-9, p, cell, sv, T).critical_lr
        on = _onset(lambda pk, sv=sv, fr=frozen: _margin(pk, p, cell, sv, T, fr).escape_probability, crit)
        rules[key] = dict(grad_rms=sv, critical_peak_lr=crit, onset_peak_lr=on, onset_rel=on / crit)
        log(f"  {key}: sqrt(v0) {sv:.4g}; critical peak lr {crit:.4g}; escape onset peak {on:.4g} ({on / crit:.3f})")
    main_on, crit = rules["adam"]["onset_peak_lr"], rules["adam"]["critical_peak_lr"]
    lo = min(0.3 * main_on, 0.5 * rules["frozen"]["onset_peak_lr"])
    peaks = np.geomspace(lo, 10 * main_on, RELS)
    runs = []
    for pk in peaks:
        sm = _margin(float(pk), p, cell, harm, T)
        pr = float(sm.escape_probability)
        pf = float(_margin(float(pk), p, cell, harm, T, frozen=True).escape_probability)
        for sd in range(SEEDS):
            runs.append(dict(prompt_set=SET, schedule="cosine", mu=BETA1, k_ref=K_REF, eta=float(pk),
                             eta_rel=float(pk / crit), eta_star=crit, seed=sd, p_escape=pr, p_escape_frozen=pf,
                             escape_onset=main_on))
    pred = dict(experiment=NAME, commit=ta.atlas.git_head(), written_before_runs=True, atlas_commit=atlas["commit"],
                cell=cell, measurement=meas, rules=rules, steps=T, basin=p["basin"], noise_per_group=p["noise_per_group"],
                groups_per_step=p["groups_per_step"], stiffness=dict(k_instant=p["stiffness"]["k_instant"],
                                                                     k_stale=p["stiffness"]["k_stale"]),
                regime_rule=ta.rule_text(T).split(" Predicted (escape model)")[0],
                band=(f"predicted (Adam model, harmonic sqrt(v0)): measured onset peak lr within +-{BAND:.0%} of "
                      f"{main_on:.4g}, i.e. [{main_on * (1 - BAND):.4g}, {main_on * (1 + BAND):.4g}]"),
                brier="P(escape within T) of the Adam model per run vs the eta*-only rule (escaped iff peak >= "
                      "critical peak lr)", seed_offset=seed_offset, rels=RELS, seeds_per_rel=SEEDS, runs=runs,
                seconds=time.perf_counter() - t0)
    (out / "predictions.json").write_text(json.dumps(pred, indent=1))
    log(f"{len(runs)} planned runs; predictions written in {pred['seconds']:.0f} s")
    return pred


def run(pred, out: pathlib.Path, log=print):
    from grpojax.grpo import Member, train_population

    atlas, arrays = ta.committed(ATLAS)
    cfg, warm, start, direction = ta.plateau_start(atlas, arrays, SET, pred["steps"])
    runs = [dict(r) for r in pred["runs"]]
    members = [Member(lr=r["eta"], b1=BETA1, b2=BETA2, k_ref=K_REF, beta=ta.BETA, clip_eps=ta.CLIP,
                      seed=pred["seed_offset"] + i, name=f"adamw-cosine-{i:04d}") for i, r in enumerate(runs)]
    res = train_population(cfg, members, None, optimizer="adam", kl_reference="initial", schedule="cosine",
                           warmup_steps=pred["cell"]["warmup_steps"], chunk=20, show_progress=False, warm=warm,
                           start=start, direction=direction)
    for j, r in enumerate(runs):
        r["member_seed"] = pred["seed_offset"] + j
    ta.measure_runs(res, runs, pred["basin"])
    log(f"{len(runs)} members x {pred['steps']} steps: {res.wall_s:.0f} s wall, "
        f"{float(sum(res.chunk_cpu_s)):.0f} s CPU; escaped {sum(r['escaped'] for r in runs)}")
    return runs, dict(wall_s=res.wall_s, first_call_s=res.chunk_s[0], cpu_s=float(sum(res.chunk_cpu_s)), n=len(runs))


def score(pred, runs):
    crit = pred["rules"]["adam"]["critical_peak_lr"]
    peak = np.array([r["eta"] for r in runs])
    y = np.array([r["escaped"] for r in runs], bool)
    on_rel, lo_rel, hi_rel = ta.logistic_onset(np.log(peak / crit), y)
    measured = dict(onset_peak_lr=on_rel * crit, lo=lo_rel * crit, hi=hi_rel * crit)
    yf = y.astype(float)
    out = dict(measured=measured, escaped=int(y.sum()), n=len(runs), diverged=int(sum(r["diverged"] for r in runs)))
    for key in ("adam", "adam_arithmetic", "frozen"):
        on = pred["rules"][key]["onset_peak_lr"]
        out[f"ratio_{key}"] = measured["onset_peak_lr"] / on
    out["within_band"] = bool(abs(out["ratio_adam"] - 1) <= BAND)
    p = np.array([r["p_escape"] for r in runs])
    pf = np.array([r["p_escape_frozen"] for r in runs])
    out["brier_adam"] = float(np.mean((p - yf) ** 2))
    out["brier_frozen"] = float(np.mean((pf - yf) ** 2))
    out["brier_eta_star"] = float(np.mean(((peak >= crit) - yf) ** 2))
    per = []
    for pk in np.unique(peak):
        m = peak == pk
        per.append(dict(peak_lr=float(pk), over_critical=float(pk / crit), p_escape=float(p[m][0]),
                        p_escape_frozen=float(pf[m][0]), escaped=int(y[m].sum()), n=int(m.sum()),
                        diverged=int(sum(r["diverged"] for r, mm in zip(runs, m) if mm))))
    out["per_lr"] = per
    return out


def write_markdown(out, pred, sc, pop, total_s, load0, load1, committed):
    r, m, meas = pred["rules"], sc["measured"], pred["measurement"]
    rows = "\n".join(f"| {q['peak_lr']:.4g} | {q['over_critical']:.3g} | {q['p_escape']:.2f} | {q['p_escape_frozen']:.2f} | "
                     f"{q['escaped']}/{q['n']} | {q['diverged']} |" for q in sc["per_lr"])
    text = f"""# AdamW with a cosine schedule against a transformer population

Pre-registered: `predictions.json` committed in {committed} before the run. Cell: the transformer atlas's tiny
transformer at its plateau θ* (difficulty 1), K_ref = 1, Adam β₁ {BETA1}, β₂ {BETA2}, ε {EPS:g}, weight decay 0,
cosine schedule over {pred['steps']} steps with {pred['cell']['warmup_steps']} warmup steps, members from θ*,
{pred['rels']} peak lrs × {pred['seeds_per_rel']} seeds (member seeds from {pred['seed_offset']}).
Regime rule (the atlas's): escaped if diverged or max_t |<θ_t − θ*, v>| > w (w = {pred['basin']:.4g}).

Gradient scale along v (per-step E[g_i²] at θ* from {meas['groups']} group gradients, B = {pred['groups_per_step']}):
harmonic (the preconditioner's Rayleigh quotient on v, pre-registered) sqrt(v₀) = {r['adam']['grad_rms']:.4g};
arithmetic sqrt(Σ v_i² E[g_i²]) = {r['adam_arithmetic']['grad_rms']:.4g}. Top 10 / 100 parameters carry
{meas['top10_share_of_harmonic']:.0%} / {meas['top100_share_of_harmonic']:.0%} of the harmonic sum; the gain
law's coupling in the population over the scalar model's: {meas['gain_coupling_over_scalar']:.3g}.

| rule | sqrt(v₀) | critical peak lr | predicted onset peak lr | measured / predicted |
|---|---|---|---|---|
| Adam model (harmonic, pre-registered) | {r['adam']['grad_rms']:.4g} | {r['adam']['critical_peak_lr']:.4g} | {r['adam']['onset_peak_lr']:.4g} | {sc['ratio_adam']:.2f} |
| Adam model (arithmetic) | {r['adam_arithmetic']['grad_rms']:.4g} | {r['adam_arithmetic']['critical_peak_lr']:.4g} | {r['adam_arithmetic']['onset_peak_lr']:.4g} | {sc['ratio_adam_arithmetic']:.2f} |
| v̂ frozen at its floor (comparison) | {r['frozen']['grad_rms']:.4g} | {r['frozen']['critical_peak_lr']:.4g} | {r['frozen']['onset_peak_lr']:.4g} | {sc['ratio_frozen']:.2f} |

Measured onset peak lr {m['onset_peak_lr']:.4g} [{m['lo']:.4g}, {m['hi']:.4g}] (maximum-likelihood logistic fit of
P(escaped) in log peak lr, 95% bootstrap interval over runs). Stated band ±{BAND:.0%}: **{'within' if sc['within_band'] else 'outside'}**
(ratio {sc['ratio_adam']:.2f}). Brier: Adam model {sc['brier_adam']:.3f}, frozen preconditioner {sc['brier_frozen']:.3f},
η*-only rule {sc['brier_eta_star']:.3f}. Escaped {sc['escaped']} of {sc['n']}, diverged {sc['diverged']}.

| peak lr | / critical | P(escape) Adam | P(escape) frozen | escaped | diverged |
|---|---|---|---|---|---|
{rows}

Population: {pop['n']} members × {pred['steps']} steps in one program, {pop['wall_s']:.0f} s wall, {pop['cpu_s']:.0f} s CPU
(first call with compilation {pop['first_call_s']:.0f} s); whole run stage {total_s:.0f} s; {load0} before, {load1} after.
"""
    (out / f"{NAME.replace('transformer_atlas_', '')}_cosine.md").write_text(text)


def pool(out: pathlib.Path) -> int:
    """Score the runs of ``out`` and of its subfolders (replicates, same predictions, other seeds) together."""
    pred = json.loads((out / "predictions.json").read_text())
    files = [out / "runs.json"] + sorted(out.glob("*/runs.json"))
    runs = [r for f in files for r in json.loads(f.read_text())]
    sc = score(pred, runs)
    sc["batches"] = [str(f.parent.relative_to(out)) for f in files]
    (out / "pooled.json").write_text(json.dumps(sc, indent=1))
    m = sc["measured"]
    (out / "pooled.md").write_text(
        f"# AdamW cosine cell, pooled ({len(runs)} runs, batches: {', '.join(sc['batches'])})\n\n"
        f"Measured onset peak lr {m['onset_peak_lr']:.4g} [{m['lo']:.4g}, {m['hi']:.4g}] vs predicted "
        f"{pred['rules']['adam']['onset_peak_lr']:.4g}: ratio {sc['ratio_adam']:.2f} (band +-{BAND:.0%}: "
        f"{'within' if sc['within_band'] else 'outside'}); arithmetic sqrt(v0): {sc['ratio_adam_arithmetic']:.2f}; "
        f"v-hat frozen: {sc['ratio_frozen']:.2f}. Brier: Adam model {sc['brier_adam']:.3f}, frozen "
        f"{sc['brier_frozen']:.3f}, eta*-only {sc['brier_eta_star']:.3f}. Escaped {sc['escaped']} of {sc['n']}, "
        f"diverged {sc['diverged']}.\n")
    print((out / "pooled.md").read_text())
    return 0


def main(argv=None):
    ap = experiment_parser(NAME, __doc__, quick_help="(no quick mode)")
    ap.add_argument("--stage", choices=("predict", "run", "pool"), default="predict",
                    help="predict: write predictions.json and stop; run: run and score against the committed ones; "
                         "pool: score the runs of --out and of its subfolders (replicates) together")
    ap.add_argument("--seed-offset", type=int, default=SEED_OFFSET,
                    help=f"predict stage: the first member seed (default {SEED_OFFSET}; a replicate takes another)")
    args = parse_args(ap, argv)
    out = args.out
    if args.seed_offset < 3_000_000:
        ap.error(f"--seed-offset must be >= 3000000 (lower seeds were run by the atlas), got {args.seed_offset}")
    if args.stage == "predict":
        predict(out, seed_offset=args.seed_offset)
        return 0
    if args.stage == "pool":
        return pool(out)
    pred = json.loads((out / "predictions.json").read_text())
    t0, load0 = time.perf_counter(), load_average()
    runs, pop = run(pred, out)
    total_s, load1 = time.perf_counter() - t0, load_average()
    (out / "runs.json").write_text(json.dumps(runs, indent=0))
    sc = score(pred, runs)
    try:
        committed = subprocess.run(["git", "log", "--diff-filter=A", "--format=%h", "-1", "--", "predictions.json"],
                                   capture_output=True, text=True, cwd=out).stdout.strip() or "not committed"
    except OSError:
        committed = "not committed"
    claims = [Claim(
        "Adam's reduction (harmonic sqrt(v0) along v, gain law, escape along the cosine schedule) predicts the "
        "escape onset peak lr of a transformer population with AdamW and a cosine schedule within +-25%",
        f"measured {sc['measured']['onset_peak_lr']:.4g} [{sc['measured']['lo']:.4g}, {sc['measured']['hi']:.4g}] vs "
        f"predicted {pred['rules']['adam']['onset_peak_lr']:.4g} (ratio {sc['ratio_adam']:.2f}); Brier "
        f"{sc['brier_adam']:.3f} vs eta*-only {sc['brier_eta_star']:.3f}",
        "confirmed" if sc["within_band"] else "refuted")]
    write_summary(out, NAME, quick=False, claims=claims, figures=[], scores=sc, population=pop,
                  total_wall_s=total_s, load_before=load0, load_after=load1, predictions_commit=committed)
    write_markdown(out, pred, sc, pop, total_s, load0, load1, committed)
    print_claims(claims)
    return 0


if __name__ == "__main__":
    sys.exit(main())
