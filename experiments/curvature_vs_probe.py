"""curvature_vs_probe: the K_d that ``grpojax curvature`` measures against the one ``grpojax advise --probe`` fits.

Both numbers are called K_d, but they are not the same quantity as they stand:

* ``advise --probe LOG`` fits the run's reward curve for its fast rate λ (the creep forecast, 90% interval)
  and inverts it with the run's hyperparameters: K_d = a / η_hb with a = (λ (1 − μ) − η_hb K_0) / (1 + λ τ),
  τ = (K_ref − 1) / 2 (periodic refresh). For an AdamW run (``--beta1``) it takes μ = β₁ and
  η_hb = η (1 − β₁): the preconditioner is taken as 1, so this K_d is in **Adam's units**, K / sqrt(v).
  With K_ref = 1 (τ = 0) and ``--k-instant 0`` the rate identifies only the sum: K_d(probe) = λ / η, which
  stands for K_0 + K_d.
* ``grpojax curvature`` measures the Rayleigh quotients vᵀK_0v and vᵀK_d v of the GRPO update of the
  checkpoint along a direction v (the stiffest direction of K_0 + K_d, or the mean update; on the prompts v was
  found on, or on held-out prompts), in the units of the **plain gradient step** (the
  update normalised by the batch's completion tokens), and σ², the per-completion variance of the update
  along v.

The conversion is the preconditioned heavy-ball reduction of the model (``docs/model/schedules.md``,
:func:`grpojax.dynamics.adam_to_heavy_ball`): Adam steps η_hb = η (1 − β₁) / (sqrt(v) + ε) with
v ≈ σ²/B + ḡ² along the error coordinate, so

    K(Adam units) = K(plain) / (sqrt(σ²/B + ḡ²) + ε),

B = G × prompts per step of the logged run; ḡ is taken as 0 (the measurement point is treated as the
plateau, as ``grpojax curvature`` does). Any scalar conversion of this kind leaves the relative width of an
interval (width / value) and, for an interval above 0, its ratio hi / lo unchanged, so those unit-free
widths are compared first; the absolute widths are compared after the conversion.

The advise side runs the command itself (``grpojax advise ... --probe LOG --json FILE``) in a
subprocess, as a user would; a refusal is recorded with its message. The curvature side reads the
``curvature.json`` files ``grpojax curvature`` wrote.

Usage:
  python experiments/curvature_vs_probe.py --log out/smollm2-arith-cpu/metrics.jsonl \\
      --curvature out/curvature-gsm8k/curvature.json --eta 1e-5 --beta1 0.9 --k-ref 1 --group-size 8 \\
      --prompts-per-step 8 --results experiments/results
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAME = "curvature_vs_probe"


def run_advise(args) -> dict:
    """``grpojax advise --probe`` on the log, as a subprocess: its JSON, or its refusal message."""
    cmd = ["advise", "--eta", f"{args.eta:g}", "--beta1", f"{args.beta1:g}", "--k-ref", str(args.k_ref),
           "--group-size", str(args.group_size), "--prompts-per-step", str(args.prompts_per_step),
           "--probe", str(args.log)]
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "advice.json"
        proc = subprocess.run([sys.executable, "-c", "from grpojax.cli import main; raise SystemExit(main())",
                               *cmd, "--json", str(out)], capture_output=True, text=True, cwd=ROOT)
        doc = json.loads(out.read_text()) if proc.returncode == 0 and out.is_file() else None
    shown = "grpojax " + " ".join(cmd)
    if doc is None:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return {"command": shown, "returncode": proc.returncode, "refused": lines[-1] if lines else "",
                "K_d": None, "interval": None}
    probe = doc["probe"]
    lo, hi = probe["curvature_interval"]
    return {"command": shown, "returncode": 0, "refused": None, "K_d": probe["curvature"], "interval": [lo, hi],
            "how": probe["how"], "status": probe.get("status"), "plateau": probe.get("plateau")}


def widths(value: float, lo: float, hi: float) -> dict:
    """Absolute width, relative width (width / |value|) and hi / lo (only for an interval above 0)."""
    w = hi - lo
    return {"width": w, "relative_width": w / abs(value) if value else None,
            "hi_over_lo": hi / lo if lo > 0 else None}


def log_grad_norm(path: pathlib.Path) -> float | None:
    """Median pre-clip gradient norm of the logged run (``grad_norm``), None when the log has none."""
    from grpojax.logs import read_log

    try:
        _, g = read_log(path).series("grad_norm")
    except (KeyError, ValueError):
        return None
    g = [float(x) for x in g if math.isfinite(x) and x > 0]
    return sorted(g)[len(g) // 2] if g else None


def curvature_entry(path: pathlib.Path, *, beta1: float, beta2: float, eps: float, samples: int,
                    grad_norm: float | None) -> dict:
    from grpojax.dynamics import adam_to_heavy_ball

    doc = json.loads(path.read_text())
    kd, k0, s2 = doc["K_d"], doc["K_0"], doc["sigma2"]
    red = adam_to_heavy_ball(beta1=beta1, beta2=beta2, eps=eps, noise=s2["value"], samples_per_step=samples)
    to_adam = 1.0 / (red.sqrt_v + eps)  # K(Adam units) = K(plain) / (sqrt(v) + ε)
    lo, hi = kd["interval"]
    st = doc["settings"]
    prompts = pathlib.Path(str(st.get("prompts")))
    command = (f"grpojax curvature --model {doc['model']['path']} --prompts {prompts.parent.name}/{prompts.name} "
               f"--reward {st.get('reward')} --group-size {st['group_size']} --prompts-per-step "
               f"{st['prompts_per_step']} "
               + (f"--holdout-prompts {st['holdout_prompts']} " if st.get("holdout_prompts") else "")
               + ("--direction update " if st.get("direction") == "update" else f"--iters {st['iters']} ")
               + f"--max-new-tokens {st['max_new_tokens']} "
               + (f"--seed {st['seed']} " if st.get("seed") else "") + f"--out {path.parent}")
    command = doc.get("command", command)  # a file written by another script says how it was made
    keys = ("reward", "prompts_per_step", "holdout_prompts", "direction", "group_size", "max_new_tokens", "temperature", "iters",
            "level", "seed")
    settings = {k: st.get(k) for k in keys} | {"prompts": st.get("prompts") if "command" in doc
                                               else f"{prompts.parent.name}/{prompts.name}"}
    return {"file": str(path), "command": command, "settings": settings,
            "K_d": kd["value"], "interval": [lo, hi], "K_0": k0["value"], "K_0_interval": k0["interval"],
            "leading_eigenvalue": {"K_0": k0["leading_eigenvalue"], "K_d": kd["leading_eigenvalue"],
                                   "K_total": doc["K_total"]["leading_eigenvalue"]},
            "sigma2": s2["value"], "sigma2_interval": s2["interval"], "converged": doc["converged"],
            "ritz_residual": {"K_d": kd["ritz_residual"], "K_0": k0["ritz_residual"]},
            "pass_rate": doc["pass_rate"]["value"], "mean_reward": doc.get("mean_reward"),
            "timings": doc["timings"], "sqrt_v": red.sqrt_v, "to_adam_units": to_adam,
            "K_d_adam": kd["value"] * to_adam, "interval_adam": [lo * to_adam, hi * to_adam],
            "K_total_adam": (kd["value"] + k0["value"]) * to_adam,
            "widths": widths(kd["value"], lo, hi), **per_coordinate(kd["value"], doc, grad_norm, eps)}


def per_coordinate(kd: float, doc: dict, grad_norm: float | None, eps: float) -> dict:
    """The other scalar reading of Adam's preconditioner: the per-coordinate RMS of the run's own gradient,
    sqrt(v) ≈ ‖g‖ / sqrt(n_params) (median logged pre-clip norm; isotropic across coordinates)."""
    if grad_norm is None:
        return {}
    rms = grad_norm / math.sqrt(doc["model"]["n_params"])
    return {"sqrt_v_per_coordinate": rms, "K_d_adam_per_coordinate": kd / (rms + eps)}


def label(s: dict) -> str:
    """How a row was measured: the direction's prompts, and the held-out prompts the quotients were measured on."""
    how = ("mean update" if s.get("direction") == "update" else f"stiffest, iters {s['iters']}")
    where = (f"direction ({how}) on {s['prompts_per_step']}, quotients on {s['holdout_prompts']} held-out prompts"
             if s.get("holdout_prompts") else f"{s['prompts_per_step']} prompts ({how})")
    task = ("the run's own prompts and reward" if "config.yaml" in str(s.get("prompts"))
            else f"{s.get('prompts')}, {s.get('reward')}")
    return (f"{task}, T {s.get('temperature'):g}: {where} × G {s['group_size']} × {s['max_new_tokens']} tok, "
            f"seed {s['seed']}")


