"""The measured-sweep check of advise's escape level: its advice is recomputed from the committed sweep, its seeds
are new, its counts come from the runs, and the pipeline runs end to end in quick mode (slow)."""

from __future__ import annotations

import json

import pytest

from _experiments import load_experiment
from grpojax.monitor import escape_sweep_bound

exp = load_experiment("escape_advise_sweep")
OUT = exp.GROWTH.parents[2] / "escape_advise_sweep"


def test_the_committed_advice_is_the_smaller_of_the_models_and_the_certified_rate(tmp_path):
    sweep = json.loads((OUT / "probe.json").read_text())
    committed = json.loads((OUT / "predictions.json").read_text())
    pred = exp.predict(tmp_path, False, sweep, log=lambda *a: None)
    assert len(pred["cells"]) == len(committed["cells"]) == 90
    for c, old in zip(pred["cells"], committed["cells"]):
        eta, esc = exp.sweep_runs(sweep, c["cell"])
        assert len(eta) == len(exp.POWERS) * len(exp.PROBE_SEEDS) == 300
        b = escape_sweep_bound(eta, esc, level=0.05, confidence=0.95)
        assert c["eta_advised"] == pytest.approx(min(c["eta_model"], b.eta))
        assert c["eta_advised"] == pytest.approx(old["eta_advised"])
        assert {round(r["eta"] / c["eta_model"], 9) for r in sweep["rates"] if r["cell"] == c["cell"]} == \
            {round(exp.RATIO ** k, 9) for k in exp.POWERS}


def test_the_seeds_are_new():
    earlier = {0, 1, 2, 3, *range(10, 18), *range(24, 28), *range(100, 170), *range(300, 316), *range(400, 480)}
    assert earlier.isdisjoint(exp.PROBE_SEEDS) and earlier.isdisjoint(exp.CHECK_SEEDS)
    assert set(exp.PROBE_SEEDS).isdisjoint(exp.CHECK_SEEDS)


def test_cells_over_the_level_are_counted_from_the_runs():
    cells = [dict(cell=n, eta_advised=a) for n, a in (("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", None))]
    pred = dict(level=0.05, cells=cells)
    # a: 1 of 30 (not over); b: 3 of 30 (over, lower bound below 0.05); c: 12 of 30 (lower bound over); d not advised
    runs = [dict(cell=n, escaped=i < k) for n, k in (("a", 1), ("b", 3), ("c", 12)) for i in range(30)]
    sc = exp.score(pred, runs)
    assert [c["measured"]["over"] for c in sc["cells"][:3]] == [False, True, True]
    assert [c["measured"]["lower_over"] for c in sc["cells"][:3]] == [False, False, True]
    assert (sc["advised"], sc["not_advised"], sc["over"], sc["lower_over"]) == (3, 1, 2, 1)
    assert sc["pooled"] == pytest.approx(16 / 90)


def test_the_committed_check_is_the_runs_of_the_committed_advice():
    summary = json.loads((OUT / "summary.json").read_text())
    committed = {c["cell"]: c for c in json.loads((OUT / "predictions.json").read_text())["cells"]}
    for c in summary["cells"]:
        assert c["eta_advised"] == committed[c["cell"]]["eta_advised"]
        assert c["measured"]["n"] == 30
    assert summary["scores"]["over"] == sum(c["measured"]["over"] for c in summary["cells"])


@pytest.mark.slow
def test_the_quick_pipeline_runs_end_to_end(tmp_path):
    import jax

    with jax.numpy_dtype_promotion("standard"):  # as the script runs outside the test suite's strict promotion
        assert exp.main(["--quick", "--out", str(tmp_path)]) == 0
    pred = json.loads((tmp_path / "predictions.json").read_text())
    assert len(pred["cells"]) == 6 and (tmp_path / "escape_advise_sweep.md").exists()
