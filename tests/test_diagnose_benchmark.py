"""The labelled failure-mode benchmark: scoring arithmetic (fast) and the acceptance run (slow)."""

from __future__ import annotations

import json

import pytest

from _experiments import load_experiment


def _load():
    return load_experiment("failure_benchmark")


def test_confusion_recall_and_false_positive_rate():
    fb = _load()
    labels = ["healthy"] * 4 + ["reward_hacking"] * 2 + ["dynamical_instability"] * 2
    detected = [(), (), ("reward_hacking",), (),
                ("reward_hacking",), (),
                ("dynamical_instability", "advantage_degeneracy"), ("dynamical_instability",)]
    c = fb.confusion(labels, detected)
    assert c["recall"]["reward_hacking"] == 0.5
    assert c["recall"]["dynamical_instability"] == 1.0
    # hacking detected in 1 of the 6 runs not labelled hacking
    assert c["false_positive_rate"]["reward_hacking"] == pytest.approx(1 / 6)
    assert c["false_positive_rate"]["advantage_degeneracy"] == pytest.approx(1 / 8)
    assert c["counts"]["healthy"]["none"] == 3 and c["counts"]["reward_hacking"]["none"] == 1


def test_specs_cover_every_label_with_varied_settings():
    fb = _load()
    specs = fb.make_specs(quick=True)
    for lab in fb.LABELS:
        runs = [s for s in specs if s.label == lab]
        assert len(runs) >= 10, lab
        assert len({json.dumps(s.params, sort_keys=True) for s in runs}) == len(runs)  # no duplicated setting


@pytest.mark.slow
def test_quick_benchmark_meets_acceptance(tmp_path):
    """The experiment as users run it: in JAX's default float32. (The test suite turns x64 on; in float64 the
    random streams differ and 2 of the 10 graded policy-concentration runs (seeds 3 and 4) fail the detector's
    gate, recall 0.8: recall on 10 runs is a coarse statistic.)"""
    import jax

    fb = _load()
    with jax.enable_x64(False):
        rc = fb.main(["--quick", "--out", str(tmp_path)])
    summary = json.loads((tmp_path / "summary.json").read_text())
    conf = summary["confusion"]
    assert min(conf["recall"].values()) >= 0.9, conf["recall"]
    assert max(conf["false_positive_rate"].values()) <= 0.1, conf["false_positive_rate"]
    assert rc == 0
    for f in summary["figures"]:
        assert (tmp_path / f).stat().st_size > 10_000
