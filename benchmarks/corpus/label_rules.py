"""Hand-label rules of ``benchmarks/corpus/README.md``, applied literally to the corpus runs.

Reads ``MANIFEST.tsv``, finds each run's files (committed under ``benchmarks/corpus/<id>/`` or in the
cache ``data/corpus-cache/<id>/``), checks their sha256, parses them with the small layout parsers below
(NumPy and the standard library only, independent of grpojax's readers), applies the rule of every mode
and writes ``labels.tsv`` (``run, repo, mode, label, reason``). Runs whose files are missing or do not
match the manifest are skipped with a message.

Usage:
  python benchmarks/corpus/label_rules.py [--out benchmarks/corpus/labels.tsv] [--show]
"""

from __future__ import annotations

import argparse
import ast
import csv
import hashlib
import json
import math
import pathlib
import re
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = ROOT / "data" / "corpus-cache"
MODES = ("reward_hacking", "advantage_degeneracy", "policy_concentration", "dynamical_instability",
         "length_pathology", "learning_plateau", "clip_saturation", "kl_drift", "gradient_spikes",
         "reward_imbalance")


# --------------------------------------------------------------------------------------------------
# curves: {name: (steps, values)}; names: reward, eval, entropy, kl, grad_norm, loss, length, trunc,
# zero_frac, reward_std, clip_frac; components: {name: (steps, values)}; meta: binary, G
# --------------------------------------------------------------------------------------------------

