"""``grpojax diagnose`` for CI: ``--fail-on LEVEL`` exit statuses, the JSON schema version, ``--plot all``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grpojax.cli import main
from grpojax.cli._diagnose import FAIL_LEVELS, FINDINGS_STATUS
from grpojax.cli._output import SCHEMA_VERSION

PNG = b"\x89PNG\r\n\x1a\n"


def _log(path, *, frac_zero=None, rising=False, n=120, seed=0):
    """A grpojax JSONL log: a saturating reward (a plateau: a low-severity finding) or one still rising
    linearly at the end (no finding), with the fraction of zero-std groups given (degeneracy when it climbs)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1, dtype=float)
    p = 0.2 + 0.5 * t / n if rising else 0.8 - 0.5 * np.exp(-t / 25)
    cols = {"reward_mean": p + 0.03 * rng.standard_normal(n), "reward_std": np.sqrt(p * (1 - p)),
            "frac_zero_std": np.full(n, 0.05) if frac_zero is None else frac_zero,
            "entropy": 0.6 - 0.1 * (1 - np.exp(-t / 40)), "grad_norm": 0.4 + 0.02 * rng.standard_normal(n)}
    path.write_text("".join(json.dumps({"step": int(s), **{k: float(v[i]) for k, v in cols.items()}}) + "\n"
                            for i, s in enumerate(t)))
    return path


LOGS = {"high": dict(frac_zero=np.linspace(0.1, 0.9, 120)), "medium": dict(frac_zero=np.linspace(0.1, 0.6, 120)),
        "low": {}, "clean": dict(rising=True)}


def _expected(results: dict, level: str) -> int:
    """The status --fail-on LEVEL must give, computed from diagnosis.json on its own: a detected failure mode or
    health check whose severity is at least the level's (info: any, warning: >= 1/3, critical: >= 2/3)."""
    floor = {"info": 0.0, "warning": 1 / 3, "critical": 2 / 3}[level]
    hit = [m for m, r in results.items() if m != "mean_field_validity" and r["verdict"] == "detected"
           and r["severity"] >= floor]
    return FINDINGS_STATUS if hit else 0


@pytest.mark.parametrize("case", list(LOGS))
def test_fail_on_exit_status_follows_the_findings(case, tmp_path, capsys):
    log = _log(tmp_path / "run.jsonl", **LOGS[case])
    base = ["diagnose", str(log), "--out", str(tmp_path / "d"), "--no-plot", "--no-validity"]
    assert main(base) == 0  # without --fail-on: 0 whatever is found
    results = json.loads((tmp_path / "d" / "diagnosis.json").read_text())["runs"][0]["results"]
    got = {}
    for level in FAIL_LEVELS:
        capsys.readouterr()
        got[level] = main([*base, "--fail-on", level])
        assert got[level] == _expected(results, level), (level, results)
        err = capsys.readouterr().err
        if got[level]:  # the line says why the build fails, naming the findings
            assert f"--fail-on {level}" in err and f"exit status {FINDINGS_STATUS}" in err
        else:
            assert "--fail-on" not in err
    # the four logs reach each boundary: every level fails, critical passes, only info fails, nothing fails
    fails = {"high": [1, 1, 1], "medium": [1, 1, 0], "low": [1, 0, 0], "clean": [0, 0, 0]}[case]
    assert [got[lv] for lv in FAIL_LEVELS] == [FINDINGS_STATUS if f else 0 for f in fails]


