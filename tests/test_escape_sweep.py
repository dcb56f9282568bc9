"""The measured escape bound of a learning-rate sweep: its binomial bound against scipy's own, the pooling and
the ascending walk on constructed sweeps, its error rate against the exact one by simulation, the file reader,
and ``advise``'s use of it from Python and the command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest

from grpojax._errors import InvalidValueError
from grpojax.monitor import advise, escape_sweep_bound, read_escape_sweep
from grpojax.monitor._escape_sweep import _upper, runs_needed


@pytest.mark.parametrize("k,n,c", [(0, 59, 0.95), (1, 60, 0.95), (3, 20, 0.9), (0, 5, 0.5), (7, 40, 0.99)])
def test_the_upper_bound_is_the_one_sided_clopper_pearson_bound(k, n, c):
    ref = binomtest(k, n, alternative="less").proportion_ci(confidence_level=c, method="exact").high
    assert _upper(k, n, c) == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("level,conf", [(0.05, 0.95), (0.01, 0.95), (0.1, 0.9), (0.5, 0.5)])
def test_runs_needed_is_the_fewest_runs_that_certify(level, conf):
    n = runs_needed(level, conf)
    assert _upper(0, n, conf) <= level < _upper(0, n - 1, conf) or n == 1
    assert runs_needed(0.05, 0.95) == 59


def _sweep(counts):
    """``counts``: [(eta, runs, escaped)] -> per-run arrays."""
    eta = np.concatenate([np.full(n, e, float) for e, n, _ in counts])
    esc = np.concatenate([np.r_[np.ones(k, bool), np.zeros(n - k, bool)] for _, n, k in counts])
    return eta, esc


def test_rates_are_pooled_upward_by_count_and_walked_in_ascending_order():
    # 20 runs per rate: a rate's pool is it and the next two (60 >= 59)
    eta, esc = _sweep([(1.0, 20, 0), (2.0, 20, 0), (3.0, 20, 0), (4.0, 20, 0), (5.0, 20, 1), (6.0, 20, 20)])
    b = escape_sweep_bound(eta, esc)
    assert [(v.pooled_runs, v.pooled_escaped) for v in b.levels] == [(60, 0), (60, 0), (60, 1), (60, 21), (40, 21),
                                                                     (20, 20)]
    assert b.eta == 2.0 and b.upper == pytest.approx(_upper(0, 60, 0.95))
    assert [v.certified for v in b.levels] == [True, True, False, False, False, False]
    # the walk stops at the first rate it cannot certify, even when a larger one could be
    eta, esc = _sweep([(1.0, 60, 5), (2.0, 60, 0), (3.0, 60, 0)])
    b = escape_sweep_bound(eta, esc)
    assert b.eta is None and b.levels[1].upper <= 0.05 and not b.levels[1].certified
    assert "no rate certified" in b.describe() and "η = 1" in b.describe()


def test_the_order_of_the_runs_does_not_matter():
    rng = np.random.default_rng(0)
    eta = np.repeat([0.1, 0.2, 0.4, 0.8, 1.6], 30)
    esc = rng.random(eta.size) < np.repeat([0.0, 0.0, 0.01, 0.3, 0.9], 30)
    perm = rng.permutation(eta.size)
    assert escape_sweep_bound(eta, esc) == escape_sweep_bound(eta[perm], esc[perm].astype(int).tolist())


@pytest.mark.parametrize("p", [0.06, 0.1])
def test_the_rate_of_certifying_a_rate_above_the_level_is_the_exact_one(p):
    """Every rate at the same P(escape) = p > level (the worst case of the walk: the first rate is already over):
    a rate is certified exactly when the first pool of 60 runs has no escape, probability (1 - p)^60 <= 0.05.
    The simulated frequency over 4,000 sweeps against it: a band of 4 binomial standard errors."""
    rng = np.random.default_rng(1)
    eta = np.repeat([1.0, 2.0, 3.0, 4.0], 20)
    n_sweeps, wrong = 4000, 0
    for _ in range(n_sweeps):
        wrong += escape_sweep_bound(eta, rng.random(eta.size) < p).eta is not None
    exact = (1 - p) ** 60
    assert exact <= 0.05
    assert abs(wrong / n_sweeps - exact) <= 4 * math.sqrt(exact * (1 - exact) / n_sweeps) + 1 / n_sweeps


def test_a_monotone_curve_keeps_the_guarantee_for_the_certified_rate():
    """P(escape) rising through the level: the frequency with which the certified rate has P > 0.05 stays below
    1 - confidence (band: 4 binomial standard errors of 0.05 over 2,000 sweeps)."""
    rng = np.random.default_rng(2)
    rates = 0.02 * 1.25 ** np.arange(12)
    prob = np.clip(0.05 * (rates / rates[6]) ** 3, 0, 1)  # 0.05 at rates[6]; over it above
    eta = np.repeat(rates, 20)
    bad, certified = 0, 0
    for _ in range(2000):
        b = escape_sweep_bound(eta, rng.random(eta.size) < np.repeat(prob, 20))
        if b.eta is not None:
            certified += 1
            bad += prob[np.searchsorted(rates, b.eta)] > 0.05
    assert certified > 1000  # the bound is not vacuous here
    assert bad / 2000 <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / 2000)


@pytest.mark.parametrize("kw,match", [
    (dict(eta=[], escaped=[]), "no runs"),
    (dict(eta=[1.0, 2.0], escaped=[True]), "2 learning rates but 1 escape flags"),
    (dict(eta=[1.0, -2.0], escaped=[True, False]), r"run 1: learning rate -2\.0; expected a finite number > 0"),
    (dict(eta=[1.0, float("nan")], escaped=[True, False]), "run 1: learning rate nan"),
    (dict(eta=[1.0, 2.0], escaped=[True, 2]), "run 1: escape flag 2"),
    (dict(eta=[1.0, "fast"], escaped=[True, False]), "eta must be learning rates"),
    (dict(eta=[1.0], escaped=[True], level=0.0), "level must be a probability in"),
    (dict(eta=[1.0], escaped=[True], confidence=True), "confidence must be a probability in"),
])
def test_bad_input_is_one_line_naming_the_value(kw, match):
    with pytest.raises(InvalidValueError, match=match) as e:
        escape_sweep_bound(kw.pop("eta"), kw.pop("escaped"), **kw)
    assert "\n" not in str(e.value)


def test_the_reader_takes_csv_and_json_lines(tmp_path):
    (tmp_path / "s.csv").write_text("eta,escaped,steps\n0.1,false,500\n0.1,0,500\n0.2,True,400\n")
    eta, esc = read_escape_sweep(tmp_path / "s.csv", steps=400)
    assert eta.tolist() == [0.1, 0.1, 0.2] and esc.tolist() == [False, False, True]
    (tmp_path / "s.jsonl").write_text('{"eta": 0.1, "escaped": false}\n\n{"eta": 0.2, "escaped": 1}\n')
    eta, esc = read_escape_sweep(tmp_path / "s.jsonl")
    assert eta.tolist() == [0.1, 0.2] and esc.tolist() == [False, True]


def _population(members, steps=300):
    return json.dumps(dict(name="tiny-arith", steps=steps, members=[
        dict(member=dict(lr=lr, momentum=mu, k_ref=1, seed=sd, name=f"m{i:04d}"), diverged=d)
        for i, (lr, mu, sd, d) in enumerate(members)]))


def test_the_reader_takes_a_populations_file(tmp_path):
    f = tmp_path / "population.json"
    f.write_text(_population([(0.1, 0.9, 0, False), (0.1, 0.9, 1, False), (0.3, 0.9, 0, True)]))
    eta, esc = read_escape_sweep(f, steps=300)
    assert eta.tolist() == [0.1, 0.1, 0.3] and esc.tolist() == [False, False, True]
    with pytest.raises(InvalidValueError, match="fewer than the planned 400"):
        read_escape_sweep(f, steps=400)
    f.write_text(_population([(0.1, 0.9, 0, False), (0.1, 0.0, 1, False)]))
    with pytest.raises(InvalidValueError, match=r"the members differ in momentum \(0.0, 0.9\)"):
        read_escape_sweep(f)


@pytest.mark.parametrize("text,suffix,match", [
    ("eta,escaped\n", ".csv", "no runs"),
    ("eta,steps\n0.1,400\n", ".csv", "row 1: no 'escaped'"),
    ("eta,escaped\nfast,true\n", ".csv", "row 1: eta 'fast'; expected a learning rate"),
    ("eta,escaped\n0.1,maybe\n", ".csv", "row 1: escaped 'maybe'; expected true/false or 1/0"),
    ("eta,escaped,steps\n0.1,true,400\n0.1,false,300\n", ".csv", "row 2: ran 300 steps, fewer than the planned 400"),
    ('{"eta": 0.1, "escaped": true}\n[1]\n', ".jsonl", "line 2 is not a JSON object"),
])
def test_the_reader_names_the_bad_row(tmp_path, text, suffix, match):
    f = tmp_path / f"s{suffix}"
    f.write_text(text)
    with pytest.raises(InvalidValueError, match=match):
        read_escape_sweep(f, steps=400)


BASE = dict(eta=0.008, mu=0.9, k_ref=4, group_size=8, curvature=0.5, pass_rate=0.6, steps=400)


def test_advise_caps_the_range_at_the_certified_rate_and_only_lowers_it():
    free = advise(**BASE)
    top = free.eta_range[1]
    eta, esc = _sweep([(0.6 * top, 30, 0), (0.7 * top, 30, 0), (0.8 * top, 30, 4), (0.9 * top, 30, 30)])
    a = advise(**BASE, escape_sweep=(eta, esc))
    assert a.escape_sweep.eta == pytest.approx(0.6 * top)
    assert a.eta_range == pytest.approx((free.eta_range[0], 0.6 * top))
    assert free.in_range and not a.in_range  # η = 0.008 is inside the model's range, above the certified rate
    assert any(n.startswith("measured sweep:") for n in a.notes)
    # a sweep that certifies more than the model advises leaves the advice as it was
    eta, esc = _sweep([(top * 2, 60, 0), (top * 4, 60, 0)])
    assert advise(**BASE, escape_sweep=(eta, esc)).eta_range == free.eta_range
    # one that certifies nothing advises no η
    eta, esc = _sweep([(top / 8, 30, 30)])
    a = advise(**BASE, escape_sweep=(eta, esc))
    assert a.escape_sweep.eta is None and a.eta_range is None and not a.in_range
    with pytest.raises(InvalidValueError, match="escape_sweep must be a pair"):
        advise(**BASE, escape_sweep=[1.0, 2.0, 3.0])


def test_the_command_line_gives_the_same_advice_as_python(tmp_path, capsys):
    from grpojax.cli._app import main

    free = advise(**BASE)
    top = free.eta_range[1]
    eta, esc = _sweep([(0.6 * top, 30, 0), (0.7 * top, 30, 0), (0.8 * top, 30, 4), (0.9 * top, 30, 30)])
    rows = [dict(eta=float(e), escaped=bool(x), steps=400) for e, x in zip(eta, esc)]
    (tmp_path / "sweep.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert main(["advise", "--eta", "0.008", "--mu", "0.9", "--k-ref", "4", "--group-size", "8", "--curvature", "0.5",
                 "--pass-rate", "0.6", "--steps", "400", "--escape-sweep", str(tmp_path / "sweep.jsonl"),
                 "--json", "-"]) == 0
    out = json.loads(capsys.readouterr().out)
    py = advise(**BASE, escape_sweep=(eta, esc)).to_dict()
    assert out["eta_range"] == pytest.approx(list(py["eta_range"]))
    assert out["escape_sweep"]["eta"] == pytest.approx(py["escape_sweep"]["eta"])
    assert out["escape_sweep"]["levels"] == py["escape_sweep"]["levels"]
    assert out["in_range"] is False


def test_the_command_line_names_a_bad_sweep_file(tmp_path, capsys):
    from grpojax.cli._app import main

    (tmp_path / "s.csv").write_text("eta,escaped,steps\n0.01,true,100\n")
    rc = main(["advise", "--eta", "0.05", "--mu", "0.9", "--k-ref", "4", "--group-size", "8", "--curvature", "0.5",
               "--steps", "400", "--escape-sweep", str(tmp_path / "s.csv")])
    err = capsys.readouterr().err
    assert rc != 0 and "--escape-sweep" in err and "ran 100 steps, fewer than the planned 400" in err


def test_along_a_schedule_the_sweep_caps_the_advised_peak_lr(tmp_path, capsys):
    from grpojax.cli._app import main

    (tmp_path / "s.csv").write_text("eta,escaped\n" + "0.001,false\n" * 60 + "0.002,true\n" * 5)
    args = ["advise", "--eta", "0.008", "--mu", "0.9", "--k-ref", "4", "--group-size", "8", "--curvature", "0.5",
            "--steps", "400", "--schedule", "cosine", "--json", "-"]
    assert main(args) == 0
    free = json.loads(capsys.readouterr().out)["schedule"]
    assert main([*args, "--escape-sweep", str(tmp_path / "s.csv")]) == 0
    sched = json.loads(capsys.readouterr().out)["schedule"]
    assert sched["advised_peak_lr"] == pytest.approx(free["advised_peak_lr"]) and free["advised_peak_lr"] > 0.001
    assert sched["advised_peak_lr_with_sweep"] == pytest.approx(0.001)
