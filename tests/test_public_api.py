"""The public API of grpojax, pinned: what each package exports, what else its ``__init__`` keeps importable,
and that every exported name is documented.

``__all__`` of a package is what users call; it is what the API reference (``docs/api/<package>.md``, built by
mkdocstrings from the docstrings) shows. A package's ``__init__`` may also import names that are not exported:
building blocks the packages after it, the command line and the experiments import through the package (the
layering rule forbids another package's private modules). Both lists are pinned here, so that a name joins
either one only by a decision written down in this file; everything else stays in the package's private
modules (tests import those directly).
"""

from __future__ import annotations

import __future__
import ast
import importlib
import inspect
import pathlib
import re
import types
import typing

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
MAX_EXPORTS = 15

#: ``__all__`` of every package.
EXPORTS = {
    "grpojax": ["ConfigError", "DataError", "GrpojaxError", "InvalidValueError", "StorageError", "UserError",
        "__version__"],
    "grpojax.dynamics": ["OscillatorParams", "REGIMES", "critical_eta", "critical_k_ref", "damping_ratio",
        "exact_critical_a", "exact_critical_eta", "from_hyperparams", "get_law", "mean_reward", "regime",
        "regime_name", "stability_margin", "stationary_variance", "trajectory"],
    "grpojax.bandit": ["BanditConfig", "MultiArmConfig", "binomial", "fixed_point", "init", "mean_drift",
        "mean_field_trajectory", "oscillator_params", "plateau", "rollout_log", "step", "stiffness",
        "with_fixed_point"],
    "grpojax.sde": ["Calibration", "Ensemble", "SOLVERS", "bandit_meanfield", "calibrate", "calibrate_ensemble",
        "exact_moments", "exact_transition", "expected_trajectory", "sample_exact", "simulate", "solve_meanfield",
        "strong_errors", "weak_errors"],
    "grpojax.sweep": ["Grid", "MEASURED_REGIMES", "PREDICTED_REGIMES", "PRESETS", "SweepResult",
        "initialize_distributed", "is_primary", "make_grid", "measure", "run_sweep", "sweep_preset"],
    "grpojax.logs": ["CANONICAL_COLUMNS", "FORMATS", "JsonlLogger", "LogFormatError", "LogWarning", "ReadReport",
        "RunLog", "detect_format", "merge_runs", "moving_average", "read_jsonl", "read_log", "read_logs",
        "truncate_jsonl", "write_jsonl"],
    "grpojax.fit": ["BayesFit", "ConvergenceWarning", "Forecast", "LawFit", "WindowForecast", "fit_all_laws",
        "fit_bayes", "fit_calibration", "fit_law", "fit_laws_batched", "forecast_all_laws", "forecast_bayes",
        "forecast_law", "forecast_window", "forecast_windows"],
    "grpojax.diagnose": ["ALL_MODES", "DEFAULT_CONFIG", "DiagnoseConfig", "Diagnosis", "Evidence", "HEALTH_MODES",
        "MODES", "ModeResult", "VERDICTS", "collapse_onset", "diagnose"],
    "grpojax.plot": ["amplitude_figure", "diagnosis_dashboard", "diagnosis_dashboard_svg", "draw_panel", "finding_figure", "fit_figure",
        "mean_trajectory_figure", "phase_diagram_figure", "predicted_trajectory_figure", "sde_convergence_figure",
        "sde_ensemble_figure", "threshold_comparison_figure", "variance_law_figure"],
    "grpojax.lm": ["CausalLM", "ModelConfig", "TextCodec", "Tokenizer", "WeightLoadError", "char_tokenizer",
        "from_gguf", "generate", "init_model", "load_pretrained", "load_tokenizer", "make_mesh", "save_pretrained",
        "sequence_logprobs", "word_tokenizer"],
    "grpojax.grpo": ["Curvature", "GRPOTrainer", "Member", "NonFiniteLossError", "REWARD_FUNCTIONS",
        "TrainConfig", "apply_overrides", "group_advantages", "grpo_loss", "load_config", "measure_curvature",
        "score_completions", "shipped_configs", "train", "train_population"],
    "grpojax.monitor": ["Advice", "Hook", "MonitorConfig", "MonitorHook", "RunStatus", "WatchReport", "WatchState",
        "advise", "attach", "curvature_from_rate", "in_advised_range", "init_state", "run_status",
        "trl_callback", "update"],
    "grpojax.cli": ["build_parser", "main"],
}

