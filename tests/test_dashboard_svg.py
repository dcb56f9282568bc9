"""The SVG dashboard (``grpojax diagnose``'s default): well-formed SVG, one panel per logged metric, every
polyline point at its data point (read back through the panel's axis limits), long series thinned without
losing their extremes, and the findings (shaded episodes, collapse lines, spikes, events) drawn."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from grpojax.diagnose import diagnose
from grpojax.logs import RunLog
from grpojax.plot import diagnosis_dashboard_svg
from grpojax.plot._dashboard_svg import downsample, nice_ticks
from grpojax.plot._diagnose import MODE_LABELS

NS = {"s": "http://www.w3.org/2000/svg"}


def _collapsing_run(n: int = 400, seed: int = 0, name: str = "run") -> RunLog:
    """A reward that rises then drops at 70% of the run, the entropy falling first, three grad-norm spikes."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1.0)
    r = 0.2 + 0.5 * (1 - np.exp(-t / (n / 6)))
    r[int(0.7 * n):] -= 0.45
    ent = 0.6 * np.exp(-t / n)
    ent[int(0.65 * n):] *= 0.3
    g = 0.3 * np.exp(0.1 * rng.standard_normal(n))
    g[[int(0.3 * n), int(0.5 * n), int(0.66 * n)]] = [30.0, 50.0, 80.0]
    return RunLog.from_columns({
        "step": t, "reward_mean": np.clip(r + 0.03 * rng.standard_normal(n), 0, 1), "entropy": ent, "grad_norm": g,
        "kl": 0.01 * t / n, "response_length": 300 + 20 * rng.standard_normal(n)}, name=name)


