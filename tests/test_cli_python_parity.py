"""Every command-line example of the README and the guides gives the numbers its Python equivalent gives.

The examples are collected from the ``bash`` / ``console`` / ``sh`` blocks of ``README.md`` and
``docs/guide/*.md`` (lines starting with ``grpojax ``, continuation lines joined). Each one must be
registered in :data:`REGISTRY` with its Python equivalent: a check that runs the command in-process
through ``grpojax.cli.main`` and the same question through the library with the library's own
defaults (no lag, seed, method or bounds passed), and compares the numbers the command wrote and
printed; or, for an example that needs what a test cannot have (a W&B server, a GGUF download,
several processes, a user's own file), the reason and the dotted name of the Python equivalent,
which must import. A new example without an entry fails :func:`test_every_example_is_registered`.

Inputs the docs name as the user's own (``run.log``, ``outputs/checkpoint-500/trainer_state.json``,
...) are replaced by fixtures of the same format (:data:`INPUTS`); ``--out`` and ``--json`` go to a
temporary folder.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import pathlib
import re
import shlex
from typing import Callable

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs" / "guide").glob("*.md"))]
FIX = REPO / "tests" / "fixtures"
QUICKSTART = FIX / "quickstart" / "trainer_state.json"

#: placeholder inputs of the docs -> a fixture in the same format.
INPUTS = {
    "tests/fixtures/quickstart/trainer_state.json": QUICKSTART,
    "outputs/checkpoint-500/trainer_state.json": QUICKSTART,
    "run.log": FIX / "logs" / "verl_console.log",
    "run/metrics.jsonl": FIX / "logs" / "grpojax.jsonl",
    "runs/tiny/metrics.jsonl": FIX / "logs" / "grpojax.jsonl",
}

_BLOCK = re.compile(r"```(?:bash|console|sh|shell)[^\n]*\n(.*?)```", re.S)


def documented_examples() -> dict[str, list[str]]:
    """``{command: [files it appears in]}`` for every ``grpojax ...`` line of a shell block of the docs."""
    found: dict[str, list[str]] = {}
    for path in DOCS:
        for block in _BLOCK.findall(path.read_text(encoding="utf-8")):
            lines = block.splitlines()
            i = 0
            while i < len(lines):
                line = lines[i].strip()
                line = line[2:] if line.startswith("$ ") else line
                if line.startswith("grpojax "):
                    while line.endswith("\\") and i + 1 < len(lines):
                        i += 1
                        line = line[:-1].rstrip() + " " + lines[i].strip()
                    cmd = _command(line)
                    found.setdefault(cmd, []).append(path.relative_to(REPO).as_posix())
                i += 1
    return found


def _command(line: str) -> str:
    """The command alone: a trailing comment and a shell tail (``|| ...``, ``> file``) removed."""
    line = re.split(r"\s+#\s", line, maxsplit=1)[0]
    line = re.split(r"\s+(?:\|\||&&|\||>)\s", line, maxsplit=1)[0]
    return " ".join(line.split())


def _argv(cmd: str, tmp: pathlib.Path) -> list[str]:
    words = shlex.split(cmd)[1:]
    out = []
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("--out", "--json") and i + 1 < len(words):
            name = "out" if w == "--out" else pathlib.Path(words[i + 1]).name
            out += [w, str(tmp / name)]
            i += 2
            continue
        out.append(str(INPUTS[w]) if w in INPUTS else w)
        i += 1
    if out and out[0] in _WRITES and "--out" not in out:  # the default folder is the working one's out/
        out += ["--out", str(tmp / "out")]
    return out


_WRITES = {"predict", "simulate", "fit", "diagnose", "compare", "sweep"}


def _flag(argv: list[str], name: str, default=None, kind=float):
    return kind(argv[argv.index(name) + 1]) if name in argv else default


def _run_cli(argv: list[str], capsys) -> str:
    from grpojax.cli import main

    rc = main(argv)
    out = capsys.readouterr()
    ok = (0, 3) if "--fail-on" in argv else (0,)  # 3: findings at or above --fail-on (the example's `|| echo`)
    assert rc in ok, f"grpojax {' '.join(argv)} exited {rc}: {out.err[-2000:]}"
    return out.out


def _close(cli, py, rel=1e-6, what=""):
    assert cli == pytest.approx(py, rel=rel, abs=1e-12), f"{what}: command line {cli!r}, Python {py!r}"


# --- the Python equivalents -------------------------------------------------------------------------------------


def check_predict(argv, tmp, printed):
    import grpojax.dynamics as dyn

    res = json.loads((tmp / "out" / "prediction.json").read_text())
    eta, mu, k_ref, curv = (_flag(argv, f) for f in ("--eta", "--mu", "--k-ref", "--curvature"))
    p = dyn.from_hyperparams(eta=eta, mu=mu, k_ref=int(k_ref), curvature=curv)  # the docs' "same from Python"
    for k, v in (("M", p.M), ("C", p.C), ("K_eff", p.K_eff), ("damping_ratio", dyn.damping_ratio(p))):
        _close(res[k], float(v), what=k)
    _close(res["exact"]["critical_eta"], float(dyn.exact_critical_eta(mu, int(k_ref), curv)), rel=1e-9,
           what="exact critical η")
    assert res["regime"] == dyn.regime_name(dyn.regime(p)) or not res["regimes_agree"]
    assert f"{float(dyn.damping_ratio(p)):.4g}" in printed  # the number on the screen is the Python one


def check_advise(argv, tmp, printed):
    from grpojax._defaults import PLANNED_STEPS
    from grpojax.monitor import advise

    a = advise(eta=_flag(argv, "--eta"), mu=_flag(argv, "--mu"), k_ref=_flag(argv, "--k-ref", kind=int),
               group_size=_flag(argv, "--group-size", kind=int), curvature=_flag(argv, "--curvature"),
               pass_rate=_flag(argv, "--pass-rate"), steps=PLANNED_STEPS)  # the command line plans a run
    assert f"{a.damping_ratio:.3g}" in printed and f"{a.exact_critical_eta:.4g}" in printed
    assert f"{a.eta_range[0]:.3g} – {a.eta_range[1]:.3g}" in printed
    assert f"{a.k_range[0]} – {a.k_range[1]}" in printed
    assert f"{a.zero_std_fraction:.3g}" in printed and str(a.group_size_needed) in printed


def _schedule_python(argv, k_flag):
    from grpojax._defaults import ADVICE_MARGIN, PLANNED_STEPS
    from grpojax.dynamics._schedule import adam_to_heavy_ball, schedule_margin

    red = adam_to_heavy_ball(beta1=_flag(argv, "--beta1"), weight_decay=_flag(argv, "--weight-decay", 0.0),
                             grad_rms=_flag(argv, "--grad-rms"))
    return schedule_margin(_flag(argv, "--eta"), _flag(argv, k_flag, kind=int), _flag(argv, "--curvature"), adam=red,
                           schedule=argv[argv.index("--schedule") + 1], steps=_flag(argv, "--steps", PLANNED_STEPS, int),
                           warmup_steps=_flag(argv, "--warmup", 0, int), warmup_ratio=_flag(argv, "--warmup-ratio"),
                           margin=_flag(argv, "--margin", ADVICE_MARGIN))


def check_predict_schedule(argv, tmp, printed):
    r = _schedule_python(argv, "--k-ref")
    res = json.loads((tmp / "out" / "prediction.json").read_text())["schedule"]
    for k in ("critical_lr", "advised_peak_lr", "min_margin"):
        _close(res[k], getattr(r, k), rel=1e-9, what=k)
    assert res["min_margin_step"] == r.min_margin_step
    assert f"{r.advised_peak_lr:.4g}" in printed and f"{r.min_margin:.3g} at step {r.min_margin_step}" in printed


def check_advise_schedule(argv, tmp, printed):
    r = _schedule_python(argv, "--k-ref")
    assert f"{r.critical_lr:.4g}" in printed and f"{r.advised_peak_lr:.4g}" in printed
    assert f"{r.min_margin:.3g} at step {r.min_margin_step}" in printed


def check_advise_noise_growth(argv, tmp, printed):
    from grpojax.dynamics._schedule import schedule_margin
    from grpojax.monitor import advise

    kw = dict(mu=_flag(argv, "--mu"), k_ref=_flag(argv, "--k-ref", kind=int), curvature=_flag(argv, "--curvature"),
              k_instant=_flag(argv, "--k-instant"))
    steps = _flag(argv, "--steps", kind=int)
    a = advise(eta=_flag(argv, "--eta"), group_size=_flag(argv, "--group-size", kind=int),
               prompts_per_step=_flag(argv, "--prompts-per-step", kind=int), steps=steps,
               noise_growth=_flag(argv, "--noise-growth"), **kw)
    assert f"{a.escape_probability:.3g} (basin" in printed and f"up to η = {a.eta_escape:.3g}" in printed
    r = schedule_margin(_flag(argv, "--eta"), kw.pop("k_ref"), kw.pop("curvature"), schedule="cosine", steps=steps,
                        noise=a.inputs["noise"], basin=a.escape_basin, samples_per_step=a.samples_per_step,
                        noise_growth=_flag(argv, "--noise-growth"), **kw)
    assert f"{r.escape_probability:.3g}" in printed
    additive = advise(eta=_flag(argv, "--eta"), group_size=_flag(argv, "--group-size", kind=int),
                      prompts_per_step=_flag(argv, "--prompts-per-step", kind=int), steps=steps,
                      mu=_flag(argv, "--mu"), k_ref=_flag(argv, "--k-ref", kind=int),
                      curvature=_flag(argv, "--curvature"), k_instant=_flag(argv, "--k-instant"))
    assert a.escape_probability > additive.escape_probability  # the growth is used, not dropped


def check_advise_from_run(argv, tmp, printed):
    from grpojax._defaults import PLANNED_STEPS
    from grpojax.logs import run_settings
    from grpojax.monitor import advise

    s = run_settings(argv[argv.index("--from-run") + 1])
    a = advise(eta=s.lr, beta1=s.beta1 if s.beta1 is not None else 0.9, k_ref=s.k_ref or 1, group_size=s.group_size,
               curvature=_flag(argv, "--curvature"), steps=PLANNED_STEPS, prompts_per_step=s.prompts_per_step or 1)
    assert f"{a.damping_ratio:.3g}" in printed and f"{a.exact_critical_eta:.4g}" in printed
    assert f"{a.eta_range[0]:.3g} – {a.eta_range[1]:.3g}" in printed
    for line in str(s).splitlines():  # the settings and where each was read
        assert line in printed


def check_fit(argv, tmp, printed):
    from grpojax.fit import fit_all_laws, forecast_window

    res = json.loads((tmp / "out" / "fit.json").read_text())
    (entry,) = res["runs"].values()
    log = argv[1]
    fits = fit_all_laws(log)  # the path itself, with the library's defaults
    for law, f in fits.items():
        got = entry["laws"][law]
        assert got["status"] == str(f.status), law
        _close(got["r2"], float(f.r2), what=f"R² of {law}")
        _close(got["aic"], float(f.aic), what=f"AIC of {law}")
    prefix = _flag(argv, "--prefix")
    if prefix is not None:
        fc = forecast_window(log, prefix=prefix)  # default window, method, seed and bounds
        wf = entry["window_forecast"]
        assert wf["status"] == fc.status and wf["method"] == fc.method
        for k in ("mean", "lo", "hi", "p_collapse"):
            _close(wf[k], getattr(fc, k), rel=1e-9, what=f"window forecast {k}")
        assert f"= {fc.p_collapse:.3f}" in printed
        assert f"{fc.mean:.4g}" in printed and f"[{fc.lo:.4g}, {fc.hi:.4g}]" in printed


def check_diagnose(argv, tmp, printed):
    from grpojax._config import apply_overrides
    from grpojax.diagnose import DEFAULT_CONFIG, diagnose

    sets = [argv[i + 1] for i, w in enumerate(argv) if w == "--set"]
    cfg = apply_overrides(DEFAULT_CONFIG, sets) if sets else None
    d = diagnose(argv[1], config=cfg)  # the path itself
    if (tmp / "out" / "diagnosis.json").exists():
        (run,) = json.loads((tmp / "out" / "diagnosis.json").read_text())["runs"]
        results = run["results"]
    else:  # --json FILE: one row per check
        rows = json.loads((tmp / "diag.json").read_text())
        rows = rows["rows"] if isinstance(rows, dict) else rows
        results = {r["mode"]: r for r in rows}
    assert set(results) == set(d.results)
    for mode, r in d.results.items():
        assert results[mode]["verdict"] == r.verdict, mode
        _close(results[mode]["severity"], round(float(r.severity), 4), rel=1e-9, what=f"severity of {mode}")
    for mode in d.findings:  # the table names each finding (with spaces for underscores)
        assert mode in printed or mode.replace("_", " ") in printed, mode


def check_simulate(argv, tmp, printed):
    import jax
    import numpy as np

    import grpojax.dynamics as dyn
    from grpojax import sde

    res = json.loads((tmp / "out" / "simulation.json").read_text())
    inp = res["inputs"]
    p = dyn.from_hyperparams(inp["eta"], inp["mu"], inp["k_ref"], inp["curvature"], noise=inp["noise"], p_star=inp["p_star"])
    _close(res["damping_ratio"], float(dyn.damping_ratio(p)), what="ζ")
    _close(res["stationary_variance_predicted"], float(dyn.stationary_variance(p, inp["group_size"])), what="Var")
    ts = np.linspace(0.0, inp["horizon"], int(min(inp["horizon"] / inp["dt"], 400)) + 1)
    ens = sde.simulate(p, ts, key=jax.random.key(inp["seed"]), n_paths=inp["paths"], solver=inp["solver"],
                       dt=inp["dt"], e0=inp["p0"] - inp["p_star"], group_size=inp["group_size"])
    final = float(inp["p_star"] + np.asarray(ens.ys)[:, -1, 0].mean())
    _close(res["final"]["mean_reward"], final, rel=1e-5, what="simulated final mean reward")


def check_compare(argv, tmp, printed):
    from grpojax.diagnose import compare_runs
    from grpojax.logs import read_log

    res = json.loads((tmp / "out" / "compare.json").read_text())
    logs = [a for a in argv[1:] if not a.startswith("--") and a != str(tmp / "out")]
    c = compare_runs([read_log(p) for p in logs])  # the library's window, k and consecutive
    assert res["runs"] == list(c.runs) and res["metrics"] == list(c.metrics) and res["settings"] == c.settings
    assert len(res["divergences"]) == len(c.divergences)
    for a, b in zip(res["divergences"], c.divergences):
        assert (a["metric"], a["run"], a["diverges_at_step"]) == (b.metric, b.run, b.step)
        _close(a["final_difference"], b.final_difference, rel=1e-9, what=f"final difference of {b.metric}")


def check_sweep(argv, tmp, printed):
    import jax

    from grpojax.sweep import run_sweep, sweep_preset

    rows = json.loads((tmp / "out" / "sweep.json").read_text())["rows"]
    preset = sweep_preset(_flag(argv, "--preset", kind=str), _flag(argv, "--size", 6, kind=int))
    res = run_sweep(preset.grid, preset.num_steps, key=jax.random.key(0)).to_dict()["rows"]
    assert len(rows) == len(res)
    for a, b in zip(rows, res):
        assert a["regime"] == b["regime"] and a["regime_exact"] == b["regime_exact"]
        for k in ("zeta", "eta_crit_exact", "late_mean", "late_std"):
            _close(a[k], b[k], rel=1e-6, what=k)


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered example: ``check`` (run after the command; None: not run here, with ``reason``), the
    Python equivalent's dotted name, and whether the pair is slow."""

    equivalent: str
    check: Callable | None = None
    reason: str = ""
    slow: bool = False


