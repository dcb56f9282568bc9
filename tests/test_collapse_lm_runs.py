"""The pieces of benchmarks/collapse/lm_runs.py and speed.py that do not train: the grids fixed in lm_rule.md,
the per-collapse lead rows, and the plain-JSONL copy of a log that both command lines read."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "collapse"))

import lm_runs as L  # noqa: E402
import speed  # noqa: E402


@pytest.mark.parametrize("family,n,seeds", [("main", 96, {0, 1, 2, 3}), ("late", 64, set(range(20, 28))),
                                             ("heldout", 96, {30, 31, 32, 33}), ("heldout2", 96, {40, 41, 42, 43}),
                                             ("heldout3", 96, {50, 51, 52, 53})])
def test_the_grids_are_those_fixed_before_the_runs(family, n, seeds):
    members = L.grid(False, family)
    assert len(members) == n and len({m.name for m in members}) == n
    assert {m.seed for m in members} == seeds and all(m.beta == 0.0 and m.clip_eps == 0.2 for m in members)
    lrs = sorted({m.lr for m in members})
    lo, hi = (1.5, 4.0) if family == "late" else (1.0, 5.0)
    assert lrs[0] == pytest.approx(lo) and lrs[-1] == pytest.approx(hi)
    others = [set(L.grid(False, f)) for f in L.FAMILIES if f != family]
    assert all(set(members).isdisjoint(o) for o in others)  # new seeds: no run repeated
    if family.startswith("heldout"):  # the main grid again, only the seeds differ
        key = lambda m: (m.lr, m.momentum, m.k_ref)  # noqa: E731
        assert sorted(map(key, members)) == sorted(map(key, L.grid(False, "main")))


def test_each_collapse_gets_its_lead_or_a_miss():
    rows = [dict(label="collapse", label_onset=405.0, part="after 25 %", detected=True),
            dict(label="control", label_onset=None, part="-", detected=True),
            dict(label="collapse", label_onset=25.0, part="first 5 %", detected=False)]
    warn = [dict(run="a", t_half=429.0, lead=6.4, span=500.0), dict(run="b", t_half=None, lead=None, span=500.0),
            dict(run="c", t_half=29.0, lead=None, span=500.0)]
    lines = L._collapse_lines(rows, warn)
    assert lines == ["| a | 405 | after 25 % | 429 | step 397 | 6.4 | True |",
                     "| c | 25 | first 5 % | 29 | - | miss | False |"]


def test_the_plain_jsonl_copy_reads_back_as_the_same_log(tmp_path):
    from grpojax.logs import read_log

    run = speed.log_1000()
    path = tmp_path / "speed.jsonl"
    speed.write_jsonl(run, path)
    back = read_log(path)
    np.testing.assert_array_equal(back.steps, run.steps)
    for col in ("reward_mean", "eval_reward", "entropy", "grad_norm"):
        s0, y0 = run.series(col)
        s1, y1 = back.series(col)
        np.testing.assert_array_equal(s1, s0)
        np.testing.assert_allclose(y1, y0, rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_what_there_was_to_read_before_t_half(seed):
    """The early-warning benchmark counts, for each collapse, the events of other metrics in the quarter of
    the run before ``t_half`` and the alert's recent stretch (35 % of the run): an entropy fall 40 steps
    before the collapse is one, and one the alert reads as a precursor; the same run without it has none; an
    entropy rise is an event but not a precursor; a fall 200 steps before is out of reach."""
    import early_warning  # noqa: PLC0415
    from grpojax.logs import RunLog  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    t = np.arange(400, dtype=float)
    reward = np.where(t < 300, 0.1 + 0.6 * (1 - np.exp(-t / 50)), 0.05) + 0.03 * rng.standard_normal(400)
    entropy = 0.6 + 0.01 * rng.standard_normal(400)
    for shift, at, want in ((-0.3, 260, (1, 1)), (0.0, 260, (0, 0)), (0.3, 260, (1, 0)), (-0.3, 100, (0, 0))):
        cols = {"reward_mean": reward, "entropy": entropy + np.where(t >= at, shift, 0.0)}
        run = RunLog.from_columns(cols, steps=t, name="sim")
        lab = early_warning.label_run(run)
        th = early_warning.half_step(run, lab)
        assert 299 <= th <= 305
        assert early_warning.events_before(run, th, 399.0) == want, shift


def test_the_label_rule_on_curves_without_a_collapse():
    """The noise benchmark's curves hold no collapse by construction (their noise-free level rises and holds,
    and neither the rule nor the finding calls that level a collapse), its rates come with their exact
    intervals, and the permutation p-value of a clear collapse is as small as it can be."""
    import label_rule_noise as N  # noqa: PLC0415
    from grpojax.diagnose import collapse_onset  # noqa: PLC0415

    rng = np.random.default_rng(0)
    t = np.arange(200, dtype=float)
    level = N.curve(rng, 200, 10.0, "gaussian") - N.curve(np.random.default_rng(0), 200, 0.0, "gaussian")
    assert np.all(np.diff(level) >= -1e-12) and level[-1] == pytest.approx(10.0)
    assert N.label_curve(t, level) is None and collapse_onset(t, level) is None
    row = N.cell(100, 3.0, "gaussian", 40, seed=1)
    assert row["curves"] == 40
    for key, k in (("label_rate", row["label"]), ("detector_rate", row["detector"])):
        rate, lo, hi = row[key]
        assert rate == k / 40 and lo <= rate <= hi
    clear = np.where(t < 150, np.clip(t / 50, 0, 1), 0.0) + 0.05 * rng.standard_normal(200)
    k, p = N.permutation_p(t, clear, 200)
    assert N.label_curve(t, clear) is not None and k == 0 and p == pytest.approx(1 / 201)


def test_score_leaves_out_weak_labels_only(tmp_path):
    """``score.py --strong`` keeps a control, keeps a clear collapse and keeps a noise curve that the rule
    labels collapse only when its permutation p-value is below 0.05."""
    import json  # noqa: PLC0415

    import label_rule_noise as N  # noqa: PLC0415
    import score  # noqa: PLC0415

    rng = np.random.default_rng(3)
    t = np.arange(50, dtype=float)
    noise = next(y for y in (rng.standard_normal(50) for _ in range(500)) if N.label_curve(t, y) is not None)
    curves = {"clear": np.where(t < 35, np.clip(t / 10, 0, 1), 0.0) + 0.05 * rng.standard_normal(50),
              "noise": noise, "control": np.clip(t / 10, 0, 1) + 0.05 * rng.standard_normal(50)}
    lines = ["id\trepo"]
    for name, y in curves.items():
        (tmp_path / name).mkdir()
        with open(tmp_path / name / "run.jsonl", "w") as f:
            for s, v in zip(t, y):
                f.write(json.dumps({"step": int(s), "reward_mean": float(v)}) + "\n")
        lines.append(f"{name}\towner/{name}")
    (tmp_path / "INDEX.tsv").write_text("\n".join(lines) + "\n")
    table = score.rows(tmp_path)
    assert {r["run"]: r["label"] for r in table} == {"clear": True, "noise": True, "control": False}
    kept = {r["run"] for r in score.strong(table)}
    p_noise = N.permutation_p(t, noise, 2000)[1]
    assert kept == ({"clear", "control"} | ({"noise"} if p_noise < 0.05 else set()))


def test_the_label_benchmarks_refuse_bad_input_in_one_line(tmp_path, capsys):
    """A commit that does not exist, or a count below 1, is a one-line usage error naming the value (exit 2),
    before any run is read."""
    import label_rule_noise as N  # noqa: PLC0415
    import score  # noqa: PLC0415

    for main, argv, name in ((score.main, [str(ROOT / "benchmarks" / "collapse_corpus"), "--since", "no-such-commit"],
                              "no-such-commit"),
                             (N.main, ["--curves", "0"], "'0'"), (N.main, ["--corpus", "--shuffles", "-3"], "'-3'")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert exc.value.code == 2 and name in err[-1], err