def _panels(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return {g.get("data-metric"): g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "panel"}


def _to_data(panel: ET.Element, points: str) -> tuple[np.ndarray, np.ndarray]:
    """A polyline's points mapped back to the data's units through the panel's box and limits (and symlog)."""
    bx, by, bw, bh = map(float, panel.get("data-box").split())
    x0, x1 = map(float, panel.get("data-xlim").split())
    y0, y1 = map(float, panel.get("data-ylim").split())
    xy = np.array([[float(v) for v in p.split(",")] for p in points.split()])
    x = x0 + (xy[:, 0] - bx) / bw * (x1 - x0)
    u = y0 + (by + bh - xy[:, 1]) / bh * (y1 - y0)
    if panel.get("data-yscale") == "symlog":  # invert v/c (|v| <= c), sign(v) (1 + log10(|v|/c)) beyond
        c = float(panel.get("data-linthresh"))
        u = np.where(np.abs(u) <= 1, u * c, np.sign(u) * c * 10.0 ** (np.abs(u) - 1))
    return x, u


def _tolerance(panel: ET.Element) -> tuple[float, float]:
    """The data-unit width of half a hundredth of an SVG unit (the points are written with two decimals)."""
    _, _, bw, bh = map(float, panel.get("data-box").split())
    x0, x1 = map(float, panel.get("data-xlim").split())
    y0, y1 = map(float, panel.get("data-ylim").split())
    return 0.0051 * (x1 - x0) / bw, 0.0051 * (y1 - y0) / bh


def test_one_panel_per_logged_metric_and_points_at_their_data(tmp_path):
    run = _collapsing_run()
    d = diagnose(run)
    svg = diagnosis_dashboard_svg(run, d, tmp_path / "dash.svg")
    assert (tmp_path / "dash.svg").read_text() == svg
    panels = _panels(svg)
    # the reward, then the logged metrics in the PNG dashboard's order (frac_zero_std, reward_std, clip
    # fractions are not logged: no panel)
    assert list(panels) == ["reward_mean", "entropy", "kl", "grad_norm", "response_length"]
    assert panels["grad_norm"].get("data-yscale") == "symlog"  # 0.3 to 80: more than two decades
    assert panels["kl"].get("data-yscale") == "linear"
    for col, panel in panels.items():
        [line] = [p for p in panel.iter("{http://www.w3.org/2000/svg}polyline") if p.get("data-series") == col]
        x, y = _to_data(panel, line.get("points"))
        s, v = run.series(col)
        tx, ty = _tolerance(panel)
        assert x.size == s.size  # 400 points: none thinned
        np.testing.assert_allclose(x, s, rtol=0, atol=tx, err_msg=col)
        if panel.get("data-yscale") == "symlog":  # two decimals of a log coordinate: a relative tolerance
            np.testing.assert_allclose(y, v, rtol=0.003, err_msg=col)
        else:
            np.testing.assert_allclose(y, v, rtol=0, atol=ty, err_msg=col)
    # the three-phase fit of the validity check is the dashed line of the reward panel
    [fit] = [p for p in panels["reward_mean"].iter("{http://www.w3.org/2000/svg}polyline")
             if p.get("data-series") == "fit"]
    fs, fy = d["mean_field_validity"].panel_data["fit"]
    x, y = _to_data(panels["reward_mean"], fit.get("points"))
    np.testing.assert_allclose(y, fy, rtol=0, atol=_tolerance(panels["reward_mean"])[1])


def test_findings_and_events_are_marked():
    run = _collapsing_run()
    d = diagnosis = diagnose(run)
    assert d["collapse"].detected and d["gradient_spikes"].detected
    svg = diagnosis_dashboard_svg(run, diagnosis)
    panels = _panels(svg)
    root = ET.fromstring(svg)
    title = "".join(root.find("s:title", NS).itertext())
    assert title == "grpojax diagnose: run"
    texts = ["".join(t.itertext()) for t in root.findall("s:text", NS)]
    found = [m for m, r in d.results.items() if r.detected]
    [line] = [t for t in texts if t.startswith("findings: ")]
    assert all(f"{MODE_LABELS[m]} ({d[m].severity:.2f})" in line for m in found), line
    shaded = {m for m, r in d.results.items() if r.verdict == "detected" and r.episodes}
    for col, panel in panels.items():
        modes = {e.get("data-mode") for e in panel.iter() if e.get("class") == "episode"}
        assert modes == shaded, col  # every detected episode in every panel, as the PNG
        # the events of the panel's series, one triangle each, pointing their way
        want = sorted((e.step, e.direction) for c in ((col, "eval_reward") if col == "reward_mean" else (col,))
                      for e in getattr(d.events.get(c), "events", ()))
        got = sorted((float(e.get("data-step")), e.get("data-direction")) for e in panel.iter()
                     if e.get("class") == "event")
        assert got == want, col
    assert any(e for e in d.events["entropy"].events if e.direction == "down")
    # the collapse onset and the checkpoint to restore: two vertical lines at their steps in the reward panel
    info = d["collapse"].panel_data["collapse"]
    reward = panels["reward_mean"]
    bx, _, bw, _ = map(float, reward.get("data-box").split())
    x0, x1 = map(float, reward.get("data-xlim").split())
    vlines = sorted(x0 + (float(v.get("x1")) - bx) / bw * (x1 - x0) for v in reward.iter() if v.get("class") == "vline")
    for step in (info["onset"], info["restore_step"]):
        assert min(abs(v - step) for v in vlines) < 0.01 * (x1 - x0) / bw * 100
    # one spike marker per spike step, on the grad norm panel
    [spikes] = [g for g in panels["grad_norm"].iter() if g.get("data-series") == "gradient_spikes"]
    assert len(list(spikes)) == len(d["gradient_spikes"].panel_data["spike_steps"]) == 3


def test_long_series_are_thinned_keeping_their_extremes():
    rng = np.random.default_rng(1)
    n = 50_000
    s = np.arange(n, dtype=float)
    y = rng.standard_normal(n)
    spikes = [123, 20_000, 49_990]
    y[spikes] = [40.0, -35.0, 60.0]
    for m in (4, 5, 100, 2000):
        xs, ys = downsample(s, y, m)
        assert 2 <= xs.size <= m
        idx = xs.astype(int)
        assert np.all(np.diff(idx) > 0)  # points of the series, in order
        np.testing.assert_array_equal(ys, y[idx])
        assert {0, n - 1} <= set(idx.tolist())
        assert {int(np.argmax(y)), int(np.argmin(y))} <= set(idx.tolist())
        if m >= 100:
            assert set(spikes) <= set(idx.tolist())
    x_short = np.arange(10.0)
    assert downsample(x_short, x_short, 10)[0] is not None and downsample(x_short, x_short, 10)[0].size == 10
    with pytest.raises(ValueError, match="max_points"):
        downsample(s, y, 3)
    # through the dashboard: a 20,000-step run draws at most max_points points per series, the spike among them
    t = np.arange(1, 20_001.0)
    g = 0.3 + 0.01 * rng.standard_normal(t.size)
    g[7777] = 9.0
    run = RunLog.from_columns({"step": t, "reward_mean": 0.5 + 0.1 * np.tanh(t / 5000), "grad_norm": g}, name="long")
    d = diagnose(run, validity=False)
    panels = _panels(diagnosis_dashboard_svg(run, d, max_points=500))
    [line] = [p for p in panels["grad_norm"].iter("{http://www.w3.org/2000/svg}polyline")
              if p.get("data-series") == "grad_norm"]
    x, v = _to_data(panels["grad_norm"], line.get("points"))
    assert x.size <= 500
    k = int(np.argmin(np.abs(x - 7778.0)))
    assert abs(x[k] - 7778.0) < 1 and v[k] == pytest.approx(9.0, rel=0.01)


def test_names_are_escaped_and_missing_reward_is_said():
    t = np.arange(1, 61.0)
    run = RunLog.from_columns({"step": t, "entropy": 0.5 + 0 * t, "kl": 0.001 * t}, name='a<b & "c"\x01')
    d = diagnose(run, validity=False)
    svg = diagnosis_dashboard_svg(run, d)
    root = ET.fromstring(svg)  # parses: escaped, the control character dropped
    assert "".join(root.find("s:title", NS).itertext()) == 'grpojax diagnose: a<b & "c"'
    panels = _panels(svg)
    assert list(panels) == ["reward_mean", "entropy", "kl"]
    assert "reward_mean not logged" in "".join(panels["reward_mean"].itertext())
    assert panels["entropy"].get("data-ylim") is not None  # a constant series still gets an axis
    y0, y1 = map(float, panels["entropy"].get("data-ylim").split())
    assert y0 < 0.5 < y1


def test_nice_ticks_are_round_and_inside():
    for lo, hi in ((0.0, 1.0), (-3.2, 17.9), (0.00012, 0.00089), (1e5, 3.7e6), (-1.0, -0.2)):
        ticks = nice_ticks(lo, hi)
        assert 3 <= len(ticks) <= 11 and all(lo - 1e-12 <= t <= hi + 1e-12 for t in ticks)
        step = ticks[1] - ticks[0]
        mant = step / 10 ** math.floor(math.log10(step))
        assert min(abs(mant - m) for m in (1, 2, 2.5, 5, 10)) < 1e-9
        np.testing.assert_allclose(np.diff(ticks), step, rtol=1e-9)