_P = "grpojax.dynamics.from_hyperparams"
_TRAIN = "grpojax.grpo.GRPOTrainer"
REGISTRY: dict[str, Entry] = {
    "grpojax predict --eta 0.01 --mu 0.9 --k-ref 4 --curvature 0.5 --out out/quickstart/predict": Entry(_P, check_predict),
    "grpojax predict --eta 0.01 --mu 0.9 --k-ref 4 --curvature 0.5 --p0 0.2 --p-star 0.8 --out out/predict":
        Entry(_P, check_predict),
    "grpojax advise --eta 0.01 --mu 0.9 --k-ref 4 --group-size 8 --curvature 0.5 --pass-rate 0.8":
        Entry("grpojax.monitor.advise", check_advise),
    "grpojax advise --from-run run.log --curvature 0.5": Entry("grpojax.logs.run_settings", check_advise_from_run),
    "grpojax predict --eta 0.001 --k-ref 4 --curvature 0.5 --optimizer adamw --beta1 0.9 --weight-decay 0.1 "
    "--grad-rms 0.05 --schedule cosine --warmup-ratio 0.1 --steps 500 --out out/predict-adamw":
        Entry("grpojax.dynamics._schedule.schedule_margin", check_predict_schedule),
    "grpojax advise --eta 0.001 --beta1 0.9 --k-ref 2 --group-size 8 --curvature 30 --schedule cosine --warmup 50 "
    "--steps 1000": Entry("grpojax.dynamics._schedule.schedule_margin", check_advise_schedule),
    "grpojax advise --eta 0.05 --mu 0.9 --k-ref 4 --group-size 8 --prompts-per-step 9 --curvature 0.5 --k-instant 0.05 "
    "--noise-growth 54 --schedule cosine --steps 400": Entry("grpojax.monitor.advise", check_advise_noise_growth),
    "grpojax fit tests/fixtures/quickstart/trainer_state.json --out out/quickstart/fit":
        Entry("grpojax.fit.fit_all_laws", check_fit, slow=True),
    "grpojax fit tests/fixtures/quickstart/trainer_state.json --prefix 0.3 --out out/quickstart/forecast":
        Entry("grpojax.fit.forecast_window", check_fit, slow=True),
    "grpojax fit outputs/checkpoint-500/trainer_state.json --prefix 0.5 --out out/fit":
        Entry("grpojax.fit.forecast_window", check_fit, slow=True),
    "grpojax fit run.log --bayes state_space --smooth 10 --out out/fit":
        Entry("grpojax.fit.fit_bayes", reason="NUTS on a real curve takes minutes on 2 cores; the state-space fit is "
              "checked against the same posterior in the fit tests"),
    "grpojax diagnose tests/fixtures/quickstart/trainer_state.json --out out/quickstart/diagnose":
        Entry("grpojax.diagnose.diagnose", check_diagnose),
    "grpojax diagnose outputs/checkpoint-500/trainer_state.json --out out/diag": Entry("grpojax.diagnose.diagnose", check_diagnose),
    "grpojax diagnose outputs/checkpoint-500/trainer_state.json --out out/diagnose":
        Entry("grpojax.diagnose.diagnose", check_diagnose),
    "grpojax diagnose run.log --set entropy_ratio=0.1 --set frac_zero_std_late=0.6":
        Entry("grpojax.diagnose.diagnose", check_diagnose),
    "grpojax diagnose run.log --bayes state_space":
        Entry("grpojax.diagnose.diagnose", reason="a NUTS posterior (minutes on 2 cores) feeds the instability check"),
    "grpojax diagnose tests/fixtures/quickstart/trainer_state.json --fail-on warning --json diag.json":
        Entry("grpojax.diagnose.diagnose", check_diagnose),
    "grpojax diagnose run/metrics.jsonl --explain --no-plot --out out/explain": Entry("grpojax.diagnose.diagnose", check_diagnose),
    "grpojax diagnose wandb://my-team/grpo-math/3kq9x2ab":
        Entry("grpojax.diagnose.diagnose", reason="reads a run from a W&B server"),
    "grpojax diagnose out/tiny-arith/metrics.jsonl --out out/tiny-arith/diagnose":
        Entry("grpojax.diagnose.diagnose", reason="needs the run `grpojax train --config tiny-arith` writes"),
    "grpojax diagnose out/population/members/m0003/metrics.jsonl --out out/population/diagnose-m0003":
        Entry("grpojax.diagnose.diagnose", reason="needs a population run of the user's population.yaml"),
    "grpojax simulate --eta 0.05 --mu 0.5 --k-ref 4 --curvature 1.2 --group-size 8 --paths 2000 --out out/simulate":
        Entry("grpojax.sde.simulate", check_simulate, slow=True),
    "grpojax compare run/metrics.jsonl run.log --out out/compare": Entry("grpojax.diagnose.compare_runs", check_compare),
    "grpojax sweep --preset transition --size 8 --out out/sweep": Entry("grpojax.sweep.run_sweep", check_sweep, slow=True),
    "grpojax sweep --preset transition --size 8 --out out/sweep-t": Entry("grpojax.sweep.run_sweep", check_sweep,
                                                                         slow=True),
    "grpojax sweep --preset stability --out out/sweep": Entry("grpojax.sweep.sweep_preset", reason="a full phase diagram"),
    "grpojax sweep --preset stability --size 256 --out out/sweep": Entry("grpojax.sweep.sweep_preset", reason="a full phase diagram"),
    "grpojax sweep --preset group-size --out out/sweep-g": Entry("grpojax.sweep.sweep_preset", reason="a full sweep"),
    "grpojax train --config tiny-arith --out out/tiny-arith": Entry(_TRAIN, reason="trains for minutes"),
    "grpojax train --config my_run.yaml --out out/run1 --set grpo.k_ref=4 --set optim.lr=5e-4":
        Entry(_TRAIN, reason="needs the user's my_run.yaml"),
    "grpojax train --config smollm2-arith --out out/smollm2-arith": Entry(_TRAIN, reason="downloads a model"),
    "grpojax train --population population.yaml --out out/population": Entry(_TRAIN, reason="needs the user's population.yaml"),
    "grpojax train --population sweep.yaml --out out/sweep": Entry(_TRAIN, reason="needs the user's sweep.yaml"),
    "grpojax advise --eta 0.008 --mu 0.9 --k-ref 4 --group-size 8 --curvature 0.5 --steps 400 --escape-sweep "
    "out/sweep/population.json":
        Entry("grpojax.monitor.advise", reason="reads the population.json of the user's sweep; "
              "tests/test_escape_sweep.py compares --escape-sweep with Python on a sweep file"),
    "grpojax reproduce --quick --out out/report": Entry("grpojax.sweep.sweep_preset", reason="runs the experiments (minutes)"),
    "grpojax reproduce --only thresholds_table --out out/report": Entry("grpojax.dynamics.exact_critical_a", reason="runs an experiment"),
    "grpojax convert-gguf SmolLM2-135M-Instruct.Q4_1.gguf models/smollm2-135m-instruct":
        Entry("grpojax.lm.from_gguf", reason="needs a downloaded GGUF file"),
    "grpojax export out/tiny-arith out/tiny-arith-hf": Entry("grpojax.lm.save_pretrained", reason="needs a trained run folder"),
    "grpojax watch runs/tiny/metrics.jsonl --every 20 --idle-timeout 120 --json out/watch.json":
        Entry("grpojax.monitor.update", reason="waits --idle-timeout 120 s for the log to grow"),
    "grpojax watch runs/tiny/metrics.jsonl --alert-file out/alerts.jsonl --on-alert 'cat >> out/pager.txt'":
        Entry("grpojax.monitor.update", reason="follows the user's growing log until it goes idle"),
    "grpojax curvature --model models/smollm2-135m-instruct --prompts gsm8k.jsonl --reward correctness --group-size 4 --out out/curvature":
        Entry("grpojax.grpo.measure_curvature", reason="needs the converted SmolLM2 checkpoint (make real-model)"),
    "grpojax curvature --model models/smollm2-135m-instruct --prompts gsm8k.jsonl --reward examples.curvature_reward:closeness --group-size 2 --prompts-per-step 8 --holdout-prompts 96 --direction update --max-new-tokens 32 --out out/curvature":
        Entry("grpojax.grpo.measure_curvature", reason="needs the converted SmolLM2 checkpoint (make real-model)"),
    "grpojax predict --from out/curvature/curvature.json --eta 1e-6 --k-ref 2":
        Entry("grpojax.dynamics.from_hyperparams", reason="reads the curvature.json the curvature command writes"),
    "grpojax advise --from out/curvature/curvature.json --eta 1e-6 --k-ref 2 --pass-rate 0.3":
        Entry("grpojax.monitor.advise", reason="reads the curvature.json the curvature command writes"),
    "grpojax watch runs/my-run/metrics.jsonl --from out/curvature/curvature.json":
        Entry("grpojax.monitor.update", reason="follows the user's growing log and reads their curvature.json"),
    "grpojax status runs/tiny runs/tiny-lr2": Entry("grpojax.monitor.run_status", reason="needs the user's run folders"),
    "grpojax launch -n 2 -- grpojax sweep --preset transition --size 8 --out out/sweep":
        Entry("grpojax.sweep.initialize_distributed", reason="starts several processes"),
    "grpojax launch -n 2 -- grpojax train --config tiny-arith --out out/tiny-arith":
        Entry("grpojax.sweep.initialize_distributed", reason="starts several processes"),
    "grpojax launch -n 4 --devices-per-process 1 -- grpojax sweep --preset stability --size 64 --out out/sweep":
        Entry("grpojax.sweep.initialize_distributed", reason="starts several processes"),
}

