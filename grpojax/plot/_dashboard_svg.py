"""The run dashboard as an SVG file written directly from the arrays (NumPy only: no matplotlib).

``grpojax diagnose`` writes this dashboard by default: importing matplotlib's figure and Agg backend alone takes
about 0.3 s of CPU, as long as the whole diagnosis of a 1,000-step log, and drawing nine panels about as long
again; this file takes a few milliseconds. The SVG shows what the PNG
dashboard (:func:`grpojax.plot.diagnosis_dashboard`) shows -- the reward with the three-phase fit, the eval
points, the forecast band, the best checkpoint of a plateau and a collapse's onset and checkpoint to restore;
every other logged metric of :data:`~grpojax.plot._diagnose.METRIC_PANELS`, the gradient spikes marked on the
grad norm; every detected episode shaded in its detector's colour; each series' events as triangles along
the top of its panel -- as polylines, rectangles and text that any browser shows and scales.

Each panel is a ``<g class="panel">`` whose ``data-metric`` names its column; its ``data-box`` (the plot
area ``x y width height`` in the SVG's units), ``data-xlim`` and ``data-ylim`` (the axis limits) place every
point: ``x = box_x + (step - xlim[0]) / (xlim[1] - xlim[0]) * width``, and ``y`` from the bottom of the box
the same way. The limits are in the data's units, or, where ``data-yscale="symlog"`` (a grad norm spanning
two decades), in symlog coordinates of ``c = data-linthresh``: ``v / c`` for ``|v| <= c``, else
``sign(v) (1 + log10(|v| / c))``. Each series is a ``<polyline>`` whose ``data-series`` names it.
A series longer than ``max_points`` is drawn through its first and last point and the lowest and highest
point of each of at most ``max_points // 2 - 1`` blocks of consecutive points (:func:`downsample`): spikes
and drops stay drawn.
"""

from __future__ import annotations

import html
import math
import pathlib

import numpy as np

from grpojax._errors import InvalidValueError
from grpojax._forecast_band import forecast_band
from grpojax.diagnose import Diagnosis
from grpojax.logs import RunLog
from grpojax.plot._diagnose import HEALTH_COLORS, METRIC_PANELS, MODE_COLORS, MODE_LABELS, _series

__all__ = ["diagnosis_dashboard_svg", "downsample", "nice_ticks"]

# matplotlib's named colours that the dashboards use, as SVG colours
_HEX = {"tab:blue": "#1f77b4", "tab:orange": "#ff7f0e", "tab:green": "#2ca02c", "tab:red": "#d62728",
        "tab:purple": "#9467bd", "tab:brown": "#8c564b", "tab:pink": "#e377c2", "tab:gray": "#7f7f7f",
        "tab:olive": "#bcbd22", "tab:cyan": "#17becf", "crimson": "#dc143c", "black": "#000000", "k": "#000000"}

MAX_POINTS = 2000
"""Points of a series drawn at most (:func:`downsample`)."""

_COLS = 3  # panels per row, as the PNG dashboard
_PW, _PH = 470, 250  # a panel's size (SVG units: pixels at 100 %)
_ML, _MR, _MT, _MB = 62, 14, 44, 34  # its plot area's margins: tick labels left and below, title and legend above
_HEAD = 64  # the figure's title and findings lines


def _hex(color: str) -> str:
    return _HEX.get(color, color)


def _esc(text) -> str:
    """Text for an SVG element or attribute: XML-escaped, without the control characters XML 1.0 forbids."""
    s = "".join(ch for ch in str(text) if ch >= " " or ch in "\t\n")
    return html.escape(s, quote=True)