def test_fail_on_refuses_an_unknown_level(tmp_path, capsys):
    log = _log(tmp_path / "run.jsonl")
    assert main(["diagnose", str(log), "--out", str(tmp_path / "d"), "--fail-on", "error"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--fail-on" in err[0] and "error" in err[0]


def test_json_carries_the_schema_version(tmp_path, capsys):
    log = _log(tmp_path / "run.jsonl", frac_zero=np.linspace(0.1, 0.9, 120))
    assert main(["diagnose", str(log), "--out", str(tmp_path / "d"), "--no-plot", "--no-validity", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows["schema_version"] == SCHEMA_VERSION and isinstance(SCHEMA_VERSION, int)
    assert {r["mode"] for r in rows["rows"] if r["verdict"] == "detected"} >= {"advantage_degeneracy"}
    assert json.loads((tmp_path / "d" / "diagnosis.json").read_text())["schema_version"] == SCHEMA_VERSION
    # another command's --json rows carry the same field
    assert main(["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5",
                 "--out", str(tmp_path / "p"), "--json", str(tmp_path / "p.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_plot_all_writes_one_figure_per_finding(tmp_path):
    log = _log(tmp_path / "run.jsonl", frac_zero=np.linspace(0.1, 0.9, 120))
    out = tmp_path / "d"
    assert main(["diagnose", str(log), "--out", str(out), "--plot", "all"]) == 0
    [run] = json.loads((out / "diagnosis.json").read_text())["runs"]
    found = {m for m, r in run["results"].items() if r["verdict"] in ("detected", "violated")}
    assert len(found) >= 2  # degeneracy and the plateau at least
    assert set(run["finding_figures"]) == found
    written = {p.name for p in out.glob("finding_*.png")}
    assert written == {f"finding_{m}.png" for m in found}
    for name in written | {"dashboard.png"}:
        assert (out / name).read_bytes()[:8] == PNG
    assert run["dashboard"] == "dashboard.svg" and run["dashboard_png"] == "dashboard.png"
    assert (out / "dashboard.svg").read_text().startswith("<svg")
    # the default writes the SVG dashboard only; --plot png the PNG only; --plot none (and --no-plot) nothing
    assert main(["diagnose", str(log), "--out", str(tmp_path / "e")]) == 0
    assert [p.name for p in (tmp_path / "e").iterdir() if p.suffix in (".png", ".svg")] == ["dashboard.svg"]
    assert main(["diagnose", str(log), "--out", str(tmp_path / "g"), "--plot", "png"]) == 0
    assert [p.name for p in (tmp_path / "g").iterdir() if p.suffix in (".png", ".svg")] == ["dashboard.png"]
    [run] = json.loads((tmp_path / "g" / "diagnosis.json").read_text())["runs"]
    assert run["dashboard"] == run["dashboard_png"] == "dashboard.png"
    assert main(["diagnose", str(log), "--out", str(tmp_path / "f"), "--plot", "none"]) == 0
    assert not list((tmp_path / "f").glob("*.png")) and not list((tmp_path / "f").glob("*.svg"))


def test_finding_figure_draws_the_measured_column():
    """A health finding's own figure draws the column its detector measures, with the episode shaded."""
    from grpojax.diagnose import diagnose
    from grpojax.logs import RunLog
    from grpojax.plot import finding_figure

    rng = np.random.default_rng(1)
    n = 200
    g = 0.5 * np.exp(0.1 * rng.standard_normal(n))
    g[[60, 140]] *= 40.0
    run = RunLog.from_columns({"step": np.arange(1, n + 1), "reward_mean": np.linspace(0.2, 0.7, n), "grad_norm": g},
                              name="spiky")
    res = diagnose(run, validity=False).results["gradient_spikes"]
    assert res.detected
    fig = finding_figure(run, res)
    [ax] = fig.axes
    [line] = [ln for ln in ax.lines if ln.get_label() == "grad_norm (measured)"]
    np.testing.assert_array_equal(line.get_ydata(), g)
    assert "gradient spikes" in ax.get_title() and "detected" in ax.get_title()


def test_watch_json_carries_the_schema_version(tmp_path, capsys):
    """watch's --json FILE (a finished log: its last write an hour ago, so the watch ends once forecast)."""
    import os
    import time

    log = _log(tmp_path / "run.jsonl")
    old = time.time() - 3600.0
    os.utime(log, (old, old))
    out = tmp_path / "w.json"
    assert main(["watch", str(log), "--every", "20", "--method", "persistence", "--json", str(out), "--no-live"]) == 0
    rep = json.loads(out.read_text())
    assert rep["schema_version"] == SCHEMA_VERSION and rep["status"] == "stopped (idle)"