def fmt(x) -> str:
    return "—" if x is None else f"{x:.3g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", type=pathlib.Path, required=True, help="the logged run's metrics file")
    ap.add_argument("--curvature", type=pathlib.Path, nargs="+", required=True, help="curvature.json file(s)")
    ap.add_argument("--eta", type=float, required=True, help="the run's learning rate")
    ap.add_argument("--beta1", type=float, default=0.9, help="the run's Adam β₁ (default 0.9)")
    ap.add_argument("--beta2", type=float, default=0.99, help="the run's Adam β₂ (default 0.99)")
    ap.add_argument("--eps", type=float, default=1e-8, help="the run's Adam ε (default 1e-8)")
    ap.add_argument("--k-ref", type=int, default=1, help="the run's updates per rollout (default 1)")
    ap.add_argument("--group-size", type=int, required=True, help="the run's G")
    ap.add_argument("--prompts-per-step", type=int, required=True, help="the run's prompts per step")
    ap.add_argument("--results", type=pathlib.Path, default=None, help="write curvature_vs_probe.{md,json} here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from grpojax._io import write_json, write_text_atomic

    probe = run_advise(args)
    samples = args.group_size * args.prompts_per_step
    gnorm = log_grad_norm(args.log)
    curv = [curvature_entry(p, beta1=args.beta1, beta2=args.beta2, eps=args.eps, samples=samples, grad_norm=gnorm)
            for p in args.curvature]
    if probe["K_d"] is not None:
        probe["widths"] = widths(probe["K_d"], *probe["interval"])
        for c in curv:
            pw, cw = probe["widths"], c["widths"]
            c["vs_probe"] = {
                # unit-free: unchanged by any scalar conversion of the units
                "relative_width_ratio": (pw["relative_width"] / cw["relative_width"]
                                         if pw["relative_width"] and cw["relative_width"] else None),
                "hi_over_lo_ratio": (pw["hi_over_lo"] / cw["hi_over_lo"]
                                     if pw["hi_over_lo"] and cw["hi_over_lo"] else None),
                # absolute, after K(Adam) = K(plain) / (sqrt(σ²/B) + ε)
                "width_ratio_adam_units": pw["width"] / (c["interval_adam"][1] - c["interval_adam"][0]),
                "point_ratio_adam_units": probe["K_d"] / c["K_d_adam"] if c["K_d_adam"] else None,
                "narrower_10x": None,
            }
            v = c["vs_probe"]
            v["narrower_10x"] = bool(v["relative_width_ratio"] is not None and v["relative_width_ratio"] >= 10
                                     and v["width_ratio_adam_units"] >= 10)
    out = {"probe": probe, "curvature": curv, "run": {"log": str(args.log), "eta": args.eta, "beta1": args.beta1,
                                                      "beta2": args.beta2, "eps": args.eps, "k_ref": args.k_ref,
                                                      "group_size": args.group_size,
                                                      "prompts_per_step": args.prompts_per_step,
                                                      "samples_per_step": samples,
                                                      "median_grad_norm": gnorm}}
    if probe["K_d"] is None:
        print(f"advise --probe refused (exit {probe['returncode']}): {probe['refused']}")
    else:
        print(f"advise --probe: K_d = {probe['K_d']:.4g} [{probe['interval'][0]:.4g}, {probe['interval'][1]:.4g}] "
              f"(Adam units), relative width {fmt(probe['widths']['relative_width'])}, "
              f"hi/lo {fmt(probe['widths']['hi_over_lo'])}")
    for c in curv:
        print(f"curvature {c['file']}: K_d = {c['K_d']:.4g} [{c['interval'][0]:.4g}, {c['interval'][1]:.4g}] (plain "
              f"units) = {c['K_d_adam']:.4g} [{c['interval_adam'][0]:.4g}, {c['interval_adam'][1]:.4g}] (Adam units, "
              f"sqrt(v) = {c['sqrt_v']:.3g}), relative width {fmt(c['widths']['relative_width'])}")
        if "vs_probe" in c:
            v = c["vs_probe"]
            print(f"  probe / curvature: relative width {fmt(v['relative_width_ratio'])}x, absolute width (Adam units) "
                  f"{fmt(v['width_ratio_adam_units'])}x, point {fmt(v['point_ratio_adam_units'])}x; 10x narrower: "
                  f"{v['narrower_10x']}")
    if args.results is None:
        return 0
    write_json(args.results, f"{NAME}.json", out)
    write_text_atomic(args.results / f"{NAME}.md", report(out))
    return 0


def report(out: dict) -> str:
    p, run = out["probe"], out["run"]
    if p["K_d"] is None:
        probe_txt = f"`{p['command']}` refused (exit {p['returncode']}): \"{p['refused']}\""
    else:
        w = p["widths"]
        probe_txt = (f"`{p['command']}`: K_d = **{p['K_d']:.4g}**, 90% interval [{p['interval'][0]:.4g}, "
                     f"{p['interval'][1]:.4g}] (Adam units; relative width {fmt(w['relative_width'])}, hi / lo "
                     f"{fmt(w['hi_over_lo'])}). {p['how']}.")
    rows = []
    for c in out["curvature"]:
        s, v = c["settings"], c.get("vs_probe", {})
        rows.append(
            f"| {label(s)} "
            f"| {c['K_d']:.3g} [{c['interval'][0]:.3g}, {c['interval'][1]:.3g}] "
            f"| {c['K_d_adam']:.3g} [{c['interval_adam'][0]:.3g}, {c['interval_adam'][1]:.3g}] "
            f"| {fmt(c['widths']['relative_width'])} | {fmt(c['widths']['hi_over_lo'])} "
            f"| {fmt(v.get('relative_width_ratio'))} | {fmt(v.get('width_ratio_adam_units'))} "
            f"| {fmt(v.get('point_ratio_adam_units'))} | {c['timings']['total_s']:.0f} s |")
    verdicts = "\n".join(
        f"- {label(c['settings'])}: "
        + ("no probe interval to compare with" if "vs_probe" not in c else
           f"relative width {fmt(c['vs_probe']['relative_width_ratio'])}× narrower than the probe's, absolute "
           f"width (Adam units) {fmt(c['vs_probe']['width_ratio_adam_units'])}× narrower: "
           + ("at least 10× narrower on both" if c["vs_probe"]["narrower_10x"] else "not 10× narrower on both")
           + ("; on a log scale the curvature interval is unbounded (it contains 0, no hi / lo), where the "
              f"probe's spans a factor {fmt(p['widths']['hi_over_lo'])}." if c["widths"]["hi_over_lo"] is None
              else f"; hi / lo {fmt(c['widths']['hi_over_lo'])} against the probe's {fmt(p['widths']['hi_over_lo'])}."))
        for c in out["curvature"])
    back = ""
    if p["K_d"] is not None:
        back = " ".join(
            f"Back in plain-gradient units the probe's K_d is {p['K_d'] * c['sqrt_v']:.3g} (σ² along v)"
            + (f" or {p['K_d'] * c['sqrt_v_per_coordinate']:.3g} (per-coordinate RMS)" if "sqrt_v_per_coordinate" in c
               else "")
            + f", against the measured K_0 + K_d = {c['K_0'] + c['K_d']:.3g} along v"
            + ("" if c["leading_eigenvalue"]["K_total"] is None else
               f" and the leading eigenvalues K_0 {c['leading_eigenvalue']['K_0']:.3g}, K_d "
               f"{c['leading_eigenvalue']['K_d']:.3g}, K_0 + K_d {c['leading_eigenvalue']['K_total']:.3g}")
            + f" ({label(c['settings'])})."
            for c in out["curvature"])
    coord = " ".join(
        f"Read instead as the per-coordinate RMS of the run's own gradient (median logged pre-clip norm "
        f"{run['median_grad_norm']:.3g} / sqrt(n_params) = {c['sqrt_v_per_coordinate']:.3g}), the preconditioner "
        f"gives K_d = {c['K_d_adam_per_coordinate']:.3g} in Adam units for the row {label(c['settings'])} "
        f"(against {c['K_d_adam']:.3g} from σ² along v)."
        for c in out["curvature"] if "K_d_adam_per_coordinate" in c)
    held = [c for c in out["curvature"] if c["settings"].get("holdout_prompts")]
    heldout_txt = ""
    if held:
        target = p["widths"]["relative_width"] / 10 if p["K_d"] is not None else None
        lines = []
        for c in held:
            m, rw = c["settings"]["holdout_prompts"], c["widths"]["relative_width"]
            lo, hi = c["interval"]
            need = (f"; if the width falls as 1/sqrt(prompts) and K_d stays {c['K_d']:.3g}, a relative width of "
                    f"{target:.3g} (10× the probe's) needs about {m * (rw / target) ** 2:,.0f} held-out prompts"
                    if target and rw and rw > target else "")
            lines.append(f"- {label(c['settings'])}: K_d {c['K_d']:.3g} [{lo:.3g}, {hi:.3g}]"
                         + (" contains 0" if lo <= 0 <= hi else "") + f", relative width {fmt(rw)}{need}.")
        heldout_txt = ("\n**Held out.** On prompts the direction was not found on, the quotients carry no selection "
                       "(a direction picked as the stiffest of a few completions is partly stiff by chance for them):\n\n"
                       + "\n".join(lines) + "\n")
    return f"""# `grpojax curvature` against `grpojax advise --probe`: the K_d interval

Logged run: `{run['log']}` (AdamW η = {run['eta']:g}, β₁ = {run['beta1']:g}, β₂ = {run['beta2']:g}, K_ref = {run['k_ref']},
G = {run['group_size']} × {run['prompts_per_step']} prompts = {run['samples_per_step']} completions per step).

**advise --probe.** {probe_txt}

**curvature** (K_d along the direction of each row: the stiffest direction of K_0 + K_d found by Lanczos, or the
mean update; measured on the prompts the direction was found on, or on held-out ones; 90% bootstrap interval
over the prompts it is measured on; plain-gradient
units, and in Adam's units through K / (sqrt(σ²/B) + ε) with B = {run['samples_per_step']}, the run's completions per step):

| measured on | K_d (plain) | K_d (Adam units) | relative width | hi / lo | probe / curvature: relative width | width (Adam units) | value (Adam units) | time (total_s) |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

{verdicts}

{heldout_txt}
Commands: {"; ".join(f"`{c['command']}`" for c in out["curvature"])}.

Relative width = (hi − lo) / |K_d|: it does not depend on the units, so it compares the two intervals whatever
the conversion; hi / lo only where the interval lies above 0 ("—" otherwise). The absolute widths are compared
after the scalar conversion of the model's AdamW reduction (docs/model/schedules.md), which takes Adam's
diagonal preconditioner as one number read along the measured direction and the mean gradient there as 0;
where the two values differ by orders of magnitude (the "value" column), the absolute width ratio mostly
measures that difference, not the precision of either interval. {coord} {back}

What differs between the two besides the units: the probe's rate is that of the run's mean reward, over
the run's own prompts, sampling temperature and reward, averaged over its steps; with K_ref = 1 it
identifies only K_0 + K_d (τ = 0), which the probe reports as K_d with K_0 = 0. The curvature is the
Rayleigh quotient at the starting checkpoint, along the stiffest direction, on the prompts and reward it was
given (the settings of each row are in the JSON).
"""


if __name__ == "__main__":
    raise SystemExit(main())
