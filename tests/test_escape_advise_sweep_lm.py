"""The transformer LM's check of advise's escape level: the model's advice is its P(escape) = level point (or the
margin), the committed advice is recomputed from the committed sweep, the member seeds are new, and the counts come
from the runs."""

from __future__ import annotations

import json

import pytest

from _experiments import load_experiment
from grpojax.dynamics import escape_probability
from grpojax.monitor import escape_sweep_bound

exp = load_experiment("escape_advise_sweep_lm")
OUT = exp.ATLAS.parent / "escape_advise_sweep_lm"


def test_the_models_advice_is_its_five_percent_point_or_the_margin():
    apred = json.loads((exp.ATLAS / "predictions.json").read_text())
    s = apred["prompt_sets"][exp.PROMPT_SET]
    cs, steps = exp.cells(apred, quick=False)
    assert len(cs) == 4 and steps == apred["steps"]
    for c in cs:
        p = float(escape_probability(c["eta05"], c["mu"], c["k_ref"], s["stiffness"]["k_stale"],
                                     noise=s["noise_per_group"], basin=s["basin"], steps=steps, lag="periodic",
                                     k_instant=s["stiffness"]["k_instant"],
                                     samples_per_step=s["groups_per_step"]).probability)
        assert p == pytest.approx(exp.LEVEL, rel=0.02)
        assert c["eta_model"] == pytest.approx(min(c["eta05"], 0.8 * c["eta_star"]))


def test_the_member_seeds_are_new():
    n_probe = 4 * len(exp.POWERS) * exp.PROBE_SEEDS
    n_check = 4 * 2 * exp.CHECK_SEEDS
    used = [(0, 1_000_000), (1_000_000, 2_000_000), (3_000_000, 4_000_000)]  # atlas, batch reuse, AdamW
    for lo, n in ((exp.PROBE_OFFSET, n_probe), (exp.CHECK_OFFSET, n_check)):
        assert all(lo + n <= a or lo >= b for a, b in used)
    assert exp.PROBE_OFFSET + n_probe <= exp.CHECK_OFFSET


def test_cells_over_the_level_are_counted_from_the_runs():
    pred = dict(level=0.05, cells=[dict(cell="a", eta_advised=1.0), dict(cell="b", eta_advised=None)])
    runs = ([dict(cell="a", which="model", escaped=i < 12) for i in range(30)]
            + [dict(cell="a", which="advised", escaped=i < 1) for i in range(30)]
            + [dict(cell="b", which="model", escaped=i < 3) for i in range(30)])
    sc = exp.score(pred, runs)
    assert (sc["model"]["over"], sc["model"]["lower_over"], sc["model"]["escaped"]) == (2, 1, 15)
    assert (sc["advised"]["cells"], sc["advised"]["over"], sc["advised"]["escaped"]) == (1, 0, 1)
    assert sc["not_advised"] == 1


def test_the_committed_advice_is_recomputed_from_the_committed_sweep(tmp_path):
    if not (OUT / "predictions.json").exists():
        pytest.skip("the transformer sweep's results are not committed in this checkout")
    sweep = json.loads((OUT / "probe.json").read_text())
    committed = json.loads((OUT / "predictions.json").read_text())
    pred = exp.predict(tmp_path, False, sweep, log=lambda *a: None)
    for c, old in zip(pred["cells"], committed["cells"], strict=True):
        mine = [r for r in sweep["runs"] if r["cell"] == c["cell"]]
        assert len(mine) == len(exp.POWERS) * exp.PROBE_SEEDS
        b = escape_sweep_bound([r["eta"] for r in mine], [r["escaped"] for r in mine])
        assert c["eta_certified"] == old["eta_certified"] == b.eta
        assert c["eta_advised"] == old["eta_advised"]