#: Names a package's ``__init__`` imports without exporting them (not in the API reference).
SHARED = {
    "grpojax.dynamics": ["EXACT_RADIUS_MAX_LAG", "EscapeEstimate", "Exponential", "LAWS", "Sigmoid", "ThreePhase",
        "companion_constant", "dominant_root", "drift_matrix", "escape_onset", "escape_probability",
        "escape_variance_closed_form", "exact_oscillatory_a", "exact_oscillatory_eta", "noise_from_gradients",
        "noise_from_reward_std", "noise_from_samples", "SCHEDULES", "AdamReduction", "ScheduleMargin",
        "adam_to_heavy_ball", "adam_escape", "AdamEscape", "schedule_margin", "schedule_shape",
        "expm2", "expm2_coefficients_numpy", "instability_windows", "lag_tau", "natural_frequency", "oscillatory_eta", "oscillatory_k_ref",
        "response_from_rest", "spectral_radius_constant", "spectral_radius_periodic", "transition_matrix"],
    "grpojax.bandit": ["ADVANTAGES", "GRADIENTS", "LAGS", "drift_logit", "gradient_noise", "mean_field_step",
        "two_arm_init", "two_arm_step_batch"],
    "grpojax.sweep": ["simulate_traces"],
    "grpojax.monitor": ["ALERT_LEVELS", "AlertConfig", "collapse_risk", "SweepBound", "SweepLevel", "escape_sweep_bound",
        "read_escape_sweep"],
    "grpojax.logs": ["CANDIDATES", "JSONL_VERSION", "RunSettings", "STEP_KEYS", "jsonl_header", "run_settings"],
    "grpojax.fit": ["COMBINED_METHODS", "FLAT_DELTA_BIC", "FORECAST_TAUS", "ForecastCalibration",
        "MIN_CREEP_POINTS", "MODELS", "STATUSES", "WINDOW_METHODS", "calibrated_forecast", "check_bounds",
        "crps_quantiles", "fit_pooled", "fit_state_space_batched", "forecast_pooled", "kalman_filter",
        "metric_bounds", "run_covariates", "split_normal_quantiles", "split_prefix", "step_intervals",
        "to_summary_dict", "winkler_score"],
    "grpojax.plot": ["comparison_figure"],
    "grpojax.diagnose": ["COMPARISON_RE", "Comparison", "compare_runs", "effective_window", "fmt_num", "group_size_for",
        "noise_sd", "reward_components", "series_events", "trailing_median", "zero_std_fraction"],
    "grpojax.lm": ["batch_sharding", "check_temperature", "check_vocab_fits", "codec_from_tokenizer", "infer_tokenizer_kind",
        "init_cache", "left_pad_positions", "param_shardings", "sample_logits", "tempered_logits"],
    "grpojax.grpo": ["AGGREGATIONS", "CheckpointStore", "RunLock", "config_task", "load_jsonl", "load_reward", "save_config", "arith_problems", "build_optimizer", "chat_prompt_ids",
        "check_run_folder", "completion_logprobs", "config_to_dict", "correctness_reward", "format_prompt",
        "make_batch", "make_grpo_update", "plan_run", "read_config_dict", "read_jsonl_metrics",
        "resolve_config_path", "rollout_due", "run_markers", "sample_batch", "split_heldout", "stiffness",
        "train_population_file"],
}


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_exports_are_pinned(name):
    mod = _module(name)
    got = list(mod.__all__)
    assert len(got) == len(set(got)), f"{name}.__all__ lists a name twice"
    assert sorted(got) == sorted(EXPORTS[name]), (
        f"{name}.__all__ changed: added {sorted(set(got) - set(EXPORTS[name]))}, "
        f"removed {sorted(set(EXPORTS[name]) - set(got))}; update EXPORTS in this file if that was meant")
    missing = [n for n in got if not hasattr(mod, n)]
    assert not missing, f"{name}.__all__ names what the package does not define: {missing}"


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_package_namespace_is_exports_plus_shared(name):
    mod = _module(name)
    # dir(): a package that imports its names on first use (grpojax._lazy) lists them before they are loaded
    public = {n for n in dir(mod)
              if not n.startswith("_") and not isinstance(getattr(mod, n), (types.ModuleType, __future__._Feature))}
    expected = {n for n in [*EXPORTS[name], *SHARED.get(name, ())] if not n.startswith("_")}
    assert public == expected, (
        f"{name} imports {sorted(public - expected)} beyond its exports and pinned shared names "
        f"(and lacks {sorted(expected - public)}): export it, pin it in SHARED, or import it from its module")
    assert not set(EXPORTS[name]) & set(SHARED.get(name, ()))


