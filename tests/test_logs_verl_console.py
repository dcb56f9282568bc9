"""The verl console reader against independent readings of the same data: the JSONL file logger's lines of
the same steps, the row-by-row text path of the table builder, and a regular expression over the whole text."""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest

from grpojax.logs import read_logs
from grpojax.logs._table import _FLOAT_BLOCK, TableBuilder
from grpojax.logs._verl import _STEP_LINE, _step_lines

#: what a verl console prints between two metric lines: Ray and vLLM records, a progress bar (its block
#: characters make the text non-ASCII), a warning, lines that hold "step:" without being a metric line
NOISE = (
    "(WorkerDict pid=4242) INFO 07-06 22:31:05 [block_pool.py:321] Successfully reset prefix cache",
    "(WorkerDict pid=4242) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 500, 'detokenize': False}",
    "\x1b[36m(TaskRunner pid=9323)\x1b[0m validation generation end",
    "Training Progress:  12%|\u2588\u258f        | 1200/10000 [3:02:11<22:14:05,  9.10s/it]",
    "(WorkerDict pid=4243) [2026-07-06 22:31:07] actor update, micro batch 4/4, global_step: 12",
    "2026-07-06 22:31:07,552\tWARNING utils.py:458 -- Detecting docker specified CPUs.",
    "(TaskRunner pid=9323) list(reward_extra_infos_dict.keys())=['acc', 'format']",
    "",
)
KEYS = ("critic/score/mean", "critic/rewards/mean", "actor/entropy", "actor/kl_loss", "actor/grad_norm",
        "actor/pg_clipfrac", "response_length/mean", "response_length/clip_ratio", "actor/lr",
        "timing_s/step", "perf/throughput", "training/global_step")


def _logs(n: int, seed: int = 0) -> tuple[str, str]:
    """(console text, JSONL file-logger text) of the same ``n`` steps: a validation metric every 50 steps
    (another set of names on that line), a value printed as ``np.float64(...)``, a text value, a NaN, ANSI
    colour codes on some lines, CRLF line ends on others."""
    rng = np.random.default_rng(seed)
    con, jsn = [], []
    for s in range(1, n + 1):
        data = {k: float(v) for k, v in zip(KEYS, rng.normal(0.5, 0.3, len(KEYS)))}
        data["training/global_step"] = float(s)
        if s % 50 == 0:
            data["val-core/openai/gsm8k/reward/mean@1"] = float(rng.uniform())
        shown = {k: repr(v) for k, v in data.items()}
        if s % 97 == 0:
            shown["actor/entropy"] = f"np.float64({data['actor/entropy']!r})"
        if s % 301 == 0:
            data["actor/lr"] = shown["actor/lr"] = "warmup"
        if s % 613 == 0:
            data["actor/grad_norm"], shown["actor/grad_norm"] = float("nan"), "nan"
        prefix = "\x1b[36m(TaskRunner pid=9323)\x1b[0m " if s % 3 == 0 else "(TaskRunner pid=9323) "
        end = "\r\n" if s % 7 == 0 else "\n"
        con.append(prefix + f"step:{s} - " + " - ".join(f"{k}:{v}" for k, v in shown.items()) + end)
        con.append("\n".join(NOISE[: 1 + s % len(NOISE)]) + "\n")
        jsn.append(json.dumps({"step": s, "data": data}) + "\n")
    return "".join(con), "".join(jsn)


def _read(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = read_logs(path)
    assert len(runs) == 1
    return runs[0]


def test_console_log_among_noise_reads_as_its_jsonl_version(tmp_path):
    n = _FLOAT_BLOCK + 1500  # more rows than one float block
    console, jsonl = _logs(n)
    (tmp_path / "c").mkdir()
    (tmp_path / "j").mkdir()
    (tmp_path / "c" / "run.log").write_text(console)
    (tmp_path / "j" / "run.jsonl").write_text(jsonl)
    c, j = _read(tmp_path / "c" / "run.log"), _read(tmp_path / "j" / "run.jsonl")
    assert (c.format, j.format) == ("verl_console", "verl_jsonl")
    np.testing.assert_array_equal(c.steps, np.arange(1, n + 1))
    np.testing.assert_array_equal(c.steps, j.steps)
    assert list(c.columns) == list(j.columns)
    for k in c.columns:
        np.testing.assert_array_equal(c.columns[k], j.columns[k], err_msg=k)
    assert np.count_nonzero(np.isfinite(c.columns["eval_reward"])) == n // 50
    assert c.meta["non_numeric_values"] == j.meta["non_numeric_values"] == {"actor/lr": n // 301}
    assert c.meta["nan_counts"] == j.meta["nan_counts"]
    assert c.meta["mapping"] == j.meta["mapping"]


def _table(rows, how: str):
    tb = TableBuilder("rows")
    for i, (step, keys, vals) in enumerate(rows):
        if how == "text" or (how == "mixed" and i % 5 == 0):
            tb.add_kv(step, keys, vals)
        else:
            tb.add_text_kv(step, keys, vals)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tb.finish_runs(name="r", format="verl_console")


@pytest.mark.parametrize("how", ["floats", "mixed"])
def test_rows_kept_as_floats_give_the_table_of_rows_kept_as_text(how):
    """Signatures interleaved, a name twice in a row, text and NaN among numbers, resumed (re-logged) steps,
    a restart of the step counter: the table is the one the row-by-row text path gives."""
    rnd = random.Random(3)
    sigs = [("reward", "entropy", "kl"), ("reward", "entropy", "kl", "val/score"), ("reward", "kl", "kl")]
    rows, step = [], 0
    for i in range(2 * _FLOAT_BLOCK + 700):
        step = 1 if i == _FLOAT_BLOCK + 100 else (step - 3 if i % 997 == 0 and step > 5 else step + 1)
        keys = sigs[0] if rnd.random() < 0.8 else rnd.choice(sigs)
        vals = tuple(rnd.choice(["abc", "nan", " 1e-3", "inf"]) if rnd.random() < 0.01 else repr(rnd.gauss(0, 1))
                     for _ in keys)
        rows.append((step, keys, vals))
    want, got = _table(rows, "text"), _table(rows, how)
    assert [r.name for r in got] == [r.name for r in want] and len(want) == 2
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a.steps, b.steps)
        assert list(a.columns) == list(b.columns)
        for k in a.columns:
            np.testing.assert_array_equal(a.columns[k], b.columns[k], err_msg=k)
        assert a.meta == b.meta


def test_step_lines_are_the_whole_text_regex_matches():
    pieces = ["step:1 - a:0.5 - b:1\n", "x step:2 - a:0.1\n", "\x1b[36m(T)\x1b[0mstep:3 - a:1\r\n", "xstep:4 - a:1\n",
              "global_step:5 - a:1\n", "noise with step: in it\n", "[r]step:6 - a:1 - step:7 - b:2\n", "step:8 - \n",
              "step:9 -  a:1\n", "\u2588 | 3/9 [00:01<00:02]\n", "\n", "step:10 - a:1", ")step:11 - a:1\n",
              ">step:12 - a:1\n", "\tstep:13 - a:1\n"]
    rnd = random.Random(0)
    for _ in range(300):
        text = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 15)))
        want = [(m.group(1), m.group(2)) for m in _STEP_LINE.finditer(text)]
        assert list(_step_lines(text)) == want, repr(text)