class Run:
    def __init__(self, rid: str):
        self.id = rid
        self.c: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.components: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.binary = False
        self.G: int | None = None

    def put(self, name: str, steps, values, *, component: bool = False, keep_nan: bool = False) -> None:
        """Store a curve. NaN means "not logged at this step" and is dropped, unless ``keep_nan`` (the
        parser only passes steps where the key was written, so a NaN there is a logged value)."""
        s = np.asarray(steps, float)
        v = np.asarray(values, float)
        if not keep_nan:
            s, v = s[~np.isnan(v)], v[~np.isnan(v)]
        if len(v):
            (self.components if component else self.c)[name] = (s, v)

    def f(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The finite points of a curve."""
        s, v = self.c[name]
        ok = np.isfinite(v)
        return s[ok], v[ok]


def _f(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def _rows_to_run(run: Run, rows: list[dict], steps, mapping: dict[str, str], comp_re=None) -> None:
    steps = list(steps)
    for canon, key in mapping.items():
        idx = [i for i, r in enumerate(rows) if key in r]
        if idx:
            run.put(canon, [steps[i] for i in idx], [_f(rows[i][key]) for i in idx], keep_nan=True)
    if comp_re is not None:
        for k in sorted({k for r in rows for k in r if comp_re.fullmatch(k)}):
            idx = [i for i, r in enumerate(rows) if k in r]
            run.put(k, [steps[i] for i in idx], [_f(rows[i][k]) for i in idx], component=True)


TRL_MAP = {"reward": "reward", "reward_std": "reward_std", "zero_frac": "frac_reward_zero_std",
           "entropy": "entropy", "kl": "kl", "grad_norm": "grad_norm", "loss": "loss",
           "length": "completions/mean_length", "trunc": "completions/clipped_ratio",
           "clip_frac": "clip_ratio/region_mean"}
TRL_COMP = re.compile(r"rewards/[^/]+(/mean)?")


def parse_trl_json_list(run: Run, paths) -> None:
    rows = [r for r in json.loads(paths[0].read_text()) if "reward" in r]
    _rows_to_run(run, rows, [r["step"] for r in rows], {**TRL_MAP, "length": "completion_length"}, TRL_COMP)


TRL_DICT = re.compile(r"\{'loss'.*?\}")


def parse_trl_console(run: Run, paths) -> None:
    """TRL console dict lines (``{'loss': ..., 'reward': ...}``), also inside carriage-return progress lines."""
    rows = []
    for piece in re.split(r"[\r\n]", paths[0].read_text(errors="replace")):
        for m in TRL_DICT.finditer(piece):
            d = ast.literal_eval(m.group(0))
            if "reward" in d:
                rows.append(d)
    _rows_to_run(run, rows, np.arange(1, len(rows) + 1), {**TRL_MAP, **({"length": "completion_length"} if rows
                  and "completion_length" in rows[0] else {})}, TRL_COMP)


def parse_jsonl_appended(run: Run, paths) -> None:
    """JSONL with several runs appended (the step counter restarts); the last segment is the run."""
    segs, cur, prev = [], [], None
    for line in paths[0].read_text().splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        if prev is not None and d["step"] <= prev:
            segs.append(cur)
            cur = []
        cur.append(d)
        prev = d["step"]
    segs.append(cur)
    rows = segs[-1]
    steps = [r["step"] for r in rows]
    run.put("reward", steps, [r["mean_reward"] for r in rows])
    run.put("zero_frac", steps, [float(len(set(r["rewards"])) == 1) for r in rows])
    run.binary = all(x in (0.0, 1.0) for r in rows for x in r["rewards"])
    run.G = max(len(r["rewards"]) for r in rows)


def parse_dict_of_lists(run: Run, paths) -> None:
    d = json.loads(paths[0].read_text())
    n = len(d["rewards_avg"])
    steps = np.arange(1, n + 1)
    run.put("reward", steps, d["rewards_avg"])
    run.put("eval", steps, d["val_accuracies_avg"])
    run.put("kl", steps, d["kl_avg"])


def parse_csv_axiomforge(run: Run, paths) -> None:
    with open(paths[0], newline="") as fh:
        rows = list(csv.DictReader(fh))
    steps = [int(r["iteration"]) for r in rows]
    run.put("reward", steps, [_f(r["mean_reward"]) for r in rows])
    run.put("reward_std", steps, [_f(r["std_reward"]) for r in rows])
    run.put("loss", steps, [_f(r["loss"]) for r in rows])
    run.put("zero_frac", steps, [_f(r["skipped_groups"]) / _f(r["n_groups"]) for r in rows])
    run.put("eval", steps, [_f(r["eval_combined"]) for r in rows])


MINIMIND = re.compile(r"Epoch:\[\d+/\d+\]\((\d+)/\d+\),(.*)")
KV = re.compile(r"\s*([A-Za-z_ ]+):\s*([-+0-9.eEnaif]+)")


def parse_text_minimind(run: Run, paths) -> None:
    rows, steps = [], []
    for line in paths[0].read_text(errors="replace").splitlines():
        m = MINIMIND.search(line)
        if not m:
            continue
        kv = {k.strip(): _f(v) for k, v in (p.groups() for p in map(KV.match, m.group(2).split(",")) if p)}
        rows.append(kv)
        steps.append(int(m.group(1)))
    mapping = {"reward": "Reward", "kl": "KL_ref", "loss": "Actor Loss", "length": "Avg Response Len"}
    if any("Avg Len" in r for r in rows):
        mapping["length"] = "Avg Len"
    _rows_to_run(run, rows, steps, mapping)
    for comp in ("Fmt", "Correct"):
        if any(comp in r for r in rows):
            run.put(comp, steps, [r.get(comp, float("nan")) for r in rows], component=True)


WIDGET = re.compile(r"GRPO step (\d+)/\d+ \| loss: (\S+) \| mean_reward: (\S+) \| KL: (\S+) \| clip_frac: (\S+)")
STEPLINE = re.compile(r"Step (\d+): generating")
REWARDS = re.compile(r"Rewards: \[([^\]]*)\]")


def parse_text_widget(run: Run, paths) -> None:
    rows = []
    zsteps, zvals, cur = [], [], None
    for line in paths[0].read_text(errors="replace").splitlines():
        m = WIDGET.search(line)
        if m:
            rows.append([_f(x) for x in m.groups()])
            continue
        m = STEPLINE.search(line)
        if m:
            cur = int(m.group(1))
            continue
        m = REWARDS.search(line)
        if m and cur is not None:
            vals = [_f(x) for x in m.group(1).split(",")]
            zsteps.append(cur)
            zvals.append(float(len(set(vals)) == 1))
            cur = None
    a = np.array(rows)
    run.put("loss", a[:, 0], a[:, 1])
    run.put("reward", a[:, 0], a[:, 2])
    run.put("kl", a[:, 0], a[:, 3])
    run.put("clip_frac", a[:, 0], a[:, 4])
    run.put("zero_frac", zsteps, zvals)


PARSERS = {"trl_json_list": parse_trl_json_list, "trl_console": parse_trl_console,
           "jsonl_appended": parse_jsonl_appended, "dict_of_lists": parse_dict_of_lists,
           "csv_columns": parse_csv_axiomforge, "text_epoch_kv": parse_text_minimind,
           "text_pipe_kv": parse_text_widget}


# --------------------------------------------------------------------------------------------------
# shared definitions (README "Definitions used by all rules")
# --------------------------------------------------------------------------------------------------

def smooth(y: np.ndarray, w: int | None = None) -> np.ndarray:
    n = len(y)
    if w is None:
        w = min(max(int(round(0.05 * n)), 3), 10)
    h = w // 2
    return np.array([np.mean(y[max(0, i - h):i + h + 1]) for i in range(n)])


def initial(y): return float(np.median(y[:3]))
def late_n(n): return max(3, int(round(0.1 * n)))
def late(y): return float(np.median(y[-late_n(len(y)):]))
def noise_sd(y): return float(np.std(np.diff(y)) / math.sqrt(2)) if len(y) > 2 else float("nan")


def running_median(y, w):
    h = w // 2
    return np.array([np.median(y[max(0, i - h):i + h + 1]) for i in range(len(y))])


def fmt(x) -> str:
    return f"{x:.3g}"


# --------------------------------------------------------------------------------------------------
# rules, one per mode: return (label, reason)
# --------------------------------------------------------------------------------------------------

def rule_reward_hacking(r: Run):
    if "reward" not in r.c or "eval" not in r.c:
        return "na", "not logged: train and eval reward"
    es, ev = r.f("eval")
    ts, tv = r.f("reward")
    if len(ev) < 4:
        return "na", f"only {len(ev)} eval points"
    if len(tv) < 8:
        return "unclear", "too few points"
    evs = smooth(ev, 3)
    k = int(np.argmax(evs))
    after = (len(ev) - 1 - k) / len(ev)
    if after < 0.2:
        return "absent", f"eval peaks at step {es[k]:g} with {after:.0%} of eval points after it (still rising)"
    tsm = smooth(tv)
    j = max(int(np.searchsorted(ts, es[k], side="right")) - 1, 0)
    gain = late(tv) - tsm[j]
    rng = float(tsm.max() - tsm.min())
    if gain < 0.3 * rng:
        return "absent", f"train gains {fmt(gain)} after the eval peak (step {es[k]:g}), < 0.3 x range {fmt(rng)}"
    peak, e0, el = float(evs[k]), initial(ev), late(ev)
    if el <= peak - 0.2 * (peak - e0):
        return "present", f"train +{fmt(gain)} after eval peak {fmt(peak)} (step {es[k]:g}); eval falls to {fmt(el)}"
    return "unclear", f"train +{fmt(gain)} after eval peak {fmt(peak)}; eval stalls at {fmt(el)}"


def rule_advantage_degeneracy(r: Run):
    if "zero_frac" in r.c:
        s, z = r.f("zero_frac")
        if len(z) < 8:
            return "unclear", "too few points"
        m = float(np.mean(z[-late_n(len(z)):]))
        what = f"late mean zero-variance-group fraction {m:.2f}"
        return ("present" if m >= 0.5 else "absent" if m < 0.3 else "unclear"), what
    if "reward_std" in r.c:
        s, v = r.f("reward_std")
        if len(v) < 8:
            return "unclear", "too few points"
        ratio = late(v) / float(running_median(v, 5).max()) if running_median(v, 5).max() > 0 else 0.0
        what = f"late reward_std {fmt(late(v))} = {ratio:.2f} x its largest 5-point median"
        return ("present" if ratio <= 0.1 else "absent" if ratio >= 0.3 else "unclear"), what
    if r.binary and r.G and "reward" in r.c:
        p = late(r.f("reward")[1])
        q = p ** r.G + (1 - p) ** r.G
        return ("present" if q >= 0.5 else "unclear"), f"binary reward p={p:.2f}, G={r.G}: q={q:.2f} (lower bound)"
    return "na", "not logged: zero-variance fraction, reward_std, or binary reward with G"


def _first_cross(y, level):
    idx = np.nonzero(y <= level)[0]
    return int(idx[0]) if len(idx) else len(y) - 1


def rule_policy_concentration(r: Run):
    if "entropy" not in r.c or "reward" not in r.c:
        return "na", "not logged: entropy and train reward"
    es, ent = r.f("entropy")
    ts, rew = r.f("reward")
    if len(ent) < 8 or len(rew) < 8:
        return "unclear", "too few points"
    e0, el = initial(ent), late(ent)
    ratio = el / e0 if e0 > 0 else float("nan")
    if ratio > 0.5:
        return "absent", f"entropy {fmt(e0)}->{fmt(el)} (ratio {ratio:.2f})"
    if ratio > 0.25:
        return "unclear", f"entropy {fmt(e0)}->{fmt(el)} (ratio {ratio:.2f}, between 0.25 and 0.5)"
    r0, rl = initial(rew), late(rew)
    if rl - r0 < 2 * noise_sd(rew):
        return "unclear", f"entropy ratio {ratio:.2f} but reward did not rise ({fmt(r0)}->{fmt(rl)})"
    esm = smooth(ent)
    k = _first_cross(esm, e0 - 0.5 * (e0 - el))
    rsm = smooth(rew)
    j = max(int(np.searchsorted(ts, es[k], side="right")) - 1, 0)
    done = (rsm[j] - r0) / (rl - r0)
    what = f"entropy {fmt(e0)}->{fmt(el)} (ratio {ratio:.2f}); reward at half-drop (step {es[k]:g}) {done:.0%} of its rise"
    return ("present" if done < 0.9 else "absent"), what


def rule_dynamical_instability(r: Run):
    if "reward" not in r.c and "grad_norm" not in r.c:
        return "na", "not logged: train reward and grad norm"
    found, short = [], []
    for name in ("reward", "loss", "grad_norm", "kl"):
        if name in r.c:
            s, v = r.c[name]
            bad = ~np.isfinite(v[1:])
            if bad.any():
                found.append(f"non-finite {name} at step {s[1:][bad][0]:g}")
    for name in ("grad_norm", "loss", "kl"):
        if name in r.c:
            s, v = r.f(name)
            a = np.abs(v)
            base = float(np.median(a[:3])) if len(a) >= 3 else 0.0
            if base > 0:
                g = float(a.max()) / base
                if g >= 1e4:
                    found.append(f"{name} reaches {g:.3g} x its initial median")
                elif g >= 5e3:
                    short.append(f"{name} reaches {g:.3g} x its initial median")
    mon = None
    if "reward" in r.c and len(r.f("reward")[1]) >= 8:
        mon = "reward"
    elif "eval" in r.c and len(r.f("eval")[1]) >= 8:
        mon = "eval"
    if mon:
        s, y = r.f(mon)
        ys = smooth(y)
        n_late = late_n(len(y))
        k = int(np.argmax(ys[:len(y) - n_late])) if len(y) > n_late else 0
        peak, y0, yl = float(ys[k]), initial(y), late(y)
        rise = peak - y0
        if rise >= 3 * noise_sd(y) and rise > 0:
            lost = (peak - yl) / rise
            msg = f"{mon} {fmt(y0)}->peak {fmt(peak)} (step {s[k]:g})->{fmt(yl)}: lost {lost:.0%} of its gain"
            if lost >= 0.5:
                found.append(msg)
            elif lost >= 0.3:
                short.append(msg)
    if "entropy" in r.c and "reward" in r.c:
        ent, rew = r.f("entropy")[1], r.f("reward")[1]
        g = late(ent) / initial(ent) if initial(ent) > 0 else float("nan")
        if late(rew) <= initial(rew):
            if g >= 3:
                found.append(f"entropy grows {g:.2f}x with no reward gain")
            elif g >= 2:
                short.append(f"entropy grows {g:.2f}x with no reward gain")
    if "grad_norm" in r.c and len(r.c["grad_norm"][1]) >= 8:
        v = r.f("grad_norm")[1]
        early = float(np.median(v[:max(3, int(round(0.1 * len(v))))]))
        if early > 0:
            g = late(v) / early
            if g >= 10:
                found.append(f"late grad norm {g:.3g} x early")
            elif g >= 5:
                short.append(f"late grad norm {g:.3g} x early")
    if found:
        return "present", "; ".join(found)
    if short:
        return "unclear", "short of the threshold by <= 2x: " + "; ".join(short)
    parts = []
    if mon:
        parts.append(f"{mon} keeps its gain or has none above noise")
    if "grad_norm" in r.c:
        parts.append("no grad-norm growth")
    return "absent", ", ".join(parts) or "no finding"


def rule_length_pathology(r: Run):
    if "length" not in r.c and "trunc" not in r.c:
        return "na", "not logged: response length or truncated fraction"
    tpeak = None
    if "trunc" in r.c:
        t = r.f("trunc")[1]
        if len(t) >= 8:
            tpeak = float(running_median(t, 11).max())
            if tpeak >= 0.1:
                return "present", f"truncated fraction (11-pt running median) peaks at {tpeak:.2f}"
    ratio = None
    if "length" in r.c:
        v = r.f("length")[1]
        if len(v) >= 8:
            ratio = late(v) / initial(v) if initial(v) > 0 else float("nan")
            if ratio <= 0.2:
                return "present", f"length {fmt(initial(v))}->{fmt(late(v))} (ratio {ratio:.2f})"
    if tpeak is None and ratio is None:
        return "unclear", "too few points"
    if (tpeak is None or tpeak < 0.05) and (ratio is None or ratio > 0.33):
        parts = [f"truncated peak {tpeak:.2f}"] if tpeak is not None else []
        if ratio is not None:
            parts.append(f"length ratio {ratio:.2f}")
        return "absent", ", ".join(parts)
    return "unclear", f"truncated peak {tpeak}, length ratio {ratio}"


def rule_learning_plateau(r: Run):
    if "eval" in r.c and len(r.f("eval")[1]) >= 8:
        mon = "eval"
    elif "reward" in r.c and len(r.f("reward")[1]) >= 20:
        mon = "reward"
    else:
        return "unclear", "fewer than 8 eval and 20 train-reward points"
    s, y = r.f(mon)
    ys = smooth(y)
    rng = float(ys.max() - ys.min())
    sd = noise_sd(y)
    if rng < 3 * sd:
        return "present", f"{mon} range {fmt(rng)} < 3 noise sd ({fmt(3 * sd)}): flat and noisy"
    m = max(3, int(round(0.3 * len(y))))
    ts, ty = s[-m:], y[-m:]
    slope = float(np.polyfit(ts, ty, 1)[0])
    gain = slope * float(ts[-1] - ts[0])
    what = f"{mon} tail (last {m} points, steps {ts[0]:g}-{ts[-1]:g}) gains {fmt(gain)} = {gain / rng:.2f} x range {fmt(rng)}"
    return ("present" if gain < 0.1 * rng else "absent" if gain >= 0.2 * rng else "unclear"), what


def rule_clip_saturation(r: Run):
    if "clip_frac" not in r.c:
        return "na", "not logged: ratio clip fraction"
    v = r.f("clip_frac")[1]
    if len(v) < 8:
        return "unclear", "too few points"
    p = float(running_median(v, 5).max())
    return ("present" if p >= 0.2 else "absent" if p < 0.1 else "unclear"), f"clip fraction 5-pt median peak {p:.3f}"


def rule_kl_drift(r: Run):
    if "kl" not in r.c or not np.any(r.f("kl")[1] != 0):
        return "na", "not logged (or logged only as 0): kl"
    v = r.f("kl")[1]
    if len(v) < 8:
        return "unclear", "too few points"
    q = len(v) // 4
    q4, q3 = float(np.median(v[-q:])), float(np.median(v[-2 * q:-q]))
    lm = late(v)
    what = f"kl last-quarter median {fmt(q4)} vs previous {fmt(q3)}; late median {fmt(lm)}"
    if lm >= 1 or (q4 >= 0.01 and q4 >= 1.5 * q3):
        return "present", what
    if (q4 <= 1.2 * q3 or q4 < 0.01) and lm < 0.5:
        return "absent", what
    return "unclear", what


def rule_gradient_spikes(r: Run):
    if "grad_norm" not in r.c:
        return "na", "not logged: grad norm"
    s, g = r.c["grad_norm"]
    if len(g) < 8:
        return "unclear", "too few points"
    if not np.all(np.isfinite(g)):
        return "present", f"non-finite grad norm at step {s[~np.isfinite(g)][0]:g}"
    quiet = 0.05 * float(np.percentile(g, 90))        # steps without a learning signal (rule change 1)
    keep = g > quiet
    s, g = s[keep], g[keep]
    best, at = 0.0, None
    for i in range(len(g)):
        nb = np.r_[g[max(0, i - 5):i], g[i + 1:i + 6]]
        if len(nb) == 0:
            continue
        ratio = g[i] / float(np.median(nb))
        if ratio > best:
            best, at = ratio, i
    if at is None:
        return "unclear", "too few steps above the quiet level"
    what = (f"largest grad norm / median of its 10 neighbours = {best:.2f} (step {s[at]:g}); "
            f"{int((~keep).sum())} quiet steps (< {fmt(quiet)}) left out")
    return ("present" if best >= 10 else "absent" if best < 5 else "unclear"), what


def rule_reward_imbalance(r: Run):
    comps = {k: v for k, (s, v) in r.components.items() if len(v) >= 8}
    if len(comps) < 2:
        return "na", f"not logged: >= 2 reward components ({len(comps)})"
    var = {k: float(np.var(v)) for k, v in comps.items()}
    rng = {k: float(np.ptp(v)) for k, v in comps.items()}
    flat = [k for k in comps if rng[k] <= 1e-6 * max(rng.values())]
    total = sum(var.values())
    top = max(var, key=var.get)
    share = var[top] / total if total > 0 else 1.0
    what = f"{len(comps)} components; {top} carries {share:.2f} of the variance" + (f"; constant: {', '.join(flat)}" if flat else "")
    if share >= 0.9 or flat:
        return "present", what
    return ("absent" if share <= 0.75 else "unclear"), what


RULES = {m: globals()[f"rule_{m}"] for m in MODES}


# --------------------------------------------------------------------------------------------------

def read_manifest(path: pathlib.Path = HERE / "MANIFEST.tsv") -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def locate(row: dict) -> list[pathlib.Path] | None:
    """The run's files (committed copy first, then the cache), or None if any is missing or differs."""
    out = []
    for p, sha in zip(row["paths"].split(";"), row["sha256"].split(";")):
        name = pathlib.PurePosixPath(p).name
        for base in (HERE / row["id"], CACHE / row["id"]):
            f = base / name
            if f.is_file() and hashlib.sha256(f.read_bytes()).hexdigest() == sha:
                out.append(f)
                break
        else:
            return None
    return out


def label_run(row: dict, paths) -> tuple[Run, list[tuple[str, str, str]]]:
    run = Run(row["id"])
    PARSERS[row["format"]](run, paths)
    if run.G is None and row.get("G", "").strip().isdigit():
        run.G = int(row["G"])
    return run, [(m, *RULES[m](run)) for m in MODES]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "labels.tsv"))
    ap.add_argument("--show", action="store_true", help="print the curves' sizes per run")
    a = ap.parse_args(argv)
    rows_out = []
    for row in read_manifest():
        paths = locate(row)
        if paths is None:
            print(f"skipped {row['id']}: files missing or sha256 differs (run benchmarks/corpus/verify.py)",
                  file=sys.stderr)
            continue
        run, labels = label_run(row, paths)
        if a.show:
            print(row["id"], {k: len(v[1]) for k, v in run.c.items()}, list(run.components))
        rows_out += [(row["id"], row["repo"], m, lab, why) for m, lab, why in labels]
    with open(a.out, "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(["run", "repo", "mode", "label", "reason"])
        w.writerows(rows_out)
    print(f"wrote {len(rows_out)} labels to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
