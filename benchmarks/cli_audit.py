"""A fresh audit of the command line: new generated cases, counted by kind of failure.

Each case takes a working command line (the bases of ``tests/test_cli_fuzz.py``) and sets one or two of
its flags -- read from the argparse parsers -- to values drawn at random (seeded, different from the
test's derandomized examples): edges of the flag's type, plausible values (1e-6 to 10, integers to 64),
random magnitudes from 1e-320 to 1e320 of either sign, random integers up to 2^70, random unicode and
paths of every kind. Every call must end
with exit 0 and a self-consistent answer, or with one stderr line naming a flag. The script counts

- ``traceback``: a Python traceback or "internal error" anywhere;
- ``internal_name``: an internal name (``M``, ``D``, ``ts``, ``p_star`` ...) in an error line;
- ``contradiction``: a successful answer that contradicts itself (regime vs margin vs spectral radius,
  inputs echoed, an interval without its point, bounds);
- ``other``: anything else that breaks the contract (several error lines, a flag not named, exit 1 for
  a value).

Usage (over a minute: run it under the shared lock)::

    flock /tmp/grpojax-heavy.lock .venv/bin/python benchmarks/cli_audit.py --cases 260 --seed 2026 \
        --out benchmarks/cli_audit.json
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

os.environ.setdefault("MPLBACKEND", "Agg")

import test_cli_fuzz as fz  # noqa: E402  (the flags, bases, paths and checks of the generated test)

WEIGHTS = {"predict": 0.32, "advise": 0.27, "fit": 0.15, "diagnose": 0.15, "simulate": 0.11}


def _random_value(rng: random.Random, action) -> list:
    """A value for ``action``: an edge of its type half of the time, else a random one of its type."""
    if fz._is_path(action):
        return [("PATH", rng.choice(fz.PATH_KINDS))]
    if action.nargs == 0:
        return []
    n = 2 if action.nargs == 2 else 1
    out = []
    for _ in range(n):
        if action.choices:
            out.append(rng.choice(list(action.choices) + ["", "NOPE", "périodique"]))
        elif action.type is not None and getattr(action.type, "__name__", "") in ("number", "float"):
            u = rng.random()
            if u < 0.35:
                out.append(rng.choice(fz.FLOAT_EDGES))
            elif u < 0.7:  # a plausible value, so that many cases reach an answer to check
                out.append(f"{10 ** rng.uniform(-6, 1):.6g}" if rng.random() < 0.8 else f"{rng.random():.6g}")
            else:
                out.append(f"{rng.choice(('-', ''))}{rng.uniform(1, 10):.4f}e{rng.randint(-320, 320)}")
        elif action.type is not None and getattr(action.type, "__name__", "") in ("integer", "int"):
            u = rng.random()
            if u < 0.35:
                out.append(rng.choice(fz.INT_EDGES))
            elif u < 0.7:
                out.append(str(rng.randint(0, 64)))
            else:
                out.append(str(rng.choice((-1, 1)) * int(2 ** rng.uniform(0, 70))))
        elif action.dest == "set":
            out.append(rng.choice(fz.SET_EDGES + ("oscillation_min_block=1e308", "kl_bound=-0")))
        else:
            out.append(rng.choice(fz.STR_EDGES + ("".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(8)),)))
    return out


def _argv(command, picks, paths, out, n):
    """The base of ``command`` with each ``(action, fragment)`` of ``picks`` applied in turn."""
    base, vals_of = None, []
    for action, fragment in picks:
        base, vals = fz.build_argv(command, action, fragment, paths, out, n, base=base)
        vals_of.append((action, vals))
    if base is None:
        base = [a.replace("{out}", out) for a in fz.BASE[command]]
    return base, vals_of


def classify(problems: list[str]) -> str:
    text = " ".join(problems)
    if "traceback" in text.lower() or "internal error" in text:
        return "traceback"
    if "internal name" in text:
        return "internal_name"
    if any(k in text for k in ("regime", "spectral", "inputs.", "interval", "bounds", "critical", "R² smooth",
                                "horizon", "final time", "margin", "in_range")):
        return "contradiction"
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=260)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="benchmarks/cli_audit.json")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    import jax  # noqa: PLC0415

    jax.config.update("jax_enable_x64", False)  # as a user runs the command line
    counts = {"ok": 0, "refused": 0, "traceback": 0, "internal_name": 0, "contradiction": 0, "other": 0}
    failures, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        ro = root / "readonly"
        ro.mkdir()
        import subprocess  # noqa: PLC0415

        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)], capture_output=True).returncode == 0
        paths = fz.Paths(root, ro if mounted else pathlib.Path("/proc/grpojax-audit"))
        cwd = os.getcwd()
        os.chdir(root)
        try:
            for n in range(a.cases):
                command = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
                acts = [x for x in fz.flags(command)
                        if (command, (x.option_strings or [x.dest])[0]) not in fz.SLOW_FLAGS]
                picks = [(act, _random_value(rng, act)) for act in rng.sample(acts, rng.choice((1, 1, 2)))]
                out = str(root / f"{command}_{n}")
                argv, vals_of = _argv(command, picks, paths, out, n)
                action, vals = vals_of[-1]
                if len(vals_of) == 2:  # two flags: the error may name either
                    given_out = next((v[0] for x, v in vals_of if x.dest == "out" and v), None)
                    rc, problems = fz.check_call(command, argv, None, [], pathlib.Path(given_out or out))
                    any_path = any(fz._is_path(x) for x, _ in vals_of)
                    problems = [p for p in problems if "does not name" not in p
                                and not (any_path and "exit 1 for a value" in p)]
                else:
                    out_used = pathlib.Path(vals[0]) if action.dest == "out" and vals else pathlib.Path(out)
                    rc, problems = fz.check_call(command, argv, action, vals, out_used)
                if problems:
                    kind = classify(problems)
                    counts[kind] += 1
                    failures.append({"kind": kind, "argv": argv, "problems": problems})
                else:
                    counts["ok" if rc == 0 else "refused"] += 1
                if (n + 1) % 20 == 0:
                    print(f"{n + 1}/{a.cases} cases, {time.perf_counter() - t0:.0f} s: {counts}", flush=True)
        finally:
            os.chdir(cwd)
            if mounted:
                subprocess.run(["umount", "-l", str(ro)], capture_output=True)
    result = {"cases": a.cases, "seed": a.seed, "seconds": round(time.perf_counter() - t0, 1), "counts": counts,
              "failures": failures}
    pathlib.Path(a.out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "failures"}))
    return 0 if not failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
