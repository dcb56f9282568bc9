"""The escape model with the sampling noise held over a refresh period (``batch_reuse=True``).

The simulator below is written from the recurrence itself: heavy ball with the stale term e_b (the error at
the last refresh), and one Gaussian draw of the gradient noise per refresh period, added at every step of the
period. Bands: 5 standard errors of the simulated variance; for P(escape) 4 standard errors of the simulated
fraction plus the model's stated tolerance (exits counted as independent make P too high: on these cases with
the basin at 2.5-3 stationary sds, model minus simulation (20,000 paths) measured -0.006 to +0.051).
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from grpojax._errors import InvalidValueError
from grpojax.dynamics import schedule_margin
from grpojax.dynamics._escape import escape_onset, escape_probability

MODEL_TOL = 0.08


def simulate_held(eta, mu, k_ref, kd, k0, noise, w, steps, n, rng, batch=1):
    """Fraction of ``n`` paths with |e| > w at some step 1..steps and Var(e) at the last step, the noise drawn
    at every refresh (t % k_ref == 0) and held for the period."""
    e, e_prev, snap, z = (np.zeros(n) for _ in range(4))
    escaped = np.zeros(n, bool)
    for t in range(steps):
        if t % k_ref == 0:
            snap = e.copy()
            z = eta * math.sqrt(noise / batch) * rng.standard_normal(n)
        e_prev, e = e, (1 + mu - eta * k0) * e - mu * e_prev - eta * kd * snap + z
        escaped |= np.abs(e) > w
    return escaped.mean(), e.var()


CASES = [  # (eta, mu, k_ref, kd, k0)
    (0.02, 0.9, 4, 1.0, 0.5),
    (0.4, 0.0, 3, -0.2, 1.0),
    (0.05, 0.9, 8, -1.04, 2.03),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("steps", [13, 60])
def test_held_noise_variance_matches_simulation(case, steps, test_seed):
    eta, mu, k_ref, kd, k0 = case
    n = 20_000
    _, var = simulate_held(eta, mu, k_ref, kd, k0, 1.5, 1e9, steps, n, np.random.default_rng(test_seed), batch=3)
    kw = dict(k_instant=k0, noise=1.5, basin=1.0, steps=steps, lag="periodic", samples_per_step=3)
    held = float(escape_probability(eta, mu, k_ref, kd, batch_reuse=True, **kw).variance)
    fresh = float(escape_probability(eta, mu, k_ref, kd, **kw).variance)
    band = 5 * math.sqrt(2 / (n - 1)) + 5 / math.sqrt(n)
    assert abs(var / held - 1) < band, (var, held)
    assert abs(var / fresh - 1) > band  # the simulation tells the two noise models apart


@pytest.mark.parametrize("case", CASES)
def test_held_noise_escape_probability_matches_simulation(case, test_seed):
    eta, mu, k_ref, kd, k0 = case
    steps, n = 400, 4000
    sd = math.sqrt(float(escape_probability(eta, mu, k_ref, kd, k_instant=k0, noise=1.0, basin=1.0, steps=1,
                                            lag="periodic", batch_reuse=True).stationary_variance))
    w = 2.7 * sd
    model = float(escape_probability(eta, mu, k_ref, kd, k_instant=k0, noise=1.0, basin=w, steps=steps,
                                     lag="periodic", batch_reuse=True).probability)
    sim, _ = simulate_held(eta, mu, k_ref, kd, k0, 1.0, w, steps, n, np.random.default_rng(test_seed))
    se = math.sqrt(max(sim * (1 - sim), 0.01) / n)
    assert 0.05 < model < 0.95  # the points are in the interesting range
    assert sim - 4 * se <= model <= sim + 4 * se + MODEL_TOL, (model, sim, se)


def test_held_noise_onset_matches_simulation(test_seed):
    mu, k_ref, kd, steps, w, n, tol = 0.9, 4, 1.0, 400, 1.0, 4000, 0.05
    on = float(escape_onset(mu, k_ref, kd, noise=1.0, basin=w, steps=steps, lag="periodic", batch_reuse=True))
    fresh = float(escape_onset(mu, k_ref, kd, noise=1.0, basin=w, steps=steps, lag="periodic"))
    assert on < fresh * (1 - 2 * tol)  # held noise escapes at a smaller lr (K_ref steps of one draw)
    rng = np.random.default_rng(test_seed)
    lo, _ = simulate_held(on * (1 - tol), mu, k_ref, kd, 0.0, 1.0, w, steps, n, rng)
    hi, _ = simulate_held(on * (1 + tol), mu, k_ref, kd, 0.0, 1.0, w, steps, n, rng)
    se = math.sqrt(0.25 / n)
    assert lo < 0.5 + 4 * se and hi > 0.5 - 4 * se, (lo, hi)


@pytest.mark.parametrize("mu,kd,k0,growth", [(0.0, 1.0, 0.0, 0.0), (0.9, 0.4, 0.3, 0.0), (0.5, 0.5, 0.2, 2.0)])
def test_one_step_period_is_the_per_step_model(mu, kd, k0, growth):
    eta = np.geomspace(0.01, 0.3, 6)
    kw = dict(k_instant=k0, noise=0.7, basin=0.5, steps=300, lag="periodic", samples_per_step=2,
              noise_growth=growth)
    a = escape_probability(eta, mu, 1, kd, **kw)
    b = escape_probability(eta, mu, 1, kd, batch_reuse=True, **kw)
    for x, y in zip(a, b):
        np.testing.assert_allclose(np.asarray(y, float), np.asarray(x, float), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(escape_onset(mu, 1, kd, batch_reuse=True, **{k: v for k, v in kw.items()}),
                               escape_onset(mu, 1, kd, **kw), rtol=1e-9)


def test_default_reproduces_the_committed_atlas_onsets():
    """The default (a fresh draw every step) gives the onsets the transformer atlas committed before this option
    existed (its predictions.json: the escape-model onset per cell)."""
    path = pathlib.Path(__file__).resolve().parents[1] / "experiments/results/transformer_atlas/predictions.json"
    if not path.exists():
        pytest.skip(f"the committed atlas predictions are absent ({path.name})")
    pred = json.loads(path.read_text())
    p = pred["prompt_sets"]["difficulty1"]
    for c in p["cells"]:
        if c["schedule"] != "constant" or c["mu"] != 0.9:
            continue
        on = float(escape_onset(c["mu"], c["k_ref"], p["stiffness"]["k_stale"], noise=p["noise_per_group"],
                                basin=p["basin"], steps=pred["steps"], lag="periodic",
                                k_instant=p["stiffness"]["k_instant"], samples_per_step=p["groups_per_step"]))
        assert on == pytest.approx(c["escape_onset"], rel=1e-9)


def test_schedule_margin_passes_batch_reuse():
    kw = dict(schedule="cosine", steps=120, warmup_steps=12, mu=0.9, lag="periodic", noise=1.0, basin=0.3)
    fresh = schedule_margin(0.01, 4, 1.0, **kw).escape_probability
    held = schedule_margin(0.01, 4, 1.0, batch_reuse=True, **kw).escape_probability
    one = schedule_margin(0.01, 1, 1.0, batch_reuse=True, **kw).escape_probability
    assert one == pytest.approx(schedule_margin(0.01, 1, 1.0, **kw).escape_probability, rel=1e-9)
    assert held > fresh  # the same draw for four steps moves the error further


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_reuse="yes"), "batch_reuse must be True or False, got 'yes'"),
    (dict(batch_reuse=True, lag="constant"), "batch_reuse=True needs lag='periodic'.*got lag='constant'"),
])
def test_bad_batch_reuse_is_refused(kwargs, match):
    base = dict(noise=1.0, basin=1.0, steps=10, lag="periodic")
    with pytest.raises(InvalidValueError, match=match):
        escape_probability(0.1, 0.0, 2, 1.0, **{**base, **kwargs})
    with pytest.raises(InvalidValueError, match=match):
        escape_onset(0.0, 2, 1.0, **{k: v for k, v in {**base, **kwargs}.items()})


def test_advise_and_the_cli_take_batch_reuse(tmp_path, capsys):
    from grpojax.cli import main
    from grpojax.monitor import advise

    kw = dict(mu=0.9, k_ref=4, group_size=8, curvature=0.5, pass_rate=0.8, steps=300, escape_level=0.05)
    held = advise(eta=0.01, batch_reuse=True, **kw)
    direct = escape_probability(0.01, 0.9, 4, 0.5, noise=0.16, basin=0.2, samples_per_step=8, steps=300,
                                lag="periodic", batch_reuse=True)
    assert held.escape_probability == pytest.approx(float(direct.probability), rel=1e-9)
    on = escape_onset(0.9, 4, 0.5, noise=0.16, basin=0.2, samples_per_step=8, steps=300, lag="periodic", level=0.05,
                      batch_reuse=True)
    assert held.eta_escape == pytest.approx(float(on), rel=1e-9) and held.eta_escape < advise(eta=0.01, **kw).eta_escape
    with pytest.raises(InvalidValueError, match="heavy-ball momentum only"):
        advise(eta=0.01, **{k: v for k, v in kw.items() if k != "mu"}, beta1=0.9, batch_reuse=True)
    assert main(["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5", "--noise", "0.16",
                 "--steps", "300", "--batch-reuse", "--out", str(tmp_path)]) == 0
    pred = json.loads((tmp_path / "prediction.json").read_text())
    assert pred["escape"]["probability"] == pytest.approx(float(escape_probability(
        0.01, 0.9, 4, 0.5, noise=0.16, basin=0.2, samples_per_step=8, steps=300, lag="periodic",
        batch_reuse=True).probability), rel=1e-9)
    assert "one batch per refresh" in capsys.readouterr().out
    assert main(["predict", "--eta", "0.01", "--mu", "0.9", "--k-ref", "4", "--curvature", "0.5", "--lag", "constant",
                 "--batch-reuse", "--out", str(tmp_path)]) != 0
    assert "--lag constant" in capsys.readouterr().err
