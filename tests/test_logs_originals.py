"""Every original log of the development corpus reads without flags, and its reward agrees with run.jsonl.

Each run folder of ``../shared/real-runs`` holds its original log file(s) and ``run.jsonl``, the same
run converted by hand and checked value by value (``CANONICAL.tsv``). The original is read the way a
user would pass it: the file itself, or, where the run is split over several files (a run resumed into
a second log), the folder of those files. The reward read (``reward_mean``, and ``eval_reward`` where
the conversion has it) must equal the converted one at every converted step. Where the original holds
several runs (a table of a learning-rate sweep, an attempt restarted in the same file), the conversion
took one of them; it is picked by name, else the last (the one ``read_log`` returns).
Skips with a reason where the shared folder is absent.
"""

from __future__ import annotations

import pathlib
import re
import time
import warnings

import numpy as np
import pytest

from grpojax.logs import LogWarning, read_jsonl, read_log, read_logs

_REPO = pathlib.Path(__file__).resolve().parents[1]
_RUNS = _REPO.parent / "shared" / "real-runs"
_IDS = sorted(p.name for p in _RUNS.iterdir() if p.is_dir()) if _RUNS.is_dir() else ["(corpus absent)"]
_MANIFEST = _REPO / "benchmarks" / "corpus" / "MANIFEST.tsv"
_CACHE = _REPO / "data" / "corpus-cache"


def _manifest_ids() -> list[str]:
    if not _MANIFEST.is_file():
        return ["(no manifest)"]
    lines = _MANIFEST.read_text().splitlines()
    return [ln.split("\t")[0] for ln in lines[1:] if ln.strip()] or ["(no manifest)"]


def _originals(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.name != "run.jsonl" and p.is_file())


def _user_input(folder: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    """The file a user would pass, or a folder holding only the originals (links, nothing copied)."""
    files = _originals(folder)
    if len(files) == 1:
        return files[0]
    d = tmp_path / folder.name
    d.mkdir()
    for f in files:
        (d / f.name).symlink_to(f)
    return d


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _pick(runs, run_id: str):
    if len(runs) == 1:
        return runs[0]
    named = [r for r in runs if _norm(r.name) and _norm(run_id).endswith(_norm(r.name))]
    return named[0] if len(named) == 1 else runs[-1]


@pytest.mark.parametrize("run_id", _IDS)
def test_original_reads_without_flags_and_matches_the_conversion(real_runs, run_id, tmp_path):
    folder = real_runs / run_id
    src = _user_input(folder, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        runs = read_logs(src)
        [ref] = read_jsonl(folder / "run.jsonl")
    run = _pick(runs, run_id)
    compared = 0
    for col in ("reward_mean", "eval_reward"):
        if not ref.has(col):
            continue
        rs, rv = ref.series(col)
        assert run.has(col), f"{src}: no {col} read (mapped: {run.report.mapped})"
        s, v = run.series(col)
        pos = np.searchsorted(s, rs)
        ok = (pos < s.size) & (s[np.minimum(pos, s.size - 1)] == rs)
        assert ok.all(), f"{src}: {col} misses converted steps {rs[~ok][:5].tolist()}"
        np.testing.assert_allclose(v[pos], rv, rtol=1e-6, atol=1e-9, err_msg=f"{src}: {col}")
        compared += rs.size
    assert compared > 0


_LOGS = _REPO.parent / "shared" / "real-logs"
_LOG_FILES = sorted(p.name for p in _LOGS.iterdir() if p.suffix != ".md") if _LOGS.is_dir() else ["(absent)"]


@pytest.mark.parametrize("name", _LOG_FILES)
def test_real_log_reads_without_flags(real_logs, name):
    """The four real logs (values checked one by one in test_logs_real.py) read without flags into one run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        [run] = read_logs(real_logs / name)
    assert run.count("reward_mean") >= 50 and run.report.mapped["reward_mean"]


def test_read_log_takes_the_last_of_a_restarted_file(real_runs):
    """The appended attempt of the CSV run: read_log returns the complete last run, as the conversion did."""
    p = real_runs / "incident-ops-grpo-csv" / "reward_log.csv"
    with pytest.warns(LogWarning, match="read the last"):
        run = read_log(p)
    [ref] = read_jsonl(real_runs / "incident-ops-grpo-csv" / "run.jsonl")
    np.testing.assert_array_equal(run.steps, ref.steps)


def test_largest_originals_read_fast(real_runs):
    """The largest originals read in well under a second each (no JAX; a loaded machine is allowed 4x)."""
    files = sorted((p for p in real_runs.rglob("*") if p.is_file() and p.name != "run.jsonl"
                    and p.suffix not in (".tsv", ".md")), key=lambda p: p.stat().st_size)[-3:]
    for f in files:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LogWarning)
            read_logs(f)
        dt = time.perf_counter() - t
        assert dt < 2.0, f"{f.name} ({f.stat().st_size / 1e6:.1f} MB) took {dt:.2f} s to read"


@pytest.mark.parametrize("run_id", _manifest_ids())
def test_public_corpus_run_reads_without_flags(run_id):
    """Each run of benchmarks/corpus (files in its git-ignored cache, or committed beside the manifest)
    reads without flags into runs with a reward column; skips where the files are not on this machine."""
    folder = next((d for d in (_REPO / "benchmarks" / "corpus" / run_id, _CACHE / run_id) if d.is_dir()), None)
    if folder is None:
        pytest.skip(f"{run_id}: files not on this machine (see benchmarks/corpus/README.md to fetch them)")
    files = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name not in ("LICENSE", "README.md")]
    src = files[0] if len(files) == 1 else folder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogWarning)
        runs = read_logs(src)
    assert runs and all(r.has("reward_mean") or r.has("eval_reward") for r in runs)
    assert max(len(r) for r in runs) >= 10