EXAMPLES = documented_examples()


def test_examples_are_found():
    # the parser sees the quickstart's commands (a broken parser would find nothing and pass the rest)
    assert any(c.startswith("grpojax predict ") for c in EXAMPLES) and len(EXAMPLES) >= 20


def test_every_example_is_registered():
    missing = sorted(set(EXAMPLES) - set(REGISTRY))
    assert not missing, "documented commands without a Python equivalent in REGISTRY: " + "; ".join(
        f"{c} ({', '.join(EXAMPLES[c])})" for c in missing)
    stale = sorted(set(REGISTRY) - set(EXAMPLES))
    assert not stale, "REGISTRY entries no document shows any more: " + "; ".join(stale)


@pytest.mark.parametrize("cmd", sorted(REGISTRY))
def test_example_parses_and_its_equivalent_imports(cmd, tmp_path):
    """Every example's flags exist (the parser accepts it) and its Python equivalent imports."""
    from grpojax.cli._app import build_parser

    words = shlex.split(cmd)[1:]
    if words[0] == "launch":
        words = words[words.index("--") + 2:]  # the launched command is what the parser must accept
    argv = _argv("grpojax " + " ".join(shlex.quote(w) for w in words), tmp_path)
    build_parser(argv).parse_args(argv)
    entry = REGISTRY[cmd]
    module, _, name = entry.equivalent.rpartition(".")
    assert hasattr(importlib.import_module(module), name), entry.equivalent
    assert entry.check is not None or entry.reason


def _compared(slow: bool):
    return [pytest.param(c, marks=[pytest.mark.slow] if e.slow else []) for c, e in sorted(REGISTRY.items())
            if e.check is not None and e.slow == slow]


@pytest.mark.parametrize("cmd", _compared(False) + _compared(True))
def test_example_matches_python(cmd, tmp_path, capsys):
    argv = _argv(cmd, tmp_path)
    printed = _run_cli(argv, capsys)
    REGISTRY[cmd].check(argv, tmp_path, printed)