def downsample(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``max_points`` of the points ``(x, y)`` (``max_points >= 4``), in their order, for a polyline.

    A series that fits is returned whole. A longer one keeps its first and last point and, in each of at most
    ``max_points // 2 - 1`` blocks of ``ceil(n / (max_points // 2 - 1))`` consecutive points (the last one
    shorter), its lowest and its highest point (the first of equal ones): every extreme of the series -- a
    spike, a drop -- stays drawn.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = y.size
    if int(max_points) < 4:
        raise InvalidValueError(f"max_points must be an integer >= 4, got {max_points!r}")
    if n <= max_points:
        return x, y
    size = -(-n // (max_points // 2 - 1))  # points per block
    full = n // size
    blocks = y[: full * size].reshape(full, size)
    start = np.arange(full) * size
    keep = [np.array([0, n - 1]), start + np.argmin(blocks, axis=1), start + np.argmax(blocks, axis=1)]
    if full * size < n:  # the shorter last block
        tail = y[full * size:]
        keep.append(full * size + np.array([np.argmin(tail), np.argmax(tail)]))
    idx = np.sort(np.concatenate(keep))
    idx = idx[np.r_[True, idx[1:] != idx[:-1]]]  # each point once (np.unique would import numpy.ma)
    return x[idx], y[idx]


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round values (1, 2, 2.5 or 5 times a power of ten apart) within ``[lo, hi]``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(n, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = [k * step for k in range(first, int(math.floor(hi / step + 1e-9)) + 1)]
    return [0.0 if abs(t) < step * 1e-9 else t for t in ticks]


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if 1e-3 <= a < 1e5:
        return f"{v:.6g}"
    return f"{v:.3g}"


class _Symlog:
    """matplotlib's symlog coordinates (base 10, ``linscale = 1``): linear within ``+-c``, logarithmic beyond."""

    def __init__(self, c: float):
        self.c = float(c)

    def __call__(self, v):
        v = np.asarray(v, float)
        a = np.abs(v) / self.c
        with np.errstate(divide="ignore"):
            return np.where(a <= 1.0, v / self.c, np.sign(v) * (1.0 + np.log10(np.maximum(a, 1.0))))

    def ticks(self, lo: float, hi: float) -> list[tuple[float, float]]:
        """``(value, coordinate)`` of 0 and of the powers of ten (times ``c``'s decade) inside ``[lo, hi]``."""
        out = []
        k0 = math.floor(math.log10(self.c))
        for k in range(k0, k0 + 40):
            v = 10.0 ** k
            for s in (v, -v):
                t = float(self(s))
                if lo <= t <= hi and abs(s) >= self.c:
                    out.append((s, t))
        if lo <= 0.0 <= hi:
            out.append((0.0, 0.0))
        out.sort(key=lambda p: p[1])
        step = max(1, math.ceil(len(out) / 6))
        return out[::step]


class _Panel:
    """One panel: the plot area at ``(x0, y0)`` of ``w x h`` units, its limits and its SVG elements."""

    def __init__(self, x0: float, y0: float, xlim: tuple[float, float], metric: str, title: str, max_points: int,
                 what: str = ""):
        self.max_points, self.what = max_points, what
        self.x0, self.y0 = x0 + _ML, y0 + _MT
        self.w, self.h = _PW - _ML - _MR, _PH - _MT - _MB
        self.ox, self.oy = x0, y0
        self.xlim, self.ylim = xlim, (0.0, 1.0)
        self.metric, self.title = metric, title
        self.yscale, self.tf = "linear", None
        self.parts: list[str] = []
        self.legend: list[tuple[str, str, str]] = []  # (label, colour, kind: line / dash / dot / marker / patch)
        self.ys: list[np.ndarray] = []  # every y value drawn: the y limits
        self.pending: list = []  # drawing calls made once the y limits are known

    # coordinates
    def px(self, x):
        a, b = self.xlim
        return self.x0 + (np.asarray(x, float) - a) / (b - a) * self.w

    def py(self, y):
        y = np.asarray(y, float) if self.tf is None else self.tf(y)
        a, b = self.ylim
        return self.y0 + self.h - (y - a) / (b - a) * self.h

    # what is drawn (collected first: the y limits come from every series)
    def line(self, x, y, color, *, width=1.0, opacity=1.0, dash=None, label=None, series=None, kind="line"):
        x, y = downsample(x, y, self.max_points)
        self.ys.append(y)
        self.pending.append(("line", x, y, color, width, opacity, dash, series))
        if label:
            self.legend.append((label, color, kind))

    def markers(self, x, y, color, shape, *, label=None, series=None, size=4.0):
        x, y = np.asarray(x, float), np.asarray(y, float)
        self.ys.append(y)
        self.pending.append(("markers", x, y, color, shape, size, series))
        if label:
            self.legend.append((label, color, "marker:" + shape))

    def band(self, x, lo, hi, color, *, label=None):
        self.ys += [np.asarray(lo, float), np.asarray(hi, float)]
        self.pending.append(("band", np.asarray(x, float), np.asarray(lo, float), np.asarray(hi, float), color))
        if label:
            self.legend.append((label, color, "patch"))

    def vline(self, x, color, *, dash=None, width=1.2, label=None):
        self.pending.append(("vline", float(x), color, dash, width))
        if label:
            self.legend.append((label, color, "dash" if dash else "line"))

    def set_ylim(self, logy: bool) -> None:
        vals = np.concatenate([v[np.isfinite(v)] for v in self.ys]) if self.ys else np.zeros(0)
        if logy and vals.size and np.all(vals >= 0) and np.any(vals > 0) and np.max(vals) >= 100 * np.min(vals[vals > 0]):
            self.yscale, self.tf = "symlog", _Symlog(max(1e-6, float(np.min(vals[vals > 0]))))
            vals = self.tf(vals)
        if not vals.size:
            self.ylim = (0.0, 1.0)
            return
        lo, hi = float(np.min(vals)), float(np.max(vals))
        pad = 0.05 * (hi - lo) if hi > lo else max(abs(lo) * 0.1, 0.5)
        self.ylim = (lo - pad, hi + pad)

    def render(self, episodes: dict, events: list, empty: str | None = None) -> str:
        out = [f'<g class="panel" data-metric="{_esc(self.metric)}" data-box="{self.x0:.2f} {self.y0:.2f} {self.w:.2f} '
               f'{self.h:.2f}" data-xlim="{self.xlim[0]!r} {self.xlim[1]!r}" data-ylim="{self.ylim[0]!r} {self.ylim[1]!r}" '
               f'data-yscale="{self.yscale}"' + (f' data-linthresh="{self.tf.c!r}"' if self.tf is not None else "") + '>',
               f'<title>{_esc(self.title + (": " + self.what if self.what else ""))}</title>',
               f'<text x="{self.ox + _PW / 2:.1f}" y="{self.oy + 15}" text-anchor="middle" font-size="13">'
               f'{_esc(self.title)}' + (f'<tspan fill="#555" font-size="11">\u00a0({_esc(self.what)})</tspan>' if self.what
                                        else "") + '</text>',
               f'<rect x="{self.x0:.2f}" y="{self.y0:.2f}" width="{self.w:.2f}" height="{self.h:.2f}" fill="white" '
               'stroke="#444" stroke-width="0.8"/>']
        if empty is not None:
            out.append(f'<text x="{self.x0 + self.w / 2:.1f}" y="{self.y0 + self.h / 2:.1f}" text-anchor="middle">'
                       f'{_esc(empty)}</text></g>')
            return "\n".join(out)
        out += self._axes()
        clip = f"clip-{_esc(self.metric)}"
        out.append(f'<clipPath id="{clip}"><rect x="{self.x0:.2f}" y="{self.y0:.2f}" width="{self.w:.2f}" '
                   f'height="{self.h:.2f}"/></clipPath><g clip-path="url(#{clip})">')
        for mode, eps in episodes.items():  # the detected episodes, shaded in their detector's colour
            color = _hex({**MODE_COLORS, **HEALTH_COLORS}[mode])
            for a, b in eps:
                xa, xb = float(self.px(a)), float(self.px(b))
                if a == b:
                    out.append(f'<line class="episode" data-mode="{mode}" x1="{xa:.2f}" x2="{xa:.2f}" y1="{self.y0:.2f}" '
                               f'y2="{self.y0 + self.h:.2f}" stroke="{color}" stroke-opacity="0.25" stroke-width="3"/>')
                else:
                    out.append(f'<rect class="episode" data-mode="{mode}" x="{min(xa, xb):.2f}" y="{self.y0:.2f}" '
                               f'width="{abs(xb - xa):.2f}" height="{self.h:.2f}" fill="{color}" fill-opacity="0.15"/>')
        for item in self.pending:
            out.append(self._draw(item))
        out.append("</g>")
        for e in events:  # the events along the top: a triangle pointing down for a drop, up for a rise
            x = float(self.px(e.step))
            if not self.x0 - 1 <= x <= self.x0 + self.w + 1:
                continue
            y = self.y0 + 7
            pts = (f"{x - 5:.2f},{y - 5:.2f} {x + 5:.2f},{y - 5:.2f} {x:.2f},{y + 4:.2f}" if e.direction == "down"
                   else f"{x - 5:.2f},{y + 4:.2f} {x + 5:.2f},{y + 4:.2f} {x:.2f},{y - 5:.2f}")
            out.append(f'<polygon class="event" data-metric="{_esc(e.metric)}" data-step="{e.step!r}" '
                       f'data-direction="{e.direction}" points="{pts}" fill="{_HEX["crimson"]}">'
                       f'<title>{_esc(e.describe())}</title></polygon>')
        out += self._legend()
        out.append("</g>")
        return "\n".join(out)

    def _axes(self) -> list[str]:
        out = []
        bottom = self.y0 + self.h
        for t in nice_ticks(*self.xlim):
            x = float(self.px(t))
            out.append(f'<line x1="{x:.2f}" x2="{x:.2f}" y1="{bottom:.2f}" y2="{bottom + 4:.2f}" stroke="#444"/>'
                       f'<text x="{x:.2f}" y="{bottom + 15:.2f}" text-anchor="middle">{_fmt_tick(t)}</text>')
        out.append(f'<text x="{self.x0 + self.w / 2:.1f}" y="{bottom + 29:.1f}" text-anchor="middle">step</text>')
        if self.tf is not None:
            yt = self.tf.ticks(*self.ylim)
        else:
            yt = [(t, t) for t in nice_ticks(*self.ylim)]
        a, b = self.ylim
        for v, t in yt:
            y = self.y0 + self.h - (t - a) / (b - a) * self.h
            out.append(f'<line x1="{self.x0:.2f}" x2="{self.x0 + self.w:.2f}" y1="{y:.2f}" y2="{y:.2f}" stroke="#ddd" '
                       f'stroke-width="0.6"/><text x="{self.x0 - 5:.2f}" y="{y + 4:.2f}" text-anchor="end">'
                       f'{_fmt_tick(v)}</text>')
        return out

    def _draw(self, item) -> str:
        kind = item[0]
        if kind == "line":
            _, x, y, color, width, opacity, dash, series = item
            pts = " ".join(f"{a:.2f},{b:.2f}" for a, b in zip(self.px(x), self.py(y)))
            extra = (f' stroke-dasharray="{dash}"' if dash else "") + (f' stroke-opacity="{opacity}"' if opacity < 1 else "")
            name = f' data-series="{_esc(series)}"' if series else ""
            return (f'<polyline class="series"{name} points="{pts}" fill="none" stroke="{_hex(color)}" '
                    f'stroke-width="{width}" stroke-linejoin="round"{extra}/>')
        if kind == "markers":
            _, x, y, color, shape, size, series = item
            name = f' data-series="{_esc(series)}"' if series else ""
            out = [f'<g class="markers"{name} fill="{_hex(color)}">']
            for a, b in zip(self.px(x), self.py(y)):
                out.append(_marker(shape, float(a), float(b), size))
            return "".join(out) + "</g>"
        if kind == "band":
            _, x, lo, hi, color = item
            ok = np.isfinite(lo) & np.isfinite(hi)
            if not ok.any():
                return ""
            xs = self.px(x[ok])
            pts = [f"{a:.2f},{b:.2f}" for a, b in zip(xs, self.py(hi[ok]))]
            pts += [f"{a:.2f},{b:.2f}" for a, b in zip(xs[::-1], self.py(lo[ok])[::-1])]
            return f'<polygon class="band" points="{" ".join(pts)}" fill="{_hex(color)}" fill-opacity="0.2"/>'
        _, x, color, dash, width = item
        xp = float(self.px(x))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return (f'<line class="vline" x1="{xp:.2f}" x2="{xp:.2f}" y1="{self.y0:.2f}" y2="{self.y0 + self.h:.2f}" '
                f'stroke="{_hex(color)}" stroke-width="{width}"{extra}/>')

    def _legend(self) -> list[str]:
        """The panel's legend in one or two rows between its title and its plot area."""
        out, x, y = [], self.ox + _ML, self.oy + 27
        for label, color, kind in self.legend:
            wlab = 5.6 * len(label) + 26
            if x + wlab > self.ox + _PW and x > self.ox + _ML:
                x, y = self.ox + _ML, y + 12
            c = _hex(color)
            if kind == "patch":
                out.append(f'<rect x="{x:.1f}" y="{y - 7:.1f}" width="14" height="8" fill="{c}" fill-opacity="0.3"/>')
            elif kind.startswith("marker:"):
                out.append(f'<g fill="{c}">{_marker(kind[7:], x + 7, y - 3, 4.0)}</g>')
            else:
                dash = {"dash": ' stroke-dasharray="5 3"', "dot": ' stroke-dasharray="1.5 2"'}.get(kind, "")
                out.append(f'<line x1="{x:.1f}" x2="{x + 16:.1f}" y1="{y - 3:.1f}" y2="{y - 3:.1f}" stroke="{c}" '
                           f'stroke-width="1.5"{dash}/>')
            out.append(f'<text x="{x + 20:.1f}" y="{y:.1f}" font-size="10">{_esc(label)}</text>')
            x += wlab
        return out


def _marker(shape: str, x: float, y: float, r: float) -> str:
    if shape == "o":
        return f'<circle cx="{x:.2f}" cy="{y:.2f}" r="{r * 0.75:.2f}"/>'
    if shape == "v":
        return f'<polygon points="{x - r:.2f},{y - r:.2f} {x + r:.2f},{y - r:.2f} {x:.2f},{y + r:.2f}"/>'
    return f'<polygon points="{x - r:.2f},{y + r:.2f} {x + r:.2f},{y + r:.2f} {x:.2f},{y - r:.2f}"/>'


def diagnosis_dashboard_svg(run: RunLog, diagnosis: Diagnosis, path: str | pathlib.Path | None = None, *,
                            forecast=None, max_points: int = MAX_POINTS) -> str:
    """The run dashboard as SVG text, written from the arrays without matplotlib (``grpojax diagnose``'s default).

    The panels of :func:`grpojax.plot.diagnosis_dashboard`, three to a row on one step axis: the reward (the
    train reward, the eval points, the three-phase fit of the validity check, the forecast band, the best
    checkpoint of a detected plateau, a collapse's onset and checkpoint to restore), then each logged metric
    of entropy, frac_zero_std, KL, grad norm (a symlog axis when it spans two decades; its spikes marked),
    reward_std, response length, clip_frac and response_clip_frac; a metric the log lacks gets no panel.
    Every detected episode is shaded in its detector's colour, every series' events are triangles along the
    top of its panel (down: a drop, up: a rise; hover for the event), and the title lists the findings.

    Args:
        run: the :class:`grpojax.logs.RunLog` that was diagnosed.
        diagnosis: the :class:`grpojax.diagnose.Diagnosis` of that run.
        path: where to write the SVG (``None``: do not write).
        forecast: a reward forecast band, as for :func:`grpojax.plot.diagnosis_dashboard`.
        max_points: points of a series drawn at most (longer series are thinned by keeping each block's
            extremes, see the module's documentation).

    Returns:
        The SVG document.
    """
    if not isinstance(max_points, int) or isinstance(max_points, bool) or max_points < 4:
        raise InvalidValueError(f"max_points must be an integer >= 4, got {max_points!r}")
    res = diagnosis.results
    specs = [spec for spec in METRIC_PANELS if _series(run, spec[0]) is not None]
    tr, ev = _series(run, "reward_mean"), _series(run, "eval_reward")
    val = res.get("mean_field_validity")
    fit = (val.panel_data or {}).get("fit") if val is not None else None
    band = forecast_band(forecast)
    xs = [a[0] for a in (tr, ev, fit) if a is not None] + [_series(run, c)[0] for c, _, _ in specs]
    if band is not None:
        xs.append(np.asarray(band[0], float))
    allx = np.concatenate([np.asarray(x, float) for x in xs]) if xs else np.zeros(0)
    allx = allx[np.isfinite(allx)]
    lo, hi = (float(allx.min()), float(allx.max())) if allx.size else (0.0, 1.0)
    pad = 0.02 * (hi - lo) if hi > lo else 0.5
    xlim = (lo - pad, hi + pad)
    colors = {**MODE_COLORS, **HEALTH_COLORS}
    shaded = {m: res[m].episodes for m in colors if m in res and res[m].verdict == "detected" and res[m].episodes}
    events = getattr(diagnosis, "events", None) or {}

    def events_of(*cols):
        return [e for c in cols for e in getattr(events.get(c), "events", ())]

    n_panels = 1 + len(specs)
    rows = math.ceil(n_panels / _COLS)
    width, height = _COLS * _PW, _HEAD + rows * _PH
    origin = [((i % _COLS) * _PW, _HEAD + (i // _COLS) * _PH) for i in range(n_panels)]
    body = []
    p = _Panel(*origin[0], xlim, "reward_mean", "reward", max_points)
    if tr is not None:
        p.line(*tr, "tab:blue", width=0.8, opacity=0.6, label="train reward (measured)", series="reward_mean")
    if ev is not None:
        p.line(*ev, "tab:green", width=0.8, label="eval reward (measured)", series="eval_reward")
        p.markers(*ev, "tab:green", "o")
    if fit is not None:
        p.line(*fit, "black", width=1.5, dash="5 3", label="three-phase law (fitted)", series="fit", kind="dash")
    if band is not None:
        fs, fp, flo, fhi = (np.asarray(a, float) for a in band)
        p.band(fs, flo, fhi, "tab:purple", label="forecast 90% band")
        p.line(fs, fp, "tab:purple", width=1.3, dash="1.5 2", label="forecast", series="forecast", kind="dot")
    plateau = res.get("learning_plateau")
    if plateau is not None and plateau.detected and "best_step" in (plateau.panel_data or {}):
        p.vline(plateau.panel_data["best_step"], HEALTH_COLORS["learning_plateau"], dash="5 3",
                label="best checkpoint (plateau)")
    col_ = res.get("collapse")
    if col_ is not None and col_.detected:
        info = col_.panel_data["collapse"]
        p.vline(info["onset"], MODE_COLORS["collapse"], label="collapse onset")
        p.vline(info["restore_step"], "black", dash="5 3", width=1.0, label="checkpoint to restore")
    p.set_ylim(False)
    empty = None if (tr is not None or ev is not None) else "reward_mean not logged"
    body.append(p.render(shaded if empty is None else {}, events_of("reward_mean", "eval_reward"), empty))
    spikes = res.get("gradient_spikes")
    for (col, ylabel, logy), (ox, oy) in zip(specs, origin[1:]):
        s, v = _series(run, col)
        p = _Panel(ox, oy, xlim, col, col, max_points, ylabel)
        p.line(s, v, "tab:gray", width=0.9, series=col)
        if col == "grad_norm" and spikes is not None and spikes.detected:
            at = np.asarray((spikes.panel_data or {}).get("spike_steps", []), float)
            hit = np.isin(s, at)
            p.markers(s[hit], v[hit], HEALTH_COLORS["gradient_spikes"], "v", label="gradient spike",
                      series="gradient_spikes")
        p.set_ylim(logy)
        body.append(p.render(shaded, events_of(col)))
    found = [f"{MODE_LABELS.get(m, m.replace('_', ' '))} ({r.severity:.2f})" for m, r in res.items() if r.detected]
    head = [f'<text x="12" y="22" font-size="15" font-weight="bold">{_esc("grpojax diagnose: " + diagnosis.run)}</text>',
            f'<text x="12" y="44" font-size="12">{_esc("findings: " + ", ".join(found) if found else "no finding")}</text>']
    x = width - 12
    for m in reversed([m for m in colors if m in shaded]):  # the shaded detectors, right-aligned
        label = MODE_LABELS[m] + " (detected)"
        x -= 5.6 * len(label) + 26
        head.append(f'<rect x="{x:.1f}" y="50" width="14" height="9" fill="{_hex(colors[m])}" fill-opacity="0.3"/>'
                    f'<text x="{x + 18:.1f}" y="58" font-size="10">{_esc(label)}</text>')
    svg = "\n".join([f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                     f'viewBox="0 0 {width} {height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="10">',
                     f"<title>{_esc('grpojax diagnose: ' + diagnosis.run)}</title>",
                     f'<rect width="{width}" height="{height}" fill="white"/>', *head, *body, "</svg>\n"])
    if path is not None:
        from grpojax._io import write_text_atomic  # noqa: PLC0415

        write_text_atomic(path, svg)
    return svg