def test_each_package_exports_at_most_fifteen_names():
    big = {k: len(v) for k, v in EXPORTS.items() if len(v) > MAX_EXPORTS}
    assert not big, f"packages exporting more than {MAX_EXPORTS} names: {big}"


def _is_code(obj) -> bool:
    """A class or a function (jitted ones included), not a value or a typing alias such as ``Callable[...]``."""
    return inspect.isclass(obj) or inspect.isroutine(obj) or (callable(obj) and typing.get_origin(obj) is None)


def _own_doc(obj) -> str:
    """The docstring written for ``obj`` itself (not one inherited or generated for a NamedTuple/dataclass)."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else inspect.getdoc(obj)
    doc = (doc or "").strip()
    name = getattr(obj, "__name__", "")
    return "" if inspect.isclass(obj) and doc.startswith(f"{name}(") else doc


@pytest.mark.parametrize("name", sorted(k for k in EXPORTS if k != "grpojax.cli"))
def test_every_export_is_documented(name):
    """A class or function carries its own docstring (the API page renders it); any other exported value
    (a constant, a default configuration, a type alias) is named in the package docstring, which heads its API
    page. (The command line's two names are documented by ``docs/guide/cli.md``.)"""
    mod = _module(name)
    pkg_doc = mod.__doc__ or ""
    assert pkg_doc.strip(), f"{name} has no package docstring"
    undocumented = []
    for n in EXPORTS[name]:
        if n.startswith("__"):
            continue  # __version__
        obj = getattr(mod, n)
        if _is_code(obj):
            if not _own_doc(obj):
                undocumented.append(n)
        elif not re.search(rf"\b{n}\b", pkg_doc):
            undocumented.append(n)
    assert not undocumented, f"{name}: exported but undocumented: {undocumented}"


@pytest.mark.parametrize("name", sorted(k for k in EXPORTS if k.count(".") == 1 and not k.endswith(".cli")))
def test_every_package_has_an_api_page(name):
    short = name.split(".")[1]
    page = REPO / "docs" / "api" / f"{short}.md"
    assert page.is_file() and f"::: {name}" in page.read_text(), f"{page} does not render {name}"
    assert f"api/{short}.md" in (REPO / "mkdocs.yml").read_text(), f"api/{short}.md is not in the mkdocs nav"


def _user_imports() -> list[tuple[str, str, str]]:
    """(where, module, name) of every ``from grpojax.X import name`` in the examples and in the Python
    blocks of README and the user guide."""
    sources = [(str(p.relative_to(REPO)), p.read_text()) for p in sorted((REPO / "examples").glob("*.py"))]
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        if "api" in page.relative_to(REPO).parts:
            continue
        text = page.read_text()
        for i, block in enumerate(text.split("```python")[1:]):
            sources.append((f"{page.relative_to(REPO)} python block {i + 1}", block.split("```")[0]))
    out = []
    for where, src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in EXPORTS:
                out.extend((where, node.module, a.name) for a in node.names)
    return out


def test_examples_and_docs_import_only_exported_names():
    imports = _user_imports()
    assert len(imports) >= 10  # the examples and guide pages do import from grpojax
    unexported = [f"{w}: {m}.{n}" for w, m, n in imports if n not in EXPORTS[m]]
    assert not unexported, "user-facing code imports names that are not exported:\n" + "\n".join(unexported)
